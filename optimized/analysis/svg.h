/// Hand-written SVG plots of a rank analysis (no plotting library): what a person would rather look at than read.
///   u_curves.svg   u(t) per layer (mean over heads) and overall, over the positions of the sequence; legend beside
///   heatmap.svg    mean u per (layer, value head), colour + value in each cell; with grouped values (GVA, Qwen3.5)
///                  each value head's column also names the key head it reads
///   spectra.svg    σ_i(S_T)/σ_1 of every head's final state on a log axis, one panel per layer, a head legend on
///                  top; the decades shown are those the data reach. With a baseline report (the unpruned model) its
///                  spectra are drawn dashed grey behind ("before/after")
/// Titles carry the checkpoint's folder name (plot_name), the token count and the state analysed; axis ticks fall at
/// round values (nice_ticks). Text is sized for an average glyph of 0.6 em so nothing is cut off at the edges.
#pragma once
#include <string>
#include <vector>

#include "optimized/analysis/rank_analysis.h"

namespace statecut {

struct PlotLabels {
  std::string name;      ///< the analysed checkpoint, as titles show it (plot_name)
  std::string baseline;  ///< the baseline checkpoint's name, or empty
};

/// The folder name of a checkpoint path ("runs/half/" → "half"; "." → the current folder's name).
std::string plot_name(const std::string& checkpoint_dir);

/// `s` with the five characters XML reserves in text and attributes escaped (<, >, &, ").
std::string xml_escape(const std::string& s);

/// Tick values covering [lo, hi] at a round step: 1, 2, 2.5 or 5 × 10^k, or a power of two when that ends on hi
/// (2048 positions get 0, 512, ..., 2048, not 511/1023); about `target` intervals (3 to 8).
std::vector<double> nice_ticks(double lo, double hi, int target = 5);

std::string svg_u_curves(const RankReport& r, const PlotLabels& labels);
std::string svg_heatmap(const RankReport& r, const PlotLabels& labels);
std::string svg_spectra(const RankReport& r, const RankReport* baseline, const PlotLabels& labels);

/// Writes the three plots into the existing folder `folder` (e.g. an AtomicDir's temporary, optimized/io/atomic_dir.h).
void write_rank_svg_files(const RankReport& r, const RankReport* baseline, const PlotLabels& labels,
                          const std::string& folder);
/// Writes the three plots into `dir` atomically; `dir` must not exist.
void write_rank_svgs(const RankReport& r, const RankReport* baseline, const PlotLabels& labels, const std::string& dir);

}  // namespace statecut

/// Hand-written SVG plots of a rank analysis (no plotting library): what a person would rather look at than read.
///   u_curves.svg   u(t) per layer (mean over heads) and overall, over the positions of the sequence
///   heatmap.svg    mean u per (layer, head), colour + value in each cell
///   spectra.svg    σ_i(S_T)/σ_1 of every head's final state on a log axis, one panel per layer; with a
///                  baseline report (the unpruned model) its spectra are drawn dashed grey behind ("before/after")
#pragma once
#include <string>

#include "optimized/analysis/rank_analysis.h"

namespace statecut {

std::string svg_u_curves(const RankReport& r, const std::string& title);
std::string svg_heatmap(const RankReport& r, const std::string& title);
std::string svg_spectra(const RankReport& r, const RankReport* baseline, const std::string& title);

/// Writes the three plots into `dir` atomically (prune_atomic_dir.h); `dir` must not exist.
void write_rank_svgs(const RankReport& r, const RankReport* baseline, const std::string& title, const std::string& dir);

}  // namespace statecut

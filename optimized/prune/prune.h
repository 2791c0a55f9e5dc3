/// `statecut prune` as a library call: calibrate (when the method needs data), select k' key channels per head
/// with ref::select_head (reference/selectors.h: the same selector as `statecut select`; seeds by the rule of
/// reference/select_rng.h, layer = the model's layer index), apply the surgery (surgery.h) and write the pruned checkpoint atomically with a
/// statecut.json that records the method, its parameters, the calibration and the keep sets.
///
/// Methods and what they read (DESIGN.md §4): rand (seed), l1 (weights), swanda (weights, RMS of attn_in),
/// grad (weights, Σ ∂L/∂W), drrqr (R factor of [Q; K], or 5,000 sampled rows with --faithful), pca (feature
/// covariance; a rotation). The same inputs and seed give a byte-identical checkpoint.
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "optimized/prune/calibration.h"
#include "optimized/text/tokenizer.h"
#include "optimized/prune/surgery.h"

namespace statecut {

struct PruneOptions {
  std::string checkpoint;
  std::string out;
  std::string method;
  double ratio = 0;  ///< in (0, 1), or 0 when keep is given
  int keep = 0;      ///< explicit k', or 0
  std::vector<std::string> calib;
  int64_t calib_seqs = 16;
  int64_t calib_len = 2048;
  uint64_t seed = 42;
  std::string select = "qk";
  bool faithful = false;
  std::string device = "cpu";
  double f = 1.5;
  int64_t batch = 0;  ///< calibration sequences per forward (0 = automatic)
  std::string keep_from;  ///< apply the keep sets of a keep.json / statecut.json instead of a method
  TokenizerChoice tokenizer = TokenizerChoice::Auto;  ///< how calibration text is tokenised (--tokenizer)
  /// Calibration with one block's weights in memory at a time (StreamedModel): "on", "off", or "auto" = on the CPU,
  /// when the fp32 weights would take more than half the memory available (weights_fit_in_memory), for every method
  /// but grad (its backward needs all blocks at once). The selection is the same either way (bitwise).
  std::string stream_weights = "auto";
};

struct PruneResult {
  nlohmann::json record;  ///< what statecut.json holds
  std::vector<LayerSelection> selection;
  double seconds_load = 0, seconds_calibrate = 0, seconds_select = 0, seconds_write = 0;
  bool streamed_weights = false;  ///< the calibration ran a StreamedModel
};

/// True for the methods that need --calib.
bool method_needs_calibration(const std::string& method);

/// One head of a calibrated layer as ref::select_head reads it: drrqr's matrix (the streamed R factor of [Q; K],
/// or the faithful rows) or pca's moments. What prune selects on, and what verify recomputes.
ref::HeadInputs selection_inputs(const LayerCalibration& lc, ref::SelectMethod method, int64_t head);

/// Checks the options without touching the model (method, ratio/keep, select, device — and that a CUDA device asked
/// for exists —, calib files exist).
void validate_prune_options(const PruneOptions& opt);

/// Everything but writing: calibration + selection (used by prune_checkpoint and by tests/benchmarks).
PruneResult select_for_checkpoint(const PruneOptions& opt, const Progress& progress = {});

/// The whole command; throws std::runtime_error with a one-line message, leaving no output directory.
PruneResult prune_checkpoint(const PruneOptions& opt, const Progress& progress = {});

}  // namespace statecut

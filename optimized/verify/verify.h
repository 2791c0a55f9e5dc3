/// `statecut verify --checkpoint DIR` as a library call: every proof statecut has, pointed at one checkpoint
/// (issue 12, DESIGN.md §2). Checks, in the order they run (each a group of rows, see verify_report.h):
///   load             tensors present with the shapes the config implies, none unexpected, dtypes supported, no
///                    NaN/Inf, shards consistent with their index, tokenizer usable         (check_load.cpp)
///   config           the fields fla / transformers derive the geometry from agree with the weights' shapes,
///                    recomputed by each library's own rule                                  (check_config.cpp)
///   pruned           statecut.json valid; with a source every kept row/channel bit-identical and every other
///                    tensor identical; drrqr: strong-RRQR certificate on recomputed features (check_pruned.cpp)
///   reference        each layer's recurrence (the q/k/v/β/g the forward fed it) vs reference/ in f64; the
///                    whole model in f64 vs the checkpoint's dtype                           (check_reference.cpp)
///   chunk-recurrent  chunked = recurrent on the real activations;  state-carry: a window split in two with the
///                    state carried equals the whole window                                 (check_recurrence.cpp)
///   theorems         Eq. (4) effective-rank bound, Prop. 2.1 readout bound (u printed), key-channel permutation
///                    (and rotation) invariance of the logits                                (check_theorems.cpp)
///   determinism      two forwards of a window give bit-identical logits                    (check_determinism.cpp)
///   kernels          CUDA prefill/decode kernels at this model's shapes vs the reference   (check_kernels.cpp)
/// A checkpoint that cannot be read at all (no folder, no/invalid config.json, a safetensors file that does not
/// parse, unreadable --text) throws Unreadable: exit code 2 with one line naming the file.
#pragma once
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "optimized/text/tokenizer.h"
#include "optimized/verify/verify_report.h"

namespace statecut::verify {

struct VerifyOptions {
  std::string checkpoint;
  std::string source;              ///< the unpruned checkpoint a pruned one was cut from ("" = none)
  std::vector<std::string> text;   ///< text/token files for the windows; none = seeded random tokens
  TokenizerChoice tokenizer = TokenizerChoice::Auto;  ///< how `text` is tokenised (--tokenizer auto|bytes)
  int64_t windows = 4;             ///< N windows ...
  int64_t len = 512;               ///< ... of L tokens
  uint64_t seed = 42;              ///< windows and random tokens, permutations
  std::string device = "cpu";
  std::vector<std::string> only, skip;  ///< check groups
  std::function<void(const std::string&)> progress;  ///< one line per step (stderr in the CLI)
};

/// The input cannot be read: the CLI prints the one-line message and exits 2.
struct Unreadable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The check groups, in run order.
const std::vector<std::string>& check_groups();

/// Runs the selected checks. Throws Unreadable (exit 2) or std::invalid_argument for bad options (unknown check).
Report run_verify(const VerifyOptions& opt);

}  // namespace statecut::verify

/// `statecut eval --niah`: a synthetic passkey / needle-in-a-haystack retrieval task, scored by likelihood rank (no
/// generation), where state reduction is expected to hurt first (paper §6, its RULER discussion).
///
/// One trial at context length L (tokens) and depth d ∈ [0, 1]:
///   needle   = "\nThe pass key is K. Remember it. K is the pass key.\n"      K: `digits` random decimal digits
///   question = "\nWhat is the pass key? The pass key is"
///   prompt   = F[0, a) ++ enc(needle) ++ F[a, f) ++ enc(question),   f = L − |enc(needle)| − |enc(question)|,
///              a = round(d · f)
/// where F is the filler text's token stream read from a seeded offset (wrapping around), so the prompt is exactly L
/// tokens and the needle starts after a of its f filler tokens (d = 0: first, d = 1: right before the question).
/// The right key and candidates − 1 distinct random distractor keys of the same length are scored as continuations
/// " K'": ll(K') = Σ log softmax over enc(" K'") after the prompt (needle, question and answer are options: "{key}"
/// in them stands for the key) (one prefill into a DecodeCache, then every
/// candidate continues a copy of that state). rank = #distractors with ll > ll(K) (0 = retrieved).
/// A cell (L, d) reports accuracy = mean [rank = 0] over its trials and the mean rank; chance accuracy is
/// 1 / candidates. Keys, distractors and filler offsets come from one std::mt19937_64(seed) drawn in cell order, so
/// a baseline and a pruned checkpoint are asked the same questions.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "optimized/models/model.h"
#include "optimized/prune/calibration.h"
#include "optimized/text/tokenizer.h"

namespace statecut {

struct NiahOptions {
  std::vector<int64_t> lengths{512, 1024, 2048, 4096};
  std::vector<double> depths{0, 0.25, 0.5, 0.75, 1};
  int64_t trials = 4;       ///< needles per cell
  int64_t candidates = 10;  ///< the key and candidates − 1 distractors
  int64_t digits = 5;
  uint64_t seed = 42;
  /// The texts above; every "{key}" stands for the key (needle and answer must hold one).
  std::string needle = "\nThe pass key is {key}. Remember it. {key} is the pass key.\n";
  std::string question = "\nWhat is the pass key? The pass key is";
  std::string answer = " {key}";
};

struct NiahCell {
  int64_t length = 0;
  double depth = 0;
  double accuracy = 0;   ///< fraction of trials with rank 0
  double mean_rank = 0;  ///< over trials, 0 .. candidates − 1
  std::vector<int64_t> ranks;
};

struct NiahResult {
  std::string filler;
  NiahOptions options;
  std::vector<NiahCell> cells;  ///< lengths outer, depths inner
  double accuracy = 0;          ///< over all cells
  double seconds = 0;
};

/// Throws std::runtime_error (one line) on bad options: a length too short for needle + question, a depth outside
/// [0, 1], fewer than 2 candidates, more candidates than keys, a filler that encodes to no tokens.
NiahResult evaluate_niah(CausalLM& model, const Tokenizer& tok, const std::string& filler_path,
                         const std::string& filler_text, const NiahOptions& opt, const Progress& progress = {});

/// Heat map, lengths as rows and depths as columns, each cell coloured by accuracy (red 0 → green 1) with its value.
std::string niah_svg(const NiahResult& r, const std::string& title);

}  // namespace statecut

/// `statecut eval`: bits per byte and token perplexity of a causal LM on a token stream, over windows.
///
/// Windows of W tokens start every S tokens (S = stride, default W: disjoint windows). Window j feeds
/// ids[s_j, s_j + W) and scores each next-token target ids[p] (p = s_j+1 .. s_j+W) that no earlier window
/// scored, so with S = W every token after the first is scored exactly once, with 0..W−1 tokens of context;
/// with S < W each scored token sees at least W − S tokens of context (HF's sliding-window perplexity).
///   NLL = Σ_p −ln softmax(logits_{p−1})[ids_p]          (nats, accumulated in f64)
///   token perplexity = exp(NLL / #scored),   bits/byte = NLL / (ln 2 · Σ_p bytes(ids_p))
/// A token file of B > 1 rows [B, T] (TokenStream::row_length = T) is B sequences: each row gets its own windows and
/// none reaches into the next row, so [2, 256] scores 2 × 255 targets (not 511 of one stream).
/// bytes(id) is 1 for byte-level models and the UTF-8 length of the piece for SentencePiece (tokenizer.h).
/// Text scored whole (no --max-tokens cut) divides by the file's own bytes less the unscored tokens' bytes(ids):
///   B = |file| − Σ_{unscored p} bytes(ids_p)      (= Σ_p bytes(ids_p) for a lossless tokenizer)
/// so a normalising tokenizer (NFC), a SentencePiece dummy-prefix space or an unknown piece does not move the
/// denominator off the document's UTF-8 length, lm-eval's. Invalid UTF-8 read by a non-byte-level tokenizer is
/// refused: its lossy repair has other bytes than the file.
#pragma once
#include <string>

#include "optimized/prune/calibration.h"
#include "optimized/models/model.h"
#include "optimized/text/token_stream.h"
#include "optimized/text/tokenizer.h"

namespace statecut {

struct EvalOptions {
  int64_t window = 2048;
  int64_t stride = 0;      ///< 0 = window (disjoint windows)
  int64_t batch = 0;       ///< windows per forward (0 = automatic)
  int64_t max_tokens = 0;  ///< evaluate only the first max_tokens of the stream (0 = all)
  /// Without a tokenizer (token files for a checkpoint that ships none) score the tokens anyway: token perplexity and
  /// nats, bits_per_byte NaN with the reason in no_bytes_reason. false: that case throws (a caller that needs bits/byte).
  bool tokens_without_bytes = false;
};

struct EvalResult {
  std::string file;
  double bits_per_byte = 0;
  double token_perplexity = 0;
  int64_t tokens = 0;  ///< scored tokens
  int64_t bytes = 0;   ///< bytes of the scored tokens
  double nll = 0;      ///< nats
  double seconds = 0;
  std::string no_bytes_reason;  ///< non-empty: bits_per_byte is NaN (no tokenizer to count bytes), this says why
};

/// Throws std::runtime_error "<file>: ..." when the stream has fewer than 2 tokens, options are bad, or the model's
/// logits are not finite on a window (a NaN bits/byte is no result).
EvalResult evaluate_stream(CausalLM& model, const TokenStream& s, const Tokenizer& tok, const EvalOptions& opt,
                           const Progress& progress = {});

}  // namespace statecut

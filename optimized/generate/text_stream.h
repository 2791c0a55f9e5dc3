/// Streaming detokenizer for `statecut generate`: token ids arrive one at a time, text leaves as soon as it is final.
///   push(id): text = decode(ids[p, end)) − decode(ids[p, r)), emitted only when it does not end in U+FFFD (a
///             multi-byte character still incomplete) and id is no byte-fallback piece (a run of <0xHH> pieces
///             decodes as a whole: valid UTF-8, else one U+FFFD per byte, so its text is final only once another
///             piece follows); then p ← r, r ← end.  finish(): whatever is left.
/// Decoding from an offset p a few tokens back (not from the start) keeps each step O(1) and lets tokenizers whose
/// decode depends on the neighbouring piece (SentencePiece's leading-space rule) agree with decode(all ids): the
/// concatenation of every push() and finish() equals Tokenizer::decode of all the ids whenever decode is
/// prefix-stable (byte-level, byte-level BPE, SentencePiece without a dummy prefix; tests/torch/tokenizer_decode.cpp).
/// Byte-level ids are passed through as bytes at once (a terminal assembles UTF-8 itself).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "optimized/text/tokenizer.h"

namespace statecut {

class TextStream {
 public:
  explicit TextStream(const Tokenizer& tok) : tok_(tok) {}
  /// The text that became final with `id` (often empty for a token that ends inside a character).
  std::string push(int64_t id);
  /// The rest, incomplete characters included (as U+FFFD).
  std::string finish();

 private:
  const Tokenizer& tok_;
  std::vector<int64_t> ids_;
  size_t prefix_ = 0, read_ = 0;  // p and r above
};

}  // namespace statecut

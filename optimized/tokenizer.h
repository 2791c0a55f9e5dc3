/// Text → token ids for a checkpoint: SentencePiece when the checkpoint folder has `tokenizer.model`,
/// else byte-level (ids 0..255, one per UTF-8 byte: what the shipped byte models use).
///
/// SentencePiece runs in the helper executable `statecut-spm` (tools/spm_main.cpp), found through $STATECUT_SPM or
/// next to the running executable; it is never linked into a LibTorch process (tokenizer.cpp says why). The whole
/// text is encoded at once, newlines included.
///
/// bytes_of(id) is the number of UTF-8 bytes a token stands for; `eval` divides the summed negative
/// log-likelihood by the bytes of the scored tokens to report bits per byte (byte-level: 1 per token).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace statecut {

class Tokenizer {
 public:
  /// Byte-level tokenizer (vocab 256).
  static Tokenizer bytes();
  /// `dir/tokenizer.model` through statecut-spm if it exists, else byte-level. Throws std::runtime_error
  /// "<dir>/tokenizer.model: <problem>" when the file is there but does not load or the helper is missing.
  static Tokenizer for_checkpoint(const std::string& dir);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  bool byte_level() const;
  /// "bytes" or "sentencepiece:<path>".
  std::string describe() const;
  std::vector<int64_t> encode(const std::string& text) const;
  /// UTF-8 bytes the token stands for: the piece's bytes with the space marker U+2581 counted as 1, byte pieces 1,
  /// control and unknown pieces 0 (so a text with characters outside the vocabulary, or a model that adds a
  /// dummy-prefix space, sums to slightly less or one more than the text's length).
  int64_t bytes_of(int64_t id) const;
  int64_t vocab_size() const;

 private:
  Tokenizer();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace statecut

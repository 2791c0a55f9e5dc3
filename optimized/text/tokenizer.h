/// Text → token ids for a checkpoint, chosen by what the folder holds (never silently):
///   tokenizer.json         BPE (bpe_tokenizer.h: byte-level as Qwen2/3/3.5, GPT-2, GPT-NeoX, Llama-3, OLMo; with
///                          byte_fallback as Llama 2, Mistral, Phi-3), also beside a tokenizer.model: it is what
///                          transformers' fast tokenizer reads (SentencePiece itself differs: a dummy "▁" before a text
///                          that starts with a space, added tokens kept as text). Read as transformers 5's
///                          AutoTokenizer reads it: the class it picks (tokenizer_config.json, config.json's
///                          model_type) may build its own pipeline from the json's vocab and merges
///                          (transformers_class.h): transformers' ids, not tokenizers'
///   tokenizer.model        SentencePiece, when there is no tokenizer.json. A json statecut cannot read is its error,
///                          never a silent switch to the model beside it
///   only other tokenizer   vocab.json / merges.txt (slow BPE), vocab.txt, spiece.model, *.tiktoken, tekken.json:
///   files                  none, naming the file (never byte-level, whatever the vocabulary)
///   neither, vocab 256     byte-level (ids 0..255, one per UTF-8 byte: what the shipped byte models use)
///   neither, other vocab   none: token files still work, but encode() and bytes_of() throw a line naming the
///                          folder (raw bytes would be meaningless ids for such a model)
///   the folder's own code  auto_map maps AutoTokenizer to the checkpoint's Python class and transformers has none of
///                          its own for the folder (ChatGLM's): none, naming it (transformers_class.h
///                          remote_tokenizer_code; needs the tokenizer.json build, PCRE2); token files still work
/// `--tokenizer bytes` (TokenizerChoice::Bytes) forces byte-level ids whatever the folder holds.
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

enum class TokenizerChoice { Auto, Bytes };

/// What this build can read: "bytes" always, "tokenizer.json" when built with PCRE2, "tokenizer.model" when the
/// SentencePiece helper is found (its path in *spm_helper, "" when missing).
std::vector<std::string> tokenizer_formats(std::string* spm_helper = nullptr);

class Tokenizer {
 public:
  /// Byte-level tokenizer (vocab 256).
  static Tokenizer bytes();
  /// The checkpoint's tokenizer by the rule above. Throws std::runtime_error "<file>: <problem>" when a tokenizer
  /// file is there but does not load (or the SentencePiece helper is missing), "<dir>: ..." when there is none
  /// and the vocabulary is not byte-level.
  static Tokenizer for_checkpoint(const std::string& dir, TokenizerChoice choice = TokenizerChoice::Auto);
  /// A tokenizer.json file, read as transformers reads it with the tokenizer_config.json and config.json beside it
  /// (transformers_class.h); throws "<path>: <problem>", naming what is unsupported.
  static Tokenizer for_tokenizer_json(const std::string& path);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  /// False when the checkpoint has no tokenizer statecut can use (see the rule above); unavailable_reason() says why.
  bool available() const;
  std::string unavailable_reason() const;
  /// The same without the advice for text (give token files, or --tokenizer bytes): for a caller that has token
  /// files already and needs the tokenizer for something else (eval's byte count).
  const std::string& unavailable_fact() const;
  bool byte_level() const;
  /// "bytes", "sentencepiece:<path>", "bpe:<path>", or "bpe:<path> as transformers' LlamaTokenizer (Metaspace,
  /// prepend first)" where transformers picks a class that builds its own pipeline.
  std::string describe() const;
  /// The tokenizer file read ("" for byte-level).
  std::string file() const;
  std::vector<int64_t> encode(const std::string& text) const;
  /// Ids → text: byte-level the bytes themselves (an id >= 256 throws), tokenizer.json HF's decode (special tokens
  /// kept, unknown ids skipped, invalid UTF-8 read lossily), SentencePiece DecodeIds through statecut-spm (an id outside
  /// the vocabulary throws). A sequence cut inside a multi-byte character ends in U+FFFD for BPE and SentencePiece;
  /// byte-level returns the raw bytes.
  std::string decode(const std::vector<int64_t>& ids) const;
  /// decode() of each sequence, in one call of the SentencePiece helper (streaming decoders call this per token).
  std::vector<std::string> decode_batch(const std::vector<std::vector<int64_t>>& seqs) const;
  /// UTF-8 bytes the token stands for: the piece's bytes with the space marker U+2581 counted as 1, byte pieces 1,
  /// control and unknown pieces 0 (so a text with characters outside the vocabulary, or a model that adds a
  /// dummy-prefix space, sums to slightly less or one more than the text's length).
  int64_t bytes_of(int64_t id) const;
  /// A byte-fallback piece (<0xHH> of a character BPE, a byte piece of SentencePiece): its run of such pieces decodes
  /// as a whole (valid UTF-8, else one U+FFFD per byte), so a streamed decode waits for the run to end.
  bool byte_piece(int64_t id) const;
  int64_t vocab_size() const;

 private:
  Tokenizer();
  static Tokenizer for_checkpoint_sentencepiece(const std::string& model_path);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Text a tokenizer that is not byte-level reads lossily: invalid UTF-8 becomes its repair (U+FFFD, three bytes for
/// each maximal invalid subpart; transformers' callers cannot even pass such text, Python refuses to decode it), so
/// the ids would stand for other bytes than the input's. Throws "<where>: invalid UTF-8 at byte N: ..." for such text;
/// a byte-level tokenizer reads any bytes. Every command that tokenises text calls it (read_tokens, tokenize, the
/// prompt of generate).
void require_valid_utf8(const Tokenizer& tok, const std::string& text, const std::string& where);

}  // namespace statecut

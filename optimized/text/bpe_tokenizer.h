/// BPE from a Hugging Face `tokenizer.json` — byte-level (Qwen2/Qwen3/Qwen3.5, GPT-2, GPT-NeoX, Llama-3, OLMo style) or
/// character-level with byte_fallback (SentencePiece converted: Llama 2, Mistral, Phi-3) — giving the ids of
/// HF `tokenizers` 0.23.2 `encode(text, add_special_tokens=False)` and the text of `decode(ids,
/// skip_special_tokens=False)`.
///
/// encode(text), in HF's order:
///   0. Invalid UTF-8 is replaced as Rust's String::from_utf8_lossy does (each maximal invalid subpart -> U+FFFD):
///      HF only ever sees text that is already decoded.
///   1. Added tokens with normalized=false are cut out of the raw text, leftmost-longest (HF's Aho-Corasick
///      LeftmostLongest): the earliest start wins, then the longest token there; lstrip/rstrip take in the Unicode
///      White_Space next to the token.
///   2. Each remaining piece is normalized (bpe_normalizer.h: NFC, Prepend, Replace of a String), then added tokens
///      with normalized=true (matched in their normalized form) are cut out the same way.
///   3. Pre-tokenizers on each remaining piece, in order: Split(Regex|String, any behavior, invert) as
///      split_regex.h's SplitBehavior says; then ByteLevel or Metaspace, last, or neither. ByteLevel prepends " " to a piece that does not
///      start with one when add_prefix_space, splits with GPT-2's regex when use_regex, and maps every UTF-8 byte b
///      of a piece to the character bytes_to_unicode(b) (printable Latin-1 bytes map to themselves, the other 68
///      bytes to U+0100.. in byte order). Regexes run in PCRE2 (UTF, UCP, JIT) rewritten to agree with HF's Oniguruma
///      (split_regex.h). Metaspace (character BPE) turns every " " into its replacement ("▁"), prepends the
///      replacement unless the piece starts with it — always, never, or "first": only to the piece at offset 0 of
///      the text (not after an added token) — and with split=true cuts before each replacement.
///   4. BPE per piece: with ignore_merges a piece that is itself in the vocab is one token; else start from one
///      symbol per mapped byte (character BPE: per character, its vocab id, else with byte_fallback its bytes'
///      tokens <0xHH>, else unk) and repeatedly merge the adjacent pair of lowest merge rank (leftmost on ties) until
///      no adjacent pair is a merge (the `merges` list order is the rank; a pair listed twice keeps the later rank).
///      Results are cached per pre-token in a cache per thread (as HF does; no lock): up to 2^18 words of <= 256
///      bytes, about 20 MB, emptied when the thread encodes with another tokenizer.
/// decode(ids): each id -> its token string (added token content, NFC'd when normalized, else the vocab string),
///   every character of a token mapped back through bytes_to_unicode (a token with a character outside the map
///   stays as its UTF-8), then the concatenation read as UTF-8 lossily. Unknown ids are skipped, as in HF.
///   Character BPE: the token strings through the file's decoder chain (bpe_decoder.h).
///
/// Ids come from the file: the vocab's ids and each added token's "id" (HF recomputes added ids from the vocab's
/// size; they agree on every tokenizer HF saved, and a trimmed vocab with its original sparse ids stays usable).
/// Supported: model BPE, tagged or untagged (unk_token, fuse_unk, ignore_merges, byte_fallback without ByteLevel; no
/// dropout, subword prefix/suffix); normalizers of bpe_normalizer.h; pre_tokenizer Split* then ByteLevel (decoder
/// ByteLevel) or Split* then Metaspace or nothing (decoders of bpe_decoder.h).
/// encode/decode/token_bytes may run on several threads at once. post_processor is ignored (add_special_tokens=false:
/// no BOS/EOS). Anything else throws
/// std::runtime_error("<path>: unsupported <part> '<type>'").
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace statecut {

struct TransformersClass;

class BpeTokenizer {
 public:
  /// Reads and checks `tokenizer_json_path`; throws std::runtime_error "<path>: <problem>" (one line). With `cls`,
  /// the pipeline transformers builds for that tokenizer class (transformers_class.h) replaces the file's.
  static BpeTokenizer from_file(const std::string& tokenizer_json_path, const TransformersClass* cls = nullptr);

  BpeTokenizer(BpeTokenizer&&) noexcept;
  BpeTokenizer& operator=(BpeTokenizer&&) noexcept;
  ~BpeTokenizer();

  /// Ids of `utf8` (any bytes; invalid UTF-8 is read lossily), without special tokens added around it.
  std::vector<int64_t> encode(const std::string& utf8) const;
  /// Text of `ids`, special tokens kept.
  std::string decode(const std::vector<int64_t>& ids) const;
  /// Raw bytes token `id` stands for (added tokens: their content; "" for an id that is not a token).
  std::string token_bytes(int64_t id) const;
  /// A character BPE's byte-fallback token <0xHH> (false for byte-level BPE, whose tokens are all bytes already).
  bool byte_fallback_token(int64_t id) const;
  /// Max id + 1 over the vocab and the added tokens.
  int64_t vocab_size() const;

  /// Ranks (positions in the `merges` list) of the merges applied while encoding `utf8`, each once, ascending.
  /// For tools that trim a tokenizer to the merges a set of texts needs (tools/make_small_bpe_tokenizer.cpp).
  std::vector<int64_t> merges_fired(const std::string& utf8) const;

 private:
  BpeTokenizer();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace statecut

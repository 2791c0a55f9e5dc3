/// Byte-level BPE from tokenizer.json; bpe_tokenizer.h gives the steps and what is supported.
#include "optimized/text/bpe_tokenizer.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string_view>
#include <unordered_map>

#include "optimized/text/bpe_added_tokens.h"
#include "optimized/text/bpe_decoder.h"
#include "optimized/text/bpe_normalizer.h"
#include "optimized/text/bpe_tables.h"
#include "optimized/text/split_regex.h"
#include "optimized/text/transformers_class.h"
#include "optimized/text/unicode_nfc.h"
#include "optimized/text/utf8.h"

namespace statecut {
namespace {

using json = nlohmann::json;
using bpe::AddedEntry;
using bpe::AddedSet;
using bpe::read_added_tokens;
using bpe::MergeEntry;
using bpe::MergeTable;
using bpe::WordCache;

[[noreturn]] void bpe_fail(const std::string& path, const std::string& problem) {
  std::string msg = path + ": " + problem;
  std::replace_if(msg.begin(), msg.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
  throw std::runtime_error(msg);
}

/// GPT-2's bytes_to_unicode: printable bytes ('!'..'~', 0xA1..0xAC, 0xAE..0xFF) are their own character, the other
/// 68 bytes become U+0100, U+0101, ... in byte order.
std::array<std::string, 256> byte_chars() {
  std::array<std::string, 256> out;
  char32_t next = 0x100;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    utf8::append(out[b], printable ? static_cast<char32_t>(b) : next++);
  }
  return out;
}

struct Symbol {  // a BPE symbol in a word's linked list
  int32_t id, prev, next;
  bool gone;
};

struct Candidate {  // a merge that may apply at `pos`
  int32_t rank, pos, new_id;
  bool operator<(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }  // min-heap
};

uint64_t next_instance() {
  static std::atomic<uint64_t> counter{0};
  return ++counter;
}

}  // namespace

struct BpeTokenizer::Impl {
  const uint64_t instance = next_instance();  // names this tokenizer's thread-local word caches
  std::string path;
  std::array<std::string, 256> byte_char = byte_chars();
  std::unordered_map<std::string, int32_t> vocab;
  MergeTable merges;
  std::array<int32_t, 256> byte_id{};  // vocab id of each byte's character, -1 when absent
  int32_t unk_id = -1;
  std::string missing_unk;  // an unk_token the vocab lacks: an error only for a text that needs it
  bool fuse_unk = false, ignore_merges = false, byte_fallback = false;
  BpeNormalizer normalizer;
  /// false: the model's symbols are characters (SentencePiece converted to BPE: Llama 2, Mistral, Phi-3), read with
  /// byte_fallback, a Metaspace pre-tokenizer or none, and decoded by char_decoder; true: byte-level BPE.
  bool byte_level = true;
  struct Metaspace {
    bool on = false, split = false;
    std::string replacement;
    enum class Scheme { Always, First, Never } scheme = Scheme::Always;
  } metaspace;
  std::unique_ptr<BpeDecoder> char_decoder;
  std::vector<std::string> token_string;  // character BPE: id -> the token string the decoder starts from
  std::array<int32_t, 256> fallback_id{};  // character BPE: id of "<0xHH>", -1 when absent
  std::unordered_map<int32_t, char> fallback_byte;  // its inverse: the byte of each "<0xHH>" id
  AddedSet raw_added, normalized_added;
  struct SplitStep {
    SplitRegex regex;
    SplitBehavior behavior;
    bool invert;
  };
  std::vector<SplitStep> splits;  // pre-tokenizer Split steps, before ByteLevel
  bool add_prefix_space = false;
  std::unique_ptr<SplitRegex> byte_level_regex;  // ByteLevel use_regex
  std::vector<std::string> decoded;              // id -> bytes the ByteLevel decoder gives for the token
  std::vector<std::string> raw_bytes;            // id -> token_bytes()
  std::vector<uint8_t> known;                    // id -> is a token

  /// BPE of one pre-token given by its raw bytes (bpe_tokenizer.h step 4); appends its ids to `out`.
  void bpe(std::string_view word, std::vector<int32_t>& out, std::vector<int64_t>* fired) const {
    if (ignore_merges) {
      std::string mapped;
      if (byte_level)
        for (unsigned char b : word) mapped += byte_char[b];
      else
        mapped = word;
      if (auto it = vocab.find(mapped); it != vocab.end()) {
        out.push_back(it->second);
        return;
      }
    }
    thread_local std::vector<Symbol> sym;  // reused: no allocation per word
    sym.clear();
    int32_t pending_unk = -1;  // an unknown run not pushed yet (fuse_unk makes a run one token)
    auto push = [&](int32_t id) {
      const auto n = static_cast<int32_t>(sym.size());
      sym.push_back({id, n - 1, n + 1, false});
    };
    auto unknown = [&] {
      if (!missing_unk.empty())
        throw std::runtime_error(path + ": the text needs unk_token '" + missing_unk +
                                 "', which is not in the vocab (tokenizers fails on it too)");
      if (unk_id < 0) return;  // HF drops the character
      if (pending_unk >= 0 && !fuse_unk) push(pending_unk);
      pending_unk = unk_id;
    };
    if (byte_level) {
      for (unsigned char b : word) {
        if (byte_id[b] < 0) {
          unknown();
          continue;
        }
        if (pending_unk >= 0) push(pending_unk), pending_unk = -1;
        push(byte_id[b]);
      }
    } else {  // one symbol per character: its vocab id, else its bytes' <0xHH> tokens (byte_fallback), else unk
      thread_local std::string ch;
      for (size_t i = 0; i < word.size();) {
        size_t bad = 0;
        const size_t n = std::max<size_t>(utf8::valid_seq(word, i, bad), 1);
        ch.assign(word.substr(i, n));
        i += n;
        if (const auto it = vocab.find(ch); it != vocab.end()) {
          if (pending_unk >= 0) push(pending_unk), pending_unk = -1;
          push(it->second);
          continue;
        }
        if (byte_fallback && std::all_of(ch.begin(), ch.end(), [&](char c) { return fallback_id[static_cast<unsigned char>(c)] >= 0; })) {
          for (char c : ch) push(fallback_id[static_cast<unsigned char>(c)]);  // a pending unk stays pending, as in HF
          continue;
        }
        unknown();
      }
    }
    if (pending_unk >= 0) push(pending_unk);
    if (sym.empty()) return;
    sym.back().next = -1;

    thread_local std::vector<Candidate> queue;  // a heap whose top is the lowest (rank, pos)
    queue.clear();
    auto consider = [&](int32_t pos) {
      const int32_t next = sym[pos].next;
      if (next < 0) return;
      if (const MergeEntry* m = merges.find(sym[pos].id, sym[next].id)) {
        queue.push_back({m->rank, pos, m->new_id});
        std::push_heap(queue.begin(), queue.end());
      }
    };
    for (int32_t i = 0; i + 1 < static_cast<int32_t>(sym.size()); ++i) consider(i);
    while (!queue.empty()) {
      std::pop_heap(queue.begin(), queue.end());
      const Candidate top = queue.back();
      queue.pop_back();
      Symbol& left = sym[top.pos];
      if (left.gone || left.next < 0) continue;
      // A stale entry: the pair at `pos` changed since it was queued (HF compares the merged id, as here).
      const MergeEntry* m = merges.find(left.id, sym[left.next].id);
      if (!m || m->new_id != top.new_id) continue;
      if (fired) fired->push_back(m->rank);
      Symbol& right = sym[left.next];
      right.gone = true;
      left.id = top.new_id;
      left.next = right.next;
      if (right.next >= 0) sym[right.next].prev = top.pos;
      if (left.prev >= 0) consider(left.prev);
      consider(top.pos);
    }
    for (const Symbol& s : sym)
      if (!s.gone) out.push_back(s.id);
  }

  struct EncodeState {
    std::vector<int64_t> ids;
    WordCache& cache;
    /// Pieces per Split step, sized once before the first piece: a step's recursion into the next must not resize it
    /// (a vector that grows moves its elements, and the caller walks its own level meanwhile).
    std::vector<std::vector<std::string_view>> levels;
    std::vector<int64_t>* fired = nullptr;
  };

  void word(std::string_view w, EncodeState& st) const {
    if (byte_level && w.size() == 1 && byte_id[static_cast<unsigned char>(w[0])] >= 0) {
      st.ids.push_back(byte_id[static_cast<unsigned char>(w[0])]);
    } else if (st.fired) {
      std::vector<int32_t> ids;
      bpe(w, ids, st.fired);
      st.ids.insert(st.ids.end(), ids.begin(), ids.end());
    } else {
      st.cache.get(w, st.ids, [&](std::vector<int32_t>& out) { bpe(w, out, nullptr); });
    }
  }

  /// Steps 3-4 on one piece of normalized text between added tokens; `at_start`: the piece begins where the text
  /// does (offset 0 of the original: Metaspace's prepend_scheme "first" prepends only there).
  void pretokenize(size_t step, std::string_view piece, EncodeState& st, bool at_start) const {
    if (step < splits.size()) {
      std::vector<std::string_view>& pieces = st.levels[step];  // stable: levels is never resized below
      pieces.clear();
      splits[step].regex.split(piece, pieces, splits[step].behavior, splits[step].invert);
      for (std::string_view p : pieces) pretokenize(step + 1, p, st, at_start && p.data() == piece.data());
      return;
    }
    if (!byte_level) return char_pretokenize(piece, st, at_start);
    std::string prefixed;
    if (add_prefix_space && piece[0] != ' ') {
      prefixed = " ";
      prefixed += piece;
      piece = prefixed;
    }
    if (!byte_level_regex) return word(piece, st);
    std::vector<std::string_view> pieces;
    byte_level_regex->split(piece, pieces);
    for (std::string_view p : pieces) word(p, st);
  }

  /// Metaspace (when the file has it) on a piece: every " " -> the replacement, the replacement prepended as the
  /// scheme says unless the piece starts with it, then split before each replacement (MergedWithNext) when `split`.
  void char_pretokenize(std::string_view piece, EncodeState& st, bool at_start) const {
    if (!metaspace.on) return word(piece, st);
    const std::string& r = metaspace.replacement;
    std::string m;
    m.reserve(piece.size() + r.size());
    for (char c : piece) {
      if (c == ' ') m += r;
      else m += c;
    }
    using Scheme = Metaspace::Scheme;
    if ((metaspace.scheme == Scheme::Always || (metaspace.scheme == Scheme::First && at_start)) && m.compare(0, r.size(), r) != 0)
      m.insert(0, r);
    if (!metaspace.split) return word(m, st);
    size_t b = 0;
    for (size_t at = m.find(r, 1); at != std::string::npos; at = m.find(r, at + r.size())) {
      word(std::string_view(m).substr(b, at - b), st);
      b = at;
    }
    if (b < m.size()) word(std::string_view(m).substr(b), st);
  }

  std::vector<int64_t> encode(const std::string& input, std::vector<int64_t>* fired) const {
    std::string repaired;
    const std::string_view text = utf8::lossy(input, repaired) ? std::string_view(repaired) : std::string_view(input);
    // One cache per thread, as HF keeps one (no lock); it is emptied when the thread encodes with another tokenizer.
    thread_local uint64_t cache_owner = 0;
    thread_local WordCache cache;
    if (cache_owner != instance) cache = WordCache(), cache_owner = instance;
    EncodeState st{{}, cache, std::vector<std::vector<std::string_view>>(splits.size()), fired};
    st.ids.reserve(text.size() / 3);
    auto token = [&](int32_t id) { st.ids.push_back(id); };
    auto normalized_piece = [&](std::string_view n, bool at_start) {
      normalized_added.split(
          n, [&](std::string_view p) { pretokenize(0, p, st, at_start && p.data() == n.data()); }, token);
    };
    raw_added.split(
        text,
        [&](std::string_view piece) {
          const bool at_start = piece.data() == text.data();
          if (normalizer.leaves(piece)) return normalized_piece(piece, at_start);
          const std::string n = normalizer.normalize(piece);
          normalized_piece(n, at_start);
        },
        token);
    return std::move(st.ids);
  }

  /// encode_special_tokens: special added tokens are matched as text (transformers' split_special_tokens).
  void load(const json& j, bool encode_special_tokens);
  void load_model(const json& m);
  /// tokenizers' serde structs have no defaults for these fields: a step without one is a file it refuses.
  void require_fields(const json& step, const char* what, std::initializer_list<const char*> fields) const {
    for (const char* f : fields)
      if (!step.contains(f)) bpe_fail(path, std::string(what) + " lacks its \"" + f + "\" field (tokenizers refuses the file)");
  }
  void load_pre_tokenizer(const json& p);
};

void BpeTokenizer::Impl::load_model(const json& m) {
  if (!m.is_object()) bpe_fail(path, "no \"model\" object");
  // A model without "type" (files written before tokenizers tagged them, RoBERTa's) is read untagged: BPE when it
  // has merges, as tokenizers tries BPE first.
  const std::string type = m.contains("type") ? m.value("type", std::string("(none)"))
                           : m.contains("merges")  ? std::string("BPE")
                                                   : std::string("(none: no \"type\" and no merges)");
  if (type != "BPE") bpe_fail(path, "unsupported model type '" + type + "' (only BPE)");
  auto str_or_empty = [&](const char* key) {
    return m.contains(key) && m[key].is_string() ? m[key].get<std::string>() : std::string();
  };
  if (!str_or_empty("continuing_subword_prefix").empty()) bpe_fail(path, "unsupported BPE continuing_subword_prefix");
  if (!str_or_empty("end_of_word_suffix").empty()) bpe_fail(path, "unsupported BPE end_of_word_suffix");
  if (m.contains("dropout") && m["dropout"].is_number() && m["dropout"].get<double>() != 0.0)
    bpe_fail(path, "unsupported BPE dropout (encode would be random)");
  const auto flag = [&](const char* key) {  // tokenizers reads a missing or null flag as false
    if (!m.contains(key) || m[key].is_null()) return false;
    if (!m[key].is_boolean()) bpe_fail(path, std::string("model \"") + key + "\" is not true or false");
    return m[key].get<bool>();
  };
  byte_fallback = flag("byte_fallback");
  fuse_unk = flag("fuse_unk");
  ignore_merges = flag("ignore_merges");
  if (!m.contains("vocab") || !m["vocab"].is_object()) bpe_fail(path, "model has no \"vocab\" object");
  if (!m.contains("merges") || !m["merges"].is_array()) bpe_fail(path, "model has no \"merges\" list");
  vocab.reserve(m["vocab"].size());
  for (const auto& [tok, id] : m["vocab"].items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
      bpe_fail(path, "vocab id of '" + tok + "' is not a non-negative 32-bit integer");
    vocab[tok] = id.get<int32_t>();
  }
  for (int b = 0; b < 256; ++b) {
    auto it = vocab.find(byte_char[b]);
    byte_id[b] = it == vocab.end() ? -1 : it->second;
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);  // HF's format!("<{:#04X}>", b)
    it = vocab.find(name);
    fallback_id[b] = it == vocab.end() ? -1 : it->second;
    if (fallback_id[b] >= 0) fallback_byte[fallback_id[b]] = static_cast<char>(b);
  }
  if (const std::string unk = str_or_empty("unk_token"); !unk.empty()) {
    // tokenizers loads a file whose unk_token is not in the vocab and fails only on a text that needs it
    auto it = vocab.find(unk);
    if (it == vocab.end()) missing_unk = unk;
    else unk_id = it->second;
  }
  auto id_of = [&](const std::string& t, size_t rank) {
    auto it = vocab.find(t);
    if (it == vocab.end()) bpe_fail(path, "merge " + std::to_string(rank) + ": '" + t + "' is not in the vocab");
    return it->second;
  };
  merges.reserve(m["merges"].size());
  size_t rank = 0;
  for (const auto& e : m["merges"]) {
    if (e.type() != m["merges"].front().type())
      bpe_fail(path, "merge " + std::to_string(rank) + ": the merges mix \"a b\" strings and [\"a\", \"b\"] pairs "
                     "(tokenizers refuses the file)");
    std::string a, b;
    if (e.is_string()) {  // legacy "a b"; HF skips "#version" lines
      const std::string s = e.get<std::string>();
      if (s.rfind("#version", 0) == 0) continue;
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        bpe_fail(path, "merge " + std::to_string(rank) + " is not \"a b\"");
      a = s.substr(0, sp), b = s.substr(sp + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      a = e[0].get<std::string>(), b = e[1].get<std::string>();
    } else {
      bpe_fail(path, "merge " + std::to_string(rank) + " is neither \"a b\" nor [\"a\", \"b\"]");
    }
    const int32_t a_id = id_of(a, rank), b_id = id_of(b, rank), new_id = id_of(a + b, rank);  // HF's order
    merges.put(a_id, b_id, {static_cast<int32_t>(rank), new_id});
    ++rank;
  }
}

void BpeTokenizer::Impl::load_pre_tokenizer(const json& p) {
  std::vector<json> steps;
  const std::string type = p.is_object() ? p.value("type", std::string("(none)")) : std::string("null");
  if (type == "Sequence" && p.contains("pretokenizers") && p["pretokenizers"].is_array())
    steps.assign(p["pretokenizers"].begin(), p["pretokenizers"].end());
  else if (!p.is_null())  // null: no pre-tokenizer (Llama 2's file: its normalizer does Metaspace's work)
    steps.push_back(p);
  for (size_t i = 0; i < steps.size(); ++i) {
    const json& s = steps[i];
    const std::string t = s.is_object() ? s.value("type", std::string("(none)")) : std::string("null");
    if (t == "ByteLevel") {
      if (i + 1 != steps.size()) bpe_fail(path, "unsupported pre_tokenizer: ByteLevel before another pre-tokenizer");
      require_fields(s, "pre_tokenizer ByteLevel", {"add_prefix_space", "trim_offsets"});
      add_prefix_space = s.value("add_prefix_space", false);
      if (s.value("use_regex", true)) byte_level_regex = std::make_unique<SplitRegex>(kGpt2Pattern, path);
    } else if (t == "Split") {
      require_fields(s, "pre_tokenizer Split", {"pattern", "behavior", "invert"});
      const std::string name = s["behavior"].is_string() ? s["behavior"].get<std::string>() : s["behavior"].dump();
      SplitBehavior behavior;
      if (!parse_split_behavior(name, behavior))
        bpe_fail(path, "unknown pre_tokenizer Split behavior '" + name + "' (tokenizers refuses the file)");
      if (!s["invert"].is_boolean()) bpe_fail(path, "pre_tokenizer Split \"invert\" is not true or false");
      const json pat = s.value("pattern", json::object());
      std::string regex;
      if (pat.contains("Regex") && pat["Regex"].is_string())
        regex = pat["Regex"].get<std::string>();
      else if (pat.contains("String") && pat["String"].is_string())
        regex = regex_escape(pat["String"].get<std::string>());
      else
        bpe_fail(path, "pre_tokenizer Split has no Regex or String pattern");
      splits.push_back({SplitRegex(regex, path), behavior, s["invert"].get<bool>()});
    } else if (t == "Metaspace") {
      if (i + 1 != steps.size()) bpe_fail(path, "unsupported pre_tokenizer: Metaspace before another pre-tokenizer");
      metaspace.on = true;
      metaspace.replacement = metaspace_replacement(s, path, "pre_tokenizer Metaspace");
      metaspace.split = s.contains("split") && !s["split"].is_null() ? s["split"].get<bool>() : true;
      const std::string scheme = metaspace_scheme(s, path, "pre_tokenizer Metaspace");
      using Scheme = Metaspace::Scheme;
      metaspace.scheme = scheme == "always" ? Scheme::Always : scheme == "first" ? Scheme::First : Scheme::Never;
    } else {
      bpe_fail(path, "unsupported pre_tokenizer '" + t + "' (only Split, then ByteLevel or Metaspace)");
    }
  }
  // ByteLevel last: byte-level BPE; else the model's symbols are characters (Metaspace last, or Split steps alone,
  // or none), which the model and the decoder must agree with (load checks).
  byte_level = !steps.empty() && steps.back().value("type", std::string()) == "ByteLevel";
}

void BpeTokenizer::Impl::load(const json& j, bool encode_special_tokens) {
  if (!j.is_object()) bpe_fail(path, "not a JSON object");
  for (const auto& [key, v] : j.items())  // tokenizers' Tokenizer struct denies unknown fields
    if (key != "version" && key != "truncation" && key != "padding" && key != "added_tokens" && key != "normalizer" &&
        key != "pre_tokenizer" && key != "model" && key != "post_processor" && key != "decoder")
      bpe_fail(path, "unknown top-level key '" + key + "' (tokenizers refuses the file)");
  // tokenizers reads format 1.0 only ("Unknown tokenizer version"); a file without the key it reads as 1.0.
  if (j.contains("version") && !(j["version"].is_string() && j["version"].get<std::string>() == "1.0"))
    bpe_fail(path, "unknown tokenizer version " + j["version"].dump() + " (tokenizers reads \"1.0\")");
  load_model(j.contains("model") ? j["model"] : json());

  normalizer = BpeNormalizer::from_json(j.value("normalizer", json()), path);

  load_pre_tokenizer(j.value("pre_tokenizer", json()));

  const json dec = j.value("decoder", json());
  const std::string dec_type = dec.is_object() ? dec.value("type", std::string("(none)")) : std::string("null");
  if (byte_level) {
    // HF would fall back on the bytes of a mapped character (U+0100 -> <0xC4><0x80>): never written, not read.
    if (byte_fallback) bpe_fail(path, "unsupported BPE byte_fallback true with a ByteLevel pre-tokenizer");
    if (dec_type != "ByteLevel")
      bpe_fail(path, "unsupported decoder '" + dec_type + "' with a ByteLevel pre-tokenizer (only ByteLevel)");
    require_fields(dec, "decoder ByteLevel", {"add_prefix_space", "trim_offsets"});
  } else {
    if (dec_type == "ByteLevel")
      bpe_fail(path, "unsupported decoder ByteLevel without a ByteLevel pre-tokenizer (a byte-level file lacks its "
                     "ByteLevel step, or a character-level one has the wrong decoder)");
    char_decoder = std::make_unique<BpeDecoder>(BpeDecoder::from_json(dec, path));
  }

  const std::vector<AddedEntry> added_tokens = read_added_tokens(j, vocab, path);
  int64_t max_id = -1;
  for (const auto& [tok, id] : vocab) max_id = std::max<int64_t>(max_id, id);
  for (const AddedEntry& a : added_tokens) max_id = std::max<int64_t>(max_id, a.id);

  // id -> token: vocab first, then added tokens (which take precedence in decode, as in HF).
  if (max_id >= (int64_t{1} << 24)) bpe_fail(path, "token id " + std::to_string(max_id) + " is too large (max 2^24 - 1)");
  const size_t n = static_cast<size_t>(max_id + 1);
  decoded.assign(n, std::string());
  raw_bytes.assign(n, std::string());
  known.assign(n, 0);
  std::unordered_map<std::string, uint8_t> char_byte;
  for (int b = 0; b < 256; ++b) char_byte[byte_char[b]] = static_cast<uint8_t>(b);
  auto decoder_bytes = [&](const std::string& tok) {  // HF's ByteLevel decoder on one token
    std::string out;
    for (size_t i = 0; i < tok.size();) {
      size_t bad = 0, len = utf8::valid_seq(tok, i, bad);
      if (len == 0) return tok;
      auto it = char_byte.find(tok.substr(i, len));
      if (it == char_byte.end()) return tok;
      out += static_cast<char>(it->second);
      i += len;
    }
    return out;
  };
  // Character BPE: the text a token stands for is its string with the space marker read as " " and a byte token
  // <0xHH> as its byte.
  const std::string marker = metaspace.on ? metaspace.replacement : std::string("\xE2\x96\x81");
  auto char_bytes = [&](const std::string& tok, int32_t id) {
    if (const auto it = fallback_byte.find(id); it != fallback_byte.end()) return std::string(1, it->second);
    std::string out;
    for (size_t i = 0; i < tok.size();)
      tok.compare(i, marker.size(), marker) == 0 ? (out += ' ', i += marker.size()) : (out += tok[i], ++i);
    return out;
  };
  if (!byte_level) token_string.assign(n, std::string());
  for (const auto& [tok, id] : vocab) {
    if (byte_level) {
      decoded[id] = raw_bytes[id] = decoder_bytes(tok);
    } else {
      token_string[id] = tok;
      raw_bytes[id] = char_bytes(tok, id);
    }
    known[id] = 1;
  }
  for (const AddedEntry& a : added_tokens) {
    const std::string form = a.normalized ? normalizer.normalize(a.content) : a.content;
    if (byte_level) decoded[a.id] = decoder_bytes(form);
    else token_string[a.id] = a.content;
    raw_bytes[a.id] = a.content;
    known[a.id] = 1;
    AddedSet& set = a.normalized ? normalized_added : raw_added;
    set.tokens.push_back({form, a.id, a.lstrip, a.rstrip, encode_special_tokens && a.special});
  }
  raw_added.finish();
  normalized_added.finish();
}

BpeTokenizer::BpeTokenizer() : impl_(std::make_unique<Impl>()) {}
BpeTokenizer::BpeTokenizer(BpeTokenizer&&) noexcept = default;
BpeTokenizer& BpeTokenizer::operator=(BpeTokenizer&&) noexcept = default;
BpeTokenizer::~BpeTokenizer() = default;

BpeTokenizer BpeTokenizer::from_file(const std::string& tokenizer_json_path, const TransformersClass* cls) {
  BpeTokenizer t;
  t.impl_->path = tokenizer_json_path;
  // tokenizers' serde_json refuses a byte order mark (line 1 column 1).
  json j = read_hf_json(tokenizer_json_path, "tokenizers");
  try {
    if (cls) apply_transformers_class(j, *cls, tokenizer_json_path);
    t.impl_->load(j, cls && cls->split_special_tokens);
  } catch (const json::exception& e) {  // a field of an unexpected JSON type
    bpe_fail(tokenizer_json_path, std::string("unexpected content: ") + e.what());
  }
  return t;
}

std::vector<int64_t> BpeTokenizer::encode(const std::string& utf8) const { return impl_->encode(utf8, nullptr); }

std::vector<int64_t> BpeTokenizer::merges_fired(const std::string& utf8) const {
  std::vector<int64_t> fired;
  impl_->encode(utf8, &fired);
  std::sort(fired.begin(), fired.end());
  fired.erase(std::unique(fired.begin(), fired.end()), fired.end());
  return fired;
}

std::string BpeTokenizer::decode(const std::vector<int64_t>& ids) const {
  if (!impl_->byte_level) {
    std::vector<std::string> tokens;
    for (int64_t id : ids)
      if (id >= 0 && id < vocab_size() && impl_->known[id]) tokens.push_back(impl_->token_string[id]);
    return impl_->char_decoder->decode(std::move(tokens));
  }
  std::string bytes;
  for (int64_t id : ids)
    if (id >= 0 && id < vocab_size() && impl_->known[id]) bytes += impl_->decoded[id];
  std::string out;
  return utf8::lossy(bytes, out) ? out : bytes;
}

std::string BpeTokenizer::token_bytes(int64_t id) const {
  return id >= 0 && id < vocab_size() ? impl_->raw_bytes[id] : std::string();
}

bool BpeTokenizer::byte_fallback_token(int64_t id) const {
  if (impl_->byte_level || id < 0) return false;
  return impl_->fallback_byte.count(static_cast<int32_t>(id)) > 0;
}

int64_t BpeTokenizer::vocab_size() const { return static_cast<int64_t>(impl_->known.size()); }

}  // namespace statecut

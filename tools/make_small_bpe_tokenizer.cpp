/// Trims a BPE tokenizer.json (byte-level, or character-level with byte_fallback) to the merges a set of golden texts
/// needs, keeping its results on them.
///
///   make_small_bpe_tokenizer FULL/tokenizer.json FULL/golden.jsonl OUT_DIR [EXTRA.jsonl ...]
///
/// Writes OUT_DIR/tokenizer.json and OUT_DIR/golden.jsonl. The texts: the golden lines chosen by `keep_line` below
/// (the hand-made categories, then the corpus excerpts of 2..kMaxIds tokens) and every line of each EXTRA file,
/// copied verbatim (their ids are HF's on the FULL tokenizer).
///
/// Why the ids stay exact: encoding with the full table, BPE applies at each step the present pair of lowest rank.
/// Keeping exactly the merges that fired (BpeTokenizer::merges_fired) keeps every step's choice: the chosen pair
/// is kept, and no kept pair of lower rank can be present where the full table had none. The vocab keeps the
/// one-character symbols (and byte tokens, unk), both sides and the result of each kept merge, with their ORIGINAL ids (so it is sparse), and
/// the added tokens' contents with their ids (see below); everything else of the file (added tokens, normalizer,
/// pre-tokenizer, decoder) is copied as it is.
///
/// Build: g++ -std=c++17 -O2 -I. tools/make_small_bpe_tokenizer.cpp optimized/text/{bpe_tokenizer,split_regex,
///        bpe_decoder,bpe_normalizer,unicode_nfc}.cpp -lpcre2-8 -o /tmp/make_small_bpe_tokenizer
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "optimized/text/bpe_tokenizer.h"
#include "optimized/text/utf8.h"

namespace {

constexpr size_t kHandMadeLines = 18;  // golden lines 0..17: whitespace, numbers, contractions, CJK, emoji, special
constexpr size_t kMaxIds = 16;         // corpus excerpts up to this many tokens (keeps the file small)

bool keep_line(size_t index, const nlohmann::json& line) {
  const size_t n = line.at("ids").size();
  return index < kHandMadeLines || (n >= 2 && n <= kMaxIds);
}

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open");
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) lines.push_back(l);
  return lines;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s FULL/tokenizer.json FULL/golden.jsonl OUT_DIR [EXTRA.jsonl ...]\n", argv[0]);
    return 2;
  }
  try {
    const std::string full_path = argv[1], out_dir = argv[3];
    const auto tok = statecut::BpeTokenizer::from_file(full_path);
    std::vector<std::string> kept;
    const auto golden = read_lines(argv[2]);
    for (size_t i = 0; i < golden.size(); ++i)
      if (keep_line(i, nlohmann::json::parse(golden[i]))) kept.push_back(golden[i]);
    for (int a = 4; a < argc; ++a)
      for (const auto& l : read_lines(argv[a])) kept.push_back(l);

    std::set<int64_t> ranks;
    for (const auto& l : kept) {
      const auto j = nlohmann::json::parse(l);
      const auto text = j.at("text").get<std::string>();
      if (tok.encode(text) != j.at("ids").get<std::vector<int64_t>>())
        throw std::runtime_error(std::string(argv[2]) + ": the full tokenizer disagrees with the golden on " + l);
      for (int64_t r : tok.merges_fired(text)) ranks.insert(r);
    }

    nlohmann::json full = nlohmann::json::parse(std::ifstream(full_path));
    nlohmann::json& model = full.at("model");
    const nlohmann::json& vocab = model.at("vocab");
    std::set<std::string> pieces;
    // Every symbol BPE may start from: each one-character piece (byte-level BPE: its 256 byte symbols, fewer where
    // the vocab lacks some, as GPT-NeoX's does; character BPE: every character the model knows, so the trimmed file
    // falls back to bytes exactly where the full one does), the byte tokens <0xHH> and the unk token.
    for (const auto& [piece, id] : vocab.items()) {
      size_t bad = 0;
      const bool one_char = !piece.empty() && statecut::utf8::valid_seq(piece, 0, bad) == piece.size();
      const bool byte_token = piece.size() == 6 && piece.rfind("<0x", 0) == 0 && piece[5] == '>';
      if (one_char || byte_token) pieces.insert(piece);
    }
    if (model.contains("unk_token") && model["unk_token"].is_string() && vocab.contains(model["unk_token"].get<std::string>()))
      pieces.insert(model["unk_token"].get<std::string>());
    nlohmann::json merges = nlohmann::json::array();
    size_t rank = 0;
    for (const auto& m : model.at("merges")) {
      std::string a, b;
      if (m.is_string()) {
        const std::string s = m.get<std::string>();
        if (s.rfind("#version", 0) == 0) continue;
        a = s.substr(0, s.find(' ')), b = s.substr(s.find(' ') + 1);
      } else {
        a = m[0].get<std::string>(), b = m[1].get<std::string>();
      }
      if (ranks.count(static_cast<int64_t>(rank))) {
        merges.push_back(m);
        pieces.insert(a), pieces.insert(b), pieces.insert(a + b);
      }
      ++rank;
    }
    nlohmann::json small_vocab = nlohmann::json::object();
    for (const auto& p : pieces) small_vocab[p] = vocab.at(p);
    // tokenizers gives an added token that is not in the vocab the next id after the vocab's entry count, not the
    // file's: the sparse vocab would move the added tokens to 907, 908, ... So each one goes into the vocab too, with
    // its original id, where tokenizers finds it first (as GPT-2's <|endoftext|> is in its vocab).
    for (const auto& a : full.at("added_tokens")) {
      const std::string content = a.at("content").get<std::string>();
      if (!content.empty() && !small_vocab.contains(content)) small_vocab[content] = a.at("id");
    }
    model["vocab"] = small_vocab;
    model["merges"] = merges;

    std::ofstream(out_dir + "/tokenizer.json") << full.dump(1, ' ', false, nlohmann::json::error_handler_t::strict)
                                              << "\n";
    std::ofstream g(out_dir + "/golden.jsonl");
    for (const auto& l : kept) g << l << "\n";
    std::printf("%zu texts, %zu merges, %zu vocab entries\n", kept.size(), merges.size(), pieces.size());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}

#include "optimized/text/token_stream.h"

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>

#include "optimized/io/checkpoint.h"
#include "optimized/io/input_file.h"
#include "optimized/io/safetensors.h"

namespace statecut {
TokenStream read_tokens(const std::string& path, const Tokenizer& tok, int64_t vocab_size) {
  if (const std::string why = io::input_file_problem(path); !why.empty()) throw std::runtime_error(path + ": " + why);
  TokenStream s;
  s.source = path;
  if (io::is_token_file_name(path)) {
    io::Tokens t = io::read_tokens(path, vocab_size);
    s.ids = std::move(t.ids);  // rows concatenated
    if (t.batch > 1) s.row_length = t.length;
  } else {
    const std::string text = io::read_input_file(path);
    s.text_bytes = static_cast<int64_t>(text.size());
    require_valid_utf8(tok, text, path);
    s.ids = tok.encode(text);
  }
  if (s.ids.empty()) throw std::runtime_error(path + ": empty: no tokens");
  for (size_t i = 0; i < s.ids.size(); ++i) {
    if (s.ids[i] < 0 || s.ids[i] >= vocab_size) {
      const std::string tok_file = tok.file();
      if (!io::is_token_file_name(path) && !tok.byte_level())  // the tokenizer is at fault, not the text
        throw std::runtime_error(tok_file + ": gives id " + std::to_string(s.ids[i]) + " (token " + std::to_string(i) +
                                 " of " + path + "), outside the model's vocabulary [0, " +
                                 std::to_string(vocab_size) + "): this tokenizer has " +
                                 std::to_string(tok.vocab_size()) + " ids, more than the model embeds");
      throw std::runtime_error(path + ": token " + std::to_string(i) + " = " + std::to_string(s.ids[i]) +
                               " outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
    }
    if (tok.available()) s.bytes += tok.bytes_of(s.ids[i]);
  }
  if (!tok.available()) s.bytes = -1;  // unknown: a token file of a checkpoint without a tokenizer
  return s;
}

uint64_t bounded_draw(std::mt19937_64& rng, uint64_t bound) {
  if (bound <= 1) return 0;
  // Reject the top partial block so every residue is equally likely.
  const uint64_t limit = std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % bound;
  uint64_t x;
  do {
    x = rng();
  } while (x >= limit);
  return x % bound;
}

Windows sample_windows(const TokenStream& s, int64_t n_seqs, int64_t len, uint64_t seed) {
  if (n_seqs < 1 || len < 2)
    throw std::runtime_error("calibration needs at least 1 sequence of at least 2 tokens (got " +
                             std::to_string(n_seqs) + "×" + std::to_string(len) + ")");
  const int64_t n = static_cast<int64_t>(s.ids.size());
  if (n < len)
    throw std::runtime_error(s.source + ": too short for " + std::to_string(n_seqs) + "×" + std::to_string(len) +
                             " calibration windows: " + std::to_string(n) + " tokens < " + std::to_string(len));
  std::mt19937_64 rng(seed);
  Windows w;
  w.ids = torch::empty({n_seqs, len}, torch::kInt64);
  auto* out = w.ids.data_ptr<int64_t>();
  for (int64_t i = 0; i < n_seqs; ++i) {
    const int64_t start = static_cast<int64_t>(bounded_draw(rng, static_cast<uint64_t>(n - len + 1)));
    w.starts.push_back(start);
    std::copy(s.ids.begin() + start, s.ids.begin() + start + len, out + i * len);
  }
  return w;
}

}  // namespace statecut

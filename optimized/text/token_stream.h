/// Token inputs of calibration, `rank` and `eval`, and seeded sampling of calibration windows.
///
/// A path is read as
///   *.safetensors, *.bin  a token file, by io::read_tokens (optimized/io/checkpoint.h), rows concatenated (their
///                         length kept in row_length: `eval` scores each row as its own sequence);
///   anything else         UTF-8 text, tokenised by the checkpoint's Tokenizer (invalid UTF-8 refused unless it is
///                         byte-level: require_valid_utf8).
/// Every id must lie in [0, vocab). Errors are one line naming the file.
///
/// sample_windows draws N start offsets s_i uniformly in [0, n − L] (std::mt19937_64 seeded with `seed`, a
/// rejection-sampled bounded draw so the result is the same with every standard library) and returns the
/// windows tokens[s_i, s_i + L) as an int64 tensor [N, L].
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "optimized/text/tokenizer.h"

namespace statecut {

struct TokenStream {
  std::string source;        // the path it came from
  std::vector<int64_t> ids;  // token ids
  int64_t bytes = 0;         // UTF-8 bytes the ids stand for (Tokenizer::bytes_of summed); -1 without a tokenizer
  int64_t row_length = 0;    // a token file of B > 1 rows [B, T]: T; 0 = one sequence
  int64_t text_bytes = -1;   // read from text: the file's own bytes (what `eval` divides by); -1 for a token file
};

TokenStream read_tokens(const std::string& path, const Tokenizer& tok, int64_t vocab_size);

/// Uniform integer in [0, bound) from a 64-bit engine, identical on every platform.
uint64_t bounded_draw(std::mt19937_64& rng, uint64_t bound);

struct Windows {
  torch::Tensor ids;            // [N, L] int64
  std::vector<int64_t> starts;  // N offsets into the stream
};

/// Throws std::runtime_error "<source>: too short for N×L calibration windows: n tokens < L" when n < L.
Windows sample_windows(const TokenStream& s, int64_t n_seqs, int64_t len, uint64_t seed);

}  // namespace statecut

/// Choosing the next token from a row of logits (what `statecut generate` draws), on the CPU in double:
///   temperature 0           greedy: argmax (the lowest id among equal maxima)
///   temperature τ > 0       p_i ∝ exp(l_i / τ) over the candidates:
///     top_k K > 0           candidates = the K largest logits (ties: lower id first), else all
///     top_p P < 1           then the smallest prefix of the candidates, by falling probability, whose mass ≥ P
///   draw                    u = 53 random bits of a std::mt19937_64 / 2^53, the first candidate whose running mass > u·Σ
/// The draw depends only on the seed and the logits (no LibTorch generator): the same seed gives the same text on
/// every machine and LibTorch version.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace statecut {

struct SamplingOptions {
  double temperature = 0.0;  ///< 0: greedy
  int64_t top_k = 0;         ///< 0: no top-k cut
  double top_p = 1.0;        ///< 1: no nucleus cut
};

/// Throws std::invalid_argument (one line) for temperature < 0, top_k < 0 or top_p outside (0, 1].
void check_sampling(const SamplingOptions& s);

/// Throws std::runtime_error "the model's logits are not finite (NaN or Inf)<where>: its forward overflows on this
/// input" when one is: a token drawn from them is noise that looks like text. One reduction (and, on a device, one
/// synchronisation).
void require_finite_logits(const torch::Tensor& logits, const std::string& where = "");

/// One id per row of logits [B, V] (any device, any float dtype); non-finite logits throw (require_finite_logits).
std::vector<int64_t> sample_next(const torch::Tensor& logits, const SamplingOptions& s, std::mt19937_64& rng);

/// The row's id by the rule above (logits of one row, in double).
int64_t sample_row(const std::vector<double>& logits, const SamplingOptions& s, std::mt19937_64& rng);

}  // namespace statecut

// Next-token choice: greedy, temperature, top-k, top-p (sampling.h).
#include "optimized/generate/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

#include "optimized/io/option_error.h"

namespace statecut {

void check_sampling(const SamplingOptions& s) {
  if (!(s.temperature >= 0.0) || !std::isfinite(s.temperature))
    throw OptionError("--temperature must be a finite number >= 0, got " + std::to_string(s.temperature));
  if (s.top_k < 0) throw OptionError("--top-k must be >= 0, got " + std::to_string(s.top_k));
  if (!(s.top_p > 0.0 && s.top_p <= 1.0))
    throw OptionError("--top-p must lie in (0, 1], got " + std::to_string(s.top_p));
}

int64_t sample_row(const std::vector<double>& logits, const SamplingOptions& s, std::mt19937_64& rng) {
  const int64_t V = static_cast<int64_t>(logits.size());
  if (V == 0) throw std::invalid_argument("sample_row: empty logits");
  if (s.temperature <= 0.0) return std::max_element(logits.begin(), logits.end()) - logits.begin();
  std::vector<int64_t> idx(static_cast<size_t>(V));
  std::iota(idx.begin(), idx.end(), 0);
  // Falling logit, lower id first on ties (stable on the id order).
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return logits[a] > logits[b]; });
  if (s.top_k > 0 && s.top_k < V) idx.resize(static_cast<size_t>(s.top_k));
  const double top = logits[idx[0]];
  std::vector<double> p(idx.size());
  double sum = 0.0;
  for (size_t i = 0; i < idx.size(); ++i) sum += p[i] = std::exp((logits[idx[i]] - top) / s.temperature);
  if (s.top_p < 1.0) {
    double mass = 0.0;
    size_t keep = 0;
    while (keep < p.size() && mass < s.top_p * sum) mass += p[keep++];
    keep = std::max<size_t>(keep, 1);
    p.resize(keep);
    idx.resize(keep);
    sum = std::accumulate(p.begin(), p.end(), 0.0);
  }
  const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53 * sum;  // [0, sum)
  double run = 0.0;
  for (size_t i = 0; i < p.size(); ++i) {
    run += p[i];
    if (run > u) return idx[i];
  }
  return idx.back();  // u within rounding of sum
}

void require_finite_logits(const torch::Tensor& logits, const std::string& where) {
  if (!torch::isfinite(logits).all().item<bool>())
    throw std::runtime_error("the model's logits are not finite (NaN or Inf)" + where +
                             ": its forward overflows on this input");
}

std::vector<int64_t> sample_next(const torch::Tensor& logits, const SamplingOptions& s, std::mt19937_64& rng) {
  TORCH_CHECK(logits.dim() == 2, "sample_next: logits must be [B, V], got ", logits.sizes());
  require_finite_logits(logits);
  std::vector<int64_t> out;
  if (s.temperature <= 0.0) {  // argmax on the device: one id per row comes back
    auto ids = logits.argmax(-1).to(torch::kCPU, torch::kInt64).contiguous();
    out.assign(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + ids.numel());
    return out;
  }
  auto l = logits.to(torch::kCPU, torch::kFloat64).contiguous();
  const int64_t B = l.size(0), V = l.size(1);
  for (int64_t b = 0; b < B; ++b) {
    const double* row = l.data_ptr<double>() + b * V;
    out.push_back(sample_row(std::vector<double>(row, row + V), s, rng));
  }
  return out;
}

}  // namespace statecut

// Golden, bf16: the HF families (mamba2, qwen3_5, qwen3_next) loaded in bf16 on the CPU against transformers' fp32
// goldens, logits and every hidden state, both recurrence forms — compared loosely, as the fla bf16 fixture is.
//
// Threshold 3e-2 and why: bf16 (u = 2^-8 = 3.9e-3) rounds every weight once and the activations after each
// projection, conv, norm and residual add (~10 roundings per block, 2–4 blocks) while the recurrences, norms and
// softmax keep fp32, so rounding errors of a few u accumulate: ≈ 8u keeps margin over what we measure (printed,
// 6.2e-3 Qwen .. 1.1e-2 Mamba-2) and stays far below what a wrong op does (≥ 1e-1, e.g. a norm weight w for 1 + w). The fp32
// forward of the same fixtures sits at ≤ 5e-4 (golden_hf_mamba2.cpp, golden_hf_qwen3_5.cpp), so these tests measure
// the bf16 path, not the golden.
#include <gtest/gtest.h>

#include <string>

#include "optimized/models/model.h"
#include "tests/torch/golden_hf_util.h"

namespace {

using namespace statecut;

constexpr double kBf16Tol = 3e-2;

struct Bf16Case {
  const char* fixture;
  const char* run;
  RecurrenceMode mode;
  size_t n_hidden;  // what transformers returns: Mamba-2 num_layers + 1, Qwen embedding + 3 blocks + final norm
};

std::string bf16_case_name(const ::testing::TestParamInfo<Bf16Case>& i) {
  return std::string(i.param.fixture) + "_" + i.param.run + "_" + golden_hf::mode_name(i.param.mode);
}

class Golden_HfBf16 : public ::testing::TestWithParam<Bf16Case> {};

TEST_P(Golden_HfBf16, bf16ForwardMatchesFp32GoldenLoosely) {
  const auto& c = GetParam();
  const auto dir = golden_hf::fixture_dir(c.fixture);
  auto model = load_causal_lm(dir, torch::kBFloat16, torch::kCPU);
  const auto golden = WeightSource::open_file(dir + "/golden.safetensors");
  golden_hf::expect_matches_golden(*model, golden, c.run, c.mode, kBf16Tol, c.fixture, c.n_hidden);
}

std::vector<Bf16Case> cases() {
  std::vector<Bf16Case> out;
  for (const auto& [f, n] : {std::pair<const char*, size_t>{"hf_mamba2", 3}, {"hf_qwen3_5", 5}, {"hf_qwen3_next", 5}})
    for (const char* run : {"run0", "run1"})
      for (auto m : {RecurrenceMode::Recurrent, RecurrenceMode::Chunk}) out.push_back({f, run, m, n});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Runs, Golden_HfBf16, ::testing::ValuesIn(cases()), bf16_case_name);

}  // namespace

// Golden: the LibTorch fla DeltaNet / Gated DeltaNet forward against fla's own outputs (shared/README.md, fixtures/).
//
// For every fixture and run, in both recurrence forms (recurrent and chunked WY), compares the logits, every hidden
// state, and per layer the tensors at the recurrence-kernel boundary (q, k after conv+SiLU, v, β, g, final state)
// by the normwise relative error ‖y − y_ref‖_F / ‖y_ref‖_F in double.
//
// Thresholds (Tolerance below) and why:
//   - fp32 runs that fla computed with its fused_recurrent kernel (run0, and every fla_delta_net run): true fp32 on
//     both sides, 2-layer model, ≤ 150 tokens: rounding alone (max measured 2.5e-6, a GDN layer-0 state) → 2e-5.
//   - GDN run1 (150 tokens) came from fla's Triton chunk kernel, which multiplies fp32 in TF32 (10-bit mantissa): its
//     own error vs an fp32 loop is ~1e-3 (recurrences/golden.safetensors shows it; max measured here 9.0e-4, the
//     gva layer-1 state) → 5e-3 on logits, hidden states and states. Layer-0 kernel inputs (q, k, v, β, g) precede
//     any recurrence → the fp32 threshold there.
//   - bf16 fixture: 8-bit mantissa (u = 3.9e-3); fla's bf16 chunk kernel rounds A, w, u, h to bf16, we keep the
//     recurrence in fp32 (max measured 7.6e-3, layer-1 state) → 2e-2.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <string>

#include "optimized/models/model.h"
#include "optimized/models/weight_source.h"
#include "tests/torch/golden_fla_common.h"

namespace statecut {
namespace {

using golden::Golden;
using golden::rel_err;

struct FlaCase {
  std::string fixture;
  RecurrenceMode mode;
};

std::string fla_case_name(const testing::TestParamInfo<FlaCase>& info) {
  return info.param.fixture + (info.param.mode == RecurrenceMode::Recurrent ? "_recurrent" : "_chunk");
}

class Golden_FlaModel : public testing::TestWithParam<FlaCase> {};

TEST_P(Golden_FlaModel, matchesFlaLogitsHiddenStatesAndKernelBoundary) {
  const auto& c = GetParam();
  const std::string dir = golden::fixture_dir(c.fixture);
  if (dir.empty()) GTEST_SKIP() << "fixture " << c.fixture << " not found (../shared/fixtures or tests/data/fixtures)";
  const bool bf16 = c.fixture.find("bf16") != std::string::npos;
  const bool gated = c.fixture.find("gated") != std::string::npos;
  auto model = load_causal_lm(dir, bf16 ? torch::kBFloat16 : torch::kFloat32, torch::kCPU);
  Golden g(dir + "/golden.safetensors");
  torch::NoGradGuard no_grad;
  int runs = 0;
  for (int run = 0; g.has("run" + std::to_string(run) + ".input_ids"); ++run, ++runs) {
    const std::string r = "run" + std::to_string(run) + ".";
    // fla's run1 of a GDN fixture came from the TF32 chunk kernel; fla_delta_net forces the recurrent kernel.
    const bool tf32_golden = gated && run == 1;
    const double tol_out = bf16 ? 2e-2 : tf32_golden ? 5e-3 : 2e-5;
    const double tol_in = bf16 ? 2e-2 : 2e-5;  // layer-0 kernel inputs precede any recurrence

    ForwardOptions opt;
    opt.mode = c.mode;
    opt.output_hidden_states = true;
    opt.capture_boundary = true;
    auto res = model->forward(g.get(r + "input_ids"), opt);

    golden::expect_close(res.logits, g.get(r + "logits"), tol_out, c.fixture + " " + r + "logits");
    int n_hidden = 0;
    for (; g.has(r + "hidden_states." + std::to_string(n_hidden)); ++n_hidden) {
      const std::string key = r + "hidden_states." + std::to_string(n_hidden);
      ASSERT_LT(n_hidden, static_cast<int>(res.hidden_states.size())) << key;
      golden::expect_close(res.hidden_states[n_hidden], g.get(key), n_hidden == 0 ? tol_in : tol_out,
                           c.fixture + " " + key);
    }
    if (n_hidden > 0)  // (trimmed copies in tests/data keep only the logits of run1)
      EXPECT_EQ(n_hidden, static_cast<int>(res.hidden_states.size())) << "number of hidden states";

    for (std::size_t L = 0; L < res.boundary.size(); ++L) {
      const std::string k = r + "layers." + std::to_string(L) + ".kernel.";
      if (!g.has(k + "q")) continue;
      const auto& b = res.boundary[L];
      const double tol = L == 0 ? tol_in : tol_out;
      const std::string at = c.fixture + " " + k;
      golden::expect_close(b.q, g.get(k + "q"), tol, at + "q");
      golden::expect_close(b.k, g.get(k + "k"), tol, at + "k");
      golden::expect_close(b.v, g.get(k + "v"), tol, at + "v");
      if (gated) {  // fla stores the raw b_proj / a_proj outputs; the kernel applies sigmoid and the gate
        golden::expect_close(b.beta, torch::sigmoid(g.get(k + "beta").to(torch::kFloat64)), tol, at + "beta");
        auto A_log = g.get(k + "A_log").to(torch::kFloat64), dt_bias = g.get(k + "dt_bias").to(torch::kFloat64);
        auto gate = -torch::exp(A_log) * torch::softplus(g.get(k + "g").to(torch::kFloat64) + dt_bias);
        golden::expect_close(b.g, gate, tol, at + "g");
        // fla's GDN layer keeps its state value-first [B,H,V,K]; ours is key-major [B,H,K,V].
        golden::expect_close(b.final_state, g.get(k + "final_state").transpose(-1, -2), tol_out, at + "final_state");
      } else {
        golden::expect_close(b.beta, g.get(k + "beta"), tol, at + "beta");
        EXPECT_FALSE(b.g.defined()) << "DeltaNet has no gate";
        golden::expect_close(b.final_state, g.get(k + "final_state"), tol_out, at + "final_state");
      }
    }
  }
  EXPECT_GE(runs, 1) << dir << ": golden holds no run";
}

const char* kFlaFixtures[] = {"fla_delta_net",          "fla_delta_net_pruned50",      "fla_delta_net_bf16",
                           "fla_gated_deltanet",     "fla_gated_deltanet_pruned50", "fla_gated_deltanet_gva"};

std::vector<FlaCase> fla_cases() {
  std::vector<FlaCase> out;
  for (const char* f : kFlaFixtures)
    for (auto m : {RecurrenceMode::Recurrent, RecurrenceMode::Chunk}) out.push_back({f, m});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Golden_FlaModel, testing::ValuesIn(fla_cases()), fla_case_name);

// The real trained byte-level DeltaNet (shared/models/byte_delta_net_4L): fla's logits on two held-out windows of
// 300 bytes in fp32; they match at 3.6e-7 (fla's delta-rule chunk kernel refuses fp32, so these are true fp32) →
// the fp32 threshold 2e-5.
class Golden_ByteDeltaNet : public testing::TestWithParam<RecurrenceMode> {};

TEST_P(Golden_ByteDeltaNet, matchesFlaLogitsOfTheTrainedModel) {
  const std::string dir = golden::model_dir("byte_delta_net_4L");
  if (dir.empty()) GTEST_SKIP() << "byte_delta_net_4L not found (../shared/models or assets/)";
  auto model = load_causal_lm(dir, torch::kFloat32, torch::kCPU);
  Golden g(dir + "/golden.safetensors");
  torch::NoGradGuard no_grad;
  ForwardOptions opt;
  opt.mode = GetParam();
  auto res = model->forward(g.get("input_ids"), opt);
  golden::expect_close(res.logits, g.get("logits"), 2e-5, "byte_delta_net_4L logits");
}

INSTANTIATE_TEST_SUITE_P(Modes, Golden_ByteDeltaNet, testing::Values(RecurrenceMode::Recurrent, RecurrenceMode::Chunk),
                         [](const testing::TestParamInfo<RecurrenceMode>& i) {
                           return std::string(i.param == RecurrenceMode::Recurrent ? "recurrent" : "chunk");
                         });

}  // namespace
}  // namespace statecut

// Golden: transformers Mamba2ForCausalLM (fixture hf_mamba2): logits and every hidden state in recurrent and chunk
// mode; the layer's SSM against the double reference statecut::ref::mamba2_multihead; the boundary tensors against
// the packed rows that prunable_layers() names.
#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <cstdio>
#include <string>

#include "optimized/models/families/hf_mamba2.h"
#include "optimized/models/layers_common.h"
#include "optimized/models/model.h"
#include "reference/recurrence_multihead.h"
#include "tests/torch/golden_hf_util.h"

namespace {

using namespace statecut;
using namespace statecut::golden_hf;

// transformers' torch path ran in true fp32 (shared/README.md). Ours is fp32 too, with other op and summation orders
// (chunked SSD vs our WY/UT chunks or a step loop), so rounding (u = 6e-8) compounds over 2 blocks, 150 steps and a
// 256-way lm_head: measured ≤ 1.3e-6; 1e-5 keeps ~8× margin and still catches any wrong op (those give ≥ 1e-2).
constexpr double kMamba2Fp32Tol = 1e-5;

struct Mamba2Case {
  const char* run;
  RecurrenceMode mode;
};

std::string mamba2_case_name(const ::testing::TestParamInfo<Mamba2Case>& i) {
  return std::string(i.param.run) + (i.param.mode == RecurrenceMode::Chunk ? "_chunk" : "_recurrent");
}

// transformers returns the stream after each block, then norm_f of the last one: num_layers + 1 entries.
constexpr size_t kHidden = 3;

class Golden_HfMamba2 : public ::testing::TestWithParam<Mamba2Case> {};

TEST_P(Golden_HfMamba2, logitsAndHiddenStatesMatchTransformers) {
  const auto dir = fixture_dir("hf_mamba2");
  auto model = load_causal_lm(dir, torch::kFloat32, torch::kCPU);
  ASSERT_EQ(model->model_type(), "mamba2");
  const auto golden = WeightSource::open_file(dir + "/golden.safetensors");
  expect_matches_golden(*model, golden, GetParam().run, GetParam().mode, kMamba2Fp32Tol, "f32", kHidden);
}

INSTANTIATE_TEST_SUITE_P(Runs, Golden_HfMamba2,
                         ::testing::Values(Mamba2Case{"run0", RecurrenceMode::Recurrent},
                                           Mamba2Case{"run0", RecurrenceMode::Chunk},
                                           Mamba2Case{"run1", RecurrenceMode::Recurrent},
                                           Mamba2Case{"run1", RecurrenceMode::Chunk}),
                         mamba2_case_name);

TEST(Golden_HfMamba2F64, doubleForwardMatchesAndChunkEqualsRecurrent) {
  const auto dir = fixture_dir("hf_mamba2");
  auto model = load_causal_lm(dir, torch::kFloat64, torch::kCPU);
  const auto golden = WeightSource::open_file(dir + "/golden.safetensors");
  // The f64 forward carries no rounding of its own, so its distance to the fp32 golden is the golden's own error.
  expect_matches_golden(*model, golden, "run1", RecurrenceMode::Chunk, kMamba2Fp32Tol, "f64", kHidden);
  ForwardOptions opt;
  const auto ids = golden.raw("run1.input_ids");
  opt.mode = RecurrenceMode::Chunk;
  auto chunk = model->forward(ids, opt).logits;
  opt.mode = RecurrenceMode::Recurrent;
  auto rec = model->forward(ids, opt).logits;
  // Same math in double, different association: n·eps-sized (logits are returned in fp32, so 1e-7 is the floor).
  EXPECT_LT(rel_err(chunk, rec), 1e-6);
}

// The rows/channels prunable_layers() names, pushed through projection + conv + SiLU, must give the boundary q = C
// and k = B: this is what surgery slices, so a wrong offset would prune the wrong channels.
TEST(Golden_HfMamba2Boundary, boundaryEqualsPrunableRowsThroughConv) {
  const auto dir = fixture_dir("hf_mamba2");
  auto model = load_causal_lm(dir, torch::kFloat32, torch::kCPU);
  const auto golden = WeightSource::open_file(dir + "/golden.safetensors");
  ForwardOptions opt;
  opt.capture_boundary = true;
  auto r = model->forward(golden.raw("run0.input_ids"), opt);
  const auto layers = model->prunable_layers();
  ASSERT_EQ(layers.size(), 2u);
  for (const auto& p : layers) {
    const auto& bd = r.boundary.at(p.layer);
    const int64_t Bsz = bd.attn_in.size(0), T = bd.attn_in.size(1);
    EXPECT_EQ(p.num_key_heads, 1);
    EXPECT_EQ(p.head_k_dim, 32);
    expect_boundary_is_prunable_rows(*model, bd, p);
    EXPECT_EQ(bd.v.sizes(), (std::vector<int64_t>{Bsz, T, 4, 32}));
    EXPECT_EQ(bd.final_state.sizes(), (std::vector<int64_t>{Bsz, 4, 32, 32}));
    EXPECT_TRUE((bd.g < 0).all().item<bool>()) << "log decay dt·A must be negative";
    EXPECT_FALSE(bd.beta.defined());
  }
}

ref::Mat mamba2_to_mat(const torch::Tensor& t2d) {
  auto c = t2d.to(torch::kFloat64).contiguous();
  using RowMat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  return Eigen::Map<const RowMat>(c.data_ptr<double>(), c.size(0), c.size(1));
}

// mamba2_ssm (the LibTorch SSM of the layer, both modes, f64 and f32) against the double reference, per batch row.
TEST(Equiv_HfMamba2Ssd, ssmMatchesDoubleReference) {
  const uint64_t seed = golden_hf::master_seed();
  torch::manual_seed(seed);
  const int64_t Bsz = 2, H = 4, G = 2, P = 5, N = 7;
  for (int64_t T : {1, 63, 65, 127}) {
    const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
    auto x = torch::randn({Bsz, T, H, P}, f64);
    auto Bm = torch::randn({Bsz, T, G, N}, f64);
    auto Cm = torch::randn({Bsz, T, G, N}, f64);
    auto dt = torch::softplus(torch::randn({Bsz, T, H}, f64) - 1.0);    // (0, ~3): transformers' softplus(dt + bias)
    auto A = -torch::exp(torch::rand({H}, f64) * 2.0 - 1.0);          // A = −exp(A_log), A_log ∈ [−1, 1]
    auto D = torch::randn({H}, f64);
    std::vector<ref::Mat> yref;  // [b*H + h] → [T, P]
    std::vector<ref::Mat> sref;  // [b*H + h] → [N, P]
    for (int64_t b = 0; b < Bsz; ++b) {
      std::vector<ref::Mat> C, B, X;
      std::vector<ref::Vec> DT;
      for (int64_t g = 0; g < G; ++g) {
        C.push_back(mamba2_to_mat(Cm[b].select(1, g)));
        B.push_back(mamba2_to_mat(Bm[b].select(1, g)));
      }
      for (int64_t h = 0; h < H; ++h) {
        X.push_back(mamba2_to_mat(x[b].select(1, h)));
        DT.push_back(mamba2_to_mat(dt[b].select(1, h).unsqueeze(1)).col(0));
      }
      const auto out = ref::mamba2_multihead(C, B, X, DT, mamba2_to_mat(A.unsqueeze(1)).col(0), mamba2_to_mat(D.unsqueeze(1)).col(0),
                                             /*chunked=*/false);
      for (const auto& hr : out) {
        yref.push_back(hr.o);
        sref.push_back(hr.state);
      }
    }
    auto yr = torch::empty({Bsz, T, H, P}, f64), sr = torch::empty({Bsz, H, N, P}, f64);
    for (int64_t b = 0; b < Bsz; ++b)
      for (int64_t h = 0; h < H; ++h) {
        const auto& y = yref[b * H + h];
        const auto& s = sref[b * H + h];
        for (int64_t t = 0; t < T; ++t)
          for (int64_t p = 0; p < P; ++p) yr[b][t][h][p] = y(t, p);
        for (int64_t n = 0; n < N; ++n)
          for (int64_t p = 0; p < P; ++p) sr[b][h][n][p] = s(n, p);
      }
    for (auto mode : {RecurrenceMode::Recurrent, RecurrenceMode::Chunk}) {
      const char* mname = mode == RecurrenceMode::Chunk ? "chunk" : "recurrent";
      torch::Tensor state, g;
      auto y = mamba2_ssm(x, Bm, Cm, dt, A, D, mode, &state, &g);
      // Same math in double; only association differs (≤ T·N·eps ≈ 1e-13).
      EXPECT_LT(rel_err(y, yr), 1e-12) << "f64 " << mname << " T=" << T;
      EXPECT_LT(rel_err(state, sr), 1e-12) << "f64 state " << mname << " T=" << T;
      EXPECT_LT(rel_err(g, dt * A), 1e-15) << "g = dt·A";
      auto y32 = mamba2_ssm(x.to(torch::kFloat32), Bm.to(torch::kFloat32), Cm.to(torch::kFloat32),
                            dt.to(torch::kFloat32), A.to(torch::kFloat32), D.to(torch::kFloat32), mode, &state);
      const double e32 = rel_err(y32, yr), s32 = rel_err(state, sr);
      std::printf("T=%lld %s: f32 y rel err %.2e, state %.2e\n", static_cast<long long>(T), mname, e32, s32);
      // fp32 inputs rounded once (u = 6e-8) plus O(T) accumulation over ≤ 127 steps of decayed sums: ≤ 1e-5.
      EXPECT_LT(e32, 1e-5) << "f32 " << mname << " T=" << T;
      EXPECT_LT(s32, 1e-5) << "f32 state " << mname << " T=" << T;
    }
  }
}

}  // namespace

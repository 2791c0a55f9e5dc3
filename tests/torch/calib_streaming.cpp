// Streaming calibration (optimized/prune/calibration.h) against the same statistics formed from ONE forward over
// all windows at once: the tall-skinny R factor, the faithful row subsample, PCA moments, RMS, and the
// gradient (checked against a central finite difference in f64, so autograd must flow through the model).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <random>
#include <utility>
#include <vector>

#include "optimized/prune/calibration.h"
#include "reference/select_rng.h"
#include "tests/torch/pipeline_util.h"

namespace fs = std::filesystem;
using namespace statecut;

namespace {

const fs::path kStreamFixtures = pipeline_test::fixture_root();

using pipeline_test::master_seed;

/// A fixture model in `dtype` on the CPU, n seeded random byte windows of len tokens, and the seed (printed).
struct StreamCase {
  std::unique_ptr<CausalLM> m;
  torch::Tensor ids;
  uint64_t seed;
};
StreamCase fixture_case(const std::string& name, torch::Dtype dtype, int64_t n, int64_t len) {
  StreamCase c;
  c.seed = master_seed();
  c.m = load_causal_lm((kStreamFixtures / name).string(), dtype, torch::kCPU);
  torch::manual_seed(c.seed);
  c.ids = torch::randint(0, 256, {n, len}, torch::kInt64);
  return c;
}

double stream_rel(const torch::Tensor& a, const torch::Tensor& b) {
  return ((a - b).norm() / b.norm()).item<double>();
}

/// [H, N, d] f64 features of every window in one forward.
struct Full {
  std::vector<torch::Tensor> q, k, attn_in;  // per prunable layer
};
Full full_forward(CausalLM& m, const torch::Tensor& ids) {
  torch::NoGradGuard ng;
  ForwardOptions fo;
  fo.capture_boundary = true;
  auto r = m.forward(ids, fo);
  Full f;
  for (const auto& L : m.prunable_layers()) {
    auto rows = [](const torch::Tensor& x) {
      return x.to(torch::kFloat64).reshape({-1, x.size(2), x.size(3)}).permute({1, 0, 2}).contiguous();
    };
    f.q.push_back(rows(r.boundary[L.layer].q));
    f.k.push_back(rows(r.boundary[L.layer].k));
    f.attn_in.push_back(r.boundary[L.layer].attn_in.to(torch::kFloat64).reshape({-1, r.boundary[L.layer].attn_in.size(-1)}));
  }
  return f;
}

// A macro, not a function: GTEST_SKIP() only ends the test when it runs in the test body itself.
#define REQUIRE_FIXTURE(name) \
  do { \
    if (!fs::exists(kStreamFixtures / (name) / "config.json")) GTEST_SKIP() << "no ../shared/fixtures/" << (name); \
  } while (0)

}  // namespace

TEST(Unit_Calibration, streamedRFactorReproducesTheFeatureGram) {
  REQUIRE_FIXTURE("fla_gated_deltanet");
  // 3 mini-batches of 2, 2, 1: three TSQR updates
  auto [m, ids, seed] = fixture_case("fla_gated_deltanet", torch::kFloat32, 5, 63);
  CalibrationNeeds nd;
  nd.features = nd.pca = nd.rms = true;
  nd.batch = 2;
  const Calibration cal = calibrate(*m, ids, nd);
  const Full f = full_forward(*m, ids);
  ASSERT_EQ(cal.layers.size(), f.q.size());
  EXPECT_EQ(cal.tokens, 5 * 63);
  for (size_t l = 0; l < f.q.size(); ++l) {
    const auto& lc = cal.layers[l];
    for (int64_t h = 0; h < f.q[l].size(0); ++h) {
      const torch::Tensor M = torch::cat({f.q[l][h], f.k[l][h]}, 0);  // [Q; K]
      const torch::Tensor R = lc.r[h];
      // Householder TSQR in f64 is backward stable (RᵀR = MᵀM to ~n·eps_f64), but M here comes from a forward at
      // another batch shape: with an optimised BLAS the fp32 features then differ by ~1e-7 relative, which bounds
      // every comparison below (kTol = 1e-6, ~16 fp32 ulps). A lost or doubled TSQR block is off by O(1).
      constexpr double kTol = 1e-6;
      EXPECT_LT(stream_rel(R.t().matmul(R), M.t().matmul(M)), kTol) << "layer " << l << " head " << h;
      EXPECT_TRUE(torch::allclose(torch::triu(R), R)) << "R is upper triangular";
      const torch::Tensor kh = f.k[l][h] * torch::rsqrt((f.k[l][h] * f.k[l][h]).sum(-1, true) + 1e-6);
      EXPECT_LT(stream_rel(lc.pca_outer_k[h], kh.t().matmul(kh)), kTol);
      EXPECT_LT(stream_rel(lc.pca_sum_k[h], kh.sum(0)), kTol);
    }
    EXPECT_EQ(lc.pca_n, 5.0 * 63);
    const torch::Tensor rms = torch::sqrt((f.attn_in[l] * f.attn_in[l]).mean(0));
    EXPECT_LT(stream_rel(lc.rms(), rms), 1e-6);  // same fp32 batch-shape bound as above
  }
}

// Each layer's statistics are labelled with the model layer they belong to, in prunable_layers() order (seed 301: the
// label taken from the next entry survived).
TEST(Unit_Calibration, layersAreLabelledWithTheirModelLayer) {
  REQUIRE_FIXTURE("hf_qwen3_5");
  auto [m, ids, seed] = fixture_case("hf_qwen3_5", torch::kFloat32, 2, 16);
  CalibrationNeeds nd;
  nd.rms = true;
  const Calibration cal = calibrate(*m, ids, nd);
  const auto layers = m->prunable_layers();
  ASSERT_EQ(cal.layers.size(), layers.size());
  for (size_t i = 0; i < layers.size(); ++i) EXPECT_EQ(cal.layers[i].layer, layers[i].layer) << "entry " << i;
}

// The gradient pass switches requires_grad on for the q/k weights only while it runs and hands every parameter back as
// it found it: a pattern that alternates along the parameter list (q/k weights included) must come back unchanged
// (seed 304: the restore reading the next parameter's saved flag survived, since every flag had been false).
TEST(Unit_Calibration, gradientPassRestoresEveryParametersRequiresGrad) {
  REQUIRE_FIXTURE("fla_delta_net");
  auto [m, ids, seed] = fixture_case("fla_delta_net", torch::kFloat32, 2, 16);
  std::vector<bool> before;
  size_t i = 0;
  for (auto& [name, p] : m->named_parameters()) {
    p.requires_grad_(i++ % 3 == 1);
    before.push_back(p.requires_grad());
  }
  CalibrationNeeds nd;
  nd.grad = true;
  calibrate(*m, ids, nd);
  i = 0;
  for (auto& [name, p] : m->named_parameters()) {
    EXPECT_EQ(p.requires_grad(), before[i]) << name;
    ++i;
  }
}

// The grad pass reports the mean next-token cross-entropy of the calibration sequences (statecut.json's mean_loss):
// over 4 windows in batches of 2 (a whole number of batches, where a loop running one batch too far would add an
// empty one) it equals the mean of each sequence's loss from a plain forward, and progress counts 2 steps (seed 307:
// `b0 < N` → `b0 <= N` survived, its empty batch turning the loss into NaN).
TEST(Unit_Calibration, gradientPassMeanLossIsTheMeanSequenceLoss) {
  REQUIRE_FIXTURE("fla_delta_net");
  auto [m, ids, seed] = fixture_case("fla_delta_net", torch::kFloat32, 4, 24);
  CalibrationNeeds nd;
  nd.grad = true;
  nd.batch = 2;
  int64_t calls = 0;
  const Calibration cal = calibrate(*m, ids, nd, [&calls](int64_t, int64_t) { ++calls; });
  EXPECT_EQ(calls, 2);
  double sum = 0;
  {
    torch::NoGradGuard ng;
    const torch::Tensor logits = m->forward(ids).logits.to(torch::kFloat64);
    for (int64_t b = 0; b < ids.size(0); ++b)
      sum += torch::nn::functional::cross_entropy(logits[b].narrow(0, 0, 23), ids[b].narrow(0, 1, 23)).item<double>();
  }
  // fp32 logits from batch-2 and batch-4 forwards, reduced in f32 vs f64: ~1e-6 relative.
  EXPECT_NEAR(cal.mean_loss, sum / 4, 1e-5 * sum / 4) << "seed " << seed;
}

// Windows must be [N, L] with N >= 1 and L >= 2 (a next token to predict): anything else is refused with that bound
// (seed 305: the message's ">= 2" changed survived).
TEST(Unit_Calibration, windowsBelowTwoTokensAreRefusedWithTheBound) {
  REQUIRE_FIXTURE("fla_delta_net");
  auto [m, ids, seed] = fixture_case("fla_delta_net", torch::kFloat32, 1, 2);
  CalibrationNeeds nd;
  nd.rms = true;
  EXPECT_NO_THROW(calibrate(*m, ids, nd)) << "one window of two tokens is the smallest";
  for (const auto& bad : {ids.narrow(1, 0, 1), ids.narrow(0, 0, 0), ids[0]}) {
    try {
      calibrate(*m, bad, nd);
      ADD_FAILURE() << "windows " << bad.sizes() << " accepted";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "calibration: token windows must be [N, L] with L >= 2");
    }
  }
}

/// A model that forwards to `inner` but never hands over block `skip`'s boundary (a family that forgot to capture one).
class DropsOneBoundary : public CausalLM {
 public:
  DropsOneBoundary(CausalLM& inner, int64_t skip) : inner_(inner), skip_(skip) {
    set_prunable_layers(inner.prunable_layers());
  }
  ForwardResult forward(const torch::Tensor& ids, const ForwardOptions& opt) override {
    ForwardOptions o = opt;
    if (opt.on_boundary)
      o.on_boundary = [this, &opt](int64_t layer, LayerBoundary& b) {
        if (layer != skip_) opt.on_boundary(layer, b);
      };
    return inner_.forward(ids, o);
  }
  const std::string& model_type() const override { return inner_.model_type(); }
  int64_t vocab_size() const override { return inner_.vocab_size(); }
  std::vector<std::pair<std::string, torch::Tensor>> named_parameters() override { return inner_.named_parameters(); }

 private:
  CausalLM& inner_;
  int64_t skip_;
};

// A prunable layer whose boundary never arrives is named by its model layer, never skipped silently (seed 306: the
// check reading the next layer's flag survived, and seed 304 the message naming the next layer).
TEST(Unit_Calibration, layerWithoutBoundaryTensorsIsNamed) {
  REQUIRE_FIXTURE("hf_qwen3_5");
  auto [m, ids, seed] = fixture_case("hf_qwen3_5", torch::kFloat32, 2, 16);
  CalibrationNeeds nd;
  nd.rms = true;
  const auto layers = m->prunable_layers();
  ASSERT_GE(layers.size(), 3u);
  for (const size_t i : {size_t{0}, size_t{1}, layers.size() - 1}) {
    DropsOneBoundary d(*m, layers[i].layer);
    try {
      calibrate(d, ids, nd);
      ADD_FAILURE() << "layer " << layers[i].layer << " without boundary accepted";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()),
                "calibration: model returned no boundary tensors for layer " + std::to_string(layers[i].layer));
    }
  }
  DropsOneBoundary none(*m, -1);
  EXPECT_NO_THROW(calibrate(none, ids, nd)) << "the wrapper itself changes nothing";
}

// The progress callback counts every mini-batch of every pass against a fixed total: 5 windows in batches of 2 are 3
// forward batches plus 3 gradient batches, 6 calls (1/6 … 6/6) (seed 301: the total's product turned into a quotient,
// 3 / 2 = 1, survived).
TEST(Unit_Calibration, progressCountsEveryBatchOfEveryPass) {
  REQUIRE_FIXTURE("fla_delta_net");
  auto [m, ids, seed] = fixture_case("fla_delta_net", torch::kFloat32, 5, 16);
  CalibrationNeeds nd;
  nd.rms = nd.grad = true;
  nd.batch = 2;
  std::vector<std::pair<int64_t, int64_t>> calls;
  calibrate(*m, ids, nd, [&calls](int64_t done, int64_t total) { calls.emplace_back(done, total); });
  ASSERT_EQ(calls.size(), 6u);
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i].first, static_cast<int64_t>(i) + 1);
    EXPECT_EQ(calls[i].second, 6);
  }
}

TEST(Unit_Calibration, faithfulRowsAreDistinctRowsOfQThenK) {
  REQUIRE_FIXTURE("fla_delta_net");
  auto [m, ids, seed] = fixture_case("fla_delta_net", torch::kFloat32, 3, 65);
  CalibrationNeeds nd;
  nd.rows = true;
  nd.faithful_rows = 127;  // of 2·3·65 = 390 rows
  nd.batch = 2;
  nd.seed = seed;
  const Calibration cal = calibrate(*m, ids, nd);
  const Full f = full_forward(*m, ids);
  for (size_t l = 0; l < f.q.size(); ++l) {
    for (int64_t h = 0; h < f.q[l].size(0); ++h) {
      const torch::Tensor rows = cal.layers[l].rows[h].to(torch::kFloat64);
      ASSERT_EQ(rows.size(0), 127);
      const torch::Tensor M = torch::cat({f.q[l][h], f.k[l][h]}, 0);
      // each sampled row is a row of M, at increasing positions of M. Not bitwise: calibration and this test run
      // the fp32 forward at different batch shapes, and an optimised BLAS (OpenBLAS) blocks the sums differently,
      // so rows agree to fp32 rounding (features ~1: 1e-6 is ~16 ulps), far below the gap between distinct rows.
      const torch::Tensor d = torch::cdist(rows, M);
      const auto [dmin, where] = d.min(1);
      EXPECT_LE(dmin.max().item<double>(), 1e-6);
      EXPECT_TRUE(torch::all(where.slice(0, 1) > where.slice(0, 0, -1)).item<bool>()) << "rows out of order";
    }
  }
}

// One-sided faithful rows (--select q or k): the rows of that side alone, exactly the ones the seed rule draws for
// (layer, head), whichever mini-batch they fall in (seed 302: the later batches' offset b0·L turned into b0/L
// survived, because every earlier faithful test was two-sided).
TEST(Unit_Calibration, oneSidedFaithfulRowsAreTheSeedRulesRowsOfThatSide) {
  REQUIRE_FIXTURE("fla_delta_net");
  auto [m, ids, seed] = fixture_case("fla_delta_net", torch::kFloat32, 5, 33);
  const Full f = full_forward(*m, ids);
  const auto layers = m->prunable_layers();
  for (const ref::ScoreSide side : {ref::ScoreSide::QOnly, ref::ScoreSide::KOnly}) {
    CalibrationNeeds nd;
    nd.rows = true;
    nd.side = side;
    nd.faithful_rows = 63;  // of 5·33 = 165 rows of one side: rows in all three mini-batches of 2, 2, 1
    nd.batch = 2;
    nd.seed = seed;
    const Calibration cal = calibrate(*m, ids, nd);
    const std::vector<torch::Tensor>& X = side == ref::ScoreSide::QOnly ? f.q : f.k;
    for (size_t l = 0; l < X.size(); ++l) {
      for (int64_t h = 0; h < X[l].size(0); ++h) {
        ref::SelectRng rng = ref::SelectRng::for_head(seed, layers[l].layer, h);
        const std::vector<ref::Index> want = ref::faithful_subsample(X[l].size(1), 63, rng);
        const torch::Tensor idx = torch::tensor(std::vector<int64_t>(want.begin(), want.end()), torch::kInt64);
        const torch::Tensor rows = cal.layers[l].rows[h].to(torch::kFloat64);
        ASSERT_EQ(rows.size(0), 63);
        // the same fp32 batch-shape bound as faithfulRowsAreDistinctRowsOfQThenK (1e-6, ~16 ulps of features ~1);
        // a row taken from the wrong position differs by O(1)
        EXPECT_LE((rows - X[l][h].index_select(0, idx)).abs().max().item<double>(), 1e-6)
            << "side " << (side == ref::ScoreSide::QOnly ? "q" : "k") << " layer " << l << " head " << h
            << " seed " << seed;
      }
    }
  }
}

// The RMS of a layer that has seen no token is refused, not 0/0 = NaN (LayerCalibration is a public struct: a caller
// may assemble one by hand).
TEST(Unit_Calibration, rmsOfNoTokensIsRefused) {
  LayerCalibration lc;
  EXPECT_THROW(lc.rms(), std::runtime_error) << "nothing collected";
  lc.sumsq = torch::zeros({4}, torch::kFloat64);
  EXPECT_THROW(lc.rms(), std::runtime_error) << "a sum over zero tokens";
  lc.rms_n = 2;
  EXPECT_NO_THROW(lc.rms());
}

TEST(Unit_Calibration, gradientMatchesCentralFiniteDifference) {
  REQUIRE_FIXTURE("fla_delta_net");
  StreamCase c = fixture_case("fla_delta_net", torch::kFloat64, 3, 33);  // named members: the lambda below captures them
  auto& m = c.m;
  const torch::Tensor& ids = c.ids;
  const uint64_t seed = c.seed;
  CalibrationNeeds nd;
  nd.grad = true;
  nd.batch = 2;
  const Calibration cal = calibrate(*m, ids, nd);
  const auto layers = m->prunable_layers();
  torch::Tensor W;
  for (auto& [name, p] : m->named_parameters())
    if (name == layers[1].k_weight) W = p;
  ASSERT_TRUE(W.defined());
  auto loss = [&]() {  // Σ over sequences of the mean next-token CE, in f64
    torch::NoGradGuard ng;
    const auto logits = m->forward(ids).logits.to(torch::kFloat64);
    double s = 0;
    for (int64_t b = 0; b < ids.size(0); ++b)
      s += torch::nn::functional::cross_entropy(logits[b].narrow(0, 0, 32), ids[b].narrow(0, 1, 32)).item<double>();
    return s;
  };
  torch::manual_seed(seed + 1);
  const torch::Tensor D = torch::randn(W.sizes(), torch::kFloat64);
  // The API returns fp32 logits even for an f64 model, so the loss carries ~6e-8 relative rounding: a step of 1e-2
  // (D has norm ~100) balances that rounding against the O(eps²) truncation of the nonlinear loss.
  const double eps = 1e-4;
  {
    torch::NoGradGuard ng;
    W.add_(D, eps);
  }
  const double lp = loss();
  {
    torch::NoGradGuard ng;
    W.add_(D, -2 * eps);
  }
  const double lm = loss();
  {
    torch::NoGradGuard ng;
    W.add_(D, eps);
  }
  const double fd = (lp - lm) / (2 * eps);
  const double ad = (cal.layers[1].grad_k.to(torch::kFloat64) * D).sum().item<double>();
  // Central difference with the step above: truncation and fp32-logit rounding (1.9e-4 relative measured at eps = 1e-5), so 2e-3
  // relative is a 10x margin; a wrong gradient (missing term, wrong weight or sign) is off by O(1).
  EXPECT_NEAR(ad, fd, 2e-3 * std::abs(fd)) << "autograd " << ad << " vs finite difference " << fd;
  EXPECT_GT(cal.mean_loss, 0.0);
}

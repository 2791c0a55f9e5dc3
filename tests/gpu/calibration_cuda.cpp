// drrqr's calibration on CUDA: the R factor of the stacked [Q; K] features is folded on the GPU (f64 QR per
// mini-batch, TSQR), then moved to the host. R^T R must equal the Gram M^T M of the same features formed in one
// piece on the host in f64.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "optimized/prune/calibration.h"
#include "optimized/models/model.h"
#include "tests/gpu/cuda_ready.h"
#include "tests/test_env.h"

namespace {

using namespace statecut;

using statecut::test::cuda_ready;

/// Per prunable layer, [H, N, d] f64 host features [Q; K] of every window, from forwards of `m` over the same
/// mini-batches calibrate() uses (same shapes, so the same kernels and the same fp32 features).
std::vector<torch::Tensor> joint_features(CausalLM& m, const torch::Tensor& ids, int64_t batch) {
  torch::NoGradGuard ng;
  ForwardOptions fo;
  fo.capture_boundary = true;
  std::vector<std::vector<torch::Tensor>> q, k;
  for (int64_t b0 = 0; b0 < ids.size(0); b0 += batch) {
    auto r = m.forward(ids.narrow(0, b0, std::min(batch, ids.size(0) - b0)), fo);
    auto rows = [](const torch::Tensor& x) {
      return x.to(torch::kCPU, torch::kFloat64).reshape({-1, x.size(2), x.size(3)}).permute({1, 0, 2});
    };
    const auto layers = m.prunable_layers();
    q.resize(layers.size()), k.resize(layers.size());
    for (size_t li = 0; li < layers.size(); ++li) {
      q[li].push_back(rows(r.boundary[layers[li].layer].q));
      k[li].push_back(rows(r.boundary[layers[li].layer].k));
    }
  }
  std::vector<torch::Tensor> out;
  for (size_t li = 0; li < q.size(); ++li) out.push_back(torch::cat({torch::cat(q[li], 1), torch::cat(k[li], 1)}, 1));
  return out;
}

}  // namespace

TEST(Gpu_Calibration, rFactorFoldedOnTheGpuReproducesTheFeatureGram) {
  if (!cuda_ready()) GTEST_SKIP() << "no CUDA device or built without the kernels";
  const std::string dir = test::fixture_dir("fla_gated_deltanet");
  if (dir.empty()) GTEST_SKIP() << "no fixture fla_gated_deltanet";
  at::globalContext().setAllowTF32CuBLAS(false);
  at::globalContext().setAllowTF32CuDNN(false);
  const uint64_t seed = test::env_seed(20261130);
  torch::manual_seed(seed);
  const torch::Tensor ids = torch::randint(0, 256, {5, 127}, torch::kInt64);  // 3 mini-batches: 2, 2, 1
  auto m = load_causal_lm(dir, torch::kFloat32, torch::kCUDA);
  CalibrationNeeds nd;
  nd.features = true;
  nd.batch = 2;
  const Calibration cal = calibrate(*m, ids, nd);
  const auto feats = joint_features(*m, ids, nd.batch);
  ASSERT_EQ(cal.layers.size(), feats.size());
  double worst = 0;
  for (size_t li = 0; li < feats.size(); ++li) {
    ASSERT_EQ(cal.layers[li].r.size(), static_cast<size_t>(feats[li].size(0)));
    for (int64_t h = 0; h < feats[li].size(0); ++h) {
      const torch::Tensor R = cal.layers[li].r[h];
      ASSERT_TRUE(R.device().is_cpu());
      ASSERT_EQ(R.scalar_type(), torch::kFloat64);
      const torch::Tensor M = feats[li][h];
      const torch::Tensor gram = M.t().matmul(M);
      const double e = ((R.t().matmul(R) - gram).norm() / gram.norm()).item<double>();
      worst = std::max(worst, e);
    }
  }
  std::printf("[errors] GPU-folded R^T R vs host f64 Gram: worst %.2e over %zu layers\n", worst, feats.size());
  // Householder QR in f64 is backward stable: ‖RᵀR − MᵀM‖/‖MᵀM‖ ≈ c·n·u with u = 1.1e-16 and n ≈ 600 rows per
  // update; 1e-11 leaves ~100x margin over that and is ~1e5 below the fp32 noise of the features themselves, so a
  // dropped mini-batch (~30% of the Gram) or a row folded twice fails by orders of magnitude. The features are the
  // same CUDA model's on the same mini-batches, so they agree bit for bit.
  EXPECT_LT(worst, 1e-11);
}

// The faithful rows and the PCA moments are gathered on the host whatever the model's device: a CUDA calibration picks
// the same rows and sums the same moments as a CPU one of the same checkpoint (optimized/prune/calibration.cpp's
// host copy; the CPU-only mutation gate cannot reach it: seed 306 weakened `rows || pca` to `rows && pca`).
TEST(Gpu_Calibration, faithfulRowsAndPcaMomentsOnTheGpuEqualTheCpus) {
  if (!cuda_ready()) GTEST_SKIP() << "no CUDA device or built without the kernels";
  const std::string dir = test::fixture_dir("fla_gated_deltanet");
  if (dir.empty()) GTEST_SKIP() << "no fixture fla_gated_deltanet";
  at::globalContext().setAllowTF32CuBLAS(false);
  at::globalContext().setAllowTF32CuDNN(false);
  const uint64_t seed = test::env_seed(20261203);
  torch::manual_seed(seed);
  const torch::Tensor ids = torch::randint(0, 256, {3, 65}, torch::kInt64);
  auto rel = [](const torch::Tensor& a, const torch::Tensor& b) {
    return ((a.to(torch::kFloat64) - b.to(torch::kFloat64)).norm() / b.to(torch::kFloat64).norm()).item<double>();
  };
  for (const bool pca : {false, true}) {
    CalibrationNeeds nd;
    (pca ? nd.pca : nd.rows) = true;
    nd.faithful_rows = 100;  // fewer than the 2 x 3 x 65 rows of [Q; K]: the subsample draws
    nd.seed = seed;
    nd.batch = 2;
    auto g = load_causal_lm(dir, torch::kFloat32, torch::kCUDA);
    auto c = load_causal_lm(dir, torch::kFloat32, torch::kCPU);
    const Calibration a = calibrate(*g, ids, nd), b = calibrate(*c, ids, nd);
    ASSERT_EQ(a.layers.size(), b.layers.size());
    double worst = 0;
    for (size_t li = 0; li < a.layers.size(); ++li) {
      const auto& x = pca ? a.layers[li].pca_outer_q : a.layers[li].rows;
      const auto& y = pca ? b.layers[li].pca_outer_q : b.layers[li].rows;
      ASSERT_EQ(x.size(), y.size()) << (pca ? "pca" : "rows") << " layer " << li;
      ASSERT_FALSE(x.empty());
      for (size_t h = 0; h < x.size(); ++h) {
        ASSERT_EQ(x[h].sizes(), y[h].sizes());
        worst = std::max(worst, rel(x[h], y[h]));
      }
    }
    std::printf("[errors] %s on CUDA vs CPU: worst %.2e\n", pca ? "PCA second moments" : "faithful rows", worst);
    // fp32 features from two devices' kernels differ by ~1e-6 relative; a wrong row or a missing window is O(1).
    EXPECT_LT(worst, 1e-4) << (pca ? "pca" : "rows");
  }
}

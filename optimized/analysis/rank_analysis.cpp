#include "optimized/analysis/rank_analysis.h"

#include "optimized/models/model_registry.h"

#include <Eigen/SVD>
#include <cmath>
#include <stdexcept>

namespace statecut {
namespace {

/// out[r] = Σ_c A[r·rs + c·cs] in[c] for r < rows, c < cols, summed in f64; returns ‖out‖².
double strided_matvec(const float* A, int rows, int cols, int64_t rs, int64_t cs, const std::vector<double>& in,
                      std::vector<double>& out) {
  double n2 = 0;
  for (int r = 0; r < rows; ++r) {
    double s = 0;
    for (int c = 0; c < cols; ++c) s += static_cast<double>(A[r * rs + c * cs]) * in[c];
    out[r] = s;
    n2 += s * s;
  }
  return n2;
}

/// ‖S‖_2² by power iteration on SᵀS, warm-started from x (unit, [dv]); updates x.
double top_sv_sq(const float* S, int dk, int dv, std::vector<double>& x, std::vector<double>& y) {
  double lambda = 0;
  for (int it = 0; it < 500; ++it) {
    // y = S x, x' = Sᵀ y; λ = ‖y‖² with ‖x‖ = 1 (Rayleigh quotient of SᵀS)
    const double ny = strided_matvec(S, dk, dv, dv, 1, x, y);  // y = S x
    if (ny == 0) return 0;
    const double nx = std::sqrt(strided_matvec(S, dv, dk, 1, dv, y, x));  // x = Sᵀ y
    for (int j = 0; j < dv; ++j) x[j] /= nx;
    const bool converged = std::abs(ny - lambda) <= 1e-9 * ny;
    lambda = ny;
    if (converged) break;
  }
  return lambda;
}

}  // namespace

std::vector<float> state_rank_curve(const torch::Tensor& k_in, const torch::Tensor& v_in, const torch::Tensor& beta_in,
                                    const torch::Tensor& g_in, torch::Tensor* final_state) {
  const torch::Tensor k = k_in.to(torch::kCPU, torch::kFloat32).contiguous();
  const torch::Tensor v = v_in.to(torch::kCPU, torch::kFloat32).contiguous();
  const torch::Tensor beta = beta_in.to(torch::kCPU, torch::kFloat32).contiguous();
  const torch::Tensor g = g_in.defined() ? g_in.to(torch::kCPU, torch::kFloat32).contiguous() : torch::Tensor();
  const int64_t T = k.size(0);
  const int dk = static_cast<int>(k.size(1)), dv = static_cast<int>(v.size(1));
  const float* kp = k.data_ptr<float>();
  const float* vp = v.data_ptr<float>();
  const float* bp = beta.data_ptr<float>();
  const float* gp = g.defined() ? g.data_ptr<float>() : nullptr;
  std::vector<float> S(static_cast<size_t>(dk) * dv, 0.f), kh(dk), w(dv);
  std::vector<double> x(dv, 1.0 / std::sqrt(static_cast<double>(dv))), y(dk);
  std::vector<float> u(T, 0.f);
  const double maxrank = std::min(dk, dv);
  for (int64_t t = 0; t < T; ++t) {
    // u before the update at t
    double fro = 0;
    for (float s : S) fro += static_cast<double>(s) * s;
    if (fro > 0) {
      const double top = top_sv_sq(S.data(), dk, dv, x, y);
      u[t] = top > 0 ? static_cast<float>(fro / top / maxrank) : 0.f;
    }
    // k̂ = k / sqrt(Σk² + 1e-6) in fp32, as fla's l2norm
    float ss = 0;
    for (int i = 0; i < dk; ++i) ss += kp[t * dk + i] * kp[t * dk + i];
    const float inv = 1.f / std::sqrt(ss + 1e-6f);
    for (int i = 0; i < dk; ++i) kh[i] = kp[t * dk + i] * inv;
    const float a = gp ? std::exp(gp[t]) : 1.f, b = bp[t];
    // w = β (v − α Sᵀ k̂);  S ← α S + k̂ wᵀ
    for (int j = 0; j < dv; ++j) {
      float s = 0;
      for (int i = 0; i < dk; ++i) s += S[i * dv + j] * kh[i];
      w[j] = b * (vp[t * dv + j] - a * s);
    }
    for (int i = 0; i < dk; ++i)
      for (int j = 0; j < dv; ++j) S[i * dv + j] = a * S[i * dv + j] + kh[i] * w[j];
  }
  if (final_state) *final_state = torch::from_blob(S.data(), {dk, dv}, torch::kFloat32).clone();
  return u;
}

RankReport analyze_rank(CausalLM& model, const torch::Tensor& ids, const RankOptions& opt) {
  if (ids.dim() != 2 || ids.size(0) != 1 || ids.size(1) < 2) throw std::runtime_error("rank: needs one sequence of >= 2 tokens");
  torch::NoGradGuard no_grad;
  ForwardOptions fo;
  fo.capture_boundary = true;
  ForwardResult res = model.forward(ids, fo);
  RankReport rep;
  rep.tokens = ids.size(1);
  rep.gated = opt.gated;
  const int64_t T = ids.size(1);
  rep.curve.assign(T, 0.f);
  int64_t n_heads_total = 0;
  const FamilySpec* family = find_family(model.model_type());
  const bool family_gated = family && family->caps.gated;
  for (const auto& L : model.prunable_layers()) {
    const LayerBoundary& b = res.boundary.at(L.layer);
    if (!b.k.defined() || !b.beta.defined()) continue;  // Mamba-2: no delta rule
    if (opt.gated && !b.g.defined() && family_gated)
      throw std::runtime_error("rank --gated: layer " + std::to_string(L.layer) + " exposes no gate g");
    LayerRank lr;
    lr.layer = L.layer;
    const int64_t Hk = b.k.size(2), Hv = b.v.size(2);
    lr.dk = static_cast<int>(b.k.size(3));
    lr.dv = static_cast<int>(b.v.size(3));
    for (int64_t h = 0; h < Hv; ++h) {
      const int64_t hk = h / (Hv / Hk);
      HeadRank hr;
      torch::Tensor Sfin;
      const torch::Tensor g = opt.gated && b.g.defined() ? b.g[0].select(1, h) : torch::Tensor();
      hr.u = state_rank_curve(b.k[0].select(1, hk), b.v[0].select(1, h), b.beta[0].select(1, h), g, &Sfin);
      double s = 0, s2 = 0;
      hr.min = hr.u.empty() ? 0 : hr.u[0];
      hr.max = hr.min;
      for (int64_t t = 0; t < T; ++t) {
        s += hr.u[t];
        s2 += static_cast<double>(hr.u[t]) * hr.u[t];
        hr.min = std::min<double>(hr.min, hr.u[t]);
        hr.max = std::max<double>(hr.max, hr.u[t]);
        rep.curve[t] += hr.u[t];
      }
      hr.mean = s / T;
      hr.std = std::sqrt(std::max(0.0, s2 / T - hr.mean * hr.mean));
      // Final state: exact spectrum in f64, and u(S_T) both ways.
      const torch::Tensor S64 = Sfin.to(torch::kFloat64).contiguous();
      const Eigen::MatrixXd M = Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
          S64.data_ptr<double>(), lr.dk, lr.dv);
      Eigen::JacobiSVD<Eigen::MatrixXd> svd(M);
      const Eigen::VectorXd sv = svd.singularValues();
      hr.spectrum.assign(sv.data(), sv.data() + sv.size());
      const double fro = M.squaredNorm();
      hr.final_u_exact = sv.size() && sv(0) > 0 ? fro / (sv(0) * sv(0)) / std::min(lr.dk, lr.dv) : 0;
      std::vector<double> x(lr.dv, 1.0 / std::sqrt(static_cast<double>(lr.dv))), y(lr.dk);
      std::vector<float> Sf(Sfin.data_ptr<float>(), Sfin.data_ptr<float>() + Sfin.numel());
      const double top = top_sv_sq(Sf.data(), lr.dk, lr.dv, x, y);
      hr.final_u_power = top > 0 ? fro / top / std::min(lr.dk, lr.dv) : 0;
      lr.mean += hr.mean;
      lr.heads.push_back(std::move(hr));
    }
    lr.mean /= static_cast<double>(lr.heads.size());
    n_heads_total += static_cast<int64_t>(lr.heads.size());
    rep.layers.push_back(std::move(lr));
  }
  if (rep.layers.empty())
    throw std::runtime_error("rank: no delta-rule layer with beta in this model (" + model.model_type() + ")");
  const int64_t T1024 = std::min<int64_t>(T, 1024);
  for (const auto& lr : rep.layers) {
    rep.mean_u += lr.mean;
    double m = 0;
    for (const auto& hr : lr.heads)
      for (int64_t t = 0; t < T1024; ++t) m += hr.u[t];
    rep.mean_u_1024 += m / (static_cast<double>(T1024) * lr.heads.size());
  }
  rep.mean_u /= static_cast<double>(rep.layers.size());
  rep.mean_u_1024 /= static_cast<double>(rep.layers.size());
  for (auto& c : rep.curve) c /= static_cast<float>(n_heads_total);
  return rep;
}

}  // namespace statecut

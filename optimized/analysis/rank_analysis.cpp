#include "optimized/analysis/rank_analysis.h"

#include <Eigen/SVD>
#include <cmath>
#include <mutex>
#include <stdexcept>

#include "optimized/models/parallel_for_each.h"
#include "optimized/models/families/hf_mamba2.h"
#include "optimized/prune/eigen_tensor.h"
#include "optimized/models/model_registry.h"

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


/// Per-head summaries and the final state's spectrum (f64 SVD) of one analysed head.
void summarise(HeadRank& hr, const torch::Tensor& Sfin, int dk, int dv) {
  const int64_t T = static_cast<int64_t>(hr.u.size());
  double s = 0, s2 = 0;
  hr.max = 0;
  for (int64_t t = 0; t < T; ++t) {
    s += hr.u[t];
    s2 += static_cast<double>(hr.u[t]) * hr.u[t];
    hr.max = std::max<double>(hr.max, hr.u[t]);
  }
  hr.mean = T ? s / T : 0;
  hr.std = T ? std::sqrt(std::max(0.0, s2 / T - hr.mean * hr.mean)) : 0;
  const Eigen::MatrixXd M = to_mat(Sfin.reshape({dk, dv}));
  Eigen::JacobiSVD<Eigen::MatrixXd> svd(M);
  const Eigen::VectorXd sv = svd.singularValues();
  hr.spectrum.assign(sv.data(), sv.data() + sv.size());
  const double fro = M.squaredNorm();
  hr.final_u_exact = sv.size() && sv(0) > 0 ? fro / (sv(0) * sv(0)) / std::min(dk, dv) : 0;
  std::vector<double> x(dv, 1.0 / std::sqrt(static_cast<double>(dv))), y(dk);
  const torch::Tensor Sc = Sfin.contiguous();
  const double top = top_sv_sq(Sc.data_ptr<float>(), dk, dv, x, y);
  hr.final_u_power = top > 0 ? fro / top / std::min(dk, dv) : 0;
}

}  // namespace

const char* rank_state_label(RankState s) {
  switch (s) {
    case RankState::UngatedDelta: return "ungated delta state";
    case RankState::GatedDelta: return "gated delta state";
    case RankState::UngatedSsd: return "Mamba-2 SSD state without its decay";
    case RankState::Ssd: return "Mamba-2 SSD state";
  }
  return "?";
}

const char* rank_state_key(RankState s) {
  switch (s) {
    case RankState::UngatedDelta: return "delta";
    case RankState::GatedDelta: return "gated_delta";
    case RankState::UngatedSsd: return "ssd_ungated";
    case RankState::Ssd: return "ssd";
  }
  return "?";
}

std::vector<float> state_rank_curve(const HeadSeries& in, torch::Tensor* final_state) {
  const torch::Tensor k = in.k.to(torch::kCPU, torch::kFloat32).contiguous();
  const torch::Tensor v = in.v.to(torch::kCPU, torch::kFloat32).contiguous();
  const torch::Tensor beta = in.beta.defined() ? in.beta.to(torch::kCPU, torch::kFloat32).contiguous() : torch::Tensor();
  const torch::Tensor g = in.g.defined() ? in.g.to(torch::kCPU, torch::kFloat32).contiguous() : torch::Tensor();
  const int64_t T = k.size(0);
  const int dk = static_cast<int>(k.size(1)), dv = static_cast<int>(v.size(1));
  const float* kp = k.data_ptr<float>();
  const float* vp = v.data_ptr<float>();
  const float* bp = beta.defined() ? beta.data_ptr<float>() : nullptr;
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
    if (in.l2norm_k) {
      // k̂ = k / sqrt(Σk² + 1e-6) in fp32, as fla's l2norm
      float ss = 0;
      for (int i = 0; i < dk; ++i) ss += kp[t * dk + i] * kp[t * dk + i];
      const float inv = 1.f / std::sqrt(ss + 1e-6f);
      for (int i = 0; i < dk; ++i) kh[i] = kp[t * dk + i] * inv;
    } else {
      for (int i = 0; i < dk; ++i) kh[i] = kp[t * dk + i];
    }
    const float a = gp ? std::exp(gp[t]) : 1.f;
    if (bp) {
      // delta rule: w = β (v − α Sᵀ k̂);  S ← α S + k̂ wᵀ
      const float b = bp[t];
      for (int j = 0; j < dv; ++j) {
        float s = 0;
        for (int i = 0; i < dk; ++i) s += S[i * dv + j] * kh[i];
        w[j] = b * (vp[t * dv + j] - a * s);
      }
    } else {
      // linear attention (Mamba-2 SSD): S ← α S + k vᵀ
      for (int j = 0; j < dv; ++j) w[j] = vp[t * dv + j];
    }
    for (int i = 0; i < dk; ++i)
      for (int j = 0; j < dv; ++j) S[i * dv + j] = a * S[i * dv + j] + kh[i] * w[j];
  }
  if (final_state) *final_state = torch::from_blob(S.data(), {dk, dv}, torch::kFloat32).clone();
  return u;
}

std::vector<float> state_rank_curve(const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& beta,
                                    const torch::Tensor& g, torch::Tensor* final_state) {
  return state_rank_curve(HeadSeries{k, v, beta, g, /*l2norm_k=*/true}, final_state);
}

RankReport analyze_rank(CausalLM& model, const torch::Tensor& ids, const RankOptions& opt) {
  if (ids.dim() != 2 || ids.size(0) != 1 || ids.size(1) < 2) throw std::runtime_error("rank: needs one sequence of >= 2 tokens");
  torch::NoGradGuard no_grad;
  ForwardOptions fo;
  fo.capture_boundary = true;
  fo.logits = false;  // the states are read from the boundaries alone
  ForwardResult res = model.forward(ids, fo);
  RankReport rep;
  rep.tokens = ids.size(1);
  rep.gated = opt.gated;
  rep.model_type = model.model_type();
  const int64_t T = ids.size(1);
  rep.curve.assign(T, 0.f);
  const FamilySpec* family = find_family(model.model_type());
  const bool family_gated = family && family->caps.gated;
  const bool ssd = family && !family->caps.delta_rule;
  rep.state = ssd ? (opt.gated ? RankState::Ssd : RankState::UngatedSsd)
                  : (opt.gated && family_gated ? RankState::GatedDelta : RankState::UngatedDelta);
  if (opt.gated && !family_gated)
    rep.notes.push_back("--gated: " + model.model_type() +
                        " has no decay gate, so its state is the ungated delta state either way");

  // Every (layer, value head) to analyse, with its series; the heads then run in parallel.
  struct Job {
    size_t layer_index;
    int64_t head;
    HeadSeries series;
  };
  std::vector<Job> jobs;
  for (const auto& L : model.prunable_layers()) {
    const LayerBoundary& b = res.boundary.at(L.layer);
    if (!b.k.defined() || !b.v.defined()) continue;  // full-attention blocks
    if (!ssd && !b.beta.defined()) continue;
    if (opt.gated && family_gated && !b.g.defined())
      throw std::runtime_error("rank --gated: layer " + std::to_string(L.layer) + " exposes no gate g");
    LayerRank lr;
    lr.layer = L.layer;
    const int64_t Hk = b.k.size(2), Hv = b.v.size(2);
    lr.num_key_heads = static_cast<int>(Hk);
    lr.dk = static_cast<int>(b.k.size(3));
    lr.dv = static_cast<int>(b.v.size(3));
    lr.heads.resize(static_cast<size_t>(Hv));
    // Mamba-2: value dt·x (the boundary keeps x and g = dt·A; hf_mamba2.h), no β, B not normalised.
    const torch::Tensor v = ssd ? b.v[0].to(torch::kFloat32) * mamba2_boundary_dt(model, L.layer, b)[0].unsqueeze(-1)
                                : b.v[0];
    for (int64_t h = 0; h < Hv; ++h) {
      const int64_t hk = h / (Hv / Hk);
      lr.heads[h].key_head = static_cast<int>(hk);
      HeadSeries s;
      s.k = b.k[0].select(1, hk);
      s.v = v.select(1, h);
      s.beta = ssd ? torch::Tensor() : b.beta[0].select(1, h);
      s.g = opt.gated && b.g.defined() ? b.g[0].select(1, h) : torch::Tensor();
      s.l2norm_k = !ssd;
      jobs.push_back({rep.layers.size(), h, std::move(s)});
    }
    rep.layers.push_back(std::move(lr));
  }
  if (rep.layers.empty())
    throw std::runtime_error("rank: no linear-attention layer to analyse in this model (" + model.model_type() + ")");

  const int64_t total = static_cast<int64_t>(jobs.size());
  int64_t done = 0;
  std::mutex progress_mutex;
  if (opt.progress) opt.progress(0, total);
  parallel_for_each(total, [&](int64_t i) {
    Job& j = jobs[i];
    LayerRank& lr = rep.layers[j.layer_index];
    HeadRank& hr = lr.heads[j.head];
    torch::Tensor Sfin;
    hr.u = state_rank_curve(j.series, &Sfin);
    summarise(hr, Sfin, lr.dk, lr.dv);
    std::lock_guard<std::mutex> lock(progress_mutex);  // counted under the lock: the callback sees 1, 2, ..., total
    ++done;
    if (opt.progress) opt.progress(done, total);
  });

  const int64_t T1024 = std::min<int64_t>(T, 1024);
  for (auto& lr : rep.layers) {
    double m1024 = 0;
    for (const auto& hr : lr.heads) {
      lr.mean += hr.mean;
      for (int64_t t = 0; t < T; ++t) rep.curve[t] += hr.u[t];
      for (int64_t t = 0; t < T1024; ++t) m1024 += hr.u[t];
    }
    lr.mean /= static_cast<double>(lr.heads.size());
    rep.mean_u += lr.mean;
    rep.mean_u_1024 += m1024 / (static_cast<double>(T1024) * lr.heads.size());
  }
  rep.mean_u /= static_cast<double>(rep.layers.size());
  rep.mean_u_1024 /= static_cast<double>(rep.layers.size());
  for (auto& c : rep.curve) c /= static_cast<float>(total);
  return rep;
}

}  // namespace statecut

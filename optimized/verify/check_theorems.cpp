// `theorems`: the paper's statements evaluated on this model's own states (both sides in f64, lhs <= rhs (1 + c eps)
// with c from properties/theorem_*.cpp), and metamorphic invariances of the whole model.
//
// State per layer and head, as `statecut rank` analyses it: the UNGATED delta state of the L2-normed keys (paper
// §2.2, DESIGN.md §3), Mamba-2: its true state. Writing each step as S_t = a_t S_{t-1} + k_t u_tᵀ makes S_T = Kᵀ U
// exactly, with the effective values u_t = β_t (v_t − S_{t−1}ᵀ k_t) (delta) or u_t = exp(Σ_{m>t} g_m) v_t (Mamba-2).
//   theorems.eff-rank   Eq. (4), App. F.1: ν(U; K) / κ(K)² <= er(S_T)   (K full column rank); u = er / min(dk, dv)
//   theorems.readout    Prop. 2.1: R(q, ε) <= κ(S_T) for the model's own last queries q (in range(S)) and the worst ε,
//                       the maximising pair attains κ, and κ >= 1 / sqrt(u)
//   theorems.permutation  a random permutation of each head's key channels, applied to the q and k projection rows
//                       and conv channels together, leaves the logits unchanged (f64)
//   theorems.rotation   a random orthogonal T per head on the q/k rows leaves the logits unchanged, in layers without
//                       convs (fla delta_net evaluated with use_short_conv = false, qk_activation = identity and
//                       qk_norm = l2: a sum-normed key is not rotation invariant)
#include <Eigen/QR>
#include <chrono>
#include <cmath>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "optimized/models/model_registry.h"
#include "optimized/prune/surgery.h"
#include "optimized/text/token_stream.h"
#include "optimized/verify/verify_checks.h"
#include "reference/delta_rule.h"
#include "reference/metrics.h"
#include "reference/primitives.h"

namespace statecut::verify {

namespace {

constexpr double kEps = std::numeric_limits<double>::epsilon();

struct HeadState {
  Mat K, U, S, Q;  // keys [T, dk], effective values [T, dv], state [dk, dv], queries [T, dk]
};

HeadState head_state(const Context& ctx, const LayerData& d, int64_t b, int64_t j) {
  const int64_t hk = j / (d.Hv / d.Hk);
  HeadState h;
  h.K = head_mat(d.k64, b, hk, 0, d.T);
  h.Q = head_mat(d.q64, b, hk, 0, d.T);
  const Mat V = head_mat(d.v64, b, j, 0, d.T);
  h.U.resize(d.T, d.dv);
  if (ctx.kind == RecKind::Mamba2) {
    const Vec g = head_vec(d.g64, b, j, 0, d.T);
    double tail = 0;  // Σ_{m>t} g_m
    for (int64_t t = d.T - 1; t >= 0; --t) {
      h.U.row(t) = std::exp(tail) * V.row(t);
      tail += g(t);
    }
    h.S = h.K.transpose() * h.U;
    return h;
  }
  if (ctx.l2norm_qk) {
    h.K = ref::l2norm_rows(h.K);
    h.Q = ref::l2norm_rows(h.Q);
  }
  const Vec beta = head_vec(d.beta64, b, j, 0, d.T);
  h.S = Mat::Zero(d.dk, d.dv);
  for (int64_t t = 0; t < d.T; ++t) {
    const Eigen::RowVectorXd u = beta(t) * (V.row(t) - h.K.row(t) * h.S);
    h.U.row(t) = u;
    h.S += h.K.row(t).transpose() * u;
  }
  // The rewrite S_T = Kᵀ U must be the reference's own delta state (else the theorem is checked on the wrong S).
  const ref::HeadResult r = ref::delta_rule_recurrent(h.Q, h.K, V, beta, 1.0);
  if (rel_err(h.S, r.state) > 1e-9)
    throw std::runtime_error(at_head(d.layer, static_cast<int>(j), static_cast<int>(b)) +
                             ": effective values do not rebuild the reference delta state");
  return h;
}

std::vector<int64_t> seeded_permutation(std::mt19937_64& rng, int64_t n) {
  std::vector<int64_t> p(n);
  for (int64_t i = 0; i < n; ++i) p[i] = i;
  for (int64_t i = n - 1; i > 0; --i) std::swap(p[i], p[bounded_draw(rng, static_cast<uint64_t>(i + 1))]);
  return p;
}

/// The final normed hidden state (f64, run on ctx.device64, returned on the CPU) of `config` with the checkpoint's
/// weights after `changed` replaced some of them. Compared instead of the logits, which the model API rounds to fp32
/// (they are its image under lm_head).
torch::Tensor hidden_with(Context& ctx, const nlohmann::json& config, const std::map<std::string, torch::Tensor>& changed,
                          const torch::Tensor& ids) {
  std::map<std::string, torch::Tensor> all;
  for (const auto& n : ctx.weights->names()) all[n] = ctx.weights->raw(n);
  for (const auto& [n, t] : changed) all[n] = t;
  const WeightSource ws = WeightSource::from_tensors(std::move(all), ctx.dir + " (transformed)");
  auto m = build_causal_lm(config, ws, torch::kFloat64, ctx.device64, ctx.config_path);
  torch::NoGradGuard ng;
  ForwardOptions fo;
  fo.output_hidden_states = true;
  fo.head = false;
  return m->forward(ids.to(ctx.device64), fo).hidden_states.back().to(torch::kCPU, torch::kFloat64);
}

CheckResult invariance_row(const std::string& name, const torch::Tensor& a, const torch::Tensor& b,
                           const std::string& what) {
  CheckResult r;
  r.name = name;
  r.threshold = 1e-10;
  r.reason = "final hidden state (the logits' preimage) in f64 on both sides; the transform only reorders/rotates "
             "the sums over key channels (q.k, ||k||^2, projections): ~n eps64 = 1e-13, a wrong mapping gives O(1)";
  Worst w;
  for (int64_t i = 0; i < a.size(0); ++i) w.add(rel_err(a[i], b[i]), "window " + std::to_string(i));
  r.figure = w.figure();
  r.where = w.where;
  r.status = le(r.figure, r.threshold);
  r.message = what;
  return r;
}

/// Both theorems on one head's state.
struct HeadVerdict {
  double u = 0;
  bool er_ran = false, er_ok = true;
  double er_ratio = 0;  ///< lhs / rhs of Eq. (4)
  bool ro_ran = false, ro_ok = true;
  double ro_ratio = 0, attained = 0, kappa = 0;
};

HeadVerdict head_theorems(const Context& ctx, const LayerData& d, int64_t b, int64_t j) {
  const HeadState h = head_state(ctx, d, b, j);
  HeadVerdict v;
  const ref::StateSpectrum sp = ref::state_spectrum(h.S);  // one SVD of S for er, u, kappa(S) and the pair
  const double er = sp.er;
  v.u = sp.u;
  // Eq. (4), needs K of full column rank
  const double kK = ref::condition_number(h.K);
  const double n = static_cast<double>(d.T + d.dk + d.dv);
  if (d.T >= d.dk && std::isfinite(kK) && kK < 1e12 && er > 0) {
    const double lhs = ref::nu(h.U, h.K) / (kK * kK);
    v.er_ran = true;
    v.er_ratio = lhs / er;
    v.er_ok = lhs <= er * (1.0 + 16.0 * n * kEps);
  }
  // Prop. 2.1, on a non-singular state
  const double kS = sp.kappa;
  if (std::isfinite(kS) && kS < 1e12 && er > 0) {
    const double tol = 4.0 * static_cast<double>(d.dk + d.dv) * kS * kEps;
    const ref::AmplificationPair& p = sp.pair;
    v.attained = std::abs(ref::readout_amplification(h.S, p.q, p.eps) - kS) / kS;
    const Mat Ud = sp.U.leftCols(std::min<Index>(d.dk, d.dv));
    double worst = (1.0 / std::sqrt(v.u)) / kS;
    for (int64_t t = std::max<int64_t>(0, d.T - 8); t < d.T; ++t) {
      const Vec q = Ud * (Ud.transpose() * h.Q.row(t).transpose());  // the part of q the state can answer
      if (q.norm() == 0) continue;
      worst = std::max(worst, ref::readout_amplification(h.S, q, p.eps) / kS);
    }
    v.ro_ran = true;
    v.ro_ratio = worst;
    v.kappa = kS;
    v.ro_ok = worst <= 1.0 + tol && v.attained <= tol;
  }
  return v;
}

void state_theorems(Context& ctx, std::vector<CheckResult>& out) {
  CheckResult er_row, ro_row;
  er_row.name = "theorems.eff-rank";
  er_row.threshold = 1;
  er_row.reason = "Eq. (4): nu(U;K)/kappa(K)^2 / er(S) <= 1 + 16 n eps (n = T + dk + dv: six SVD-based quantities, "
                  "each ~2 n eps relative)";
  ro_row.name = "theorems.readout";
  ro_row.threshold = 1;
  ro_row.reason = "Prop. 2.1: R(q, eps)/kappa(S) <= 1 and (1/sqrt(u))/kappa <= 1, + 4 (dk + dv) kappa eps64 "
                  "(the norms of S^T x near sigma_min); the maximising pair must reach kappa to that accuracy";
  Worst wer, wro, wattain, low_u;  // low_u tracks -u: the least utilised head
  int er_heads = 0, er_skipped = 0, ro_heads = 0, ro_skipped = 0, total = 0;
  bool er_fail = false, ro_fail = false;
  double min_ratio = 1e300, sum_u = 0;
  std::string er_fail_at, ro_fail_at;
  nlohmann::json layers = nlohmann::json::array();
  for (size_t li = 0; li < ctx.layers.size(); ++li) {
    const LayerData d = layer_data(ctx, li);
    ctx.say("theorems: layer " + std::to_string(d.layer));
    std::vector<HeadVerdict> hv(d.B * d.Hv);
    std::mutex mu;
    std::set<std::thread::id> workers;  // how many threads the heads really ran on (progress line)
    const auto start = std::chrono::steady_clock::now();
    parallel_for_each(d.B * d.Hv, [&](int64_t i) {
      hv[i] = head_theorems(ctx, d, i / d.Hv, i % d.Hv);
      const std::lock_guard<std::mutex> lock(mu);
      workers.insert(std::this_thread::get_id());
    });
    ctx.say("theorems: layer " + std::to_string(d.layer) + ": " + std::to_string(d.B * d.Hv) + " heads in " +
            fmt(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()) + " s on " +
            std::to_string(workers.size()) + " threads");
    nlohmann::json heads = nlohmann::json::array();
    for (int64_t i = 0; i < d.B * d.Hv; ++i) {
      const HeadVerdict& v = hv[i];
      const std::string at = at_head(d.layer, static_cast<int>(i % d.Hv), static_cast<int>(i / d.Hv));
      nlohmann::json hj = {{"window", i / d.Hv}, {"head", i % d.Hv}, {"u", v.u}};
      sum_u += v.u;
      ++total;
      low_u.add(-v.u, at);
      if (v.er_ran) {
        hj["eff_rank_ratio"] = v.er_ratio;
        wer.add(v.er_ratio, at);
        min_ratio = std::min(min_ratio, v.er_ratio);
        if (!v.er_ok && !er_fail) er_fail = true, er_fail_at = at;
        ++er_heads;
      } else {
        ++er_skipped;
      }
      if (v.ro_ran) {
        hj["readout_ratio"] = v.ro_ratio;
        hj["kappa"] = v.kappa;
        wro.add(v.ro_ratio, at);
        wattain.add(v.attained, at);
        if (!v.ro_ok && !ro_fail) ro_fail = true, ro_fail_at = at;
        ++ro_heads;
      } else {
        ++ro_skipped;
      }
      heads.push_back(hj);
    }
    layers.push_back({{"layer", d.layer}, {"heads", heads}});
  }
  const double mean_u = total ? sum_u / total : 0;
  er_row.figure = er_heads == 0 ? NAN : wer.figure();  // no head ran: "-", not the empty maximum's -inf
  er_row.where = er_fail ? er_fail_at : wer.where;
  er_row.status = er_heads == 0 ? Status::Skip : (er_fail ? Status::Fail : Status::Pass);
  er_row.message = "lhs/rhs over " + std::to_string(er_heads) + " heads in [" + fmt(min_ratio) + ", " +
                   fmt(wer.figure()) + "] (tightness); mean u " + fmt(mean_u) + ", lowest u " + fmt(-low_u.value) +
                   " at " + low_u.where +
                   (er_skipped ? "; " + std::to_string(er_skipped) + " heads with rank-deficient K skipped" : "");
  if (er_heads == 0)
    er_row.message = "no head ran: each needs keys of full column rank (T >= dk) and a state that is not zero (" +
                     std::to_string(er_skipped) + " heads without)";
  er_row.details = {{"mean_u", mean_u}, {"layers", layers}};
  ro_row.figure = ro_heads == 0 ? NAN : wro.figure();
  ro_row.where = ro_fail ? ro_fail_at : wro.where;
  ro_row.status = ro_heads == 0 ? Status::Skip : (ro_fail ? Status::Fail : Status::Pass);
  ro_row.message = "R/kappa for the last 8 queries and 1/(sqrt(u) kappa), worst over " + std::to_string(ro_heads) +
                   " heads; maximising pair reaches kappa to " + fmt(wattain.figure()) + " relative" +
                   (ro_skipped ? "; " + std::to_string(ro_skipped) + " singular states skipped" : "");
  if (ro_heads == 0)
    ro_row.message = "no head ran: each needs a state that is not singular (" + std::to_string(ro_skipped) +
                     " singular states skipped)";
  out.push_back(std::move(er_row));
  out.push_back(std::move(ro_row));
}

void invariances(Context& ctx, std::vector<CheckResult>& out) {
  if (!ctx.ensure_f64() || !ctx.weights) {
    out.push_back(unavailable(ctx, "theorems.permutation", ctx.f64_error));
    out.push_back(unavailable(ctx, "theorems.rotation", ctx.f64_error));
    return;
  }
  std::mt19937_64 rng(ctx.opt.seed);
  std::vector<LayerSelection> perm;
  for (const auto& L : ctx.layers) {
    LayerSelection s;
    s.layer = L.layer;
    for (int h = 0; h < L.num_key_heads; ++h) s.keep.push_back(seeded_permutation(rng, L.head_k_dim));
    perm.push_back(std::move(s));
  }
  ctx.say("theorems: permuted model (f64)");
  const torch::Tensor lp = hidden_with(ctx, ctx.config, apply_selection(*ctx.weights, ctx.layers, perm), ctx.ids);
  out.push_back(invariance_row("theorems.permutation", lp, ctx.hidden64,
                               "final hidden state (f64) with each head's key channels permuted (q/k rows and conv channels together, "
                               "seed " + std::to_string(ctx.opt.seed) + ") vs unpermuted"));

  if (ctx.model_type != "delta_net") {
    out.push_back(skipped("theorems.rotation", "needs a layer without convs: " + ctx.model_type +
                                                   " applies a short conv and SiLU before the state, which a rotation "
                                                   "does not commute with (only fla delta_net can switch them off)"));
    return;
  }
  nlohmann::json cfg = ctx.config;
  cfg["use_short_conv"] = false;
  cfg["qk_activation"] = "identity";
  cfg["qk_norm"] = "l2";  // fla's other choice, sum normalisation, is not rotation invariant
  const auto layers = prunable_layers_from_config(cfg, ctx.config_path);
  std::vector<LayerSelection> rot;
  for (const auto& L : layers) {
    LayerSelection s;
    s.layer = L.layer;
    for (int h = 0; h < L.num_key_heads; ++h) {
      Mat G(L.head_k_dim, L.head_k_dim);
      std::normal_distribution<double> nd;
      for (Index i = 0; i < G.size(); ++i) G.data()[i] = nd(rng);
      const Mat Qm = Eigen::HouseholderQR<Mat>(G).householderQ();
      s.rotation.push_back(from_mat(Qm));
    }
    rot.push_back(std::move(s));
  }
  ctx.say("theorems: rotated model without convs (f64)");
  const torch::Tensor ids = ctx.ids.narrow(0, 0, 1);
  const torch::Tensor base = hidden_with(ctx, cfg, {}, ids);
  // Rotate in f64 (apply_selection rounds to the source dtype: a bf16 model would lose the exact invariance). Only
  // the tensors it reads, the q/k weights and convs with their biases, are widened: the rest stay as stored (a copy
  // of every weight in f64 is 4x a bf16 model's bytes), and hidden_with's model takes them in f64 either way.
  const std::set<std::string> read = selection_tensors(*ctx.weights, layers);
  std::map<std::string, torch::Tensor> all64;
  for (const auto& n : ctx.weights->names())
    all64[n] = read.count(n) ? ctx.weights->raw(n).to(torch::kFloat64) : ctx.weights->raw(n);
  const WeightSource ws64 = WeightSource::from_tensors(std::move(all64), ctx.dir + " (f64)");
  const torch::Tensor lr = hidden_with(ctx, cfg, apply_selection(ws64, layers, rot), ids);
  CheckResult r = invariance_row("theorems.rotation", lr, base,
                                 "final hidden state (f64) with q/k rows rotated by a random orthogonal T per head vs "
                                 "unrotated, the layers evaluated without convs (use_short_conv = false, qk_activation = "
                                 "identity, qk_norm = l2)");
  // The rotation's own rounding: fl(T W) moves each q/k entry by up to dk u64 of the row's size (a sum of dk
  // products), and the recurrence then rounds in other coordinates. How far such moves carry is this evaluation's
  // conditioning, measured: every q/k entry moved by one ulp, 2 u64 (a seeded random sign; 1 + u64 would round to 1),
  // moves the hidden state by s; dk u64 is dk/2 such moves, so 4 dk s leaves 8x headroom. Without convs, collinear q/k rows give exactly collinear keys, and with beta near 2 (allow_neg_eigval) the
  // chunk form's triangular solve is ill-conditioned there: 2.6e-10 from rounding alone (audit 25), past a fixed 1e-10.
  if (r.status == Status::Fail && std::isfinite(r.figure)) {
    std::map<std::string, torch::Tensor> moved;
    int64_t dk = 1;
    for (const auto& L : layers) {
      dk = std::max<int64_t>(dk, L.head_k_dim);
      for (const std::string& n : {L.q_weight, L.k_weight}) {
        if (moved.count(n)) continue;
        torch::Tensor w = ws64.raw(n).contiguous().clone();
        double* p = w.data_ptr<double>();
        for (int64_t i = 0; i < w.numel(); ++i) p[i] *= 1.0 + ((rng() & 1) ? 1.0 : -1.0) * std::ldexp(1.0, -52);
        moved[n] = w;
      }
    }
    const double sens = rel_err(hidden_with(ctx, cfg, moved, ids), base);
    const double limit = 4.0 * static_cast<double>(dk) * sens;
    r.details["sensitivity"] = sens;
    if (limit > r.threshold) {
      r.threshold = limit;
      r.reason = "this evaluation is ill-conditioned: moving each q/k entry by one ulp moves the final hidden state by "
                 "s = " + fmt(sens) + "; rotating rounds each entry by up to dk u64 (dk = " +
                 std::to_string(dk) + "): limit 4 dk s; a wrong mapping gives O(1)";
      r.status = le(r.figure, r.threshold);
      if (r.threshold >= 0.1) {
        r.status = Status::Skip;
        r.message += ": " + fmt(r.figure) + ", not checkable: rounding alone moves this evaluation by 4 dk s = " +
                     fmt(r.threshold);
      }
    }
  }
  out.push_back(std::move(r));
}

}  // namespace

void check_theorems(Context& ctx, std::vector<CheckResult>& out) {
  if (ctx.layers.empty() || !ctx.ensure_forward()) {
    out.push_back(forward_unavailable(ctx, "theorems"));
    return;
  }
  state_theorems(ctx, out);
  invariances(ctx, out);
}

}  // namespace statecut::verify

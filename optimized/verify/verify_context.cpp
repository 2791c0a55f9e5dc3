#include "optimized/verify/verify_context.h"

#include <algorithm>
#include <chrono>

#include <cmath>
#include <exception>

#include "optimized/models/layers_common.h"
#include "optimized/models/recurrence.h"
#include "reference/delta_rule.h"
#include "reference/gated_delta_rule.h"
#include "reference/general_rule.h"
#include "reference/primitives.h"

namespace statecut::verify {

namespace {
std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

std::string error_text(const std::exception& e) {
  if (const auto* c = dynamic_cast<const c10::Error*>(&e)) return first_line(c->what_without_backtrace());
  return first_line(e.what());
}
}  // namespace

void Context::say(const std::string& line) const {
  if (opt.progress) opt.progress(line);
}

bool Context::ensure_forward() {
  if (forward_ok_) return *forward_ok_;
  forward_ok_ = false;
  if (!model) {
    forward_error = "the model does not load";
    return false;
  }
  try {
    torch::NoGradGuard ng;
    ForwardOptions fo;
    fo.mode = RecurrenceMode::Chunk;
    fo.capture_boundary = true;
    say("forward (" + std::string(dtype_label(run_dtype)) + ", " + std::to_string(ids.size(0)) + "x" +
        std::to_string(ids.size(1)) + " tokens)");
    fwd = model->forward(ids.to(device), fo);
    forward_ok_ = true;
  } catch (const std::exception& e) {
    forward_error = "the forward throws: " + error_text(e);
  }
  return *forward_ok_;
}

bool Context::ensure_f64() {
  if (f64_ok_) return *f64_ok_;
  f64_ok_ = false;
  if (!model) {
    f64_error = "the model does not load";
    return false;
  }
  // On the run's device when it is a GPU (f64 there is IEEE double, TF32 never applies; a 1.3B forward of 4 x 512
  // tokens takes ~23 s on 16 CPU cores), on the CPU otherwise or when the GPU cannot run it.
  std::vector<torch::Device> where{device};
  if (!device.is_cpu()) where.emplace_back(torch::kCPU);
  for (const torch::Device& dev : where) {
    try {
      torch::NoGradGuard ng;
      say("forward in f64" + (dev.is_cpu() ? std::string() : " on " + dev.str()));
      const std::unique_ptr<CausalLM> model64 = load_causal_lm(dir, torch::kFloat64, dev);
      ForwardOptions fo;
      fo.output_hidden_states = true;
      // A window at a time: the f64 head's [L, V] product is held for one window, not N (at a 152k vocabulary,
      // 4 x 512 tokens: 2.5 GB less). Models return fp32 logits, so logits64 keeps them in fp32.
      // Each window's logits go straight into their rows (a list and a cat held them twice at the end).
      std::vector<torch::Tensor> hid;
      torch::Tensor lg;
      for (int64_t b = 0; b < ids.size(0); ++b) {
        const ForwardResult r = forward_window(*model64, b, dev, fo);
        if (!lg.defined()) lg = torch::empty({ids.size(0), r.logits.size(1), r.logits.size(2)}, torch::kFloat32);
        lg[b].copy_(r.logits[0]);
        hid.push_back(r.hidden_states.back().to(torch::kCPU, torch::kFloat64));
      }
      logits64 = lg;
      hidden64 = torch::cat(hid);
      device64 = dev;
      f64_ok_ = true;
      break;
    } catch (const std::exception& e) {
      f64_error = "the f64 model fails: " + error_text(e);
      if (!dev.is_cpu()) say("f64 on " + dev.str() + " failed (" + error_text(e) + "): again on the CPU");
    }
  }
  return *f64_ok_;
}

ForwardResult Context::forward_window(CausalLM& m, int64_t b, torch::Device dev, const ForwardOptions& fo) const {
  return m.forward(ids.slice(0, b, b + 1).to(dev), fo);
}

const std::vector<double>& Context::f64_distances() {
  if (f64_distances_.empty())
    for (int64_t b = 0; b < fwd.logits.size(0); ++b) f64_distances_.push_back(rel_err(fwd.logits[b], logits64[b]));
  return f64_distances_;
}

double Context::f64_sensitivity() {
  if (f64_sensitivity_) return *f64_sensitivity_;
  f64_sensitivity_ = std::nan("");
  if (!ensure_f64()) return *f64_sensitivity_;
  try {
    torch::NoGradGuard ng;
    const double u = unit_roundoff(run_dtype);
    say("forward in f64 with every weight moved by one unit roundoff of " + std::string(dtype_label(run_dtype)));
    const std::unique_ptr<CausalLM> m = load_causal_lm(dir, torch::kFloat64, device64);
    auto gen = at::detail::createCPUGenerator(opt.seed);
    for (auto& [name, w] : m->named_parameters()) {
      if (!w.is_floating_point()) continue;
      const torch::Tensor bit = torch::randint(2, w.sizes(), gen, torch::TensorOptions().dtype(torch::kFloat64));
      w.mul_((bit * 2 - 1).to(w.device()).mul_(u).add_(1.0));  // w (1 ± u)
    }
    double worst = 0;
    for (int64_t b = 0; b < ids.size(0); ++b) {
      const torch::Tensor lg = forward_window(*m, b, device64, ForwardOptions()).logits;
      worst = std::max(worst, rel_err(lg[0], logits64[b]));
    }
    f64_sensitivity_ = worst;
  } catch (const std::exception& e) {
    f64_error = "the perturbed f64 model fails: " + error_text(e);
  }
  return *f64_sensitivity_;
}

LayerData layer_data(Context& ctx, size_t li) {
  const PrunableLayer& L = ctx.layers.at(li);
  if (static_cast<size_t>(L.layer) >= ctx.fwd.boundary.size() || !ctx.fwd.boundary[L.layer].q.defined())
    throw std::runtime_error("layer " + std::to_string(L.layer) + ": the forward exposes no recurrence boundary");
  const LayerBoundary& bd = ctx.fwd.boundary[L.layer];
  LayerData d;
  d.layer = L.layer;
  d.B = bd.q.size(0);
  d.T = bd.q.size(1);
  d.Hk = static_cast<int>(bd.q.size(2));
  d.dk = static_cast<int>(bd.q.size(3));
  d.Hv = static_cast<int>(bd.v.size(2));
  d.dv = static_cast<int>(bd.v.size(3));
  d.q = bd.q;
  d.k = bd.k;
  d.g = bd.g;
  d.gated = bd.g.defined();
  d.final_state = bd.final_state;
  if (ctx.kind == RecKind::Mamba2) {
    // The family computes v = x·dt and g = dt·A with A = −exp(A_log) (hf_mamba2.cpp); dt = g / A recovers dt to a
    // rounding, and both paths below get the SAME v, so the comparison sees only the recurrences.
    const std::string name = "backbone.layers." + std::to_string(L.layer) + ".mixer.A_log";
    torch::Tensor A_log;
    for (const auto& [n, t] : ctx.model->named_parameters())
      if (n == name) A_log = t;
    if (!A_log.defined()) throw std::runtime_error(name + ": not among the model's parameters");
    const auto ct = compute_dtype(bd.v.scalar_type());
    const torch::Tensor A = -torch::exp(A_log.to(ct));
    const torch::Tensor dt = bd.g.to(ct) / A.view({1, 1, -1});
    d.v = bd.v.to(ct) * dt.unsqueeze(-1);
    d.scale = 1.0;
  } else {
    d.v = bd.v;
    d.beta = bd.beta;
    d.scale = 1.0 / std::sqrt(static_cast<double>(d.dk));
    d.kernels = delta_rule_uses_cuda_kernels(d.q, d.k, d.v);
  }
  auto f64 = [](const torch::Tensor& t) {
    return t.defined() ? t.detach().to(torch::kCPU, torch::kFloat64).contiguous() : torch::Tensor();
  };
  d.q64 = f64(d.q);
  d.k64 = f64(d.k);
  d.v64 = f64(d.v);
  d.beta64 = f64(d.beta);
  d.g64 = f64(d.g);
  return d;
}

Mat head_mat(const torch::Tensor& x64, int64_t b, int64_t h, int64_t t0, int64_t n) {
  const int64_t T = x64.size(1), H = x64.size(2), D = x64.size(3);
  const double* base = x64.data_ptr<double>() + ((b * T + t0) * H + h) * D;
  Mat m(n, D);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t c = 0; c < D; ++c) m(t, c) = base[t * H * D + c];
  return m;
}

Vec head_vec(const torch::Tensor& x64, int64_t b, int64_t h, int64_t t0, int64_t n) {
  const int64_t T = x64.size(1), H = x64.size(2);
  const double* base = x64.data_ptr<double>() + (b * T + t0) * H + h;
  Vec v(n);
  for (int64_t t = 0; t < n; ++t) v(t) = base[t * H];
  return v;
}

ref::HeadResult ref_head(const Context& ctx, const LayerData& d, int64_t b, int64_t j, int64_t t0, int64_t n, const Mat* S0,
                         bool chunked) {
  const int64_t hk = j / (d.Hv / d.Hk);  // grouped values: value head j reads key head j / (Hv/Hk)
  Mat q = head_mat(d.q64, b, hk, t0, n), k = head_mat(d.k64, b, hk, t0, n);
  const Mat v = head_mat(d.v64, b, j, t0, n);
  if (ctx.kind == RecKind::Mamba2) {  // S_t = exp(g_t) S + k_t v_tᵀ: the general rule with (e^g, 0, 1)
    const Vec alpha = head_vec(d.g64, b, j, t0, n).array().exp();
    const Vec zero = Vec::Zero(n), one = Vec::Ones(n);
    return chunked ? ref::general_rule_chunked(q, k, v, alpha, zero, one, d.scale, S0)
                   : ref::general_rule_recurrent(q, k, v, alpha, zero, one, d.scale, S0);
  }
  if (ctx.l2norm_qk) {
    q = ref::l2norm_rows(q);
    k = ref::l2norm_rows(k);
  }
  const Vec beta = head_vec(d.beta64, b, j, t0, n);
  if (!d.gated)
    return chunked ? ref::delta_rule_chunked(q, k, v, beta, d.scale, S0)
                   : ref::delta_rule_recurrent(q, k, v, beta, d.scale, S0);
  const Vec g = head_vec(d.g64, b, j, t0, n);
  return chunked ? ref::gated_delta_chunked(q, k, v, beta, g, d.scale, S0)
                 : ref::gated_delta_recurrent(q, k, v, beta, g, d.scale, S0);
}

torch::Tensor opt_recurrence(const Context& ctx, const LayerData& d, RecurrenceMode mode, int64_t t0, int64_t n,
                             const torch::Tensor& S0, torch::Tensor* S) {
  auto sl = [&](const torch::Tensor& x) { return x.defined() ? x.narrow(1, t0, n) : x; };
  if (ctx.kind == RecKind::Mamba2) {
    const auto ct = d.v.scalar_type();
    return gated_linear_attention(sl(d.q).to(ct), sl(d.k).to(ct), sl(d.v), sl(d.g), d.scale, S0, mode, S);
  }
  if (t0 == 0 && n == d.T && !S0.defined())
    return delta_rule_forward(d.q, d.k, d.v, d.beta, d.g, d.scale, ctx.l2norm_qk, mode, S);
  const auto ct = compute_dtype(d.v.scalar_type());
  const torch::Tensor q = ctx.l2norm_qk ? l2_normalize(sl(d.q)) : sl(d.q).to(ct);
  const torch::Tensor k = ctx.l2norm_qk ? l2_normalize(sl(d.k)) : sl(d.k).to(ct);
  return gated_delta_rule(q, k, sl(d.v), sl(d.beta), sl(d.g), d.scale, S0, mode, S);
}

double rel_err(const Mat& a, const Mat& b) {
  if (!a.allFinite()) return std::nan("");
  const double num = (a - b).norm(), den = b.norm();
  if (den == 0) return num == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return num / den;
}

double rel_err(const torch::Tensor& a, const torch::Tensor& b) {
  // In f64, a slice of 2^20 entries at a time: a window's logits at a 152k vocabulary are 78M entries, whose f64
  // copies and difference would hold 1.9 GB at once.
  const torch::Tensor x = a.detach().reshape(-1), y = b.detach().reshape(-1);
  TORCH_CHECK(x.numel() == y.numel(), "rel_err of ", a.sizes(), " and ", b.sizes());
  constexpr int64_t kSlice = int64_t{1} << 20;
  double num = 0, den = 0;
  for (int64_t i = 0; i < x.numel(); i += kSlice) {
    const int64_t e = std::min(x.numel(), i + kSlice);
    const torch::Tensor xs = x.slice(0, i, e).to(torch::kCPU, torch::kFloat64), ys = y.slice(0, i, e).to(torch::kCPU, torch::kFloat64);
    if (!torch::isfinite(xs).all().item<bool>()) return std::nan("");
    num += (xs - ys).square().sum().item<double>();
    den += ys.square().sum().item<double>();
  }
  num = std::sqrt(num), den = std::sqrt(den);
  if (den == 0) return num == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return num / den;
}

double unit_roundoff(torch::Dtype d) {
  switch (d) {
    case torch::kFloat64: return std::ldexp(1.0, -53);
    case torch::kBFloat16: return std::ldexp(1.0, -8);
    case torch::kFloat16: return std::ldexp(1.0, -11);
    default: return std::ldexp(1.0, -24);
  }
}

double subnormal_half_spacing(torch::Dtype d) {
  switch (d) {
    case torch::kFloat16: return std::ldexp(1.0, -25);
    case torch::kBFloat16: return std::ldexp(1.0, -134);
    case torch::kFloat64: return 0.0;
    default: return std::ldexp(1.0, -150);
  }
}

const char* dtype_label(torch::Dtype d) {
  switch (d) {
    case torch::kFloat64: return "f64";
    case torch::kBFloat16: return "bf16";
    case torch::kFloat16: return "f16";
    case torch::kFloat32: return "f32";
    default: return "other";
  }
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
double seconds_since(double t0) { return now_seconds() - t0; }

}  // namespace statecut::verify

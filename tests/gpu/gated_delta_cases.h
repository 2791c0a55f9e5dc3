/// Op registry of the gated delta rule CUDA kernels (STYLE.md): one case list, the input generator, the double
/// reference, the plain same-precision loop and the error metric, shared by tests/gpu and bench/cuda_*.
///
/// Per sequence n and value head hv (key head hv / (HV/H)), state S [K, V]:
///   S_t = exp(g_t) (I - b_t k_t k_t^T) S_{t-1} + b_t k_t v_t^T,  o_t = S_t^T (scale q_t)
/// or, for cases without the delta term (delta = false, Mamba-2's SSD with b = dt), S_t = exp(g_t) S_{t-1} + b_t k_t v_t^T
/// with the fused transforms of kernels/gated_delta.h (l2 norm of q, k; g = -exp(A_log) softplus(a + dt_bias);
/// b = sigmoid(logit)). Shapes: q, k [B,T,H,K]; v [B,T,HV,V]; g, beta [B,T,HV]; state [N,HV,K,V] (or [N,HV,V,K]).
#pragma once
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <tuple>
#include <type_traits>
#include <cctype>
#include <sstream>
#include <string>
#include <vector>

#include "tests/rel_err_tensor.h"
#ifdef STATECUT_WITH_CUDA_KERNELS
#include "kernels/binding/gated_delta_torch.h"
#endif

namespace statecut::gpu_cases {

constexpr double kTf32Unit = 1.0 / 2048;  ///< 2^-11, unit roundoff of the chunk kernel's TF32 matrix operands

struct GdCase {
  int B = 1, T = 65, H = 2, HV = 2, K = 64, V = 128;
  std::vector<int64_t> seqlens;       ///< non-empty: packed varlen batch (B = 1, T = sum)
  bool gate = true;                   ///< g present (false: plain delta rule)
  double g_lo = -3.0, g_hi = -0.05;   ///< log-gate range when the gate is given directly
  int g_strong = 0;                   ///< > 0: mixed decay instead of the range: g = g_lo for the first g_strong
                                      ///< steps of each sequence, then g = g_hi
  int g_period = 0;                   ///< with g_strong: the pattern repeats every g_period steps (0: once)
  double b_lo = 0.0, b_hi = 1.0;      ///< beta range when given directly
  bool l2norm = true, gate_in_kernel = false, beta_sigmoid = false, v_first = false, init_state = true;
  bool delta = true;                  ///< false: gated linear attention, S_t = e^{g_t} S_{t-1} + b_t k_t v_t^T (Mamba-2)
  at::ScalarType dtype = at::kBFloat16;

  int64_t N() const { return seqlens.empty() ? B : static_cast<int64_t>(seqlens.size()); }
  std::string name() const {
    std::ostringstream s;
    s << "gated_delta(dtype=" << (dtype == at::kBFloat16 ? "bf16" : "fp16") << ",B=" << B << ",T=" << T
      << ",H=" << H << ",HV=" << HV << ",dk=" << K << ",dv=" << V;
    if (!seqlens.empty()) s << ",varlen=" << seqlens.size();
    if (!gate) s << ",nogate";
    else if (gate_in_kernel) s << ",gate=kernel";
    else if (g_strong > 0) {
      s << ",g=" << g_lo << "x" << g_strong << "then" << g_hi;
      if (g_period > 0) s << "per" << g_period;
    } else s << ",g=[" << g_lo << "," << g_hi << "]";
    if (beta_sigmoid) s << ",beta=sigmoid";
    else s << ",beta=[" << b_lo << "," << b_hi << "]";
    if (!l2norm) s << ",prenorm";
    if (v_first) s << ",vfirst";
    if (!init_state) s << ",s0=0";
    if (!delta) s << ",nodelta";
    s << ")";
    return s.str();
  }
  std::string gtest_name() const {
    std::string out;
    for (char c : name()) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    return out;
  }
};

/// Equivalence cases: every key dim of the issue, chunk boundaries, both layouts, fused transforms, GVA, varlen,
/// beta at 0 and 1, strong and no decay, and a wide decode batch.
inline std::vector<GdCase> equivalence_cases() {
  std::vector<GdCase> cs;
  for (int K : {16, 32, 64, 76, 89, 128, 179, 256}) {
    GdCase c;
    c.K = K, c.T = 130, c.H = 2, c.HV = 2, c.V = 128;
    cs.push_back(c);
  }
  for (int T : {1, 63, 64, 65, 1000}) {
    GdCase c;
    c.K = 89, c.V = 64, c.T = T;
    cs.push_back(c);
  }
  { GdCase c; c.K = 128, c.V = 128, c.T = 4096, c.H = 1, c.HV = 1, c.g_lo = -0.2, c.g_hi = -1e-3; cs.push_back(c); }
  { GdCase c; c.K = 179, c.V = 256, c.T = 200, c.H = 1, c.HV = 2; cs.push_back(c); }
  { GdCase c; c.K = 76, c.V = 64, c.T = 150, c.gate = false; cs.push_back(c); }                      // delta rule
  { GdCase c; c.K = 64, c.V = 128, c.T = 150, c.b_lo = 0.0, c.b_hi = 0.0, c.g_lo = -0.05, c.g_hi = -1e-3;
    cs.push_back(c); }  // beta = 0: the state only decays (weakly, so it stays inside fp32's range)
  { GdCase c; c.K = 64, c.V = 128, c.T = 150, c.b_lo = 1.0, c.b_hi = 1.0; cs.push_back(c); }           // beta = 1
  { GdCase c; c.K = 96, c.V = 128, c.T = 150, c.g_lo = -1e-4, c.g_hi = 0.0; cs.push_back(c); }         // no decay
  { GdCase c; c.K = 96, c.V = 128, c.T = 150, c.g_lo = -20.0, c.g_hi = -2.0; cs.push_back(c); }        // strong
  // mixed strong/weak decay: after 32 steps of -20 the in-chunk cumulative gate is -640, and the weak steps' decays
  // must not come from differences of it (kernels/gated_delta_chunk_prep.cu takes e^{G_i - G_j}; CPU: issue 19)
  { GdCase c; c.K = 89, c.V = 128, c.T = 130, c.g_lo = -20.0, c.g_hi = -1e-3, c.g_strong = 32; cs.push_back(c); }
  { GdCase c; c.K = 128, c.V = 128, c.T = 200, c.g_lo = -20.0, c.g_hi = -1e-3, c.g_strong = 32, c.g_period = 64;
    cs.push_back(c); }  // the same pattern in every chunk
  // reset tokens (g = -1000: a GDN gate -exp(A_log) softplus(x) of a strongly activated token) then weak decay, in
  // every chunk: G = -32000 after the resets, where fp32's spacing (3.9e-3) exceeds the weak steps (1e-3), so an
  // fp32 e^{G_i - G_j} reads decay 1 for them (up to 3% off over 32 steps); the double in-chunk cumsum keeps them
  // exact. beta <= 0.1 keeps the state a long-memory decayed sum (a large beta lets the delta rule overwrite it, and
  // the wrong decays then barely show: beta in [0, 1] moved the state error only from 2.9e-4 to 9.6e-4); the last
  // chunk ends in its weak part (T = 180) so the final state holds them; fp16 output (rounding below TF32's)
  { GdCase c; c.K = 89, c.V = 128, c.T = 180, c.g_lo = -1000.0, c.g_hi = -1e-3, c.g_strong = 32, c.g_period = 64;
    c.b_lo = 0.0, c.b_hi = 0.1, c.dtype = at::kHalf; cs.push_back(c); }
  { GdCase c; c.K = 89, c.V = 128, c.T = 100, c.H = 2, c.HV = 4, c.gate_in_kernel = true, c.beta_sigmoid = true;
    cs.push_back(c); }                                                                                 // fla layer
  { GdCase c; c.K = 89, c.V = 128, c.T = 100, c.v_first = true; cs.push_back(c); }
  { GdCase c; c.K = 128, c.V = 64, c.T = 77, c.v_first = true, c.l2norm = false; cs.push_back(c); }
  { GdCase c; c.K = 64, c.V = 128, c.B = 1, c.seqlens = {1, 63, 130, 64, 0, 7}; c.T = 265; cs.push_back(c); }
  { GdCase c; c.K = 64, c.V = 128, c.B = 1, c.seqlens = {70, 5}; c.T = 75, c.v_first = true; cs.push_back(c); }
  { GdCase c; c.K = 89, c.V = 128, c.T = 100, c.dtype = at::kHalf; cs.push_back(c); }
  { GdCase c; c.K = 32, c.V = 64, c.T = 9, c.init_state = false; cs.push_back(c); }
  { GdCase c; c.K = 64, c.V = 128, c.T = 1, c.B = 128, c.H = 16, c.HV = 16; cs.push_back(c); }        // B*H = 2048
  // many heads: the chunk kernel picks its wide value tiles (VT = 128 at dk 64, VT = 64 at dk 128)
  { GdCase c; c.K = 64, c.V = 128, c.T = 130, c.B = 8, c.H = 16, c.HV = 16; cs.push_back(c); }
  { GdCase c; c.K = 128, c.V = 128, c.T = 130, c.B = 8, c.H = 16, c.HV = 16, c.v_first = true; cs.push_back(c); }
  { GdCase c; c.K = 128, c.V = 128, c.T = 4, c.B = 64, c.H = 16, c.HV = 16, c.v_first = true; cs.push_back(c); }
  // value dims above 256 (Gated DeltaNet 1.3B: dk 256, dv 512, and its 50% prune dk 128): more value tiles per head
  { GdCase c; c.K = 256, c.V = 512, c.T = 130, c.H = 2, c.HV = 2, c.gate_in_kernel = true, c.beta_sigmoid = true;
    cs.push_back(c); }
  { GdCase c; c.K = 128, c.V = 512, c.T = 1, c.B = 4, c.H = 6, c.HV = 6; cs.push_back(c); }
  // its whole layer on a full grid (8 x 6 heads x 32 value tiles >= 2 blocks per SM): the chunk kernel keeps one k
  // buffer so that two blocks share an SM; a tail chunk of 2 rows
  { GdCase c; c.K = 256, c.V = 512, c.T = 130, c.B = 8, c.H = 6, c.HV = 6; cs.push_back(c); }
  { GdCase c; c.K = 89, c.V = 388, c.T = 70, c.v_first = true; cs.push_back(c); }
  { GdCase c; c.K = 64, c.V = 1024, c.T = 65; cs.push_back(c); }
  // without the delta term (Mamba-2's SSD: one key head = one group, four value heads, q = C, k = B as the model
  // gives them, no L2 norm; b = dt in [0.01, 2]): its state dims and chunk boundaries, the [V,K] layout, packed
  // sequences, strong-then-weak decay, long weak-decay memory in fp16
  const auto nodelta = [](int K, int V, int T) {
    GdCase c;
    c.K = K, c.V = V, c.T = T, c.H = 1, c.HV = 4, c.delta = false, c.l2norm = false, c.b_lo = 0.01, c.b_hi = 2.0;
    return c;
  };
  { GdCase c = nodelta(128, 64, 130); cs.push_back(c); }
  { GdCase c = nodelta(16, 64, 63); cs.push_back(c); }
  { GdCase c = nodelta(89, 64, 65); c.v_first = true; cs.push_back(c); }
  { GdCase c = nodelta(64, 128, 265); c.B = 1, c.seqlens = {1, 63, 130, 64, 0, 7}; cs.push_back(c); }
  { GdCase c = nodelta(128, 64, 200); c.g_lo = -20.0, c.g_hi = -1e-3, c.g_strong = 32, c.g_period = 64;
    cs.push_back(c); }
  { GdCase c = nodelta(128, 64, 1000); c.g_lo = -0.05, c.g_hi = -1e-3, c.dtype = at::kHalf; cs.push_back(c); }
  return cs;
}

/// Benchmark shapes (issue 6): prefill B x T with H = 16, dv = 128; decode B with H = 16, T = 1.
struct PrefillShape { int B, T; };
inline std::vector<PrefillShape> prefill_shapes() { return {{1, 8192}, {8, 2048}, {8, 8192}, {32, 2048}}; }
inline std::vector<int> prefill_dks() { return {128, 96, 64, 32}; }
inline std::vector<int> decode_batches() { return {1, 8, 64, 256}; }
inline std::vector<int> decode_dks() { return {128, 64, 32}; }

/// Prefill FLOPs of the chunked form per token and value head, the count the kernels' benchmark has used since the
/// first wave (the products with the state, the in-chunk products and the triangular solve): 6KV + 6CK + 4CV + C^2/3,
/// C = 64.
inline double prefill_flops(double tokens, double HV, double K, double V) {
  const double C = 64;
  return tokens * HV * (6 * K * V + 6 * C * K + 4 * C * V + C * C / 3);
}

inline uint64_t seed_from_env(uint64_t fallback) {
  const char* s = std::getenv("STATECUT_SEED");
  return s ? std::strtoull(s, nullptr, 10) : fallback;
}

/// Host inputs of one case (CPU tensors; q, k, v in the case dtype, the rest fp32).
struct GdInputs {
  at::Tensor q, k, v, g, beta, A_log, dt_bias, s0, cu;
};

inline GdInputs make_inputs(const GdCase& c, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const auto f32 = at::TensorOptions().dtype(at::kFloat);
  GdInputs in;
  in.q = at::randn({c.B, c.T, c.H, c.K}, gen, f32);
  in.k = at::randn({c.B, c.T, c.H, c.K}, gen, f32);
  if (!c.l2norm) {  // caller passes already normalised q, k
    in.q = in.q / in.q.norm(2, -1, true);
    in.k = in.k / in.k.norm(2, -1, true);
  }
  in.q = in.q.to(c.dtype), in.k = in.k.to(c.dtype);
  in.v = at::randn({c.B, c.T, c.HV, c.V}, gen, f32).to(c.dtype);
  if (c.gate) {
    if (c.gate_in_kernel) {
      in.g = at::randn({c.B, c.T, c.HV}, gen, f32);
      in.A_log = at::log(at::rand({c.HV}, gen, f32) * 15 + 1);
      in.dt_bias = at::randn({c.HV}, gen, f32) * 0.5 - 3;
    } else if (c.g_strong > 0) {  // position within each sequence (packed sequences restart at their start)
      in.g = at::empty({c.B, c.T, c.HV}, f32);
      float* gp = in.g.data_ptr<float>();
      std::vector<int64_t> starts{0};
      for (size_t i = 0; i + 1 < c.seqlens.size(); ++i) starts.push_back(starts.back() + c.seqlens[i]);
      for (int64_t b = 0; b < c.B; ++b)
        for (int64_t t = 0, s = 0; t < c.T; ++t) {
          while (s + 1 < static_cast<int64_t>(starts.size()) && t >= starts[s + 1]) ++s;
          const int64_t pos = t - starts[s];
          const int64_t in_period = c.g_period > 0 ? pos % c.g_period : pos;
          for (int64_t h = 0; h < c.HV; ++h)
            gp[(b * c.T + t) * c.HV + h] = static_cast<float>(in_period < c.g_strong ? c.g_lo : c.g_hi);
        }
    } else {
      in.g = at::rand({c.B, c.T, c.HV}, gen, f32) * (c.g_hi - c.g_lo) + c.g_lo;
    }
  }
  if (c.beta_sigmoid) in.beta = at::randn({c.B, c.T, c.HV}, gen, f32) * 2;
  else in.beta = at::rand({c.B, c.T, c.HV}, gen, f32) * (c.b_hi - c.b_lo) + c.b_lo;
  const int64_t N = c.N();
  if (c.init_state)
    in.s0 = c.v_first ? at::randn({N, c.HV, c.V, c.K}, gen, f32) * 0.3 : at::randn({N, c.HV, c.K, c.V}, gen, f32) * 0.3;
  if (!c.seqlens.empty()) {
    std::vector<int64_t> cu{0};
    for (int64_t l : c.seqlens) cu.push_back(cu.back() + l);
    in.cu = at::tensor(cu, at::TensorOptions().dtype(at::kLong));
  }
  return in;
}

/// Plain token loop in Real: with float it is the "plain same-precision loop" whose error sets the equivalence bound
/// (the double oracle is statecut::ref, see gated_delta_reference.h). Returns o [B,T,HV,V] as Real (the caller
/// rounds it to the output dtype, as the kernels do) and the final state in the case's layout.
template <typename Real>
void loop_reference(const GdCase& c, const GdInputs& in, double scale, at::Tensor& o_out, at::Tensor& s_out) {
  const auto dt = std::is_same<Real, double>::value ? at::kDouble : at::kFloat;
  const at::Tensor q = in.q.to(dt).contiguous(), k = in.k.to(dt).contiguous(), v = in.v.to(dt).contiguous();
  const at::Tensor g = in.g.defined() ? in.g.to(dt).contiguous() : at::Tensor();
  const at::Tensor b = in.beta.to(dt).contiguous();
  const Real* qp = q.data_ptr<Real>();
  const Real* kp = k.data_ptr<Real>();
  const Real* vp = v.data_ptr<Real>();
  const Real* gp = g.defined() ? g.data_ptr<Real>() : nullptr;
  const Real* bp = b.data_ptr<Real>();
  const int64_t N = c.N(), H = c.H, HV = c.HV, K = c.K, V = c.V;
  o_out = at::zeros({c.B, c.T, HV, V}, at::TensorOptions().dtype(dt));
  s_out = c.v_first ? at::zeros({N, HV, V, K}, at::TensorOptions().dtype(dt))
                    : at::zeros({N, HV, K, V}, at::TensorOptions().dtype(dt));
  Real* op = o_out.data_ptr<Real>();
  const at::Tensor s0 = in.s0.defined() ? in.s0.to(dt).contiguous() : at::Tensor();
  const at::Tensor alog = in.A_log.defined() ? in.A_log.to(dt).contiguous() : at::Tensor();
  const at::Tensor dtb = in.dt_bias.defined() ? in.dt_bias.to(dt).contiguous() : at::Tensor();
  std::vector<Real> S(K * V), kv(K), qv(K), vn(V);
  for (int64_t n = 0; n < N; ++n) {
    int64_t bos = n * c.T, eos = (n + 1) * c.T;
    if (!c.seqlens.empty()) {
      bos = 0;
      for (int64_t i = 0; i < n; ++i) bos += c.seqlens[i];
      eos = bos + c.seqlens[n];
    }
    for (int64_t hv = 0; hv < HV; ++hv) {
      const int64_t h = hv / (HV / H);
      for (int64_t i = 0; i < K; ++i)
        for (int64_t j = 0; j < V; ++j)
          S[i * V + j] = s0.defined() ? s0.data_ptr<Real>()[((n * HV + hv) * K * V) +
                                                          (c.v_first ? j * K + i : i * V + j)]
                                      : Real(0);
      for (int64_t t = bos; t < eos; ++t) {
        Real nk = 0, nq = 0;
        for (int64_t i = 0; i < K; ++i) {
          kv[i] = kp[(t * H + h) * K + i], qv[i] = qp[(t * H + h) * K + i];
          nk += kv[i] * kv[i], nq += qv[i] * qv[i];
        }
        const Real mk = c.l2norm ? Real(1) / std::sqrt(nk + Real(1e-6)) : Real(1);
        const Real mq = Real(scale) * (c.l2norm ? Real(1) / std::sqrt(nq + Real(1e-6)) : Real(1));
        for (int64_t i = 0; i < K; ++i) kv[i] *= mk, qv[i] *= mq;
        Real gt = gp ? gp[t * HV + hv] : Real(0);
        if (gp && c.gate_in_kernel) {
          const Real x = gt + dtb.data_ptr<Real>()[hv];
          const Real sp = x > Real(20) ? x : std::log1p(std::exp(x));
          gt = -std::exp(alog.data_ptr<Real>()[hv]) * sp;
        }
        Real bt = bp[t * HV + hv];
        if (c.beta_sigmoid) bt = Real(1) / (Real(1) + std::exp(-bt));
        const Real alpha = std::exp(gt);
        for (auto& s : S) s *= alpha;
        for (int64_t j = 0; j < V; ++j) {
          Real a = 0;
          for (int64_t i = 0; i < K; ++i) a += S[i * V + j] * kv[i];
          vn[j] = bt * (c.delta ? vp[(t * HV + hv) * V + j] - a : vp[(t * HV + hv) * V + j]);
        }
        for (int64_t i = 0; i < K; ++i)
          for (int64_t j = 0; j < V; ++j) S[i * V + j] += kv[i] * vn[j];
        for (int64_t j = 0; j < V; ++j) {
          Real o = 0;
          for (int64_t i = 0; i < K; ++i) o += S[i * V + j] * qv[i];
          op[(t * HV + hv) * V + j] = o;  // B = 1 when packed, so t indexes [B*T]
        }
      }
      at::Tensor st = at::from_blob(S.data(), {K, V}, at::TensorOptions().dtype(dt)).clone();
      if (c.v_first) s_out[n][hv].copy_(st.t());
      else s_out[n][hv].copy_(st);
    }
  }
}

/// Normwise relative error ||x - ref||_F / ||ref||_F in double.
using statecut::test::rel_err;

#ifdef STATECUT_WITH_CUDA_KERNELS
enum class Kernel { kChunk, kRecurrent };

inline c10::optional<at::Tensor> opt(const at::Tensor& t) {
  return t.defined() ? c10::optional<at::Tensor>(t) : c10::nullopt;
}

/// Inputs moved to the device once.
inline GdInputs to_device(const GdInputs& in) {
  GdInputs d;
  auto mv = [](const at::Tensor& t) { return t.defined() ? t.to(at::kCUDA) : t; };
  d.q = mv(in.q), d.k = mv(in.k), d.v = mv(in.v), d.g = mv(in.g), d.beta = mv(in.beta), d.A_log = mv(in.A_log);
  d.dt_bias = mv(in.dt_bias), d.s0 = mv(in.s0), d.cu = mv(in.cu);
  return d;
}

/// One call of a kernel on device inputs; returns (o, final state).
inline std::tuple<at::Tensor, at::Tensor> run_cuda(Kernel which, const GdCase& c, const GdInputs& d,
                                                   const at::Tensor& s0, double scale) {
  if (!c.delta)  // no fused transforms on this path (gated_linear_attention_rule)
    return statecut::cuda::gated_linear_attention_rule(which == Kernel::kChunk, d.q, d.k, d.v, opt(d.g), opt(d.beta),
                                                       scale, opt(s0), true, opt(d.cu), c.v_first);
  auto fn = which == Kernel::kChunk ? &statecut::cuda::gated_delta_rule_chunk
                                    : &statecut::cuda::gated_delta_rule_recurrent;
  return fn(d.q, d.k, d.v, opt(d.g), opt(d.beta), scale, opt(s0), true, opt(d.cu), c.l2norm, c.gate_in_kernel,
            opt(d.A_log), opt(d.dt_bias), c.beta_sigmoid, c.v_first);
}
#endif

}  // namespace statecut::gpu_cases

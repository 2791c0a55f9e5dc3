/// The double-precision oracle of the registry cases: statecut::ref::gated_delta_recurrent (general_rule_recurrent
/// for cases without the delta term) per (sequence, value head), after the fused transforms of the kernels, all in
/// double through statecut::ref primitives (l2norm_rows, gdn_log_decay, sigmoid). Shapes as
/// tests/gpu/gated_delta_cases.h; o [B,T,HV,V] and the final state in the case's layout, both double CPU tensors.
#pragma once
#include <ATen/ATen.h>

#include "reference/gated_delta_rule.h"
#include "reference/general_rule.h"
#include "reference/primitives.h"
#include "tests/gpu/gated_delta_cases.h"

namespace statecut::gpu_cases {

inline ref::Mat rows_of(const at::Tensor& x3, int64_t bos, int64_t len, int64_t head) {  // x3 [Ttot, heads, D]
  const at::Tensor s = x3.narrow(0, bos, len).select(1, head).contiguous();
  ref::Mat m(len, s.size(1));
  const double* p = s.data_ptr<double>();
  for (int64_t t = 0; t < len; ++t)
    for (int64_t c = 0; c < s.size(1); ++c) m(t, c) = p[t * s.size(1) + c];
  return m;
}

inline ref::Vec steps_of(const at::Tensor& x2, int64_t bos, int64_t len, int64_t head) {  // x2 [Ttot, heads]
  const at::Tensor s = x2.narrow(0, bos, len).select(1, head).contiguous();
  ref::Vec v(len);
  for (int64_t t = 0; t < len; ++t) v(t) = s.data_ptr<double>()[t];
  return v;
}

inline void reference_double(const GdCase& c, const GdInputs& in, double scale, at::Tensor& o_out,
                             at::Tensor& s_out) {
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  const int64_t Ttot = static_cast<int64_t>(c.B) * c.T, N = c.N();
  const at::Tensor q = in.q.to(at::kDouble).reshape({Ttot, c.H, c.K});
  const at::Tensor k = in.k.to(at::kDouble).reshape({Ttot, c.H, c.K});
  const at::Tensor v = in.v.to(at::kDouble).reshape({Ttot, c.HV, c.V});
  const at::Tensor b = in.beta.to(at::kDouble).reshape({Ttot, c.HV});
  const at::Tensor g = in.g.defined() ? in.g.to(at::kDouble).reshape({Ttot, c.HV}) : at::zeros({Ttot, c.HV}, f64);
  o_out = at::zeros({Ttot, c.HV, c.V}, f64);
  s_out = c.v_first ? at::zeros({N, c.HV, c.V, c.K}, f64) : at::zeros({N, c.HV, c.K, c.V}, f64);
  int64_t bos = 0;
  for (int64_t n = 0; n < N; ++n) {
    const int64_t len = c.seqlens.empty() ? c.T : c.seqlens[n];
    for (int64_t hv = 0; hv < c.HV; ++hv) {
      const int64_t h = hv / (c.HV / c.H);
      ref::Mat qh = rows_of(q, bos, len, h), kh = rows_of(k, bos, len, h);
      if (c.l2norm) qh = ref::l2norm_rows(qh), kh = ref::l2norm_rows(kh);
      ref::Vec gh = steps_of(g, bos, len, hv), bh = steps_of(b, bos, len, hv);
      if (c.gate && c.gate_in_kernel)
        gh = ref::gdn_log_decay(gh, in.A_log[hv].item<double>(), in.dt_bias[hv].item<double>());
      if (c.beta_sigmoid) bh = ref::sigmoid(bh);
      ref::Mat S0 = ref::Mat::Zero(c.K, c.V);
      if (in.s0.defined()) {
        at::Tensor s = in.s0[n][hv].to(at::kDouble);
        if (c.v_first) s = s.t();
        s = s.contiguous();
        for (int64_t i = 0; i < c.K; ++i)
          for (int64_t j = 0; j < c.V; ++j) S0(i, j) = s.data_ptr<double>()[i * c.V + j];
      }
      // without the delta term: the general rule with alpha = e^g, no k k^T term, gamma = b
      const ref::HeadResult r =
          c.delta ? ref::gated_delta_recurrent(qh, kh, rows_of(v, bos, len, hv), bh, gh, scale, &S0)
                  : ref::general_rule_recurrent(qh, kh, rows_of(v, bos, len, hv), gh.array().exp().matrix(),
                                                ref::Vec::Zero(len), bh, scale, &S0);
      double* op = o_out.data_ptr<double>();  // [Ttot, HV, V] contiguous
      for (int64_t t = 0; t < len; ++t)
        for (int64_t j = 0; j < c.V; ++j) op[((bos + t) * c.HV + hv) * c.V + j] = r.o(t, j);
      at::Tensor st = at::empty({c.K, c.V}, f64);
      for (int64_t i = 0; i < c.K; ++i)
        for (int64_t j = 0; j < c.V; ++j) st.data_ptr<double>()[i * c.V + j] = r.state(i, j);
      s_out[n][hv].copy_(c.v_first ? st.t() : st);
    }
    bos += len;
  }
  o_out = o_out.reshape({c.B, c.T, c.HV, c.V});
}

}  // namespace statecut::gpu_cases

// chunk_scan: the inter-chunk scan as one autograd node (math in recurrence_scan.h).
#include "optimized/models/recurrence_scan.h"

#include <vector>

namespace statecut {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct ChunkScanFunction : public torch::autograd::Function<ChunkScanFunction> {
  // Outputs: {states, S_N} and, for the delta rule, v_new. An absent w or d is passed as an empty placeholder (a
  // custom Function takes no undefined inputs) and flagged by delta / gated.
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& u, const torch::Tensor& w,
                               const torch::Tensor& k, const torch::Tensor& d, const torch::Tensor& S0, bool delta,
                               bool gated) {
    const int64_t N = u.size(1), R = u.size(0);
    // Every step writes into buffers the node owns, in place, in the order a plain loop of out-of-place baddbmm runs
    // (copy the addend, then accumulate the GEMM into it): the same values bit for bit, without a copy of the addend
    // per step and without stacking the per-chunk results afterwards.
    auto st = torch::empty({R, N, S0.size(1), S0.size(2)}, S0.options());  // S_0..S_{N−1}
    auto S_last = torch::empty_like(S0);
    const auto vbuf = delta ? u.clone(at::MemoryFormat::Contiguous) : torch::Tensor();  // v_new_n = u_n − w_n S_n
    st.select(1, 0).copy_(S0);
    for (int64_t n = 0; n < N; ++n) {
      const auto S = st.select(1, n);
      auto vn = delta ? vbuf.select(1, n).baddbmm_(w.select(1, n), S, /*beta=*/1, /*alpha=*/-1) : u.select(1, n);
      auto next = n + 1 < N ? st.select(1, n + 1) : S_last;
      if (gated)
        torch::mul_out(next, d.select(1, n), S);
      else
        next.copy_(S);
      next.baddbmm_(k.select(1, n).transpose(-1, -2), vn);
    }
    variable_list out = {st, S_last};
    if (delta) out.push_back(vbuf);
    // v_new for ∂k: the delta rule's output, else u
    ctx->save_for_backward({w, k, d, st, delta ? out[2] : u});
    ctx->saved_data["delta"] = delta;
    ctx->saved_data["gated"] = gated;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &w = saved[0], &k = saved[1], &d = saved[2], &states = saved[3], &vn = saved[4];
    const bool delta = ctx->saved_data["delta"].toBool(), gated = ctx->saved_data["gated"].toBool();
    const int64_t N = states.size(1);
    const auto& g_states = grads[0];
    const auto& g_last = grads[1];
    const torch::Tensor g_vnew = delta ? grads[2] : torch::Tensor();
    // As in the forward: buffers owned here, written in place in the order of the out-of-place loop (bit-identical).
    // Pn[n] = P_{n+1}; Dl[n] = Δ_n, from a copy of the incoming gradient (which autograd may share). The out= and
    // in-place steps make this backward itself not differentiable (no create_graph): nothing here takes a 2nd order.
    const int64_t R = states.size(0);
    const auto Pn = torch::empty_like(states);
    const auto Dl = g_vnew.defined() ? g_vnew.clone(at::MemoryFormat::Contiguous)
                                     : torch::empty({R, N, k.size(2), states.size(3)}, states.options());
    if (g_last.defined())
      Pn.select(1, N - 1).copy_(g_last);
    else
      Pn.select(1, N - 1).zero_();
    const auto P0 = torch::empty({R, states.size(2), states.size(3)}, states.options());
    const torch::Tensor none;
    for (int64_t n = N - 1; n >= 0; --n) {
      const auto P = Pn.select(1, n), kn = k.select(1, n);
      auto Delta = Dl.select(1, n);
      if (g_vnew.defined())
        Delta.baddbmm_(kn, P);
      else
        torch::bmm_out(Delta, kn, P);
      auto Pprev = n > 0 ? Pn.select(1, n - 1) : P0;  // P_n
      if (gated)
        torch::mul_out(Pprev, d.select(1, n), P);
      else
        Pprev.copy_(P);
      if (g_states.defined()) Pprev.add_(g_states.select(1, n));
      if (delta) Pprev.baddbmm_(w.select(1, n).transpose(-1, -2), Delta, /*beta=*/1, /*alpha=*/-1);
    }
    const auto& P = P0;
    torch::Tensor du = Dl, dw, dk, dd;
    if (delta && ctx->needs_input_grad(1)) dw = -torch::matmul(Dl, states.transpose(-1, -2));
    if (ctx->needs_input_grad(2)) dk = torch::matmul(vn, Pn.transpose(-1, -2));
    if (gated && ctx->needs_input_grad(3)) dd = (Pn * states).sum({-2, -1}, /*keepdim=*/true);
    return {du, dw, dk, dd, P, none, none};
  }
};

}  // namespace

ChunkScan chunk_scan(const torch::Tensor& u, const torch::Tensor& w, const torch::Tensor& k, const torch::Tensor& d,
                     const torch::Tensor& S0) {
  TORCH_CHECK(u.dim() == 4 && k.dim() == 4 && S0.dim() == 3, "chunk_scan: u, k [R,N,C,d] and S0 [R,dk,dv] expected");
  TORCH_CHECK(u.size(1) > 0, "chunk_scan: no chunks (the caller returns early for T = 0)");
  const auto absent = u.new_empty({0});
  auto out = ChunkScanFunction::apply(u, w.defined() ? w : absent, k, d.defined() ? d : absent, S0, w.defined(),
                                      d.defined());
  ChunkScan r;
  r.states = out[0];
  r.last = out[1];
  r.v_new = w.defined() ? out[2] : u;
  return r;
}

}  // namespace statecut

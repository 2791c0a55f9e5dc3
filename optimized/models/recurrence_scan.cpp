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
    const int64_t N = u.size(1);
    std::vector<torch::Tensor> states, v_new;
    states.reserve(N);
    auto S = S0;
    for (int64_t n = 0; n < N; ++n) {
      states.push_back(S);
      auto vn = delta ? torch::baddbmm(u.select(1, n), w.select(1, n), S, /*beta=*/1, /*alpha=*/-1) : u.select(1, n);
      if (delta) v_new.push_back(vn);
      S = torch::baddbmm(gated ? d.select(1, n) * S : S, k.select(1, n).transpose(-1, -2), vn);
    }
    auto st = torch::stack(states, 1);
    variable_list out = {st, S};
    if (delta) out.push_back(torch::stack(v_new, 1));
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
    auto P = g_last.defined() ? g_last
                              : torch::zeros({states.size(0), states.size(2), states.size(3)}, states.options());
    const torch::Tensor none;
    std::vector<torch::Tensor> P_next(N), Delta(N);
    for (int64_t n = N - 1; n >= 0; --n) {
      P_next[n] = P;
      const auto kn = k.select(1, n);
      Delta[n] = g_vnew.defined() ? torch::baddbmm(g_vnew.select(1, n), kn, P) : torch::bmm(kn, P);
      auto base = gated ? d.select(1, n) * P : P;
      if (g_states.defined()) base = base + g_states.select(1, n);
      P = delta ? torch::baddbmm(base, w.select(1, n).transpose(-1, -2), Delta[n], /*beta=*/1, /*alpha=*/-1) : base;
    }
    const auto Dl = torch::stack(Delta, 1);   // [R,N,C,dv]
    const auto Pn = torch::stack(P_next, 1);  // [R,N,dk,dv]
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

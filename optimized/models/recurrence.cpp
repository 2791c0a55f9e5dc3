// Batched LibTorch recurrences (recurrent loop and chunked WY/UT form); math in recurrence.h.
#include "optimized/models/recurrence.h"

#include "optimized/models/recurrence_scan.h"
#include "optimized/models/unit_lower_inverse.h"

#include <string>

namespace statecut {
namespace {

struct Prepared {
  torch::Tensor q, k, v, beta, g, S;  // [B,H,T,d] / [B,H,T] in the compute dtype; S [B,H,dk,dv]
  int64_t B = 0, T = 0, H = 0, dk = 0, dv = 0;
};

// Checks shapes, casts to the compute dtype, expands grouped key heads to value heads and moves time to dim 2.
Prepared prepare(const char* op, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                 const torch::Tensor& beta, const torch::Tensor& g, const torch::Tensor& S0) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, op, ": q, k, v must be [B,T,H,D]");
  TORCH_CHECK(q.sizes() == k.sizes(), op, ": q ", q.sizes(), " and k ", k.sizes(), " differ");
  const int64_t B = v.size(0), T = v.size(1), Hv = v.size(2), dv = v.size(3);
  const int64_t Hk = k.size(2), dk = k.size(3);
  TORCH_CHECK(k.size(0) == B && k.size(1) == T, op, ": q/k ", k.sizes(), " and v ", v.sizes(), " disagree on B,T");
  TORCH_CHECK(Hk > 0 && Hv % Hk == 0, op, ": value heads ", Hv, " not a multiple of key heads ", Hk);
  const auto cd = v.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  Prepared p;
  p.B = B, p.T = T, p.H = Hv, p.dk = dk, p.dv = dv;
  auto expand = [&](const torch::Tensor& x) {
    auto y = x.to(cd);
    if (Hv != Hk) y = y.repeat_interleave(Hv / Hk, /*dim=*/2);
    return y.transpose(1, 2).contiguous();  // [B,H,T,d]
  };
  p.q = expand(q);
  p.k = expand(k);
  p.v = v.to(cd).transpose(1, 2).contiguous();
  if (beta.defined()) {
    TORCH_CHECK(beta.dim() == 3 && beta.size(0) == B && beta.size(1) == T && beta.size(2) == Hv, op,
                ": beta must be [B,T,Hv], got ", beta.sizes());
    p.beta = beta.to(cd).transpose(1, 2).contiguous();
  }
  if (g.defined()) {
    TORCH_CHECK(g.dim() == 3 && g.size(0) == B && g.size(1) == T && g.size(2) == Hv, op,
                ": g must be [B,T,Hv], got ", g.sizes());
    p.g = g.to(cd).transpose(1, 2).contiguous();
  }
  if (S0.defined()) {
    TORCH_CHECK(S0.dim() == 4 && S0.size(0) == B && S0.size(1) == Hv && S0.size(2) == dk && S0.size(3) == dv, op,
                ": initial_state must be [B,Hv,dk,dv], got ", S0.sizes());
    p.S = S0.to(v.device(), cd).clone();
  } else {
    p.S = torch::zeros({B, Hv, dk, dv}, v.options().dtype(cd));
  }
  return p;
}

// The recurrent loop; delta = false gives gated linear attention.
torch::Tensor run_recurrent(Prepared& p, double scale, bool delta) {
  auto o = torch::empty({p.B, p.H, p.T, p.dv}, p.v.options());
  auto q = p.q * scale;
  auto& S = p.S;
  for (int64_t t = 0; t < p.T; ++t) {
    if (p.g.defined()) S = S * torch::exp(p.g.select(2, t)).unsqueeze(-1).unsqueeze(-1);
    auto kt = p.k.select(2, t);  // [B,H,dk]
    auto vt = p.v.select(2, t);  // [B,H,dv]
    if (delta) {
      auto pred = torch::matmul(kt.unsqueeze(-2), S).squeeze(-2);  // Sᵀk: [B,H,dv]
      vt = (vt - pred) * p.beta.select(2, t).unsqueeze(-1);
    }
    S = S + kt.unsqueeze(-1) * vt.unsqueeze(-2);
    o.select(2, t).copy_(torch::matmul(q.select(2, t).unsqueeze(-2), S).squeeze(-2));
  }
  return o;
}

// The chunked form with chunk C; T is padded to a multiple of C with zeros (g = 0, β = 0: the state passes unchanged).
torch::Tensor run_chunked(Prepared& p, double scale, bool delta) {
  const int64_t C = kRecurrenceChunk;
  const int64_t N = (p.T + C - 1) / C, Tp = N * C, pad = Tp - p.T;
  auto pad_t = [&](const torch::Tensor& x) {  // pads dim 2 (time)
    if (pad == 0) return x;
    auto sz = x.sizes().vec();
    sz[2] = pad;
    return torch::cat({x, torch::zeros(sz, x.options())}, 2);
  };
  auto chunks = [&](const torch::Tensor& x) {  // [B,H,Tp,...] → [B,H,N,C,...]
    auto sz = x.sizes().vec();
    std::vector<int64_t> out = {sz[0], sz[1], N, C};
    out.insert(out.end(), sz.begin() + 3, sz.end());
    return x.reshape(out);
  };
  auto q = chunks(pad_t(p.q)) * scale;  // [B,H,N,C,dk]
  auto k = chunks(pad_t(p.k));
  auto v = chunks(pad_t(p.v));  // [B,H,N,C,dv]
  auto opts = p.v.options();
  auto g = p.g.defined() ? chunks(pad_t(p.g)) : torch::zeros({p.B, p.H, N, C}, opts);  // [B,H,N,C]

  auto ones = torch::ones({C, C}, opts.dtype(torch::kBool));
  auto incl = torch::tril(ones);        // i >= j
  auto strict = torch::tril(ones, -1);  // i > j
  // Every decay is a sum of the g it spans, never a difference of cumulative sums: after a strong-decay stretch
  // G_i, G_j are large and G_i − G_j would lose |G|·eps of the exponent (reference/chunk_scan.h).
  // G_i = g_0 + ... + g_i, summed from the chunk start.
  auto G = g.cumsum(-1);
  // Segment sums E_ij = g_{j+1} + ... + g_i (i >= j): g_i placed at (i, j) for i > j, summed down each column.
  auto E = g.unsqueeze(-1).expand({p.B, p.H, N, C, C}).masked_fill(strict.logical_not(), 0.0).cumsum(-2);
  // D_ij = exp(E_ij) on and below the diagonal, 0 above (masked before exp: no inf·0).
  auto D = torch::exp(E.masked_fill(incl.logical_not(), -std::numeric_limits<double>::infinity()));
  auto Gamma = torch::exp(G).unsqueeze(-1);  // [B,H,N,C,1]

  torch::Tensor u, w;
  if (delta) {
    auto b = chunks(pad_t(p.beta)).unsqueeze(-1);  // [B,H,N,C,1]
    // (I + strict_lower(diag(β) K Kᵀ ⊙ D)) [u | w] = [β V | β Γ K]: a unit lower-triangular system per chunk, solved
    // by its explicit inverse (unit_lower_inverse.h): forward and backward are then batched GEMMs, not trsm.
    auto L = (torch::matmul(k * b, k.transpose(-1, -2)) * D).masked_fill(strict.logical_not(), 0.0);
    auto rhs = torch::cat({v * b, k * b * Gamma}, -1);
    auto X = torch::matmul(unit_lower_inverse(L), rhs);  // reads L's strict lower part; the unit diagonal is implied
    u = X.narrow(-1, 0, p.dv);
    w = X.narrow(-1, p.dv, p.dk);
  } else {
    u = v;
  }
  auto Aqk = torch::matmul(q, k.transpose(-1, -2)) * D;  // tril_incl(Q Kᵀ ⊙ D) (D is 0 above the diagonal)
  auto qG = q * Gamma;
  auto k_dec = k * D.select(-2, C - 1).unsqueeze(-1);  // K ⊙ exp(g_{j+1} + ... + g_last): D's last row
  auto decay_last = Gamma.narrow(-2, C - 1, 1);         // exp(g_0 + ... + g_last): [B,H,N,1,1]

  // The inter-chunk scan on [B·H, ...] slices, then the outputs of all chunks from the stacked states in two batched
  // GEMMs.
  const int64_t BH = p.B * p.H;
  if (N == 0) return torch::empty({p.B, p.H, 0, p.dv}, opts);
  auto flat = [&](const torch::Tensor& x) {  // [B,H,N,...] → [B·H,N,...]
    auto sz = x.sizes().vec();
    sz.erase(sz.begin());
    sz[0] = BH;
    return x.reshape(sz);
  };
  // the only sequential part, one autograd node: two GEMMs a chunk forward and backward (recurrence_scan.h)
  const auto scan = chunk_scan(flat(u), delta ? flat(w) : torch::Tensor(), flat(k_dec),
                               p.g.defined() ? flat(decay_last) : torch::Tensor(), p.S.reshape({BH, p.dk, p.dv}));
  p.S = scan.last.reshape({p.B, p.H, p.dk, p.dv});
  auto o = torch::matmul(flat(qG), scan.states) + torch::matmul(flat(Aqk), scan.v_new);
  return o.reshape({p.B, p.H, Tp, p.dv}).narrow(2, 0, p.T);
}

torch::Tensor finish(Prepared& p, torch::Tensor o, torch::Tensor* final_state) {
  if (final_state) *final_state = p.S;
  return o.transpose(1, 2).contiguous();  // [B,T,H,dv]
}

}  // namespace

torch::Tensor gated_delta_rule(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const torch::Tensor& beta, const torch::Tensor& g, double scale,
                               const torch::Tensor& initial_state, RecurrenceMode mode, torch::Tensor* final_state) {
  TORCH_CHECK(beta.defined(), "gated_delta_rule: beta is required");
  auto p = prepare("gated_delta_rule", q, k, v, beta, g, initial_state);
  auto o = mode == RecurrenceMode::Recurrent ? run_recurrent(p, scale, true) : run_chunked(p, scale, true);
  return finish(p, o, final_state);
}

torch::Tensor gated_linear_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                     const torch::Tensor& g, double scale, const torch::Tensor& initial_state,
                                     RecurrenceMode mode, torch::Tensor* final_state) {
  auto p = prepare("gated_linear_attention", q, k, v, torch::Tensor(), g, initial_state);
  auto o = mode == RecurrenceMode::Recurrent ? run_recurrent(p, scale, false) : run_chunked(p, scale, false);
  return finish(p, o, final_state);
}

}  // namespace statecut

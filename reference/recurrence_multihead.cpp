#include "reference/recurrence_multihead.h"

#include <string>

#include "reference/delta_rule.h"
#include "reference/gated_delta_rule.h"
#include "reference/linear_attention.h"
#include "reference/mamba2_ssd.h"

namespace statecut::ref {
namespace {

std::string n2s(std::size_t n) { return std::to_string(n); }

}  // namespace

std::vector<HeadResult> run_multihead(Rule rule, const MultiHeadInput& in, double scale, bool chunked,
                                      const std::vector<Mat>* S0) {
  const std::size_t Hk = in.q.size(), Hv = in.v.size();
  if (in.k.size() != Hk)
    throw ShapeError("run_multihead: k has " + n2s(in.k.size()) + " heads but q has " + n2s(Hk));
  if (Hk == 0 || Hv % Hk != 0)
    throw ShapeError("run_multihead: " + n2s(Hv) + " value heads are not a multiple of " + n2s(Hk) + " key heads");
  if (rule != Rule::Linear && in.beta.size() != Hv)
    throw ShapeError("run_multihead: beta has " + n2s(in.beta.size()) + " heads, expected " + n2s(Hv));
  if (rule == Rule::GatedDelta && in.g.size() != Hv)
    throw ShapeError("run_multihead: g has " + n2s(in.g.size()) + " heads, expected " + n2s(Hv));
  if (S0 && S0->size() != Hv)
    throw ShapeError("run_multihead: S0 has " + n2s(S0->size()) + " heads, expected " + n2s(Hv));
  const std::size_t rep = Hv / Hk;
  std::vector<HeadResult> out;
  out.reserve(Hv);
  for (std::size_t j = 0; j < Hv; ++j) {
    const Mat& q = in.q[j / rep];
    const Mat& k = in.k[j / rep];
    const Mat* s0 = S0 ? &(*S0)[j] : nullptr;
    switch (rule) {
      case Rule::Linear:
        out.push_back(chunked ? linear_attention_chunked(q, k, in.v[j], scale, s0)
                              : linear_attention_recurrent(q, k, in.v[j], scale, s0));
        break;
      case Rule::Delta:
        out.push_back(chunked ? delta_rule_chunked(q, k, in.v[j], in.beta[j], scale, s0)
                              : delta_rule_recurrent(q, k, in.v[j], in.beta[j], scale, s0));
        break;
      case Rule::GatedDelta:
        out.push_back(chunked ? gated_delta_chunked(q, k, in.v[j], in.beta[j], in.g[j], scale, s0)
                              : gated_delta_recurrent(q, k, in.v[j], in.beta[j], in.g[j], scale, s0));
        break;
    }
  }
  return out;
}

std::vector<HeadResult> mamba2_multihead(const std::vector<Mat>& C, const std::vector<Mat>& B,
                                         const std::vector<Mat>& x, const std::vector<Vec>& dt, const Vec& A,
                                         const Vec& D, bool chunked) {
  const std::size_t G = C.size(), H = x.size();
  if (B.size() != G) throw ShapeError("mamba2_multihead: B has " + n2s(B.size()) + " groups but C has " + n2s(G));
  if (G == 0 || H % G != 0)
    throw ShapeError("mamba2_multihead: " + n2s(H) + " heads are not a multiple of " + n2s(G) + " groups");
  if (dt.size() != H) throw ShapeError("mamba2_multihead: dt has " + n2s(dt.size()) + " heads, expected " + n2s(H));
  if (static_cast<std::size_t>(A.size()) != H)
    throw ShapeError("mamba2_multihead: A has " + n2s(static_cast<std::size_t>(A.size())) + " heads, expected " + n2s(H));
  if (static_cast<std::size_t>(D.size()) != H)
    throw ShapeError("mamba2_multihead: D has " + n2s(static_cast<std::size_t>(D.size())) + " heads, expected " + n2s(H));
  const std::size_t rep = H / G;
  std::vector<HeadResult> out;
  out.reserve(H);
  for (std::size_t h = 0; h < H; ++h) {
    const Index hi = static_cast<Index>(h);
    out.push_back(chunked ? mamba2_ssd_chunked(C[h / rep], B[h / rep], x[h], dt[h], A(hi), D(hi))
                          : mamba2_ssd_recurrent(C[h / rep], B[h / rep], x[h], dt[h], A(hi), D(hi)));
  }
  return out;
}

}  // namespace statecut::ref

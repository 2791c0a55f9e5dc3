// Channel selectors of the paper, one index set per head shared by q and k. Math: selectors.h.
#include "reference/selectors.h"

#include "reference/enum_names.h"
#include "reference/pca.h"
#include "reference/rrqr.h"
#include "reference/selection_budget.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

namespace statecut::ref {
namespace {

std::string shape(const Mat& m) { return std::to_string(m.rows()) + "x" + std::to_string(m.cols()); }

void need(const Mat& m, Index rows, Index cols, const std::string& what, Index head) {
  if (m.rows() != rows || (cols >= 0 && m.cols() != cols))
    throw ShapeError("select: head " + std::to_string(head) + ": " + what + " is " + shape(m) + ", expected " +
                     std::to_string(rows) + "x" + (cols >= 0 ? std::to_string(cols) : std::string("*")));
  if (!m.allFinite()) throw ShapeError("select: head " + std::to_string(head) + ": " + what + " has NaN or Inf");
}

bool uses_q(ScoreSide s) { return s != ScoreSide::KOnly; }
bool uses_k(ScoreSide s) { return s != ScoreSide::QOnly; }

// dk of a head, from the field the method reads.
Index head_dk(const HeadInputs& h, SelectMethod m, ScoreSide side) {
  if (m == SelectMethod::Drrqr && h.m.size() > 0) return h.m.cols();
  if (m == SelectMethod::Pca && (h.pca_q.n > 0 || h.pca_k.n > 0))
    return (uses_k(side) ? h.pca_k : h.pca_q).outer.cols();
  if (m == SelectMethod::Drrqr || m == SelectMethod::Pca) return uses_k(side) ? h.k.cols() : h.q.cols();
  if (m == SelectMethod::Rand && h.wq.size() == 0 && h.wk.size() == 0) return h.m.cols();
  return uses_q(side) ? h.wq.rows() : h.wk.rows();
}

// Joint / one-sided sum of two per-channel score vectors.
Vec combine(const Vec& sq, const Vec& sk, ScoreSide side) {
  if (side == ScoreSide::QOnly) return sq;
  if (side == ScoreSide::KOnly) return sk;
  return sq + sk;
}

void check_weights(const Mat& wq, const Mat& wk, ScoreSide side, const char* who) {
  if (wq.rows() != wk.rows() || wq.cols() != wk.cols())
    throw ShapeError(std::string(who) + ": Wq is " + shape(wq) + " but Wk is " + shape(wk));
  (void)side;
}

// One table per enum: parsing and printing a name cannot disagree (enum_names.h).
using detail::Named;
constexpr Named<SelectMethod> kMethods[] = {{SelectMethod::Rand, "rand"},     {SelectMethod::L1, "l1"},
                                            {SelectMethod::SWanda, "swanda"}, {SelectMethod::Grad, "grad"},
                                            {SelectMethod::Drrqr, "drrqr"},   {SelectMethod::Pca, "pca"}};
constexpr Named<ScoreSide> kSides[] = {{ScoreSide::Joint, "qk"}, {ScoreSide::QOnly, "q"}, {ScoreSide::KOnly, "k"}};

}  // namespace

SelectMethod method_from_name(const std::string& name) {
  return detail::from_name(kMethods, name, "selection method");
}
const char* method_name(SelectMethod m) { return detail::name_of(kMethods, m); }
ScoreSide side_from_name(const std::string& name) { return detail::from_name(kSides, name, "score side"); }
const char* side_name(ScoreSide s) { return detail::name_of(kSides, s); }

Vec l1_scores(const Mat& wq, const Mat& wk, ScoreSide side) {
  check_weights(wq, wk, side, "l1");
  return combine(wq.cwiseAbs().rowwise().sum(), wk.cwiseAbs().rowwise().sum(), side);
}

Vec swanda_scores(const Mat& wq, const Mat& wk, const Vec& rms, ScoreSide side) {
  check_weights(wq, wk, side, "swanda");
  if (rms.size() != wq.cols())
    throw ShapeError("swanda: rms has " + std::to_string(rms.size()) + " entries, weights have " +
                     std::to_string(wq.cols()) + " input features");
  // (|Wq| + |Wk|) diag(rms), summed over inputs: one side at a time so Table 16's modes fall out.
  return combine(wq.cwiseAbs() * rms, wk.cwiseAbs() * rms, side);
}

Vec grad_scores(const Mat& wq, const Mat& wk, const Mat& grad_wq, const Mat& grad_wk, ScoreSide side) {
  check_weights(wq, wk, side, "grad");
  if (grad_wq.rows() != wq.rows() || grad_wq.cols() != wq.cols() || grad_wk.rows() != wk.rows() ||
      grad_wk.cols() != wk.cols())
    throw ShapeError("grad: gradients " + shape(grad_wq) + " / " + shape(grad_wk) + " do not match weights " +
                     shape(wq));
  return combine(wq.cwiseProduct(grad_wq).cwiseAbs().rowwise().sum(),
                 wk.cwiseProduct(grad_wk).cwiseAbs().rowwise().sum(), side);
}

std::vector<Index> top_k_sorted(const Vec& scores, Index k) {
  validate_keep(k, scores.size());
  if (scores.hasNaN()) throw ShapeError("top-k: scores contain NaN");
  std::vector<Index> idx(scores.size());
  std::iota(idx.begin(), idx.end(), Index{0});
  std::stable_sort(idx.begin(), idx.end(), [&](Index a, Index b) { return scores(a) > scores(b); });
  idx.resize(k);
  std::sort(idx.begin(), idx.end());
  return idx;
}

std::vector<Index> rand_subset(Index dk, Index k, SelectRng& rng) {
  validate_keep(k, dk);
  std::vector<Index> p(dk);
  std::iota(p.begin(), p.end(), Index{0});
  for (Index t = 0; t < k; ++t) std::swap(p[t], p[t + static_cast<Index>(rng.below(dk - t))]);
  p.resize(k);
  std::sort(p.begin(), p.end());
  return p;
}

Mat drrqr_matrix(const Mat& q, const Mat& k, ScoreSide side) {
  if (side == ScoreSide::QOnly) return q;
  if (side == ScoreSide::KOnly) return k;
  if (q.cols() != k.cols())
    throw ShapeError("drrqr: Q has " + std::to_string(q.cols()) + " channels but K has " + std::to_string(k.cols()));
  Mat m(q.rows() + k.rows(), q.cols());
  m << q, k;  // stacked along tokens (rrqr.py: cat([Xq, Xk], dim=0))
  return m;
}

Index resolve_budget(const SelectOptions& opt, Index dk) {
  if (opt.keep != 0) return validate_keep(opt.keep, dk);
  return budget_from_ratio(dk, opt.ratio);
}

namespace {

// One head with the layer's dk, budget k and input width `hidden` (what every head of a layer must share).
HeadSelection select_one(const HeadInputs& h, const Vec& rms, const SelectOptions& opt, Index head, Index dk, Index k,
                         Index hidden) {
  HeadSelection out;
  switch (opt.method) {
    case SelectMethod::Rand: {
      SelectRng rng = SelectRng::for_head(opt.seed, opt.layer, head);
      out.keep = rand_subset(dk, k, rng);
      break;
    }
    case SelectMethod::L1:
    case SelectMethod::SWanda:
    case SelectMethod::Grad: {
      need(h.wq, dk, hidden, "Wq", head);
      need(h.wk, dk, hidden, "Wk", head);
      Vec s;
      if (opt.method == SelectMethod::L1) {
        s = l1_scores(h.wq, h.wk, opt.side);
      } else if (opt.method == SelectMethod::SWanda) {
        s = swanda_scores(h.wq, h.wk, rms, opt.side);
      } else {
        need(h.grad_wq, dk, hidden, "dL/dWq", head);
        need(h.grad_wk, dk, hidden, "dL/dWk", head);
        s = grad_scores(h.wq, h.wk, h.grad_wq, h.grad_wk, opt.side);
      }
      out.keep = top_k_sorted(s, k);
      break;
    }
    case SelectMethod::Drrqr: {
      Mat own;
      if (h.m.size() > 0) {
        need(h.m, h.m.rows(), dk, "M", head);
      } else {
        if (uses_q(opt.side)) need(h.q, h.q.rows(), dk, "Q", head);
        if (uses_k(opt.side)) need(h.k, h.k.rows(), dk, "K", head);
        own = drrqr_matrix(h.q, h.k, opt.side);
      }
      const Mat& M = h.m.size() > 0 ? h.m : own;
      RrqrOptions ro;
      ro.f = opt.f;
      ro.mode = opt.faithful ? DrrqrMode::Faithful : DrrqrMode::Strong;
      ro.seed = opt.seed;
      ro.layer = opt.layer;
      ro.head = head;
      const RrqrResult r = strong_rrqr(M, k, ro);
      out.pivots.assign(r.perm.begin(), r.perm.begin() + k);
      out.keep = out.pivots;
      std::sort(out.keep.begin(), out.keep.end());
      out.rows = M.rows();
      out.swaps = r.swaps;
      out.k_certified = r.k_certified;
      out.max_rho = r.max_rho;
      out.certified = r.certified;
      break;
    }
    case SelectMethod::Pca: {
      PcaStats sq, sk;
      if (h.pca_q.n > 0 || h.pca_k.n > 0) {
        sq = h.pca_q;
        sk = h.pca_k;
      } else {
        if (uses_q(opt.side)) {
          need(h.q, h.q.rows(), dk, "Q", head);
          sq.add(l2norm_rows_fla(h.q));
        }
        if (uses_k(opt.side)) {
          need(h.k, h.k.rows(), dk, "K", head);
          sk.add(l2norm_rows_fla(h.k));
        }
      }
      if (opt.side == ScoreSide::Joint && sq.n != sk.n)
        throw ShapeError("pca: head " + std::to_string(head) + ": Q and K have different token counts");
      const PcaStats& s =
          opt.side == ScoreSide::QOnly ? sq : opt.side == ScoreSide::KOnly ? sk : average_stats(sq, sk);
      out.rotation = pca_rotation(s.covariance(), k, opt.pca_adversarial);
      break;
    }
  }
  return out;
}

}  // namespace

HeadSelection select_head(const HeadInputs& h, const Vec& rms, const SelectOptions& opt, Index head) {
  const Index dk = head_dk(h, opt.method, opt.side);
  return select_one(h, rms, opt, head, dk, resolve_budget(opt, dk), h.wq.cols());
}

std::vector<HeadSelection> select_layer(const LayerInputs& in, const SelectOptions& opt) {
  if (in.heads.empty()) throw ShapeError("select: the layer has no heads");
  const Index dk = head_dk(in.heads.front(), opt.method, opt.side);
  const Index k = resolve_budget(opt, dk);
  const Index hidden = in.heads.front().wq.cols();
  std::vector<HeadSelection> out;
  out.reserve(in.heads.size());
  for (std::size_t hi = 0; hi < in.heads.size(); ++hi)
    out.push_back(select_one(in.heads[hi], in.rms, opt, static_cast<Index>(hi), dk, k, hidden));
  return out;
}

std::vector<std::vector<Index>> select_channels(const LayerInputs& in, const SelectOptions& opt) {
  if (opt.method == SelectMethod::Pca)
    throw ShapeError("select: pca rotates the key space and returns no channel subset; use pca_rotations");
  std::vector<std::vector<Index>> out;
  for (HeadSelection& s : select_layer(in, opt)) out.push_back(std::move(s.keep));
  return out;
}

std::vector<Mat> pca_rotations(const LayerInputs& in, const SelectOptions& opt) {
  SelectOptions o = opt;
  o.method = SelectMethod::Pca;
  std::vector<Mat> out;
  for (HeadSelection& s : select_layer(in, o)) out.push_back(std::move(s.rotation));
  return out;
}

}  // namespace statecut::ref

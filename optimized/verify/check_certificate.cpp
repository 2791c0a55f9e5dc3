// pruned.certificate: a drrqr record claims that its keep sets are strong-RRQR selections (Gu & Eisenstat 1996,
// reference/rrqr.h): for M = [Q; K] of the calibration features, every swap of a kept channel i with a discarded
// one j changes |det A| by rho_ij <= f. The claim is re-derived here: the calibration windows are rebuilt from the
// record (same files, tokenizer, window starts and length), the unpruned source model recomputes the features
// (conv + SiLU outputs before the L2 norm) as their R factor, and rho is evaluated for the RECORDED keep set:
// R0 [:, keep ∪ rest] = Q R, then rrqr_certificate(R, k'). The value of rho does not depend on the order of the kept
// or of the discarded columns (it is a ratio of determinants).
//
// A pca record claims that each head's rotation T holds the top-k' eigenvectors of the covariance C of the L2-normed
// calibration features (reference/pca.h), in descending order, each row's largest entry positive. With the same
// windows recomputed, and T̂ the rotation the weights row recovered (‖T̂_i − T_i‖ ≤ δ_i), two things are checked:
//   the variance T̂ captures, 1 − tr(T̂ C T̂ᵀ) / Σ_{i<k'} λ_i ≤ 2 Σ λ_i δ_i / Σ λ_i + 1e-5 (C T_iᵀ = λ_i T_iᵀ, so
//   a perturbation D of T moves the trace by 2 Σ λ_i D_i·T_i + tr(D C Dᵀ) ≥ −2 Σ λ_i δ_i; 1e-5 for fp32 features):
//   a random rotation, or a channel subset labelled pca, captures visibly less;
//   each row pca determines is pca's own vector: features recomputed in fp32 elsewhere move C by ν ≤ 1e-5·λ_0, so
//   pca's row i by e_i ≤ √2 ν / gap_i (Davis–Kahan); where e_i + δ_i ≤ 0.3, cos(T̂_i, T_i) > 0.9 (a mixed or
//   reordered row gives ~0), and where pca's sign is fixed too — its largest |entry| leads the next by more than
//   2 e_i — with pca's sign (a flipped one gives −1). The sign matters: the conv and SiLU between the projection and
//   q·k are not odd. (A 1.3B DeltaNet pruned with CUDA calibration had rows whose two largest entries were nearly
//   equal: without the lead condition their sign was called flipped.)
#include <algorithm>
#include <functional>
#include <Eigen/QR>
#include <filesystem>

#include "optimized/io/checkpoint.h"
#include "optimized/models/layers_common.h"
#include "optimized/models/streamed_model.h"
#include "optimized/prune/calibration.h"
#include "optimized/prune/prune.h"
#include "optimized/text/token_stream.h"
#include "optimized/text/tokenizer.h"
#include "reference/pca.h"
#include "reference/rrqr.h"
#include "optimized/verify/verify_checks.h"

namespace statecut::verify {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

/// The pca half of pruned.certificate (the header comment states the claim and its bounds).
CheckResult pca_certificate(const Calibration& c, const std::vector<PrunableLayer>& layers, const json& rec,
                            const RecoveredRotations& rotations) {
  CheckResult r;
  r.name = "pruned.certificate";
  r.relation = "<=";
  r.threshold = 1;
  r.reason = "pca keeps the top-k' eigenvectors of the calibration features' covariance: the variance the recovered "
             "rotation captures falls short of theirs by at most 2 Σλδ/Σλ + 1e-5 (δ: its error from rounding), and "
             "every row pca fixes (eigengap against 1e-5 of C's noise) is pca's vector, with pca's sign where fixed "
             "(cos > 0.9)";
  const std::string side = rec.value("select", std::string("qk"));
  Worst w;
  int heads = 0, not_recovered = 0;
  std::vector<std::string> problems;
  for (size_t li = 0; li < layers.size() && li < c.layers.size(); ++li) {
    const int layer = layers[li].layer;
    for (size_t h = 0; h < c.layers[li].pca_sum_k.size(); ++h) {
      const auto it = rotations.find({layer, static_cast<int>(h)});
      if (it == rotations.end()) {
        ++not_recovered;
        continue;
      }
      const ref::HeadInputs in = selection_inputs(c.layers[li], ref::SelectMethod::Pca, static_cast<int64_t>(h));
      const ref::PcaStats s = side == "q" ? in.pca_q : side == "k" ? in.pca_k : ref::average_stats(in.pca_q, in.pca_k);
      const Mat C = s.covariance();
      const torch::Tensor Tt = it->second.T.contiguous();
      const Index kp = Tt.size(0), dk = Tt.size(1);
      if (C.rows() != dk) continue;  // the weights row names a geometry mismatch
      const Mat That = Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
          Tt.data_ptr<double>(), kp, dk);
      const torch::Tensor dt = it->second.delta.contiguous();
      const Eigen::Map<const Vec> delta(dt.data_ptr<double>(), kp);
      const ref::PcaDecomposition pca = ref::pca_decomposition(C, kp);
      const Mat& T = pca.T;
      const Vec& lam = pca.eigenvalues;  // descending
      const double top = lam.head(kp).sum();
      const double deficit = 1.0 - (That * C * That.transpose()).trace() / top;
      const double bound = 2.0 * lam.head(kp).cwiseMax(0.0).dot(delta) / top + 1e-5;
      const std::string at = at_head(layer, static_cast<int>(h));
      w.add(deficit / bound, at);
      ++heads;
      // Features recomputed elsewhere (CPU here, perhaps CUDA in prune; other batching) move C by ~1e-6 of λ_0: ν is
      // ten times that. Row i of pca's T then moves by at most e_i = √2 ν / gap_i (Davis–Kahan).
      const double nu = 1e-5 * lam(0);
      for (Index i = 0; i < kp; ++i) {
        double gap = INFINITY;
        if (i > 0) gap = std::min(gap, lam(i - 1) - lam(i));
        if (i + 1 < dk) gap = std::min(gap, lam(i) - lam(i + 1));
        const double e = std::sqrt(2.0) * nu / gap;
        if (!(e + delta(i) <= 0.3)) continue;  // near-degenerate eigenvalues: pca does not fix this row
        const double cos = That.row(i).dot(T.row(i)) / That.row(i).norm();
        // pca's sign (the largest |entry| positive) is fixed only where that entry leads the next by more than 2e.
        Vec mags = T.row(i).cwiseAbs().transpose();
        std::sort(mags.data(), mags.data() + mags.size(), std::greater<double>());
        const bool sign_fixed = dk < 2 || mags(0) - mags(1) > 2 * e;
        if (sign_fixed ? cos > 0.9 : std::abs(cos) > 0.9) continue;
        problems.push_back(at + ": row " + std::to_string(i) + " of the rotation is " +
                           (cos < -0.9 ? std::string("pca's eigenvector with the sign flipped")
                                       : "not pca's eigenvector " + std::to_string(i) + " (cos " + fmt(cos) + ")") +
                           " (relative eigengap " + fmt(gap / lam(0)) + ")");
      }
    }
  }
  r.figure = heads == 0 ? NAN : w.figure();
  r.where = problems.empty() ? w.where : problems.front().substr(0, problems.front().find(':'));
  r.status = heads == 0 ? Status::Skip : !problems.empty() ? Status::Fail : le(r.figure, r.threshold);
  const std::string summary = "the recovered rotations of " + std::to_string(heads) +
                              " heads against pca of the recomputed calibration features (worst variance shortfall " +
                              fmt(r.figure) + " of its bound)" +
                              (not_recovered ? "; " + std::to_string(not_recovered) +
                                                   " heads without a recovered rotation (see pruned.weights)"
                                             : "");
  if (heads == 0)
    r.message = "no head's rotation was recovered from the weights (see pruned.weights): nothing to compare with pca";
  else if (!problems.empty())
    r.message = first_problem(problems) + "; " + summary;
  else if (r.status == Status::Fail)
    r.message = r.where + ": the rotation captures less of the calibration features' variance than pca's top-" +
                std::to_string(rec.value("new_head_k_dim", 0)) + " eigenvectors: not pca's rotation; " + summary;
  else
    r.message = summary;
  r.details["problems"] = problems;
  return r;
}

}  // namespace

void check_certificate(Context& ctx, const json& rec, const std::string& source, std::vector<CheckResult>& out,
                       const RecoveredRotations* rotations) {
  const std::string method = rec.value("method", std::string());
  if (method != "drrqr" && method != "pca") {
    out.push_back(skipped("pruned.certificate", "method '" + method + "' makes no claim about the calibration "
                                                "features (only drrqr's strong RRQR and pca's eigenvectors do)"));
    return;
  }
  if (rec.value("faithful", false) && method == "drrqr") {
    out.push_back(skipped("pruned.certificate",
                          "--faithful drrqr stops after 20 swaps on 5,000 sampled rows: no certificate is claimed"));
    return;
  }
  const json& cal = rec.value("calibration", json());
  if (!cal.is_object() || !cal.contains("files") || !cal.contains("starts") || !cal.contains("len")) {
    if (rec.contains("keep_from") && rec["keep_from"].is_string()) {  // prune --keep-from: a selection made elsewhere
      out.push_back(skipped("pruned.certificate", "applied with --keep-from " + rec["keep_from"].get<std::string>() +
                                                      ": the certificate is that selection's (verify the checkpoint "
                                                      "it came from)"));
      return;
    }
    // statecut prune always records the calibration of a drrqr or pca selection: without it the claim cannot be
    // re-derived, and a record that claims the method with nothing to show for it is not passed.
    CheckResult r;
    r.name = "pruned.certificate";
    r.status = Status::Fail;
    r.relation = "==";
    r.reason = "a " + method + " record carries its calibration (files, starts, len) so that its claim can be re-derived";
    r.message = (fs::path(ctx.dir) / "statecut.json").string() + ": method " + method +
                " without its calibration files/starts/len: its claim cannot be re-derived";
    out.push_back(std::move(r));
    return;
  }
  if (method == "pca" && (!rotations || rotations->empty())) {
    out.push_back(skipped("pruned.certificate",
                          "no head's rotation was recovered from the weights (see pruned.weights): nothing to compare with pca"));
    return;
  }
  for (const auto& f : cal["files"])
    if (!fs::is_regular_file(f.get<std::string>())) {
      out.push_back(skipped("pruned.certificate", "calibration file " + f.get<std::string>() +
                                                      " (from statecut.json) not found from the working directory"));
      return;
    }
  CheckResult r;
  r.name = "pruned.certificate";
  const double f = rec.value("f", 1.5);
  // Features recomputed in fp32 (possibly in other batch sizes) move rho by ~1e-6 relative.
  r.threshold = f * (1.0 + 1e-5);
  r.reason = "strong RRQR (Gu-Eisenstat Thm 3.2): max rho_ij <= f = " + fmt(f) +
             " from the record, + 1e-5 relative for features recomputed in fp32";
  ctx.say("pruned.certificate: recomputing calibration features with " + source);
  const json src_cfg = io::read_config(source);
  // The tokenizer prune calibrated with: the record names it ("bytes" for byte ids, forced with --tokenizer bytes or
  // the only choice of a byte-level model), not verify's own --tokenizer (which reads --text): the certificate holds
  // only on the features prune selected from, and auto would refuse a model that is not byte-level and ships no
  // tokenizer file.
  const bool bytes = cal.contains("tokenizer") && cal["tokenizer"] == "bytes";
  const Tokenizer tok = Tokenizer::for_checkpoint(source, bytes ? TokenizerChoice::Bytes : TokenizerChoice::Auto);
  const int64_t vocab = cfg_int(src_cfg, "vocab_size", tok.vocab_size(), (fs::path(source) / "config.json").string());
  std::vector<int64_t> stream;
  for (const auto& f_ : cal["files"]) {
    const TokenStream s = read_tokens(f_.get<std::string>(), tok, vocab);
    stream.insert(stream.end(), s.ids.begin(), s.ids.end());
  }
  const int64_t len = cal["len"].get<int64_t>();
  const auto starts = cal["starts"].get<std::vector<int64_t>>();
  std::vector<int64_t> ids;
  for (int64_t s : starts) {
    if (s < 0 || s + len > static_cast<int64_t>(stream.size()))
      throw std::runtime_error("statecut.json: calibration start " + std::to_string(s) + " + len " +
                               std::to_string(len) + " lies outside the " +
                               std::to_string(stream.size()) + " tokens of its files");
    ids.insert(ids.end(), stream.begin() + s, stream.begin() + s + len);
  }
  const torch::Tensor windows = torch::tensor(ids, torch::kInt64).view({static_cast<int64_t>(starts.size()), len});
  // As prune calibrated: whole, or one block at a time when the fp32 model would not fit (streamed_model.h).
  const torch::Device cpu(torch::kCPU);
  PassModel pass(source, torch::kFloat32, cpu, should_stream_weights("auto", source, cpu, /*needs_grad=*/false));
  CausalLM* model = &pass.model();
  // What prune's calibration collected for this record (the R factor of the --select side's features).
  CalibrationNeeds needs =
      calibration_needs(method == "pca" ? ref::SelectMethod::Pca : ref::SelectMethod::Drrqr, /*faithful=*/false);
  const std::string side = rec.value("select", std::string("qk"));
  try {
    needs.side = ref::side_from_name(side);
  } catch (const ref::ShapeError&) {
    throw std::runtime_error("statecut.json: unknown select '" + side + "' (one of qk, q, k)");
  }
  needs.seed = rec.value("seed", uint64_t{42});
  const Calibration c = calibrate(*model, windows, needs, {}, pass.hook());
  if (method == "pca") {
    CheckResult p = pca_certificate(c, model->prunable_layers(), rec, *rotations);
    p.message += ", " + std::to_string(starts.size()) + " x " + std::to_string(len) + " calibration tokens with " + source;
    out.push_back(std::move(p));
    return;
  }

  std::map<int, std::vector<std::vector<int64_t>>> keep;
  for (const auto& l : rec["selection"]["layers"]) keep[l.at("layer").get<int>()] = l.at("keep").get<std::vector<std::vector<int64_t>>>();
  const auto& layers = model->prunable_layers();
  Worst w;
  int heads = 0, rank_skipped = 0;
  json per_layer = json::array();
  for (size_t li = 0; li < layers.size() && li < c.layers.size(); ++li) {
    const int layer = layers[li].layer;
    json hl = json::array();
    for (size_t h = 0; h < c.layers[li].r.size(); ++h) {
      const Mat R0 = selection_inputs(c.layers[li], ref::SelectMethod::Drrqr, static_cast<int64_t>(h)).m;
      const Index n = R0.cols();
      const auto& kh = keep.at(layer).at(h);
      const Index k = static_cast<Index>(kh.size());
      if (k >= n) {
        hl.push_back(0.0);
        continue;
      }
      // Numerical rank of the features: the certificate needs a non-singular A (as strong_rrqr does).
      Eigen::ColPivHouseholderQR<Mat> cp(R0);
      cp.setThreshold(4.0 * n * std::numeric_limits<double>::epsilon());
      if (cp.rank() < k) {
        ++rank_skipped;
        hl.push_back(nullptr);
        continue;
      }
      std::vector<bool> kept(n, false);
      Mat X(n, n);
      Index col = 0;
      for (int64_t ch : kh) X.col(col++) = R0.col(ch), kept[ch] = true;
      for (Index j = 0; j < n; ++j)
        if (!kept[j]) X.col(col++) = R0.col(j);
      const Mat R = Eigen::HouseholderQR<Mat>(X).matrixQR().triangularView<Eigen::Upper>();
      const double rho = ref::rrqr_certificate(R, k).max_rho;
      w.add(rho, at_head(layer, static_cast<int>(h)));
      hl.push_back(rho);
      ++heads;
    }
    per_layer.push_back({{"layer", layer}, {"max_rho", hl}});
  }
  r.figure = heads == 0 ? NAN : w.figure();  // no head: "-", not Worst's -inf
  r.where = w.where;
  r.status = heads == 0 ? Status::Skip : le(r.figure, r.threshold);
  r.message = "max rho of the recorded keep sets over " + std::to_string(heads) + " heads, features of " +
              std::to_string(starts.size()) + " x " + std::to_string(len) + " calibration tokens recomputed with " +
              source + (rank_skipped ? "; " + std::to_string(rank_skipped) + " rank-deficient heads skipped" : "");
  if (r.status == Status::Fail)
    r.message = r.where + ": swapping a kept channel grows |det A| by " + fmt(r.figure) + " > f = " + fmt(f) +
                ": not a strong-RRQR selection; " + r.message;
  r.details["layers"] = per_layer;
  out.push_back(std::move(r));
}

}  // namespace statecut::verify

// pruned.certificate: a drrqr record claims that its keep sets are strong-RRQR selections (Gu & Eisenstat 1996,
// reference/rrqr.h): for M = [Q; K] of the calibration features, every swap of a kept channel i with a discarded
// one j changes |det A| by rho_ij <= f. The claim is re-derived here: the calibration windows are rebuilt from the
// record (same files, tokenizer, window starts and length), the unpruned source model recomputes the features
// (conv + SiLU outputs before the L2 norm) as their R factor, and rho is evaluated for the RECORDED keep set:
// R0 [:, keep ∪ rest] = Q R, then rrqr_certificate(R, k'). The value of rho does not depend on the order of the kept
// or of the discarded columns (it is a ratio of determinants).
#include <Eigen/QR>
#include <filesystem>

#include "optimized/io/checkpoint.h"
#include "optimized/models/layers_common.h"
#include "optimized/models/streamed_model.h"
#include "optimized/prune/calibration.h"
#include "optimized/prune/prune.h"
#include "optimized/text/token_stream.h"
#include "optimized/text/tokenizer.h"
#include "reference/rrqr.h"
#include "optimized/verify/verify_checks.h"

namespace statecut::verify {
namespace fs = std::filesystem;
using nlohmann::json;

void check_certificate(Context& ctx, const json& rec, const std::string& source, std::vector<CheckResult>& out) {
  const std::string method = rec.value("method", std::string());
  if (method != "drrqr") {
    out.push_back(skipped("pruned.certificate", "method '" + method + "' makes no strong-RRQR claim"));
    return;
  }
  if (rec.value("faithful", false)) {
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
    // statecut prune always records the calibration of a drrqr selection: without it the claim cannot be re-derived,
    // and a record that claims drrqr with nothing to show for it is not passed.
    CheckResult r;
    r.name = "pruned.certificate";
    r.status = Status::Fail;
    r.relation = "==";
    r.reason = "a drrqr record carries its calibration (files, starts, len) so that its strong-RRQR claim can be re-derived";
    r.message = (fs::path(ctx.dir) / "statecut.json").string() +
                ": method drrqr without its calibration files/starts/len: the strong-RRQR claim cannot be re-derived";
    out.push_back(std::move(r));
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
                               std::to_string(len) + " is past the " + std::to_string(stream.size()) +
                               " tokens of its files");
    ids.insert(ids.end(), stream.begin() + s, stream.begin() + s + len);
  }
  const torch::Tensor windows = torch::tensor(ids, torch::kInt64).view({static_cast<int64_t>(starts.size()), len});
  // As prune calibrated: whole, or one block at a time when the fp32 model would not fit (streamed_model.h).
  const torch::Device cpu(torch::kCPU);
  PassModel pass(source, torch::kFloat32, cpu, should_stream_weights("auto", source, cpu, /*needs_grad=*/false));
  CausalLM* model = &pass.model();
  // What prune's calibration collected for this record (the R factor of the --select side's features).
  CalibrationNeeds needs = calibration_needs(ref::SelectMethod::Drrqr, /*faithful=*/false);
  const std::string side = rec.value("select", std::string("qk"));
  try {
    needs.side = ref::side_from_name(side);
  } catch (const ref::ShapeError&) {
    throw std::runtime_error("statecut.json: unknown select '" + side + "' (one of qk, q, k)");
  }
  needs.seed = rec.value("seed", uint64_t{42});
  const Calibration c = calibrate(*model, windows, needs, {}, pass.hook());

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
  r.figure = w.figure();
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

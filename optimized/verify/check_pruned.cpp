// `pruned` (a statecut.json is present): the record is valid for this checkpoint (check_record.cpp), and with the
// unpruned source pruned.weights holds the checkpoint to it (check_pruned_weights.h) — against the record's keep sets,
// the ones the weights imply when there is no record, or as one rotation of the first source for a chain with a pca
// step — and pruned.certificate re-derives the method's claim (check_certificate.cpp).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "optimized/io/checkpoint.h"
#include "optimized/prune/prune_record.h"
#include "optimized/prune/surgery.h"
#include "optimized/verify/check_pruned_weights.h"

namespace statecut::verify {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

/// --source without a statecut.json (a checkpoint pruned elsewhere, or whose record was dropped on the way): the
/// keep sets are inferred from the q rows, then every k row, conv channel and other tensor is held to them as with a
/// record. When not one q row is a source row, the checkpoint is checked as a rotation (pca) instead. Nothing
/// inferred is trusted that the weights do not show.
void check_pruned_without_record(Context& ctx, std::vector<CheckResult>& out) {
  const std::string source = ctx.opt.source;
  const std::string why = "no statecut.json: the keep sets are inferred from the q rows against --source " + source;
  if (ctx.layers.empty()) {
    out.push_back(skipped("pruned", ctx.no_layers_reason()));
    return;
  }
  if (!ctx.weights) {
    out.push_back(skipped("pruned.weights", "the weights do not open: " + ctx.load_error));
    return;
  }
  const SourceModel sm = read_source(source);
  const WeightSource src = WeightSource::open_dir(source);
  ctx.say("pruned: weights against " + source + " (keep sets inferred: no statecut.json)");
  std::vector<std::string> unmatched;
  const auto keep = infer_keep(ctx, src, sm.layers, unmatched);
  out.push_back(skipped("pruned.record", why));
  int64_t q_rows = 0;
  for (const auto& [layer, heads] : keep)
    for (const auto& kh : heads) q_rows += static_cast<int64_t>(kh.size());
  if (q_rows > 0 && static_cast<int64_t>(unmatched.size()) == q_rows) {
    // Not one q row is a source row: no subset, but perhaps a rotation (pca), which the weights alone can show.
    std::map<int, std::vector<std::vector<int64_t>>> rot;
    for (const auto& [layer, heads] : keep) rot[layer] = {};
    CheckResult w = weights_row(ctx, sm, src, rot, true);
    w.message += " (no statecut.json and no q row equals a source row: checked as a rotation, pca's surgery, "
                 "against --source " + source + ")";
    out.push_back(std::move(w));
    out.push_back(skipped("pruned.certificate", "no statecut.json: no method or calibration to re-derive"));
    return;
  }
  if (!unmatched.empty()) {
    CheckResult r;
    r.name = "pruned.weights";
    r.relation = "==";
    r.threshold = 0;
    r.reason = "a pruned checkpoint keeps a subset of its source's q/k channels: every q row must be one of the source's";
    r.figure = static_cast<double>(unmatched.size());
    r.status = Status::Fail;
    r.where = "q rows";
    r.message = first_problem(unmatched) + " (" + why + ")";
    r.details["problems"] = unmatched;
    out.push_back(std::move(r));
    return;
  }
  CheckResult w = weights_row(ctx, sm, src, keep, false);
  w.message += " (" + why + ")";
  out.push_back(std::move(w));
  out.push_back(skipped("pruned.certificate", "no statecut.json: no method or calibration to re-derive"));
}

/// The pruning steps of a record's chain since its last step without a selection (statecut train starts a chain):
/// how many there are and how many rotated (pca), and the first rotating step's source.
struct ChainRotations {
  int steps = 0, rotations = 0;
  std::string rotated_step;
};

ChainRotations chain_rotations(const json& rec) {
  ChainRotations c;
  const auto visit = [&](const json& step, bool last) {
    if (pruning_step_kind(step) == PruningStep::None) {
      c = ChainRotations();  // no pruning: the chain starts after it
      return;
    }
    ++c.steps;
    if (pruning_step_kind(step) != PruningStep::Rotation) return;
    if (++c.rotations == 1) {
      const std::string from = step.contains("source") && step["source"].is_object()
                                   ? step["source"].value("checkpoint", std::string("?"))
                                   : std::string("?");
      c.rotated_step = last ? "this step" : "the step from " + from;
    }
  };
  if (rec.contains("history") && rec["history"].is_array())
    for (const auto& h : rec["history"]) visit(h, false);
  visit(rec, true);
  return c;
}

}  // namespace

/// The keys of which a pruning record (prune.cpp, prune_record.cpp) has at least one.
constexpr const char* kPruningKeys[] = {"selection", "method", "new_head_k_dim", "head_k_dim", "original", "history",
                                        "keep_from"};

void check_pruned(Context& ctx, std::vector<CheckResult>& out) {
  const fs::path rec_path = fs::path(ctx.dir) / "statecut.json";
  if (!fs::exists(rec_path)) {
    if (ctx.opt.source.empty()) {
      out.push_back(skipped("pruned", "no statecut.json: not a checkpoint written by statecut prune"));
      return;
    }
    check_pruned_without_record(ctx, out);
    return;
  }
  json rec;
  try {
    rec = io::read_json_file(rec_path.string());
  } catch (const std::exception& e) {
    CheckResult r;
    r.name = "pruned.record";
    r.status = Status::Fail;
    r.message = e.what();
    out.push_back(r);
    return;
  }
  if (ctx.layers.empty()) {
    out.push_back(skipped("pruned", ctx.no_layers_reason()));
    return;
  }
  // statecut train and a fine-tune of an unpruned model write a statecut.json too, with no pruning in it: there is
  // no keep set to check (they failed here as records without a selection).
  if (rec.is_object() && std::none_of(std::begin(kPruningKeys), std::end(kPruningKeys),
                                      [&](const char* k) { return rec.contains(k); })) {
    std::string what;
    for (const char* k : {"train", "finetune"})
      if (rec.contains(k)) what += std::string(what.empty() ? "" : " and ") + "statecut " + k;
    out.push_back(skipped("pruned", rec_path.string() + " records " + (what.empty() ? "no run statecut knows" : what) +
                                        ", no pruning: no keep sets to check" +
                                        (ctx.opt.source.empty() ? "" : " (--source is not compared)")));
    return;
  }
  std::map<int, std::vector<std::vector<int64_t>>> keep;
  bool rotation = false;
  CheckResult rr = record_row(ctx, rec, keep, &rotation);
  const bool record_ok = rr.status == Status::Pass;
  out.push_back(std::move(rr));

  // The source: --source, else the record's own source path when it still exists.
  std::string source = ctx.opt.source;
  std::string source_note;
  if (source.empty() && rec.contains("source") && rec["source"].contains("checkpoint")) {
    const std::string p = rec["source"]["checkpoint"].get<std::string>();
    if (fs::exists(fs::path(p) / "config.json")) source = p, source_note = " (from statecut.json)";
  }
  if (source.empty()) {
    out.push_back(skipped("pruned.weights", "give --source DIR (the unpruned checkpoint) to compare the weights bit for bit"));
    out.push_back(skipped("pruned.certificate", "needs --source DIR"));
    return;
  }
  if (!record_ok) {
    out.push_back(skipped("pruned.weights", "the record is invalid"));
    out.push_back(skipped("pruned.certificate", "the record is invalid"));
    return;
  }
  const SourceModel sm = read_source(source);
  // Pruned in several steps and checked against the first source: the keep sets composed back to it ("original").
  bool composed = false;
  const int64_t src_dk = sm.layers.empty() ? -1 : sm.layers.front().head_k_dim;  // else the weights row names it
  const std::string step_source = rec.contains("source") && rec["source"].is_object()
                                      ? rec["source"].value("checkpoint", std::string("?"))
                                      : std::string("?");
  // The record names this very folder as the step's source: its dk must be the record's head_k_dim (an edited
  // head_k_dim would otherwise send the check down the paths for an earlier source, and skip it).
  std::error_code same_ec;
  const int64_t rec_dk = rec.contains("head_k_dim") && rec["head_k_dim"].is_number_integer()
                             ? rec["head_k_dim"].get<int64_t>()
                             : int64_t{-1};
  if (src_dk > 0 && rec_dk != src_dk && step_source != "?" && fs::equivalent(step_source, source, same_ec)) {
    CheckResult w;
    w.name = "pruned.weights";
    w.relation = "==";
    w.threshold = 0;
    w.status = Status::Fail;
    w.figure = 1;
    w.where = "source";
    w.reason = "the record's head_k_dim is its source's dk";
    w.message = rec_path.string() + ": head_k_dim " + std::to_string(rec_dk) + ", but its source " + source +
                " (the record's own source.checkpoint) has dk " + std::to_string(src_dk);
    out.push_back(std::move(w));
    out.push_back(skipped("pruned.certificate", "the record contradicts its source"));
    return;
  }
  if (rec.contains("original") && rec["original"].is_object() && rec["original"].contains("layers")) {
    try {
      if (src_dk != rec.value("head_k_dim", int64_t{-1}) && src_dk == rec["original"].value("head_k_dim", int64_t{-1})) {
        std::map<int, std::vector<std::vector<int64_t>>> original;
        for (const auto& l : rec["original"]["layers"])
          original[l.at("layer").get<int>()] = l.at("keep").get<std::vector<std::vector<int64_t>>>();
        keep = std::move(original);
        composed = true;
        source_note += " (keep sets composed over " + std::to_string(rec["original"].value("steps", 2)) +
                       " pruning steps back to this source)";
      }
    } catch (const std::exception&) {  // not the first source after all: the step's own selection applies
    }
  }
  std::string convs_unchecked;  // a chain of two or more rotations: why its conv filters are not compared
  if (!composed && rec.contains("original") && rec["original"].is_null() && src_dk > 0 &&
      src_dk != rec.value("head_k_dim", int64_t{-1})) {
    // A step of a chain with a rotation (pca, "original": null) checked against an earlier source: its keep sets
    // index a dk-head_k_dim model, not this source. Subsets and one rotation compose to one rotation Q = S₂·T·S₁ with
    // orthonormal rows, whose conv filters are (Q∘Q)·C (a subset's S∘S is S), so the chain is checked as a rotation
    // of this source. Two rotations do not compose so: (T₂∘T₂)(T₁∘T₁) is not (T₂T₁)∘(T₂T₁).
    const ChainRotations chain = chain_rotations(rec);
    if (chain.rotations == 0) {  // "original": null without a rotating step: an edited record, nothing to compose
      const std::string why = "statecut.json has \"original\": null (a rotation in its chain) but none of its steps "
                              "rotated, and " + source + " has dk " + std::to_string(src_dk) + ", not the step's " +
                              std::to_string(rec.value("head_k_dim", int64_t{-1})) + ": give --source " + step_source;
      out.push_back(skipped("pruned.weights", why));
      out.push_back(skipped("pruned.certificate", why));
      return;
    }
    keep.clear();
    for (const auto& L : sm.layers) keep[L.layer] = {};
    rotation = composed = true;
    if (chain.rotations == 1) {
      source_note += " (" + std::to_string(chain.steps) + " pruning steps, one a rotation (" + chain.rotated_step +
                     "): their q/k rows checked as one rotation of this source)";
    } else {  // the q/k rows still are Q·W with Q = T₂T₁… orthonormal; only the convs are out of reach
      convs_unchecked = std::to_string(chain.rotations) + " steps of the chain rotated channels (pca): their q/k rows " +
                        "are checked as one rotation of " + source + ", their conv filters follow no one rotation of " +
                        "it (give --source " + step_source + " to check this step's)";
    }
  }
  // Fine-tunes after the surgery — this checkpoint's, and when composed back to the first source every earlier step's:
  // the tensors they changed (statecut.json "changed_tensors") are held to shape only, every other one bit for bit.
  std::set<std::string> tuned;
  RecoveredRotations recovered;  // a rotation's T̂ per head, from the weights row to the certificate
  bool tuned_known = true, any_tune = false;
  const auto take = [&](const json& ft) {
    any_tune = true;
    if (ft.is_object() && ft.contains("changed_tensors") && ft["changed_tensors"].is_array()) {
      for (const auto& n : ft["changed_tensors"])
        if (n.is_string()) tuned.insert(n.get<std::string>());
    } else {
      tuned_known = false;  // a record written before the names were kept
    }
  };
  const auto take_all = [&](const json& r) {
    if (r.contains("finetune")) take(r["finetune"]);
    if (r.contains("finetune_previous") && r["finetune_previous"].is_array())
      for (const auto& f : r["finetune_previous"]) take(f);
  };
  take_all(rec);
  if (composed && rec.contains("history") && rec["history"].is_array())
    for (const auto& h : rec["history"])
      if (h.is_object()) take_all(h);
  if (any_tune && !tuned_known) {
    // statecut finetune names every tensor it changed; an entry without the names cannot say which tensors may differ
    // from the source, and skipping the comparison let one line of JSON switch the whole row off (audit 25 F4).
    CheckResult w;
    w.name = "pruned.weights";
    w.status = Status::Fail;
    w.figure = NAN;
    w.where = "statecut.json";
    w.message = rec_path.string() + ": a \"finetune\" entry" + (composed ? " of an earlier step" : "") +
                " without \"changed_tensors\", which statecut finetune writes: which tensors may differ from the "
                "source is unknown, so none can be compared";
    out.push_back(std::move(w));
  } else if (!ctx.weights) {
    out.push_back(skipped("pruned.weights", "the weights do not open: " + ctx.load_error));
  } else {
    ctx.say("pruned: weights against " + source + source_note);
    CheckResult w =
        weights_row(ctx, sm, WeightSource::open_dir(source), keep, rotation, tuned, &recovered, convs_unchecked);
    w.message += source_note;
    out.push_back(std::move(w));
  }
  if (composed) {
    out.push_back(skipped("pruned.certificate",
                          "the certificate belongs to the last step: give --source its own source (" + step_source + ")"));
    return;
  }
  check_certificate(ctx, rec, source, out, rotation ? &recovered : nullptr);
}

}  // namespace statecut::verify

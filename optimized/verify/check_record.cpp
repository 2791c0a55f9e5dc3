// pruned.record: statecut.json describes this checkpoint. Its keep sets fit the config's geometry (one set per layer
// and key head, k' distinct channels in [0, dk)); its method is one `statecut prune` writes; the model type it says it
// pruned is this checkpoint's; and in a record of several pruning steps, "original" (the keep sets composed back to
// the first source, which `verify --source FIRST` compares the weights against) is what the steps in "history" and
// this step's selection compose to — recomputed here independently of prune_record.cpp, so an edited "original" or
// "history" fails here even when the weights are only compared with the last step's source.
//
// Composition (DESIGN.md §4): a step keeping channels s_1..s_k' of a model whose channel j is channel o_j of the
// first source keeps o_{s_1}..o_{s_k'} of it. A step without a selection (statecut train) starts a new chain; a
// rotation (pca) ends the composition ("original": null from then on).
#include <algorithm>
#include <array>
#include <filesystem>
#include <optional>
#include <set>

#include "optimized/prune/prune_record.h"
#include "optimized/prune/surgery.h"
#include "optimized/verify/verify_checks.h"

namespace statecut::verify {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using RecordKeepSets = std::map<int, std::vector<std::vector<int64_t>>>;

/// A "keep" value is one list of integer channels per key head (anything else — a string, 1e300, null — is named by
/// the caller in the record's terms, not as a JSON library's type error).
bool keep_lists_well_formed(const json& kj) {
  bool ok = kj.is_array();
  for (size_t h = 0; ok && h < kj.size(); ++h) {
    ok = kj[h].is_array();
    for (size_t i = 0; ok && i < kj[h].size(); ++i) ok = kj[h][i].is_number_integer();
  }
  return ok;
}

/// A selection entry's layer (json_layer_index of its "layer"), nullopt when it has none.
std::optional<int> entry_layer(const json& l) {
  return l.is_object() && l.contains("layer") ? json_layer_index(l["layer"]) : std::nullopt;
}

/// The problem with a selection entry whose "layer" is no layer index.
std::string no_layer_index(const json& l) {
  const std::string got = l.is_object() && l.contains("layer") ? l["layer"].dump() : std::string("absent");
  return std::string("a selection entry without a layer index (") + kLayerIndexRule + "): \"layer\" " +
         got.substr(0, 40);
}

/// The step's kind (pruning_step_kind), and its keep sets when it kept channels; nullopt (with a problem) when its selection is malformed.
std::optional<PruningStep> record_step_of(const json& step, const std::string& where, RecordKeepSets& keep,
                                          std::vector<std::string>& problems) {
  const PruningStep kind = pruning_step_kind(step);
  if (kind == PruningStep::None) return kind;
  const json& sel = step["selection"];
  if (!sel.is_object() || !sel.contains("layers") || !sel["layers"].is_array() || sel["layers"].empty()) {
    problems.push_back(where + ": a selection without layers");
    return std::nullopt;
  }
  for (const auto& l : sel["layers"]) {
    const auto layer = entry_layer(l);
    if (!layer) {
      problems.push_back(where + ": " + no_layer_index(l));
      return std::nullopt;
    }
    if (!l.contains("keep")) continue;  // a rotated layer
    const json& kj = l["keep"];
    if (!keep_lists_well_formed(kj)) {
      problems.push_back(where + ": layer " + std::to_string(*layer) +
                         ": \"keep\" must hold one list of integer channels per key head");
      return std::nullopt;
    }
    keep[*layer] = kj.get<std::vector<std::vector<int64_t>>>();
  }
  return kind;
}

/// The chain of keep-set steps back to its first source, as prune_record.cpp's "original" should state it.
struct RecordChain {
  enum { None, Kept, Rotated } state = None;
  RecordKeepSets original;  ///< channels of the first source
  int64_t steps = 0;
  json checkpoint, head_k_dim;
};

/// Advances the chain by one step; false (with a problem) when the step cannot apply to what the chain kept.
bool advance_chain(RecordChain& c, const json& step, const std::string& where, std::vector<std::string>& problems) {
  RecordKeepSets keep;
  const auto kind = record_step_of(step, where, keep, problems);
  if (!kind) return false;
  if (*kind == PruningStep::None) {
    c = RecordChain{};
    return true;
  }
  if (*kind == PruningStep::Rotation || c.state == RecordChain::Rotated) {
    c.state = RecordChain::Rotated;
    c.original.clear();
    ++c.steps;
    return true;
  }
  if (c.state == RecordChain::None) {
    c.state = RecordChain::Kept;
    c.original = std::move(keep);
    c.steps = 1;
    c.checkpoint = step.contains("source") && step["source"].is_object() ? step["source"].value("checkpoint", json())
                                                                         : json();
    c.head_k_dim = step.value("head_k_dim", json());
    return true;
  }
  RecordKeepSets composed;
  for (const auto& [layer, heads] : keep) {
    const auto it = c.original.find(layer);
    if (it == c.original.end() || it->second.size() != heads.size()) {
      problems.push_back(where + ": layer " + std::to_string(layer) + " does not follow from the step before it " +
                         "(no keep sets there, or another number of heads)");
      return false;
    }
    auto& out = composed[layer];
    for (size_t h = 0; h < heads.size(); ++h) {
      out.emplace_back();
      for (int64_t ch : heads[h]) {
        if (ch < 0 || ch >= static_cast<int64_t>(it->second[h].size())) {
          problems.push_back(where + ": " + at_head(layer, static_cast<int>(h)) + " keeps channel " +
                             std::to_string(ch) + " of the " + std::to_string(it->second[h].size()) +
                             " the step before it kept");
          return false;
        }
        out.back().push_back(it->second[h][static_cast<size_t>(ch)]);
      }
    }
  }
  c.original = std::move(composed);
  ++c.steps;
  return true;
}

std::string channel_list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size() && i < 8; ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + (v.size() > 8 ? ", ...]" : "]");
}

/// "original" against the chain recomputed from "history" and this step.
void check_record_history(const json& rec, const std::string& path, std::vector<std::string>& problems) {
  const bool has_history = rec.contains("history");
  if (has_history && !rec["history"].is_array()) {
    problems.push_back(path + ": \"history\" is " + std::string(rec["history"].type_name()) + ", not a list of steps");
    return;
  }
  RecordChain before;
  if (has_history)
    for (size_t i = 0; i < rec["history"].size(); ++i)
      if (!advance_chain(before, rec["history"][i], path + ": history[" + std::to_string(i) + "]", problems)) return;
  RecordChain after = before;
  if (!advance_chain(after, rec, path, problems)) return;
  const bool has_original = rec.contains("original");
  if (before.state == RecordChain::None || after.state == RecordChain::None) {  // this step starts its chain: nothing to compose
    if (has_original)
      problems.push_back(path + ": \"original\" but no earlier pruning step in \"history\" to compose back to");
    return;
  }
  if (!has_original) {
    problems.push_back(path + ": no \"original\" though \"history\" holds an earlier pruning step");
    return;
  }
  const json& o = rec["original"];
  if (after.state == RecordChain::Rotated) {
    if (!o.is_null()) problems.push_back(path + ": \"original\" should be null: a step of the chain rotated channels");
    return;
  }
  if (!o.is_object()) {
    problems.push_back(path + ": \"original\" is " + std::string(o.type_name()) + ", but the steps in \"history\" " +
                       "compose to keep sets of " + std::to_string(after.original.size()) + " layers");
    return;
  }
  if (o.value("steps", json()) != json(after.steps))
    problems.push_back(path + ": \"original\" counts " + o.value("steps", json()).dump() + " steps, \"history\" and " +
                       "this step make " + std::to_string(after.steps));
  if (o.value("head_k_dim", json()) != after.head_k_dim)
    problems.push_back(path + ": \"original\" head_k_dim " + o.value("head_k_dim", json()).dump() +
                       ", the chain's first step pruned dk " + after.head_k_dim.dump());
  if (o.value("checkpoint", json()) != after.checkpoint)
    problems.push_back(path + ": \"original\" checkpoint " + o.value("checkpoint", json()).dump() +
                       ", the chain's first step pruned " + after.checkpoint.dump());
  RecordKeepSets stated;
  if (!record_step_of(json{{"selection", {{"layers", o.value("layers", json())}}}}, path + ": \"original\"", stated, problems))
    return;
  for (const auto& [layer, heads] : after.original) {
    const auto it = stated.find(layer);
    if (it == stated.end()) {
      problems.push_back(path + ": \"original\" has no keep sets for layer " + std::to_string(layer));
      continue;
    }
    for (size_t h = 0; h < heads.size(); ++h)
      if (h >= it->second.size() || it->second[h] != heads[h]) {
        problems.push_back(path + ": \"original\" " + at_head(layer, static_cast<int>(h)) + " keeps " +
                           (h < it->second.size() ? channel_list(it->second[h]) : std::string("nothing")) +
                           ", the steps in \"history\" compose to " + channel_list(heads[h]));
        break;
      }
  }
  for (const auto& [layer, heads] : stated)
    if (!after.original.count(layer))
      problems.push_back(path + ": \"original\" lists layer " + std::to_string(layer) + ", which no step pruned");
}

/// The methods `statecut prune` records (selectors.h); a --keep-from prune records the keep file's own method.
void check_record_method(const Context& ctx, const json& rec, const std::string& path,
                         std::vector<std::string>& problems) {
  static constexpr std::array<const char*, 6> kMethods = {"rand", "l1", "swanda", "grad", "drrqr", "pca"};
  if (!rec.contains("method") || !rec["method"].is_string()) {
    problems.push_back(path + ": \"method\" is " + (rec.contains("method") ? rec["method"].dump() : "absent") +
                       ", not the name of a selection method");
  } else if (!rec.contains("keep_from")) {
    const std::string m = rec["method"].get<std::string>();
    if (std::none_of(kMethods.begin(), kMethods.end(), [&](const char* k) { return m == k; }))
      problems.push_back(path + ": method '" + m + "' is none of statecut prune's (rand, l1, swanda, grad, drrqr, pca)");
  }
  const json src = rec.value("source", json());
  if (src.is_object() && src.contains("model_type") && ctx.config.contains("model_type") &&
      src["model_type"] != ctx.config["model_type"])
    problems.push_back(path + ": the record pruned a " + src["model_type"].dump() + " model, config.json's model_type is " +
                       ctx.config["model_type"].dump());
}

}  // namespace

CheckResult record_row(const Context& ctx, const json& rec, std::map<int, std::vector<std::vector<int64_t>>>& keep,
                       bool* rotation) {
  CheckResult r;
  r.name = "pruned.record";
  r.relation = "==";
  r.threshold = 0;
  r.reason = "statecut.json must describe these weights: one keep set per layer and head, k' distinct channels in "
             "[0, dk), k' = the config's key dim";
  std::vector<std::string> problems;
  std::set<int> rotated;  // layers the record says were rotated (pca), not subset
  const std::string path = (fs::path(ctx.dir) / "statecut.json").string();
  // A key dimension as the record states it; nullopt when missing (prune writes both keys) or no integer, the problem
  // named here. 2^63 and more (nlohmann's unsigned) read as -1, which the checks below refuse printing the record's
  // own text, never that -1.
  const auto int_field = [&](const char* key) -> std::optional<int64_t> {
    if (!rec.contains(key)) {
      problems.push_back(path + ": no \"" + key + "\"");
      return std::nullopt;
    }
    if (!rec[key].is_number_integer()) {
      problems.push_back(path + ": \"" + key + "\" is " + rec[key].dump() + ", not an integer");
      return std::nullopt;
    }
    if (rec[key].is_number_unsigned() && rec[key].get<uint64_t>() > uint64_t{INT64_MAX}) return int64_t{-1};
    return rec[key].get<int64_t>();
  };
  const std::optional<int64_t> old_field = int_field("head_k_dim"), new_field = int_field("new_head_k_dim");
  if (old_field && *old_field <= 0)
    problems.push_back(path + ": head_k_dim " + rec["head_k_dim"].dump() + " is no key dimension (a positive integer)");
  const int now_dk = ctx.layers.front().head_k_dim;
  if (new_field && *new_field != now_dk)
    problems.push_back(path + ": new_head_k_dim " + rec["new_head_k_dim"].dump() + " but config.json gives dk " +
                       std::to_string(now_dk));
  const int64_t old_dk = old_field.value_or(-1), new_dk = new_field.value_or(-1);
  if (rec.contains("finetune") && !rec["finetune"].is_object())
    problems.push_back(path + ": \"finetune\" is " + std::string(rec["finetune"].type_name()) +
                       ", not a fine-tune's record");
  if (!rec.contains("selection") || !rec["selection"].contains("layers") || !rec["selection"]["layers"].is_array()) {
    problems.push_back(path + ": no selection.layers");
  } else {
    for (const auto& l : rec["selection"]["layers"]) {
      const auto index = entry_layer(l);
      if (!index) {
        problems.push_back(path + ": " + no_layer_index(l));
        continue;
      }
      const int layer = *index;
      if (keep.count(layer)) {
        problems.push_back(path + ": layer " + std::to_string(layer) + " is listed twice");
        continue;
      }
      if (l.contains("rotation") && !l["rotation"].is_boolean()) {
        problems.push_back(path + ": layer " + std::to_string(layer) + ": \"rotation\" is " + l["rotation"].dump() +
                           ", not true or false");
        keep[layer];
        continue;
      }
      if (l.value("rotation", false)) {
        *rotation = true;
        rotated.insert(layer);
        keep[layer];
        continue;
      }
      if (!l.contains("keep")) {
        problems.push_back(path + ": layer " + std::to_string(layer) + " has no keep sets");
        continue;
      }
      const json& kj = l["keep"];
      if (!keep_lists_well_formed(kj)) {
        problems.push_back(path + ": layer " + std::to_string(layer) +
                           ": \"keep\" must hold one list of integer channels per key head");
        keep[layer];
        continue;
      }
      keep[layer] = kj.get<std::vector<std::vector<int64_t>>>();
    }
  }
  for (const auto& L : ctx.layers) {
    const auto it = keep.find(L.layer);
    if (it == keep.end()) {
      problems.push_back(path + ": no keep sets for layer " + std::to_string(L.layer));
      if (r.where.empty()) r.where = "layer " + std::to_string(L.layer);
      continue;
    }
    if (rotated.count(L.layer)) continue;  // no keep sets: the weights row checks the rotation
    if (static_cast<int>(it->second.size()) != L.num_key_heads)
      problems.push_back(path + ": layer " + std::to_string(L.layer) + " has " + std::to_string(it->second.size()) +
                         " keep sets for " + std::to_string(L.num_key_heads) + " key heads");
    for (size_t h = 0; h < it->second.size(); ++h) {
      const auto& kh = it->second[h];
      const std::string at = at_head(L.layer, static_cast<int>(h));
      std::set<int64_t> seen;
      for (int64_t c : kh) {
        if (c < 0 || (old_dk > 0 && c >= old_dk)) problems.push_back(path + ": " + at + ": channel " + std::to_string(c) + " outside [0, " + std::to_string(old_dk) + ")");
        if (!seen.insert(c).second) problems.push_back(path + ": " + at + ": channel " + std::to_string(c) + " kept twice");
      }
      if (static_cast<int>(kh.size()) != now_dk)
        problems.push_back(path + ": " + at + ": " + std::to_string(kh.size()) + " channels kept, config dk " + std::to_string(now_dk));
      if (!problems.empty() && r.where.empty()) r.where = at;
    }
  }
  for (const auto& [layer, k] : keep)
    if (std::none_of(ctx.layers.begin(), ctx.layers.end(), [&](const PrunableLayer& L) { return L.layer == layer; }))
      problems.push_back(path + ": layer " + std::to_string(layer) + " is not a linear-attention layer of this model");
  // statecut prune rotates every layer (pca) or none, and only pca rotates.
  if (!rotated.empty()) {
    if (rotated.size() != keep.size())
      problems.push_back(path + ": " + std::to_string(rotated.size()) + " layers rotated and " +
                         std::to_string(keep.size() - rotated.size()) +
                         " kept channels: statecut prune rotates every layer (pca) or none");
    if (rec.contains("method") && rec["method"] != "pca")
      problems.push_back(path + ": layers rotated, but method is " + rec["method"].dump() + ": only pca rotates");
  } else if (rec.value("method", json()) == "pca" && !rec.contains("keep_from")) {
    problems.push_back(path + ": method pca, but no layer is marked rotated");
  }
  // --ratio R gave k' = budget_for_ratio(dk, R) (a record of --keep K holds "ratio": null).
  if (rec.contains("ratio") && rec["ratio"].is_number() && old_dk > 0 && !rec.contains("keep_from")) {
    const double ratio = rec["ratio"].get<double>();
    const int expect = ratio > 0 && ratio < 1 ? budget_for_ratio(static_cast<int>(old_dk), ratio) : -1;
    if (expect != new_dk && new_dk > 0)  // new_dk -1: named above
      problems.push_back(path + ": ratio " + rec["ratio"].dump() + " of dk " + std::to_string(old_dk) + " keeps " +
                         (expect > 0 ? std::to_string(expect) : std::string("no valid number of")) +
                         " channels, the record " + std::to_string(new_dk));
  }
  check_record_method(ctx, rec, path, problems);
  check_record_history(rec, path, problems);
  r.figure = static_cast<double>(problems.size());
  r.status = problems.empty() ? Status::Pass : Status::Fail;
  r.message = problems.empty() ? "method " + rec.value("method", std::string("?")) + ", dk " + std::to_string(old_dk) +
                                     " -> " + std::to_string(new_dk) + " in " + std::to_string(keep.size()) +
                                     " layers" + (*rotation ? " (a rotation: no keep sets)" : "")
                               : first_problem(problems);
  r.details["problems"] = problems;
  return r;
}

}  // namespace statecut::verify

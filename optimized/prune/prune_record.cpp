// The pruning record across steps (prune_record.h).
#include "optimized/prune/prune_record.h"

#include <filesystem>
#include <map>
#include <stdexcept>

#include "optimized/io/checkpoint.h"
#include "optimized/prune/surgery.h"

namespace statecut {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

bool numbers_only(const json& a) {
  if (!a.is_array() || a.empty()) return false;
  for (const auto& x : a)
    if (!x.is_number()) return false;
  return true;
}

void write(const json& j, int indent, std::string& out) {
  const std::string pad(static_cast<size_t>(indent) + 2, ' '), close(static_cast<size_t>(indent), ' ');
  if (numbers_only(j)) {
    out += '[';
    for (size_t i = 0; i < j.size(); ++i) out += (i ? ", " : "") + j[i].dump();
    out += ']';
  } else if (j.is_array() && !j.empty()) {
    out += "[\n";
    for (size_t i = 0; i < j.size(); ++i) {
      out += pad;
      write(j[i], indent + 2, out);
      out += i + 1 < j.size() ? ",\n" : "\n";
    }
    out += close + "]";
  } else if (j.is_object() && !j.empty()) {
    out += "{\n";
    size_t i = 0;
    for (auto it = j.begin(); it != j.end(); ++it, ++i) {
      out += pad + io::json_text(json(it.key())) + ": ";
      write(it.value(), indent + 2, out);
      out += i + 1 < j.size() ? ",\n" : "\n";
    }
    out += close + "}";
  } else {
    out += io::json_text(j);
  }
}

/// layer → per-head keep lists.
std::map<int, std::vector<std::vector<int64_t>>> by_layer(const std::vector<LayerSelection>& sel) {
  std::map<int, std::vector<std::vector<int64_t>>> m;
  for (const auto& s : sel) m[s.layer] = s.keep;
  return m;
}

}  // namespace

PruningStep pruning_step_kind(const json& step) {
  if (!step.is_object() || !step.contains("selection")) return PruningStep::None;
  const json& sel = step["selection"];
  if (sel.is_object() && sel.contains("layers") && sel["layers"].is_array())
    for (const auto& l : sel["layers"])
      if (l.is_object() && !l.contains("keep")) return PruningStep::Rotation;
  return PruningStep::Subset;
}

std::string compact_record_text(const json& j) {
  std::string out;
  write(j, 0, out);
  return out + "\n";
}

json with_pruning_history(json record, const std::string& source_dir) {
  const fs::path prev_path = fs::path(source_dir) / "statecut.json";
  if (!fs::exists(prev_path)) return record;
  const std::string where = prev_path.string();
  const json prev = io::read_json_file(where);
  if (!prev.is_object()) throw std::runtime_error(where + ": not a JSON object");

  json history = prev.contains("history") && prev["history"].is_array() ? prev["history"] : json::array();
  json step = prev;
  step.erase("history");
  step.erase("original");
  history.push_back(step);
  record["history"] = history;

  // A record of no pruning (statecut train, a finetune of an unpruned model): this step's source is the first one.
  if (!prev.contains("selection") && !prev.contains("original")) return record;
  // The previous step's keep sets against the first source: its "original", or its own selection (one step).
  const bool this_rotates = pruning_step_kind(record) != PruningStep::Subset;
  const bool prev_rotates = prev.contains("original") ? prev["original"].is_null()
                                                      : pruning_step_kind(prev) != PruningStep::Subset;
  if (this_rotates || prev_rotates) {
    record["original"] = nullptr;  // a rotation is no subset of the original channels
    return record;
  }
  json orig_ckpt, orig_dk;
  std::vector<LayerSelection> prev_orig;
  int64_t steps = 1;
  if (prev.contains("original")) {
    const json& o = prev["original"];
    if (!o.is_object() || !o.contains("layers")) throw std::runtime_error(where + ": 'original' has no 'layers'");
    prev_orig = keep_selections(json{{"selection", {{"layers", o["layers"]}}}}, where + " (original)");
    orig_ckpt = o.value("checkpoint", json(nullptr));
    orig_dk = o.value("head_k_dim", json(nullptr));
    steps = o.value("steps", int64_t{1});
  } else {
    prev_orig = keep_selections(prev, where);
    orig_ckpt = prev.contains("source") ? prev["source"].value("checkpoint", json(nullptr)) : json(nullptr);
    orig_dk = prev.value("head_k_dim", json(nullptr));
  }
  const auto before = by_layer(prev_orig);
  const auto now = by_layer(keep_selections(record, "this step's selection"));
  json layers = json::array();
  for (const auto& [layer, heads] : now) {
    const auto it = before.find(layer);
    if (it == before.end())
      throw std::runtime_error(where + ": has no keep sets for layer " + std::to_string(layer) + ", which this step prunes");
    if (it->second.size() != heads.size())
      throw std::runtime_error(where + ": layer " + std::to_string(layer) + " has " + std::to_string(it->second.size()) +
                               " heads, this step " + std::to_string(heads.size()));
    json keep = json::array();
    for (size_t h = 0; h < heads.size(); ++h) {
      std::vector<int64_t> composed;
      for (int64_t c : heads[h]) {
        if (c < 0 || c >= static_cast<int64_t>(it->second[h].size()))
          throw std::runtime_error(where + ": layer " + std::to_string(layer) + " head " + std::to_string(h) + " kept " +
                                   std::to_string(it->second[h].size()) + " channels; this step keeps channel " +
                                   std::to_string(c));
        composed.push_back(it->second[h][static_cast<size_t>(c)]);
      }
      keep.push_back(composed);
    }
    layers.push_back({{"layer", layer}, {"keep", keep}});
  }
  record["original"] = {{"checkpoint", orig_ckpt}, {"head_k_dim", orig_dk}, {"steps", steps + 1}, {"layers", layers}};
  return record;
}

}  // namespace statecut

#include "optimized/prune/surgery.h"

#include <climits>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "optimized/io/checkpoint.h"
#include "optimized/io/safetensors.h"
#include "optimized/models/io_dtype.h"
#include "reference/selection_budget.h"
#include "optimized/models/layers_common.h"
#include "optimized/models/model_registry.h"
#include "optimized/models/weight_source.h"

namespace statecut {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

[[noreturn]] void surgery_fail(const std::string& msg) { throw std::runtime_error(msg); }

/// One q or k row block of a (possibly packed) weight: rows offset + h·stride + c, c < dk.
struct SurgeryBlock {
  std::string tensor;
  int64_t offset = 0;
  int64_t stride = 0;
  bool conv = false;
};

std::vector<SurgeryBlock> blocks_of(const PrunableLayer& L) {
  std::vector<SurgeryBlock> b;
  const int64_t dk = L.head_k_dim;
  b.push_back({L.q_weight, L.q_row_offset, head_row_stride(L.q_row_stride, L.head_k_dim), false});
  b.push_back({L.k_weight, L.k_row_offset, head_row_stride(L.k_row_stride, L.head_k_dim), false});
  if (!L.q_conv.empty()) b.push_back({L.q_conv, L.q_conv_offset, dk, true});
  if (!L.k_conv.empty()) b.push_back({L.k_conv, L.k_conv_offset, dk, true});
  return b;
}

std::string bias_name(const std::string& weight) {
  const std::string suf = ".weight";
  if (weight.size() > suf.size() && weight.compare(weight.size() - suf.size(), suf.size(), suf) == 0)
    return weight.substr(0, weight.size() - suf.size()) + ".bias";
  return "";
}

/// A non-negative decimal index of a keep.json key ("<layer>.<head>"); anything else is the file's error.
int key_index(const std::string& path, const std::string& key, const std::string& part) {
  if (part.empty() || part.size() > 9 || part.find_first_not_of("0123456789") != std::string::npos)
    surgery_fail(path + ": keep key '" + key + "' is not '<layer>.<head>' (two non-negative integers)");
  return std::stoi(part);
}

}  // namespace

int budget_for_ratio(int dk, double ratio) {
  if (!(ratio > 0.0 && ratio < 1.0)) surgery_fail("--ratio must lie in (0, 1), got " + std::to_string(ratio));
  return static_cast<int>(ref::budget_from_ratio(dk, ratio));  // one budget rule (reference/selection_budget.h)
}

int LayerSelection::new_dim() const {
  if (!rotation.empty()) return static_cast<int>(rotation.front().size(0));
  return keep.empty() ? 0 : static_cast<int>(keep.front().size());
}

std::string python_json_dump(const json& j) { return io::json_text(j, 2, /*ensure_ascii=*/true) + "\n"; }

void check_selection(const PrunableLayer& L, const LayerSelection& s) {
  const bool rot = !s.rotation.empty();
  const size_t nh = rot ? s.rotation.size() : s.keep.size();
  if (nh != static_cast<size_t>(L.num_key_heads))
    surgery_fail("selection: layer " + std::to_string(L.layer) + " has " + std::to_string(nh) + " heads, the model " +
         std::to_string(L.num_key_heads));
  const int k = s.new_dim();
  if (k < 1 || k > L.head_k_dim)
    surgery_fail("selection: layer " + std::to_string(L.layer) + ": keep " + std::to_string(k) + " outside [1, dk=" +
         std::to_string(L.head_k_dim) + "]");
  for (size_t h = 0; h < nh; ++h) {
    if (rot) {
      const auto& T = s.rotation[h];
      if (T.dim() != 2 || T.size(0) != k || T.size(1) != L.head_k_dim)
        surgery_fail("selection: layer " + std::to_string(L.layer) + " head " + std::to_string(h) + ": rotation shape must be [k', dk]");
      continue;
    }
    const auto& kh = s.keep[h];
    if (static_cast<int>(kh.size()) != k)
      surgery_fail("selection: layer " + std::to_string(L.layer) + " head " + std::to_string(h) + ": " +
           std::to_string(kh.size()) + " channels, other heads " + std::to_string(k));
    std::set<int64_t> seen;
    for (int64_t c : kh) {
      if (c < 0 || c >= L.head_k_dim)
        surgery_fail("selection: layer " + std::to_string(L.layer) + " head " + std::to_string(h) + ": channel " +
             std::to_string(c) + " outside [0, " + std::to_string(L.head_k_dim) + ")");
      if (!seen.insert(c).second)
        surgery_fail("selection: layer " + std::to_string(L.layer) + " head " + std::to_string(h) + ": channel " +
             std::to_string(c) + " repeated");
    }
  }
}

std::set<std::string> selection_tensors(const WeightSource& src, const std::vector<PrunableLayer>& layers) {
  std::set<std::string> names;
  for (const auto& L : layers)
    for (const SurgeryBlock& b : blocks_of(L)) {
      names.insert(b.tensor);
      const std::string bias = bias_name(b.tensor);
      if (!bias.empty() && src.has(bias)) names.insert(bias);
    }
  return names;
}

std::map<std::string, torch::Tensor> apply_selection(const WeightSource& src, const std::vector<PrunableLayer>& layers,
                                                     const std::vector<LayerSelection>& sel) {
  std::map<int, const LayerSelection*> by_layer;
  for (const auto& s : sel) by_layer[s.layer] = &s;
  // tensor name -> blocks (with their layer geometry and selection)
  struct Target {
    SurgeryBlock block;
    const PrunableLayer* layer;
    const LayerSelection* sel;
  };
  std::map<std::string, std::vector<Target>> targets;
  for (const auto& L : layers) {
    auto it = by_layer.find(L.layer);
    if (it == by_layer.end()) surgery_fail("selection: no keep set for layer " + std::to_string(L.layer));
    const LayerSelection& s = *it->second;
    check_selection(L, s);
    for (const SurgeryBlock& b : blocks_of(L)) {
      targets[b.tensor].push_back({b, &L, &s});
      const std::string bias = bias_name(b.tensor);
      if (!bias.empty() && src.has(bias)) targets[bias].push_back({b, &L, &s});
    }
  }

  std::map<std::string, torch::Tensor> out;
  for (const auto& [name, tlist] : targets) {
    const torch::Tensor raw = src.raw(name);
    const int64_t rows = raw.size(0);
    // owner[r]: the (target index, head, channel) of a row inside a q/k block; target −1 for the other rows.
    struct Owner {
      int64_t target = -1, head = -1, channel = -1;
    };
    std::vector<Owner> owner(static_cast<size_t>(rows));
    for (size_t ti = 0; ti < tlist.size(); ++ti) {
      const auto& t = tlist[ti];
      for (int64_t h = 0; h < t.layer->num_key_heads; ++h)
        for (int64_t c = 0; c < t.layer->head_k_dim; ++c) {
          const int64_t r = t.block.offset + h * t.block.stride + c;
          if (r < 0 || r >= rows)
            surgery_fail(src.origin(name) + ": " + name + ": q/k block row " + std::to_string(r) + " outside its " +
                 std::to_string(rows) + " rows (config and weights disagree)");
          owner[r] = Owner{static_cast<int64_t>(ti), h, c};
        }
    }
    const bool rotate = !tlist.front().sel->rotation.empty();
    if (!rotate) {
      std::vector<int64_t> idx;
      for (int64_t r = 0; r < rows; ++r) {
        if (owner[r].target < 0) {
          idx.push_back(r);
        } else if (owner[r].channel == 0) {  // first row of (block, head): emit its kept channels in order
          const auto& t = tlist[owner[r].target];
          const int64_t h = owner[r].head;
          for (int64_t c : t.sel->keep[h]) idx.push_back(t.block.offset + h * t.block.stride + c);
        }
      }
      out[name] = raw.index_select(0, torch::tensor(idx, torch::kInt64)).contiguous();
      continue;
    }
    std::vector<torch::Tensor> pieces;
    const torch::Tensor w64 = raw.to(torch::kFloat64);
    for (int64_t r = 0; r < rows; ++r) {
      if (owner[r].target < 0) {
        pieces.push_back(raw.narrow(0, r, 1));
      } else if (owner[r].channel == 0) {
        const auto& t = tlist[owner[r].target];
        const int64_t h = owner[r].head;
        const torch::Tensor blk = w64.narrow(0, t.block.offset + h * t.block.stride, t.layer->head_k_dim);
        torch::Tensor T = t.sel->rotation[h].to(torch::kFloat64);
        if (t.block.conv) T = T * T;  // depthwise filters: diagonal approximation Σ_d T[r,d]² w[d]
        const torch::Tensor flat = blk.reshape({t.layer->head_k_dim, -1});
        auto shape = blk.sizes().vec();
        shape[0] = T.size(0);
        pieces.push_back(T.matmul(flat).reshape(shape).to(raw.scalar_type()));
      }
    }
    out[name] = torch::cat(pieces, 0).contiguous();
  }
  return out;
}

void write_pruned_checkpoint(const std::string& src_dir, const std::vector<LayerSelection>& sel, const std::string& dir) {
  const std::string cfg_path = (fs::path(src_dir) / "config.json").string();
  const json cfg = io::read_config(src_dir);
  const auto layers = prunable_layers_from_config(cfg, cfg_path);
  if (sel.empty()) surgery_fail("selection: empty");
  const int k = sel.front().new_dim();
  for (const auto& s : sel)
    if (s.new_dim() != k) surgery_fail("selection: every layer must keep the same number of channels");
  const WeightSource src = WeightSource::open_dir(src_dir);
  const auto changed = apply_selection(src, layers, sel);

  // Which files hold which tensors: one model.safetensors, or the shards of the index.
  std::vector<std::string> files;
  const fs::path index = fs::path(src_dir) / "model.safetensors.index.json";
  json index_json;
  if (fs::exists(fs::path(src_dir) / "model.safetensors")) {
    files.push_back("model.safetensors");
  } else if (fs::exists(index)) {
    index_json = io::read_json_file(index.string());
    std::set<std::string> shard_set;
    for (const auto& [name, shard] : index_json.at("weight_map").items()) shard_set.insert(shard.get<std::string>());
    files.assign(shard_set.begin(), shard_set.end());
  } else {
    surgery_fail(io::no_weights_message(src_dir));
  }
  int64_t total = 0, parameters = 0;
  for (const auto& f : files) {
    const auto in = io::SafetensorsFile::open((fs::path(src_dir) / f).string());
    io::SafetensorsWriter w;
    for (const auto& name : in.names()) {
      auto it = changed.find(name);
      if (it == changed.end()) {
        // Borrowed from the mapped source (`in` outlives w.write below): no second copy of the weights in memory.
        // Its pages are given back once written, so the pass holds one tensor of the source at a time.
        const io::TensorView& v = in.tensor(name);
        w.add_borrowed(v.name, v.dtype, v.shape, v.data, v.nbytes, [&in, &v] { in.release(v); });
        total += static_cast<int64_t>(v.nbytes);
        parameters += v.numel();
      } else {
        const torch::Tensor& t = it->second;  // lives in `changed` until the function returns
        const size_t nb = static_cast<size_t>(t.numel()) * t.element_size();
        w.add_borrowed(name, io_dtype_of(t.scalar_type()), t.sizes().vec(), t.data_ptr(), nb);
        total += static_cast<int64_t>(nb);
        parameters += t.numel();
      }
    }
    w.set_metadata(in.metadata());
    w.write((fs::path(dir) / f).string());
  }
  if (!index_json.is_null()) {
    index_json["metadata"]["total_size"] = total;
    // Newer huggingface_hub writes the parameter count too: the source's would be stale.
    if (index_json["metadata"].contains("total_parameters")) index_json["metadata"]["total_parameters"] = parameters;
    std::ofstream(fs::path(dir) / "model.safetensors.index.json") << python_json_dump(index_json);
  }
  std::ofstream cfg_out(fs::path(dir) / "config.json", std::ios::binary);
  cfg_out << python_json_dump(pruned_config(cfg, k, cfg_path));
  if (!cfg_out) surgery_fail((fs::path(dir) / "config.json").string() + ": write failed");
  io::copy_companion_files(src_dir, dir);  // tokenizer, chat template, generation config, licence
}

namespace {

/// keep.json / statecut.json → selections (read_keep_file's body; nlohmann's type errors are caught there).
/// An integer of a keep file: a JSON integer (nlohmann's get<int64_t> would take 0.5 as 0), else the file's error.
int64_t keep_int(const json& v, const std::string& path, const std::string& where) {
  if (!v.is_number_integer()) surgery_fail(path + ": " + where + ": expected an integer, got " + v.dump());
  return v.get<int64_t>();
}

/// A list of channel indices [c, ...].
std::vector<int64_t> keep_list(const json& v, const std::string& path, const std::string& where) {
  if (!v.is_array()) surgery_fail(path + ": " + where + ": expected a list of channel indices, got " + v.dump());
  std::vector<int64_t> out;
  for (const auto& c : v) out.push_back(keep_int(c, path, where));
  return out;
}

std::vector<LayerSelection> keep_file_selections(const json& j, const std::string& path) {
  std::vector<LayerSelection> out;

  if (j.contains("keep") && j["keep"].is_object()) {  // fixture keep.json: {"<layer>.<head>": [...]}
    std::map<int, std::map<int, std::vector<int64_t>>> m;
    for (const auto& [key, val] : j["keep"].items()) {
      const auto dot = key.find('.');
      if (dot == std::string::npos) surgery_fail(path + ": keep key '" + key + "' is not '<layer>.<head>'");
      m[key_index(path, key, key.substr(0, dot))][key_index(path, key, key.substr(dot + 1))] =
          keep_list(val, path, "keep '" + key + "'");
    }
    for (const auto& [layer, heads] : m) {
      LayerSelection s;
      s.layer = layer;
      int expect = 0;
      for (const auto& [h, keep] : heads) {
        if (h != expect++) surgery_fail(path + ": layer " + std::to_string(layer) + " is missing head " + std::to_string(expect - 1));
        s.keep.push_back(keep);
      }
      out.push_back(std::move(s));
    }
  } else if (j.contains("selection") && j["selection"].contains("layers")) {
    for (const auto& l : j["selection"]["layers"]) {
      if (!l.contains("keep")) surgery_fail(path + ": layer without a 'keep' list (a pca rotation cannot be re-applied from JSON)");
      LayerSelection s;
      const auto layer = json_layer_index(l.at("layer"));
      if (!layer)
        surgery_fail(path + ": selection layer: expected a layer index (" + kLayerIndexRule + "), got " +
                     l.at("layer").dump());
      s.layer = *layer;
      const std::string where = "selection layer " + std::to_string(s.layer);
      if (!l.at("keep").is_array()) surgery_fail(path + ": " + where + ": 'keep' is not a list of per-head lists");
      for (const auto& kh : l.at("keep")) s.keep.push_back(keep_list(kh, path, where));
      out.push_back(std::move(s));
    }
  } else {
    surgery_fail(path + ": neither a keep.json ('keep') nor a statecut.json ('selection')");
  }
  if (out.empty()) surgery_fail(path + ": no keep sets");
  std::set<int> layers;  // one keep set per layer: a second would silently replace the first
  for (const auto& s : out)
    if (!layers.insert(s.layer).second) surgery_fail(path + ": layer " + std::to_string(s.layer) + " is listed twice");
  return out;
}

}  // namespace

std::optional<int> json_layer_index(const json& v) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<uint64_t>();
    return u <= static_cast<uint64_t>(INT_MAX) ? std::optional<int>(static_cast<int>(u)) : std::nullopt;
  }
  if (!v.is_number_integer()) return std::nullopt;  // a float, a string, null
  const auto i = v.get<int64_t>();
  return i >= 0 && i <= INT_MAX ? std::optional<int>(static_cast<int>(i)) : std::nullopt;
}

std::vector<LayerSelection> read_keep_file(const std::string& path) {
  return keep_selections(io::read_json_file(path), path);
}

std::vector<LayerSelection> keep_selections(const json& j, const std::string& path) {
  try {
    return keep_file_selections(j, path);
  } catch (const json::exception& e) {  // a value of the wrong type: one line naming the file
    std::string what = e.what();
    surgery_fail(path + ": " + what.substr(0, what.find('\n')));
  }
}

}  // namespace statecut

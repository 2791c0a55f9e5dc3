#include "optimized/surgery.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "optimized/fla_delta_net.h"
#include "optimized/fla_gated_deltanet.h"
#include "optimized/hf_mamba2.h"
#include "optimized/hf_qwen3_5.h"
#include "optimized/io/safetensors.h"
#include "optimized/layers_common.h"
#include "optimized/weight_source.h"

namespace statecut {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

[[noreturn]] void fail(const std::string& msg) { throw std::runtime_error(msg); }

int64_t get_int(const json& c, const char* key, const std::string& origin) {
  if (!c.contains(key) || !c[key].is_number()) fail(origin + ": missing or non-numeric '" + key + "'");
  return c[key].get<int64_t>();
}
double get_num(const json& c, const char* key, double dflt) {
  return c.contains(key) && c[key].is_number() ? c[key].get<double>() : dflt;
}

/// One q or k row block of a (possibly packed) weight: rows offset + h·stride + c, c < dk.
struct Block {
  std::string tensor;
  int64_t offset = 0;
  int64_t stride = 0;
  bool conv = false;
};

std::vector<Block> blocks_of(const PrunableLayer& L) {
  std::vector<Block> b;
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

io::DType io_dtype(torch::Dtype d) {
  switch (d) {
    case torch::kFloat32: return io::DType::F32;
    case torch::kFloat64: return io::DType::F64;
    case torch::kBFloat16: return io::DType::BF16;
    case torch::kFloat16: return io::DType::F16;
    case torch::kInt64: return io::DType::I64;
    case torch::kInt32: return io::DType::I32;
    case torch::kInt16: return io::DType::I16;
    case torch::kInt8: return io::DType::I8;
    case torch::kUInt8: return io::DType::U8;
    case torch::kBool: return io::DType::BOOL;
    default: fail(std::string("surgery: no safetensors dtype for torch dtype ") + c10::toString(d));
  }
}

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(path + ": cannot open for reading");
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

json parse_json_file(const std::string& path) {
  try {
    return json::parse(read_text(path));
  } catch (const json::parse_error& e) {
    fail(path + ": invalid JSON: " + e.what());
  }
}

/// Layer i with `heads` key heads of dimension dk (tensor names filled in by the family's branch).
PrunableLayer layer_shape(int64_t i, int64_t heads, int64_t dk) {
  PrunableLayer L;
  L.layer = static_cast<int>(i);
  L.num_key_heads = static_cast<int>(heads);
  L.head_k_dim = static_cast<int>(dk);
  return L;
}

/// The Gated DeltaNet layers of a Qwen3.5 / Qwen3-Next text config whose tensors live under `prefix`.
std::vector<PrunableLayer> qwen_layers(const json& c, bool packed, const std::string& prefix, const std::string& origin) {
  const int64_t n_layers = get_int(c, "num_hidden_layers", origin);
  const int64_t Hk = get_int(c, "linear_num_key_heads", origin);
  const int64_t dk = get_int(c, "linear_key_head_dim", origin);
  int64_t group = 0;  // qwen3_next: rows per key head of in_proj_qkvz, [q (dk) | k (dk) | v (r·dv) | z (r·dv)]
  if (packed) {
    const int64_t Hv = get_int(c, "linear_num_value_heads", origin), dv = get_int(c, "linear_value_head_dim", origin);
    if (Hk <= 0 || Hv % Hk != 0) fail(origin + ": linear_num_value_heads must be a multiple of linear_num_key_heads");
    group = 2 * dk + 2 * (Hv / Hk) * dv;
  }
  const std::vector<bool> full = qwen_full_attention_layers(c, n_layers, origin);
  std::vector<PrunableLayer> out;
  for (int64_t i = 0; i < n_layers; ++i) {
    if (full[i]) continue;
    PrunableLayer L = layer_shape(i, Hk, dk);
    const std::string p = prefix + "layers." + std::to_string(i) + ".linear_attn.";
    // qwen3_5: in_proj_qkv rows [q (Hk·dk) | k (Hk·dk) | v (Hv·dv)]; qwen3_next: in_proj_qkvz rows per key head
    // [q | k | v | z]. The conv channels are [q | k | v] in both (transformers concatenates before the conv).
    if (packed) {
      L.q_weight = L.k_weight = p + "in_proj_qkvz.weight";
      L.k_row_offset = dk;
      L.q_row_stride = L.k_row_stride = group;
    } else {
      L.q_weight = L.k_weight = p + "in_proj_qkv.weight";
      L.k_row_offset = Hk * dk;
    }
    L.q_conv = L.k_conv = p + "conv1d.weight";
    L.k_conv_offset = Hk * dk;
    out.push_back(L);
  }
  return out;
}

/// The text config of a nested "qwen3_5" config (the multimodal release), or fails naming the file.
const json& qwen_text_config(const json& c, const std::string& origin) {
  if (!c.contains("text_config") || !c["text_config"].is_object())
    fail(origin + ": model_type 'qwen3_5' needs a \"text_config\" object");
  return c["text_config"];
}

}  // namespace

std::vector<PrunableLayer> prunable_layers_from_config(const json& c, const std::string& origin, bool allow_none) {
  if (!c.is_object() || !c.contains("model_type") || !c["model_type"].is_string())
    fail(origin + ": missing 'model_type'");
  const std::string mt = c["model_type"].get<std::string>();
  std::vector<PrunableLayer> out;
  if (mt == "qwen3_5") {  // the multimodal release: text model nested, tensors under model.language_model.
    out = qwen_layers(qwen_text_config(c, origin), false, "model.language_model.", origin + " (text_config)");
  } else if (mt == "qwen3_5_text" || mt == "qwen3_next") {
    out = qwen_layers(c, mt == "qwen3_next", "model.", origin);
  } else if (mt == "delta_net" || mt == "gated_deltanet") {
    const int64_t n_layers = get_int(c, "num_hidden_layers", origin);
    const int64_t hidden = get_int(c, "hidden_size", origin);
    const int64_t H =
        cfg_int(c, "num_heads", mt == "delta_net" ? kFlaDeltaNetDefaultHeads : kFlaGatedDeltaNetDefaultHeads, origin);
    int64_t dk;
    if (mt == "delta_net") {
      const int64_t key_dim = static_cast<int64_t>(hidden * get_num(c, "expand_k", 1.0));
      if (H <= 0 || key_dim % H != 0) fail(origin + ": key_dim " + std::to_string(key_dim) + " not divisible by num_heads");
      dk = key_dim / H;
    } else {
      dk = cfg_int(c, "head_dim", kFlaGatedDeltaNetDefaultHeadDim, origin);
    }
    std::set<int64_t> attn_layers;  // fla hybrids: config "attn": {"layers": [...]} are softmax attention
    if (c.contains("attn") && c["attn"].is_object() && c["attn"].contains("layers"))
      for (const auto& l : c["attn"]["layers"]) attn_layers.insert(l.get<int64_t>());
    const bool conv = !c.contains("use_short_conv") || c["use_short_conv"].get<bool>();
    for (int64_t i = 0; i < n_layers; ++i) {
      if (attn_layers.count(i)) continue;
      PrunableLayer L = layer_shape(i, H, dk);
      const std::string p = "model.layers." + std::to_string(i) + ".attn.";
      L.q_weight = p + "q_proj.weight";
      L.k_weight = p + "k_proj.weight";
      if (conv) {
        L.q_conv = p + "q_conv1d.weight";
        L.k_conv = p + "k_conv1d.weight";
      }
      out.push_back(L);
    }
  } else if (mt == "mamba2") {
    const int64_t n_layers = get_int(c, "num_hidden_layers", origin);
    const int64_t hidden = get_int(c, "hidden_size", origin);
    const int64_t I = static_cast<int64_t>(get_num(c, "expand", 2.0) * hidden);
    const int64_t G = cfg_int(c, "n_groups", kMamba2DefaultGroups, origin);
    const int64_t N = get_int(c, "state_size", origin);
    for (int64_t i = 0; i < n_layers; ++i) {
      PrunableLayer L = layer_shape(i, G, N);
      const std::string p = "backbone.layers." + std::to_string(i) + ".mixer.";
      // in_proj rows: [z (I) | x (I) | B (G·N) | C (G·N) | dt (H)]; conv channels: [x | B | C]. Key = B, query = C.
      L.q_weight = L.k_weight = p + "in_proj.weight";
      L.k_row_offset = 2 * I;
      L.q_row_offset = 2 * I + G * N;
      L.q_conv = L.k_conv = p + "conv1d.weight";
      L.k_conv_offset = I;
      L.q_conv_offset = I + G * N;
      out.push_back(L);
    }
  } else {
    fail(origin + ": model_type '" + mt +
         "' cannot be pruned (supported: delta_net, gated_deltanet, mamba2, qwen3_5_text, qwen3_5, qwen3_next)");
  }
  if (out.empty() && !allow_none) fail(origin + ": no linear-attention layer to prune");
  return out;
}

int budget_for_ratio(int dk, double ratio) {
  if (!(ratio > 0.0 && ratio < 1.0)) fail("--ratio must lie in (0, 1), got " + std::to_string(ratio));
  return std::max(1, static_cast<int>(std::floor(dk * (1.0 - ratio))));
}

int LayerSelection::new_dim() const {
  if (!rotation.empty()) return static_cast<int>(rotation.front().size(0));
  return keep.empty() ? 0 : static_cast<int>(keep.front().size());
}

json pruned_config(const json& config, int new_dk, const std::string& origin) {
  json c = config;
  const std::string mt = c.value("model_type", "");
  if (mt == "delta_net") {
    const int64_t hidden = get_int(c, "hidden_size", origin);
    const int64_t H = cfg_int(c, "num_heads", kFlaDeltaNetDefaultHeads, origin);
    const double e = static_cast<double>(H * new_dk) / static_cast<double>(hidden);
    if (static_cast<int64_t>(hidden * e) != H * new_dk) fail(origin + ": expand_k cannot express key_dim " + std::to_string(H * new_dk));
    c["expand_k"] = e;
  } else if (mt == "gated_deltanet") {
    const int64_t hd = cfg_int(c, "head_dim", kFlaGatedDeltaNetDefaultHeadDim, origin);
    const int64_t dv = static_cast<int64_t>(hd * get_num(c, "expand_v", 2.0));
    double e = static_cast<double>(dv) / new_dk;
    // fla: head_v_dim = int(head_dim * expand_v); step up by ulps until the product truncates to dv again.
    for (int i = 0; i < 8 && static_cast<int64_t>(new_dk * e) != dv; ++i) e = std::nextafter(e, 1e300);
    if (static_cast<int64_t>(new_dk * e) != dv) fail(origin + ": expand_v cannot keep head_v_dim " + std::to_string(dv));
    c["head_dim"] = new_dk;
    c["expand_v"] = e;
  } else if (mt == "mamba2") {
    c["state_size"] = new_dk;
  } else if (mt == "qwen3_5_text" || mt == "qwen3_next") {
    c["linear_key_head_dim"] = new_dk;
  } else if (mt == "qwen3_5") {
    qwen_text_config(c, origin);
    c["text_config"]["linear_key_head_dim"] = new_dk;
  } else {
    fail(origin + ": model_type '" + mt + "' cannot be pruned");
  }
  return c;
}

std::string python_json_dump(const json& j) { return j.dump(2, ' ', /*ensure_ascii=*/true) + "\n"; }

std::map<std::string, torch::Tensor> apply_selection(const WeightSource& src, const std::vector<PrunableLayer>& layers,
                                                     const std::vector<LayerSelection>& sel) {
  std::map<int, const LayerSelection*> by_layer;
  for (const auto& s : sel) by_layer[s.layer] = &s;
  // tensor name -> blocks (with their layer geometry and selection)
  struct Target {
    Block block;
    const PrunableLayer* layer;
    const LayerSelection* sel;
  };
  std::map<std::string, std::vector<Target>> targets;
  for (const auto& L : layers) {
    auto it = by_layer.find(L.layer);
    if (it == by_layer.end()) fail("selection: no keep set for layer " + std::to_string(L.layer));
    const LayerSelection& s = *it->second;
    const bool rot = !s.rotation.empty();
    const size_t nh = rot ? s.rotation.size() : s.keep.size();
    if (nh != static_cast<size_t>(L.num_key_heads))
      fail("selection: layer " + std::to_string(L.layer) + " has " + std::to_string(nh) + " heads, the model " +
           std::to_string(L.num_key_heads));
    const int k = s.new_dim();
    if (k < 1 || k > L.head_k_dim)
      fail("selection: layer " + std::to_string(L.layer) + ": keep " + std::to_string(k) + " outside [1, dk=" +
           std::to_string(L.head_k_dim) + "]");
    for (size_t h = 0; h < nh; ++h) {
      if (rot) {
        const auto& T = s.rotation[h];
        if (T.dim() != 2 || T.size(0) != k || T.size(1) != L.head_k_dim)
          fail("selection: layer " + std::to_string(L.layer) + " head " + std::to_string(h) + ": rotation shape must be [k', dk]");
        continue;
      }
      const auto& kh = s.keep[h];
      if (static_cast<int>(kh.size()) != k)
        fail("selection: layer " + std::to_string(L.layer) + " head " + std::to_string(h) + ": " +
             std::to_string(kh.size()) + " channels, other heads " + std::to_string(k));
      std::set<int64_t> seen;
      for (int64_t c : kh) {
        if (c < 0 || c >= L.head_k_dim)
          fail("selection: layer " + std::to_string(L.layer) + " head " + std::to_string(h) + ": channel " +
               std::to_string(c) + " outside [0, " + std::to_string(L.head_k_dim) + ")");
        if (!seen.insert(c).second)
          fail("selection: layer " + std::to_string(L.layer) + " head " + std::to_string(h) + ": channel " +
               std::to_string(c) + " repeated");
      }
    }
    for (const Block& b : blocks_of(L)) {
      targets[b.tensor].push_back({b, &L, &s});
      const std::string bias = bias_name(b.tensor);
      if (!bias.empty() && src.has(bias)) targets[bias].push_back({b, &L, &s});
    }
  }

  std::map<std::string, torch::Tensor> out;
  for (const auto& [name, tlist] : targets) {
    const torch::Tensor raw = src.raw(name);
    const int64_t rows = raw.size(0);
    // owner[r] = (target index, head, channel) for rows inside a q/k block, or -1.
    std::vector<std::array<int64_t, 3>> owner(rows, {-1, -1, -1});
    for (size_t ti = 0; ti < tlist.size(); ++ti) {
      const auto& t = tlist[ti];
      for (int64_t h = 0; h < t.layer->num_key_heads; ++h)
        for (int64_t c = 0; c < t.layer->head_k_dim; ++c) {
          const int64_t r = t.block.offset + h * t.block.stride + c;
          if (r < 0 || r >= rows)
            fail(src.origin(name) + ": " + name + ": q/k block row " + std::to_string(r) + " outside its " +
                 std::to_string(rows) + " rows (config and weights disagree)");
          owner[r] = {static_cast<int64_t>(ti), h, c};
        }
    }
    const bool rotate = !tlist.front().sel->rotation.empty();
    if (!rotate) {
      std::vector<int64_t> idx;
      for (int64_t r = 0; r < rows; ++r) {
        if (owner[r][0] < 0) {
          idx.push_back(r);
        } else if (owner[r][2] == 0) {  // first row of (block, head): emit its kept channels in order
          const auto& t = tlist[owner[r][0]];
          const int64_t h = owner[r][1];
          for (int64_t c : t.sel->keep[h]) idx.push_back(t.block.offset + h * t.block.stride + c);
        }
      }
      out[name] = raw.index_select(0, torch::tensor(idx, torch::kInt64)).contiguous();
      continue;
    }
    std::vector<torch::Tensor> pieces;
    const torch::Tensor w64 = raw.to(torch::kFloat64);
    for (int64_t r = 0; r < rows; ++r) {
      if (owner[r][0] < 0) {
        pieces.push_back(raw.narrow(0, r, 1));
      } else if (owner[r][2] == 0) {
        const auto& t = tlist[owner[r][0]];
        const int64_t h = owner[r][1];
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
  const json cfg = parse_json_file(cfg_path);
  const auto layers = prunable_layers_from_config(cfg, cfg_path);
  if (sel.empty()) fail("selection: empty");
  const int k = sel.front().new_dim();
  for (const auto& s : sel)
    if (s.new_dim() != k) fail("selection: every layer must keep the same number of channels");
  const WeightSource src = WeightSource::open_dir(src_dir);
  const auto changed = apply_selection(src, layers, sel);

  // Which files hold which tensors: one model.safetensors, or the shards of the index.
  std::vector<std::string> files;
  const fs::path index = fs::path(src_dir) / "model.safetensors.index.json";
  json index_json;
  if (fs::exists(fs::path(src_dir) / "model.safetensors")) {
    files.push_back("model.safetensors");
  } else if (fs::exists(index)) {
    index_json = parse_json_file(index.string());
    std::set<std::string> shard_set;
    for (const auto& [name, shard] : index_json.at("weight_map").items()) shard_set.insert(shard.get<std::string>());
    files.assign(shard_set.begin(), shard_set.end());
  } else {
    fail(src_dir + ": no model.safetensors or model.safetensors.index.json");
  }
  int64_t total = 0;
  for (const auto& f : files) {
    const auto in = io::SafetensorsFile::open((fs::path(src_dir) / f).string());
    io::SafetensorsWriter w;
    for (const auto& name : in.names()) {
      auto it = changed.find(name);
      if (it == changed.end()) {
        w.add(in.tensor(name));
        total += static_cast<int64_t>(in.tensor(name).nbytes);
      } else {
        const torch::Tensor& t = it->second;
        const size_t nb = static_cast<size_t>(t.numel()) * t.element_size();
        w.add(name, io_dtype(t.scalar_type()), t.sizes().vec(), t.data_ptr(), nb);
        total += static_cast<int64_t>(nb);
      }
    }
    w.set_metadata(in.metadata());
    w.write((fs::path(dir) / f).string());
  }
  if (!index_json.is_null()) {
    index_json["metadata"]["total_size"] = total;
    std::ofstream(fs::path(dir) / "model.safetensors.index.json") << python_json_dump(index_json);
  }
  std::ofstream cfg_out(fs::path(dir) / "config.json", std::ios::binary);
  cfg_out << python_json_dump(pruned_config(cfg, k, cfg_path));
  if (!cfg_out) fail((fs::path(dir) / "config.json").string() + ": write failed");
  for (const char* extra : {"tokenizer.model", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                            "generation_config.json"}) {
    const fs::path p = fs::path(src_dir) / extra;
    if (fs::exists(p)) fs::copy_file(p, fs::path(dir) / extra);
  }
}

std::vector<LayerSelection> read_keep_file(const std::string& path) {
  const json j = parse_json_file(path);
  std::vector<LayerSelection> out;
  if (j.contains("keep") && j["keep"].is_object()) {  // fixture keep.json: {"<layer>.<head>": [...]}
    std::map<int, std::map<int, std::vector<int64_t>>> m;
    for (const auto& [key, val] : j["keep"].items()) {
      const auto dot = key.find('.');
      if (dot == std::string::npos) fail(path + ": keep key '" + key + "' is not '<layer>.<head>'");
      m[std::stoi(key.substr(0, dot))][std::stoi(key.substr(dot + 1))] = val.get<std::vector<int64_t>>();
    }
    for (const auto& [layer, heads] : m) {
      LayerSelection s;
      s.layer = layer;
      int expect = 0;
      for (const auto& [h, keep] : heads) {
        if (h != expect++) fail(path + ": layer " + std::to_string(layer) + " is missing head " + std::to_string(expect - 1));
        s.keep.push_back(keep);
      }
      out.push_back(std::move(s));
    }
  } else if (j.contains("selection") && j["selection"].contains("layers")) {
    for (const auto& l : j["selection"]["layers"]) {
      if (!l.contains("keep")) fail(path + ": layer without a 'keep' list (a pca rotation cannot be re-applied from JSON)");
      LayerSelection s;
      s.layer = l.at("layer").get<int>();
      s.keep = l.at("keep").get<std::vector<std::vector<int64_t>>>();
      out.push_back(std::move(s));
    }
  } else {
    fail(path + ": neither a keep.json ('keep') nor a statecut.json ('selection')");
  }
  if (out.empty()) fail(path + ": no keep sets");
  return out;
}

}  // namespace statecut

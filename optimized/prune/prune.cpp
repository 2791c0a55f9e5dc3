#include "optimized/prune/prune.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>

#include "optimized/io/atomic_dir.h"
#include "optimized/io/checkpoint.h"
#include "optimized/io/input_file.h"
#include "optimized/io/option_error.h"
#include "optimized/text/token_stream.h"
#include "optimized/text/tokenizer.h"
#include "optimized/models/layers_common.h"
#include "optimized/models/parallel_for_each.h"
#include "optimized/models/streamed_model.h"
#include "optimized/models/weight_source.h"
#include "optimized/prune/eigen_tensor.h"
#include "optimized/prune/prune_record.h"
#include "reference/selectors.h"
#include "optimized/models/device_check.h"

namespace statecut {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

double prune_seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// --method's name → the reference's enum (its one name table), or the CLI's one-line error.
ref::SelectMethod method_of(const std::string& name) {
  try {
    return ref::method_from_name(name);
  } catch (const ref::ShapeError&) {
    throw OptionError("unknown --method '" + name + "' (one of rand, l1, swanda, grad, drrqr, pca)");
  }
}

ref::ScoreSide side_of(const std::string& name) {
  try {
    return ref::side_from_name(name);
  } catch (const ref::ShapeError&) {
    throw OptionError("unknown --select '" + name + "' (one of qk, q, k)");
  }
}

}  // namespace

bool method_needs_calibration(const std::string& m) { return needs_calibration(method_of(m)); }

void validate_prune_options(const PruneOptions& opt) {
  if (!opt.keep_from.empty()) {
    if (!opt.method.empty() || opt.ratio != 0 || opt.keep != 0)
      throw OptionError("--keep-from replaces --method/--ratio/--keep: give only one of them");
    if (!fs::is_regular_file(opt.keep_from)) throw std::runtime_error(opt.keep_from + ": keep file not found");
    if (opt.out.empty()) throw OptionError("--out DIR is required");
    require_device_available(torch::Device(opt.device));
    return;
  }
  if (opt.method.empty()) throw OptionError("give --method (rand, l1, swanda, grad, drrqr, pca) or --keep-from FILE");
  (void)method_of(opt.method);
  if ((opt.ratio != 0) == (opt.keep != 0)) throw OptionError("give exactly one of --ratio R and --keep K");
  if (opt.keep == 0 && !(opt.ratio > 0 && opt.ratio < 1))
    throw OptionError("--ratio must lie in the open interval (0, 1), got " + std::to_string(opt.ratio));
  if (opt.keep < 0) throw OptionError("--keep must be >= 1, got " + std::to_string(opt.keep));
  (void)side_of(opt.select);
  if (opt.device != "cpu" && opt.device.rfind("cuda", 0) != 0)
    throw OptionError("unknown --device '" + opt.device + "' (cpu or cuda)");
  if (!(opt.f > 1) || !std::isfinite(opt.f)) throw OptionError("--f must be finite and > 1");
  if (opt.stream_weights != "auto" && opt.stream_weights != "on" && opt.stream_weights != "off")
    throw OptionError("unknown --stream-weights '" + opt.stream_weights + "' (auto, on or off)");
  if (opt.stream_weights == "on" && opt.device != "cpu")
    throw OptionError("--stream-weights on runs on the CPU (on CUDA the model must fit the device)");
  if (opt.stream_weights == "on" && opt.method == "grad")
    throw OptionError("--stream-weights on: --method grad needs every block's weights at once (its backward)");
  if (method_needs_calibration(opt.method)) {
    if (opt.calib.empty()) throw OptionError("--method " + opt.method + " needs calibration text: --calib FILE");
    if (opt.calib_seqs < 1 || opt.calib_len < 2)
      throw OptionError("--calib-seqs must be >= 1 and --calib-len >= 2");
    for (const auto& c : opt.calib)
      if (const std::string why = io::input_file_problem(c); !why.empty())
        throw std::runtime_error(c + ": calibration file: " + why);
  }
  if (opt.out.empty()) throw OptionError("--out DIR is required");
  // Every method, the data-free ones too: --device cuda on a machine without one is refused, not run on the CPU
  // (after the option checks, so a usage error still wins: exit 2 before this exit 1).
  require_device_available(torch::Device(opt.device));
}

namespace {

/// k' for every head: --keep K (at most dk) or the ratio's budget.
int resolve_budget(const PruneOptions& opt, int dk, const std::string& cfg_path) {
  if (opt.keep <= 0) return budget_for_ratio(dk, opt.ratio);
  if (opt.keep > dk)
    throw std::runtime_error("--keep " + std::to_string(opt.keep) + " exceeds the key head dim dk = " + std::to_string(dk) +
                             " of " + cfg_path);
  return opt.keep;
}

/// Paths in the record are absolute, so verify and a later prune find them from any working directory.
std::string absolute_path(const std::string& p) { return fs::absolute(p).lexically_normal().string(); }

json source_record(const PruneOptions& opt, const json& cfg) {
  const std::string origin = (fs::path(opt.checkpoint) / "config.json").string();
  return {{"checkpoint", absolute_path(opt.checkpoint)}, {"model_type", cfg_string(cfg, "model_type", "", origin)}};
}

/// --keep-from: the selection is the file's; nothing is computed. It must fit this model, checked here so that the
/// error names the keep file: exactly the model's linear-attention layers (a layer the model lacks was copied into
/// statecut.json and failed verify later), the file's dk when it states one, and every keep set (check_selection).
PruneResult selection_from_keep_file(const PruneOptions& opt, const json& cfg, const std::vector<PrunableLayer>& layers) {
  const int dk = layers.front().head_k_dim;
  PruneResult res;
  const json kf = io::read_json_file(opt.keep_from);
  res.selection = keep_selections(kf, opt.keep_from);
  for (const char* key : {"dk", "head_k_dim"})
    if (kf.contains(key) && !(kf[key].is_number_integer() && kf[key].get<int64_t>() == dk))
      throw std::runtime_error(opt.keep_from + ": \"" + key + "\" is " + kf[key].dump() + ", but " + opt.checkpoint +
                               " has dk " + std::to_string(dk));
  std::map<int, const PrunableLayer*> by_layer;
  for (const auto& L : layers) by_layer[L.layer] = &L;
  std::set<int> seen;
  for (const auto& s : res.selection) {
    const auto it = by_layer.find(s.layer);
    if (it == by_layer.end())
      throw std::runtime_error(opt.keep_from + ": layer " + std::to_string(s.layer) +
                               " is not a linear-attention layer of " + opt.checkpoint);
    seen.insert(s.layer);
    try {
      check_selection(*it->second, s);
    } catch (const std::exception& e) {
      throw std::runtime_error(opt.keep_from + ": " + e.what());
    }
  }
  for (const auto& L : layers)
    if (!seen.count(L.layer))
      throw std::runtime_error(opt.keep_from + ": no keep set for layer " + std::to_string(L.layer) + " of " +
                               opt.checkpoint);
  // The kept width the file states must be the one its lists give: a contradiction means the lists or the number were
  // edited, and which one the user meant cannot be told.
  const int new_dk = res.selection.front().new_dim();
  for (const char* key : {"new_dk", "new_head_k_dim"})
    if (kf.contains(key) && !(kf[key].is_number_integer() && kf[key].get<int64_t>() == new_dk))
      throw std::runtime_error(opt.keep_from + ": \"" + key + "\" is " + kf[key].dump() + ", but its keep sets keep " +
                               std::to_string(new_dk) + " channels per head");
  json layers_rec = json::array();
  for (const auto& s : res.selection) layers_rec.push_back({{"layer", s.layer}, {"keep", s.keep}});
  // The method that chose the channels when the file says (a statecut.json), else "keep-from".
  std::string method = "keep-from";
  if (kf.contains("method") && kf["method"].is_string()) method = kf["method"].get<std::string>();
  res.record = {{"statecut_version", STATECUT_VERSION},
                {"method", method},
                {"keep_from", absolute_path(opt.keep_from)},
                {"source", source_record(opt, cfg)},
                {"head_k_dim", dk},
                {"new_head_k_dim", new_dk},
                {"calibration", nullptr},
                {"selection", {{"layers", layers_rec}}}};
  return res;
}

/// What one calibration pass gives the data-driven methods, and its record for statecut.json.
struct CalibrationRun {
  Calibration cal;
  json record = nullptr;
};

/// Tokenises the calibration files, samples the seeded windows and runs the unpruned model over them, collecting
/// what `opt.method` needs (features, rows, RMS, gradients or PCA statistics). Sets the load/calibrate timings.
CalibrationRun calibrate_for_method(const PruneOptions& opt, const json& cfg, const Progress& progress,
                                    PruneResult& res, std::chrono::steady_clock::time_point t0) {
  torch::Device dev(opt.device);  // available: select_for_checkpoint checked it
  // The checkpoint first: a broken one is named as such before its text is tokenised.
  CalibrationNeeds needs = calibration_needs(method_of(opt.method), opt.faithful);
  res.streamed_weights = should_stream_weights(opt.stream_weights, opt.checkpoint, dev, needs.grad);
  PassModel model(opt.checkpoint, torch::kFloat32, dev, res.streamed_weights);
  const Tokenizer tok = Tokenizer::for_checkpoint(opt.checkpoint, opt.tokenizer);
  const int64_t vocab = cfg_int(cfg, "vocab_size", tok.vocab_size(), (fs::path(opt.checkpoint) / "config.json").string());
  TokenStream all;
  all.source = opt.calib.size() == 1 ? opt.calib.front() : std::string("calibration files");
  for (const auto& f : opt.calib) {
    TokenStream s = read_tokens(f, tok, vocab);
    all.ids.insert(all.ids.end(), s.ids.begin(), s.ids.end());
    all.bytes += s.bytes;
  }
  const Windows w = sample_windows(all, opt.calib_seqs, opt.calib_len, opt.seed);
  res.seconds_load = prune_seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  needs.side = side_of(opt.select);
  needs.seed = opt.seed;
  needs.batch = opt.batch;
  CalibrationRun run;
  try {
    run.cal = calibrate(model.model(), w.ids, needs, progress, model.hook());
  } catch (const CalibrationNotFinite& e) {  // the checkpoint's forward overflowed: name it
    throw std::runtime_error(opt.checkpoint + ": " + e.what());
  }
  res.seconds_calibrate = prune_seconds_since(t0);
  std::vector<std::string> files;
  for (const auto& f : opt.calib) files.push_back(absolute_path(f));
  run.record = {{"files", files},
                {"tokenizer", tok.describe()},
                {"stream_tokens", static_cast<int64_t>(all.ids.size())},
                {"seqs", opt.calib_seqs},
                {"len", opt.calib_len},
                {"tokens", run.cal.tokens},
                {"seed", opt.seed},
                {"starts", w.starts}};
  if (needs.grad) run.record["mean_loss"] = run.cal.mean_loss;
  return run;
}

/// One layer's inputs to ref::select_layer: per head the q/k weight rows (rand, l1, swanda, grad; + their gradients
/// for grad), the matrix drrqr factors (the streamed R factor of [Q; K], or the faithful rows), or pca's moments.
ref::LayerInputs layer_inputs(const PrunableLayer& L, const WeightSource& weights, const LayerCalibration* lc,
                              ref::SelectMethod m) {
  using ref::SelectMethod;
  const int64_t H = L.num_key_heads, dk = L.head_k_dim;
  ref::LayerInputs in;
  in.heads.resize(H);
  if (m == SelectMethod::Drrqr || m == SelectMethod::Pca) {
    for (int64_t h = 0; h < H; ++h) in.heads[h] = selection_inputs(*lc, m, h);
    return in;
  }
  const torch::Tensor wq = q_block_rows(weights.raw(L.q_weight), L);  // to_mat converts each head's rows once
  const torch::Tensor wk = k_block_rows(weights.raw(L.k_weight), L);
  for (int64_t h = 0; h < H; ++h) {
    ref::HeadInputs& hi = in.heads[h];
    hi.wq = to_mat(wq.narrow(0, h * dk, dk));
    hi.wk = to_mat(wk.narrow(0, h * dk, dk));
    if (m == SelectMethod::Grad) {
      hi.grad_wq = to_mat(lc->grad_q.narrow(0, h * dk, dk));
      hi.grad_wk = to_mat(lc->grad_k.narrow(0, h * dk, dk));
    }
  }
  if (m == SelectMethod::SWanda) in.rms = to_vec(lc->rms());
  return in;
}

}  // namespace

ref::HeadInputs selection_inputs(const LayerCalibration& lc, ref::SelectMethod method, int64_t head) {
  ref::HeadInputs in;
  if (method == ref::SelectMethod::Pca) {
    in.pca_q.sum = to_vec(lc.pca_sum_q.at(head));
    in.pca_q.outer = to_mat(lc.pca_outer_q.at(head));
    in.pca_q.n = lc.pca_n;
    in.pca_k.sum = to_vec(lc.pca_sum_k.at(head));
    in.pca_k.outer = to_mat(lc.pca_outer_k.at(head));
    in.pca_k.n = lc.pca_n;
  } else if (method == ref::SelectMethod::Drrqr) {
    in.m = to_mat(lc.rows.empty() ? lc.r.at(head) : lc.rows.at(head));
  } else {
    throw std::runtime_error(std::string("selection_inputs: ") + ref::method_name(method) +
                             " reads the weights, not only the calibration");
  }
  return in;
}

PruneResult select_for_checkpoint(const PruneOptions& opt, const Progress& progress) {
  validate_prune_options(opt);
  auto t0 = std::chrono::steady_clock::now();
  const json cfg = io::read_config(opt.checkpoint);
  const std::string cfg_path = (fs::path(opt.checkpoint) / "config.json").string();
  const auto layers = prunable_layers_from_config(cfg, cfg_path);
  const int dk = layers.front().head_k_dim;
  for (const auto& L : layers)
    if (L.head_k_dim != dk) throw std::runtime_error(cfg_path + ": layers differ in head_k_dim");
  if (!opt.keep_from.empty()) {
    PruneResult res = selection_from_keep_file(opt, cfg, layers);
    res.seconds_load = prune_seconds_since(t0);
    return res;
  }
  const int k = resolve_budget(opt, dk, cfg_path);
  const WeightSource weights = WeightSource::open_dir(opt.checkpoint);

  PruneResult res;
  CalibrationRun calib;
  if (method_needs_calibration(opt.method)) {
    calib = calibrate_for_method(opt, cfg, progress, res, t0);
  } else {
    // The data-free methods read only the q/k weights; the whole checkpoint is still checked as the loader checks it
    // so that a broken one (NaN weights, shapes or vocab that disagree with config.json, a missing tensor) stops here
    // with the loader's one-line error, not in a pruned copy: without holding a copy of the weights (a 2.6 GB
    // checkpoint peaked at 6.8 GB when it was loaded as a bf16 model here).
    check_causal_lm_loads(opt.checkpoint);
    res.seconds_load = prune_seconds_since(t0);
  }

  t0 = std::chrono::steady_clock::now();
  ref::SelectOptions so;
  so.method = method_of(opt.method);
  so.keep = k;
  so.side = side_of(opt.select);
  so.seed = opt.seed;
  so.f = opt.f;
  so.faithful = opt.faithful;
  json layers_rec = json::array();
  json diag = json::array();
  // Layers are independent (the seed rule reads the layer and the head): selected on the intra-op threads, recorded
  // in layer order below. Peak memory: one layer's f64 inputs per thread.
  std::vector<std::vector<ref::HeadSelection>> selected(layers.size());
  parallel_for_each(static_cast<int64_t>(layers.size()), [&](int64_t li) {
    const PrunableLayer& L = layers[static_cast<size_t>(li)];
    ref::SelectOptions lo = so;
    lo.layer = L.layer;  // the seed rule's layer (reference/select_rng.h): the model's layer index
    const LayerCalibration* lc = calib.cal.layers.empty() ? nullptr : &calib.cal.layers[static_cast<size_t>(li)];
    try {
      selected[static_cast<size_t>(li)] = ref::select_layer(layer_inputs(L, weights, lc, lo.method), lo);
    } catch (const ref::ShapeError& e) {  // the reference names the head only: add the checkpoint and the layer
      throw std::runtime_error(opt.checkpoint + ": layer " + std::to_string(L.layer) + ": " + e.what());
    }
  });
  for (size_t li = 0; li < layers.size(); ++li) {
    const PrunableLayer& L = layers[li];
    LayerSelection sel;
    sel.layer = L.layer;
    json heads = json::array();
    for (ref::HeadSelection& hs : selected[li]) {
      if (so.method == ref::SelectMethod::Pca) {
        sel.rotation.push_back(from_mat(hs.rotation));
        continue;
      }
      sel.keep.emplace_back(hs.keep.begin(), hs.keep.end());
      if (so.method == ref::SelectMethod::Drrqr)
        heads.push_back({{"swaps", hs.swaps}, {"max_rho", hs.max_rho}, {"certified", hs.certified}});
    }
    if (so.method == ref::SelectMethod::Drrqr) diag.push_back({{"layer", L.layer}, {"heads", heads}});
    json lr = {{"layer", L.layer}};
    if (sel.rotation.empty()) lr["keep"] = sel.keep;
    else lr["rotation"] = true;
    layers_rec.push_back(lr);
    res.selection.push_back(std::move(sel));
  }
  res.seconds_select = prune_seconds_since(t0);

  res.record = {{"statecut_version", STATECUT_VERSION},
                {"method", opt.method},
                {"select", opt.select},
                {"faithful", opt.faithful},
                {"f", opt.f},
                {"seed", opt.seed},
                {"ratio", opt.keep > 0 ? json(nullptr) : json(opt.ratio)},
                {"source", source_record(opt, cfg)},
                {"head_k_dim", dk},
                {"new_head_k_dim", k},
                {"calibration", calib.record},
                {"selection", {{"layers", layers_rec}}}};
  if (!diag.empty()) res.record["drrqr"] = diag;
  return res;
}

PruneResult prune_checkpoint(const PruneOptions& opt, const Progress& progress) {
  validate_prune_options(opt);
  AtomicDir out(opt.out);  // fails fast on an unwritable or existing --out, before any calibration
  PruneResult res = select_for_checkpoint(opt, progress);
  // A folder pruned before: its steps are kept and the keep sets composed back to the first source.
  res.record = with_pruning_history(std::move(res.record), opt.checkpoint);
  const auto t0 = std::chrono::steady_clock::now();
  write_pruned_checkpoint(opt.checkpoint, res.selection, out.path());
  std::ofstream rec(fs::path(out.path()) / "statecut.json", std::ios::binary);
  rec << compact_record_text(res.record);
  rec.close();
  if (!rec) throw std::runtime_error(out.target() + ": cannot write statecut.json");
  out.commit();
  res.seconds_write = prune_seconds_since(t0);
  return res;
}

}  // namespace statecut

#include "optimized/prune.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>

#include "optimized/prune_atomic_dir.h"
#include "optimized/text.h"
#include "optimized/tokenizer.h"
#include "optimized/weight_source.h"
#include "reference/pca.h"
#include "reference/rrqr.h"
#include "reference/selectors.h"

namespace statecut {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::vector<std::string> kMethods = {"rand", "l1", "swanda", "grad", "drrqr", "pca"};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

ref::Mat to_mat(const torch::Tensor& t) {
  const torch::Tensor c = t.to(torch::kCPU, torch::kFloat64).contiguous();
  return Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
      c.data_ptr<double>(), c.size(0), c.size(1));
}
ref::Vec to_vec(const torch::Tensor& t) {
  const torch::Tensor c = t.to(torch::kCPU, torch::kFloat64).contiguous();
  return Eigen::Map<const ref::Vec>(c.data_ptr<double>(), c.numel());
}
torch::Tensor from_mat(const ref::Mat& m) {
  torch::Tensor t = torch::empty({m.rows(), m.cols()}, torch::kFloat64);
  Eigen::Map<Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(t.data_ptr<double>(), m.rows(),
                                                                                     m.cols()) = m;
  return t;
}

json read_config(const std::string& dir) {
  const std::string path = (fs::path(dir) / "config.json").string();
  std::ifstream f(path);
  if (!f) throw std::runtime_error(path + ": cannot open (is --checkpoint a model folder?)");
  try {
    return json::parse(f);
  } catch (const json::parse_error& e) {
    throw std::runtime_error(path + ": invalid JSON: " + e.what());
  }
}

FeatureSide feature_side(const std::string& s) {
  if (s == "qk") return FeatureSide::Joint;
  if (s == "q") return FeatureSide::QOnly;
  return FeatureSide::KOnly;
}

}  // namespace

bool method_needs_calibration(const std::string& m) { return m == "swanda" || m == "grad" || m == "drrqr" || m == "pca"; }

void validate_prune_options(const PruneOptions& opt) {
  if (!opt.keep_from.empty()) {
    if (!opt.method.empty() || opt.ratio != 0 || opt.keep != 0)
      throw std::runtime_error("--keep-from replaces --method/--ratio/--keep: give only one of them");
    if (!fs::is_regular_file(opt.keep_from)) throw std::runtime_error(opt.keep_from + ": keep file not found");
    if (opt.out.empty()) throw std::runtime_error("--out DIR is required");
    return;
  }
  if (opt.method.empty()) throw std::runtime_error("give --method (rand, l1, swanda, grad, drrqr, pca) or --keep-from FILE");
  if (std::find(kMethods.begin(), kMethods.end(), opt.method) == kMethods.end())
    throw std::runtime_error("unknown --method '" + opt.method + "' (one of rand, l1, swanda, grad, drrqr, pca)");
  if ((opt.ratio != 0) == (opt.keep != 0)) throw std::runtime_error("give exactly one of --ratio R and --keep K");
  if (opt.keep == 0 && !(opt.ratio > 0 && opt.ratio < 1))
    throw std::runtime_error("--ratio must lie in the open interval (0, 1), got " + std::to_string(opt.ratio));
  if (opt.keep < 0) throw std::runtime_error("--keep must be >= 1, got " + std::to_string(opt.keep));
  if (opt.select != "qk" && opt.select != "q" && opt.select != "k")
    throw std::runtime_error("unknown --select '" + opt.select + "' (one of qk, q, k)");
  if (opt.device != "cpu" && opt.device.rfind("cuda", 0) != 0)
    throw std::runtime_error("unknown --device '" + opt.device + "' (cpu or cuda)");
  if (!(opt.f > 1)) throw std::runtime_error("--f must be > 1");
  if (method_needs_calibration(opt.method)) {
    if (opt.calib.empty()) throw std::runtime_error("--method " + opt.method + " needs calibration text: --calib FILE");
    if (opt.calib_seqs < 1 || opt.calib_len < 2)
      throw std::runtime_error("--calib-seqs must be >= 1 and --calib-len >= 2");
    for (const auto& c : opt.calib)
      if (!fs::is_regular_file(c)) throw std::runtime_error(c + ": calibration file not found");
  }
  if (opt.out.empty()) throw std::runtime_error("--out DIR is required");
}

PruneResult select_for_checkpoint(const PruneOptions& opt, const Progress& progress) {
  validate_prune_options(opt);
  auto t0 = std::chrono::steady_clock::now();
  const json cfg = read_config(opt.checkpoint);
  const std::string cfg_path = (fs::path(opt.checkpoint) / "config.json").string();
  const auto layers = prunable_layers_from_config(cfg, cfg_path);
  const int dk = layers.front().head_k_dim;
  for (const auto& L : layers)
    if (L.head_k_dim != dk) throw std::runtime_error(cfg_path + ": layers differ in head_k_dim");
  int k = 0;
  if (!opt.keep_from.empty()) {
    PruneResult res;
    res.selection = read_keep_file(opt.keep_from);
    json layers_rec = json::array();
    for (const auto& s : res.selection) layers_rec.push_back({{"layer", s.layer}, {"keep", s.keep}});
    res.record = {{"statecut_version", "0.1.0"},
                  {"method", "file"},
                  {"keep_from", opt.keep_from},
                  {"source", {{"checkpoint", opt.checkpoint}, {"model_type", cfg.value("model_type", "")}}},
                  {"head_k_dim", dk},
                  {"new_head_k_dim", res.selection.front().new_dim()},
                  {"calibration", nullptr},
                  {"selection", {{"layers", layers_rec}}}};
    res.seconds_load = seconds_since(t0);
    return res;
  }
  if (opt.keep > 0) {
    if (opt.keep > dk)
      throw std::runtime_error("--keep " + std::to_string(opt.keep) + " exceeds the key head dim dk = " + std::to_string(dk) +
                               " of " + cfg_path);
    k = opt.keep;
  } else {
    k = budget_for_ratio(dk, opt.ratio);
  }
  const WeightSource weights = WeightSource::open_dir(opt.checkpoint);

  PruneResult res;
  json calib_rec = nullptr;
  Calibration cal;
  if (method_needs_calibration(opt.method)) {
    const Tokenizer tok = Tokenizer::for_checkpoint(opt.checkpoint);
    const int64_t vocab = cfg.value("vocab_size", tok.vocab_size());
    TokenStream all;
    all.source = opt.calib.size() == 1 ? opt.calib.front() : std::string("calibration files");
    for (const auto& f : opt.calib) {
      TokenStream s = read_tokens(f, tok, vocab);
      all.ids.insert(all.ids.end(), s.ids.begin(), s.ids.end());
      all.bytes += s.bytes;
    }
    const Windows w = sample_windows(all, opt.calib_seqs, opt.calib_len, opt.seed);
    torch::Device dev(opt.device);
    if (dev.is_cuda() && !torch::cuda::is_available()) throw std::runtime_error("--device cuda: no CUDA device available");
    auto model = load_causal_lm(opt.checkpoint, torch::kFloat32, dev);
    res.seconds_load = seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    CalibrationNeeds needs;
    needs.side = feature_side(opt.select);
    needs.seed = opt.seed;
    needs.batch = opt.batch;
    needs.rms = opt.method == "swanda";
    needs.grad = opt.method == "grad";
    needs.pca = opt.method == "pca";
    needs.features = opt.method == "drrqr" && !opt.faithful;
    needs.rows = opt.method == "drrqr" && opt.faithful;
    cal = calibrate(*model, w.ids, needs, progress);
    res.seconds_calibrate = seconds_since(t0);
    calib_rec = {{"files", opt.calib},
                 {"tokenizer", tok.describe()},
                 {"stream_tokens", static_cast<int64_t>(all.ids.size())},
                 {"seqs", opt.calib_seqs},
                 {"len", opt.calib_len},
                 {"tokens", cal.tokens},
                 {"seed", opt.seed},
                 {"starts", w.starts}};
    if (needs.grad) calib_rec["mean_loss"] = cal.mean_loss;
  } else {
    // The data-free methods read only the q/k weights; the whole checkpoint is still loaded once as a model (bf16:
    // the smallest copy that keeps fp32's range) so that a broken one (NaN weights, shapes or vocab that disagree
    // with config.json, a missing tensor) stops here with the loader's one-line error, not in a pruned copy.
    (void)load_causal_lm(opt.checkpoint, torch::kBFloat16, torch::Device(torch::kCPU));
    res.seconds_load = seconds_since(t0);
  }

  t0 = std::chrono::steady_clock::now();
  ref::SelectOptions so;
  so.method = ref::method_from_name(opt.method);
  so.keep = k;
  so.side = ref::side_from_name(opt.select);
  so.seed = opt.seed;
  so.f = opt.f;
  so.faithful = opt.faithful;
  json layers_rec = json::array();
  json diag = json::array();
  for (size_t li = 0; li < layers.size(); ++li) {
    const PrunableLayer& L = layers[li];
    const int64_t H = L.num_key_heads;
    so.stream = static_cast<uint64_t>(L.layer);
    LayerSelection sel;
    sel.layer = L.layer;
    if (opt.method == "drrqr") {
      const LayerCalibration& lc = cal.layers[li];
      ref::RrqrOptions ro;
      ro.f = opt.f;
      ro.seed = opt.seed;
      ro.stream = so.stream;
      json hd = json::array();
      for (int64_t h = 0; h < H; ++h) {
        ref::RrqrResult rr;
        if (opt.faithful) {
          ro.mode = ref::DrrqrMode::Faithful;
          rr = ref::strong_rrqr(to_mat(lc.rows[h]), k, ro);
        } else {
          rr = ref::strong_rrqr(to_mat(lc.r[h]), k, ro);  // R of [Q; K]: same columns as M itself
        }
        std::vector<int64_t> keep(rr.perm.begin(), rr.perm.begin() + k);
        std::sort(keep.begin(), keep.end());
        sel.keep.push_back(keep);
        hd.push_back({{"swaps", rr.swaps}, {"max_rho", rr.max_rho}, {"certified", rr.certified}});
      }
      diag.push_back({{"layer", L.layer}, {"heads", hd}});
    } else if (opt.method == "pca") {
      const LayerCalibration& lc = cal.layers[li];
      for (int64_t h = 0; h < H; ++h) {
        ref::PcaStats sq, sk;
        sq.sum = to_vec(lc.pca_sum_q[h]);
        sq.outer = to_mat(lc.pca_outer_q[h]);
        sq.n = lc.pca_n;
        sk.sum = to_vec(lc.pca_sum_k[h]);
        sk.outer = to_mat(lc.pca_outer_k[h]);
        sk.n = lc.pca_n;
        const ref::PcaStats st =
            so.side == ref::ScoreSide::Joint ? ref::average_stats(sq, sk) : (so.side == ref::ScoreSide::QOnly ? sq : sk);
        sel.rotation.push_back(from_mat(ref::pca_rotation(st.covariance(), k)));
      }
    } else {
      const torch::Tensor wq = q_block_rows(weights.raw(L.q_weight), L).to(torch::kFloat64);
      const torch::Tensor wk = k_block_rows(weights.raw(L.k_weight), L).to(torch::kFloat64);
      ref::LayerInputs in;
      for (int64_t h = 0; h < H; ++h) {
        ref::HeadInputs hi;
        hi.wq = to_mat(wq.narrow(0, h * dk, dk));
        hi.wk = to_mat(wk.narrow(0, h * dk, dk));
        if (opt.method == "grad") {
          hi.grad_wq = to_mat(cal.layers[li].grad_q.narrow(0, h * dk, dk));
          hi.grad_wk = to_mat(cal.layers[li].grad_k.narrow(0, h * dk, dk));
        }
        in.heads.push_back(std::move(hi));
      }
      if (opt.method == "swanda") in.rms = to_vec(cal.layers[li].rms());
      for (const auto& kh : ref::select_channels(in, so)) sel.keep.emplace_back(kh.begin(), kh.end());
    }
    json lr = {{"layer", L.layer}};
    if (sel.rotation.empty()) lr["keep"] = sel.keep;
    else lr["rotation"] = true;
    layers_rec.push_back(lr);
    res.selection.push_back(std::move(sel));
  }
  res.seconds_select = seconds_since(t0);

  res.record = {{"statecut_version", "0.1.0"},
                {"method", opt.method},
                {"select", opt.select},
                {"faithful", opt.faithful},
                {"f", opt.f},
                {"seed", opt.seed},
                {"ratio", opt.keep > 0 ? json(nullptr) : json(opt.ratio)},
                {"source", {{"checkpoint", opt.checkpoint}, {"model_type", cfg.value("model_type", "")}}},
                {"head_k_dim", dk},
                {"new_head_k_dim", k},
                {"calibration", calib_rec},
                {"selection", {{"layers", layers_rec}}}};
  if (!diag.empty()) res.record["drrqr"] = diag;
  return res;
}

PruneResult prune_checkpoint(const PruneOptions& opt, const Progress& progress) {
  validate_prune_options(opt);
  AtomicDir out(opt.out);  // fails fast on an unwritable or existing --out, before any calibration
  PruneResult res = select_for_checkpoint(opt, progress);
  const auto t0 = std::chrono::steady_clock::now();
  write_pruned_checkpoint(opt.checkpoint, res.selection, out.path());
  std::ofstream rec(fs::path(out.path()) / "statecut.json", std::ios::binary);
  rec << res.record.dump(2) << "\n";
  rec.close();
  if (!rec) throw std::runtime_error(out.target() + ": cannot write statecut.json");
  out.commit();
  res.seconds_write = seconds_since(t0);
  return res;
}

}  // namespace statecut

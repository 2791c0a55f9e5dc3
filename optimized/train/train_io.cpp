// Output and state files of the trainer (train_io.h).
#include "optimized/train/train_io.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "optimized/io/checkpoint.h"
#include "optimized/io/safetensors.h"
#include "optimized/models/io_dtype.h"
#include "optimized/models/weight_source.h"

namespace statecut {
namespace fs = std::filesystem;
namespace {

[[noreturn]] void train_io_fail(const std::string& msg) { throw std::runtime_error(msg); }

}  // namespace

void write_updated_checkpoint(const std::string& src_dir, const std::map<std::string, torch::Tensor>& changed,
                              const std::string& dir) {
  std::vector<std::string> files;
  const fs::path index = fs::path(src_dir) / "model.safetensors.index.json";
  if (fs::exists(fs::path(src_dir) / "model.safetensors")) {
    files.push_back("model.safetensors");
  } else if (fs::exists(index)) {
    std::set<std::string> shards;
    for (const auto& [name, shard] : io::read_json_file(index.string()).at("weight_map").items())
      shards.insert(shard.get<std::string>());
    files.assign(shards.begin(), shards.end());
    fs::copy_file(index, fs::path(dir) / index.filename());  // tensor sizes and names do not change
  } else {
    train_io_fail(io::no_weights_message(src_dir));
  }
  std::set<std::string> written;
  for (const auto& f : files) {
    const auto in = io::SafetensorsFile::open((fs::path(src_dir) / f).string());
    io::SafetensorsWriter w;
    std::vector<torch::Tensor> keep_alive;
    for (const auto& name : in.names()) {
      const auto& view = in.tensor(name);
      auto it = changed.find(name);
      if (it == changed.end()) {
        w.add(view);
        continue;
      }
      const torch::Tensor t = it->second.detach().to(torch::kCPU, torch_dtype(view.dtype)).contiguous();
      if (t.sizes().vec() != view.shape)
        train_io_fail((fs::path(src_dir) / f).string() + ": " + name + ": the trained tensor's shape differs from the stored one");
      keep_alive.push_back(t);
      w.add_borrowed(name, view.dtype, view.shape, t.data_ptr(), static_cast<size_t>(t.nbytes()));
      written.insert(name);
    }
    w.set_metadata(in.metadata());
    w.write((fs::path(dir) / f).string());
  }
  for (const auto& [name, t] : changed)
    if (!written.count(name)) train_io_fail(src_dir + ": the checkpoint holds no tensor '" + name + "'");
  fs::copy_file(fs::path(src_dir) / "config.json", fs::path(dir) / "config.json");
  io::copy_companion_files(src_dir, dir);  // tokenizer, chat template, generation config, licence
}

void save_tensor_file(const std::string& path, const std::vector<std::pair<std::string, torch::Tensor>>& tensors) {
  io::SafetensorsWriter w;
  std::vector<torch::Tensor> keep_alive;
  for (const auto& [name, t0] : tensors) {
    const torch::Tensor t = t0.detach().to(torch::kCPU).contiguous();
    keep_alive.push_back(t);
    w.add_borrowed(name, io_dtype_of(t.scalar_type()), t.sizes().vec(), t.data_ptr(), static_cast<size_t>(t.nbytes()));
  }
  w.write(path);  // the writer itself goes through a temporary and a rename
}

std::map<std::string, torch::Tensor> load_tensor_file(const std::string& path) {
  const auto f = io::SafetensorsFile::open(path);
  std::map<std::string, torch::Tensor> out;
  for (const auto& name : f.names()) out.emplace(name, tensor_from_view(f.tensor(name)));
  return out;
}

std::string loss_csv(const std::vector<StepRecord>& rows) {
  std::ostringstream o;
  o << "step,lr,loss,ce,kd,grad_norm,tokens,seconds,eval_bpb\n";
  char buf[512];
  for (const auto& r : rows) {
    std::snprintf(buf, sizeof buf, "%lld,%.9g,%.9g,%.9g,%.9g,%.9g,%lld,%.3f,", static_cast<long long>(r.step), r.lr,
                  r.loss, r.ce, r.kd, r.grad_norm, static_cast<long long>(r.tokens), r.seconds);
    o << buf;
    if (r.eval_bpb >= 0) {
      std::snprintf(buf, sizeof buf, "%.6f", r.eval_bpb);
      o << buf;
    }
    o << "\n";
  }
  return o.str();
}

std::string loss_svg(const std::vector<StepRecord>& rows, const std::string& title) {
  const double W = 720, H = 400, L = 60, R = 60, T = 40, B = 50;
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H << "\" font-family=\"sans-serif\" "
    << "font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o << "<text x=\"" << W / 2 << "\" y=\"20\" text-anchor=\"middle\" font-size=\"14\">" << title << "</text>\n";
  if (rows.empty()) return o.str() + "</svg>\n";
  double lo = 1e300, hi = -1e300, elo = 1e300, ehi = -1e300;
  for (const auto& r : rows) {
    for (double v : {r.loss, r.ce, r.kd})
      if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
    if (r.eval_bpb >= 0) elo = std::min(elo, r.eval_bpb), ehi = std::max(ehi, r.eval_bpb);
  }
  if (!(hi > lo)) hi = lo + 1;
  const double s0 = static_cast<double>(rows.front().step), s1 = std::max(s0 + 1, static_cast<double>(rows.back().step));
  auto X = [&](double s) { return L + (s - s0) / (s1 - s0) * (W - L - R); };
  auto Y = [&](double v, double a, double b) { return H - B - (v - a) / (b - a) * (H - T - B); };
  o << "<line x1=\"" << L << "\" y1=\"" << H - B << "\" x2=\"" << W - R << "\" y2=\"" << H - B << "\" stroke=\"black\"/>\n";
  o << "<line x1=\"" << L << "\" y1=\"" << T << "\" x2=\"" << L << "\" y2=\"" << H - B << "\" stroke=\"black\"/>\n";
  char buf[128];
  for (int i = 0; i <= 4; ++i) {
    const double v = lo + (hi - lo) * i / 4;
    std::snprintf(buf, sizeof buf, "%.3g", v);
    o << "<text x=\"" << L - 5 << "\" y=\"" << Y(v, lo, hi) + 4 << "\" text-anchor=\"end\">" << buf << "</text>\n";
  }
  o << "<text x=\"" << (L + W - R) / 2 << "\" y=\"" << H - 15 << "\" text-anchor=\"middle\">step (" << rows.front().step
    << " to " << rows.back().step << ")</text>\n";
  auto poly = [&](auto value, const char* colour, const char* label, int slot, double a, double b) {
    o << "<polyline fill=\"none\" stroke=\"" << colour << "\" stroke-width=\"1.5\" points=\"";
    for (const auto& r : rows) {
      const double v = value(r);
      if (std::isfinite(v) && v >= 0) o << X(static_cast<double>(r.step)) << "," << Y(v, a, b) << " ";
    }
    o << "\"/>\n<text x=\"" << L + 10 + slot * 130 << "\" y=\"" << T - 5 << "\" fill=\"" << colour << "\">" << label
      << "</text>\n";
  };
  poly([](const StepRecord& r) { return r.loss; }, "black", "loss", 0, lo, hi);
  poly([](const StepRecord& r) { return r.ce; }, "#1f77b4", "cross-entropy", 1, lo, hi);
  poly([](const StepRecord& r) { return r.kd; }, "#d62728", "KD (KL, before T^2)", 2, lo, hi);
  if (ehi >= elo) {
    if (!(ehi > elo)) ehi = elo + 0.01;
    poly([](const StepRecord& r) { return r.eval_bpb; }, "#2ca02c", "eval bits/byte (right axis)", 3, elo, ehi);
    for (int i = 0; i <= 4; ++i) {
      const double v = elo + (ehi - elo) * i / 4;
      std::snprintf(buf, sizeof buf, "%.4g", v);
      o << "<text x=\"" << W - R + 5 << "\" y=\"" << Y(v, elo, ehi) + 4 << "\" fill=\"#2ca02c\">" << buf << "</text>\n";
    }
  }
  return o.str() + "</svg>\n";
}

nlohmann::json step_to_json(const StepRecord& r) {
  return {{"step", r.step}, {"lr", r.lr},         {"loss", r.loss},       {"ce", r.ce},
          {"kd", r.kd},     {"grad_norm", r.grad_norm}, {"tokens", r.tokens}, {"seconds", r.seconds},
          {"eval_bpb", r.eval_bpb}};
}

StepRecord step_from_json(const nlohmann::json& j) {
  auto num = [&](const char* k) {  // NaN is stored as null by nlohmann::json
    const auto& v = j.at(k);
    return v.is_null() ? std::nan("") : v.get<double>();
  };
  StepRecord r;
  r.step = j.at("step").get<int64_t>();
  r.lr = num("lr"), r.loss = num("loss"), r.ce = num("ce"), r.kd = num("kd"), r.grad_norm = num("grad_norm");
  r.tokens = j.at("tokens").get<int64_t>();
  r.seconds = num("seconds"), r.eval_bpb = num("eval_bpb");
  return r;
}

nlohmann::json input_identity(const std::string& path) {
  std::error_code ec;
  const fs::path canon = fs::weakly_canonical(fs::absolute(path), ec);
  uint64_t h = 1469598103934665603ULL;  // FNV-1a
  const auto eat = [&h](const std::string& bytes) {
    for (const unsigned char c : bytes) h = (h ^ c) * 1099511628211ULL;
  };
  const auto eat_file = [&](const fs::path& f) {
    std::ifstream in(f, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    eat(f.filename().string() + "\n" + s.str());
  };
  if (fs::is_directory(canon, ec)) {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(canon, ec))
      if (e.is_regular_file()) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      const std::string name = f.filename().string();
      if (name == "config.json" || name == "statecut.json") eat_file(f);
      else if (f.extension() == ".safetensors") eat(name + " " + std::to_string(fs::file_size(f, ec)) + "\n");
    }
  } else {
    eat_file(canon);
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return {{"path", canon.string()}, {"fingerprint", hex}};
}

}  // namespace statecut

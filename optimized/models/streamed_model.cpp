#include "optimized/models/streamed_model.h"

#include <algorithm>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>

#include "optimized/models/model_registry.h"

namespace statecut {
namespace {

/// The layer index in a tensor name ("….layers.<i>.…"), or −1 for an outer tensor.
int64_t block_of(const std::string& name) {
  static const std::regex layer_re(R"((^|\.)layers\.(\d+)\.)");
  std::smatch m;
  return std::regex_search(name, m, layer_re) ? std::stoll(m[2].str()) : -1;
}

int64_t nbytes_of(const std::vector<int64_t>& shape, torch::Dtype dtype) {
  int64_t n = static_cast<int64_t>(c10::elementSize(dtype));
  for (const int64_t d : shape) n *= d;
  return n;
}

}  // namespace

StreamedModel StreamedModel::load(const std::string& dir, torch::Dtype dtype, int64_t min_numel) {
  StreamedModel s;
  s.model_ = load_causal_lm_placeholders(dir, dtype, torch::Device(torch::kCPU), min_numel);
  s.source_ = WeightSource::open_dir(dir);
  for (auto& [name, t] : s.model_->named_parameters()) {
    if (t.numel() < min_numel) continue;  // copied at load: stays
    Entry e;
    e.name = name;
    e.t = t;
    e.shape = t.sizes().vec();
    e.dtype = t.scalar_type();
    e.block = block_of(name);
    e.embedding = e.block < 0 && name.find("embed") != std::string::npos;
    s.any_embedding_ = s.any_embedding_ || e.embedding;
    s.num_blocks_ = std::max(s.num_blocks_, e.block + 1);
    s.streamed_bytes_ += nbytes_of(e.shape, e.dtype);
    e.resident = true;  // an uninitialised placeholder (torch::empty: no page touched) until release_all() below
    s.resident_bytes_ += nbytes_of(e.shape, e.dtype);
    s.entries_.push_back(std::move(e));
  }
  s.release_all();
  return s;
}

ForwardOptions StreamedModel::options(ForwardOptions opt) {
  opt.before_block = [this](int64_t block) { enter(block); };
  return opt;
}

bool StreamedModel::wanted(const Entry& e, int64_t block) const {
  if (block < 0) return e.block < 0 && (e.embedding || !any_embedding_);
  if (block >= num_blocks_) return e.block < 0;
  return e.block == block;
}

void StreamedModel::enter(int64_t block) {
  torch::NoGradGuard no_grad;
  for (auto& e : entries_)  // give back first, so the peak is one block's, not two
    if (e.resident && !wanted(e, block)) give_back(e);
  for (auto& e : entries_) {
    if (!e.resident && wanted(e, block)) {
      e.t.set_(source_.get(e.name, e.shape, e.dtype, torch::Device(torch::kCPU)));
      e.resident = true;
      resident_bytes_ += nbytes_of(e.shape, e.dtype);
      peak_resident_bytes_ = std::max(peak_resident_bytes_, resident_bytes_);  // as held, tensor by tensor
    }
  }
}

void StreamedModel::release_all() {
  torch::NoGradGuard no_grad;
  for (auto& e : entries_)
    if (e.resident) give_back(e);
}

void StreamedModel::give_back(Entry& e) {
  e.t.set_(torch::empty({0}, torch::TensorOptions().dtype(e.dtype)));  // frees the block's storage
  e.resident = false;
  resident_bytes_ -= nbytes_of(e.shape, e.dtype);
}

PassModel::PassModel(const std::string& dir, torch::Dtype dtype, torch::Device device, bool stream) {
  if (stream && !device.is_cpu()) throw std::runtime_error("streamed weights run on the CPU only");
  if (stream) streamed_ = std::make_unique<StreamedModel>(StreamedModel::load(dir, dtype));
  else whole_ = load_causal_lm(dir, dtype, device);
}

int64_t weights_bytes_as(const std::string& dir, torch::Dtype dtype) {
  const WeightSource w = WeightSource::open_dir(dir);
  int64_t total = 0;
  for (const auto& name : w.names()) total += nbytes_of(w.shape(name), dtype);
  return total;
}

int64_t available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string key;
    int64_t kib = 0;
    if (ls >> key >> kib && key == "MemAvailable:") return kib * 1024;
  }
  return -1;
}

bool weights_fit_in_memory(const std::string& dir, torch::Dtype dtype) {
  const int64_t avail = available_memory_bytes();
  return avail < 0 || weights_bytes_as(dir, dtype) <= avail / 2;
}

}  // namespace statecut

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

namespace {

/// The first number in a file ("max", absent or unreadable: −1).
int64_t read_bytes(const std::string& path) {
  std::ifstream in(path);
  int64_t v = -1;
  return in >> v ? v : -1;
}

/// The value of `key` in a "key value" file (memory.stat), or 0.
int64_t stat_value(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string k;
  int64_t v = 0;
  while (in >> k >> v)
    if (k == key) return v;
  return 0;
}

/// The room under the memory limits of this process's cgroup and its ancestors (a container's or a CI job's limit,
/// which /proc/meminfo does not show): min over limited levels of limit − usage + inactive file pages (reclaimable,
/// as the page cache of a mapped checkpoint is). cgroup v2 (memory.max, memory.current) and v1 (memory controller:
/// memory.limit_in_bytes, memory.usage_in_bytes). −1 when no level has a limit.
int64_t cgroup_room(const std::string& root) {
  std::ifstream in(root + "/proc/self/cgroup");
  std::string line, v2, v1;
  while (std::getline(in, line)) {  // "id:controllers:path"
    const auto a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string id = line.substr(0, a), ctl = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (id == "0" && ctl.empty()) v2 = path;
    std::istringstream cs(ctl);
    for (std::string c; std::getline(cs, c, ',');)
      if (c == "memory") v1 = path;
  }
  constexpr int64_t kNoLimit = int64_t{1} << 60;  // v1 writes "no limit" as ~2^63
  int64_t room = -1;
  auto level = [&](const std::string& dir, const char* limit, const char* usage, const char* inactive) {
    const int64_t lim = read_bytes(dir + "/" + limit), use = read_bytes(dir + "/" + usage);
    if (lim < 0 || lim >= kNoLimit || use < 0) return;
    const int64_t r = std::max<int64_t>(0, lim - use + stat_value(dir + "/memory.stat", inactive));
    room = room < 0 ? r : std::min(room, r);
  };
  auto walk = [&](const std::string& base, std::string path, const char* limit, const char* usage, const char* inactive) {
    while (true) {
      level(base + (path == "/" ? "" : path), limit, usage, inactive);
      if (path.empty() || path == "/") break;
      const auto cut = path.find_last_of('/');
      path = cut == 0 || cut == std::string::npos ? "/" : path.substr(0, cut);
    }
  };
  if (!v1.empty()) walk(root + "/sys/fs/cgroup/memory", v1, "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file");
  if (!v2.empty()) walk(root + "/sys/fs/cgroup", v2, "memory.max", "memory.current", "inactive_file");
  return room;
}

}  // namespace

int64_t available_memory_bytes(const std::string& root) {
  int64_t avail = -1;
  std::ifstream in(root + "/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string key;
    int64_t kib = 0;
    if (ls >> key >> kib && key == "MemAvailable:") avail = kib * 1024;
  }
  const int64_t room = cgroup_room(root);
  if (room >= 0) avail = avail < 0 ? room : std::min(avail, room);
  return avail;
}

bool weights_fit_in_memory(const std::string& dir, torch::Dtype dtype) {
  const int64_t avail = available_memory_bytes();
  return avail < 0 || weights_bytes_as(dir, dtype) <= avail / 2;
}

bool should_stream_weights(const std::string& mode, const std::string& dir, torch::Device device, bool needs_grad) {
  if (!device.is_cpu() || needs_grad || mode == "off") return false;
  return mode == "on" || !weights_fit_in_memory(dir, torch::kFloat32);
}

}  // namespace statecut

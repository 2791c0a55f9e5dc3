// Checkpoint I/O speed on a 1.3B-shaped DeltaNet checkpoint (fla-hub/delta_net-1.3B-100B shapes,
// its config.json: 339 tensors, 1,365,677,056 bf16 parameters, 2.73 GB), random weights written
// by our own writer into a temporary directory (STATECUT_BENCH_DIR, default the system temp dir) and
// deleted at exit. Targets (issue 4, item 6): open + reach the first tensor < 1 s; read everything from
// the page cache at >= 1 GB/s (bytes of the file per second, converting bf16 → f32 as a model load does).
// Before timing, the file is re-opened and checked: tensor count, parameter count, and one tensor's bytes.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

#include "optimized/io/remove_tree.h"
#include "optimized/io/safetensors.h"

namespace io = statecut::io;
namespace fs = std::filesystem;

namespace {

struct Shape {
  std::string name;
  std::vector<int64_t> shape;
};

std::vector<Shape> delta_net_1p3b() {
  const int64_t H = 2048, I = 5632, V = 32000, heads = 16, dh = 128, L = 24;
  std::vector<Shape> s = {{"model.embeddings.weight", {V, H}}, {"model.norm.weight", {H}}, {"lm_head.weight", {V, H}}};
  for (int64_t i = 0; i < L; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    s.push_back({p + "attn_norm.weight", {H}});
    s.push_back({p + "attn.q_proj.weight", {H, H}});
    s.push_back({p + "attn.k_proj.weight", {H, H}});
    s.push_back({p + "attn.v_proj.weight", {H, H}});
    s.push_back({p + "attn.b_proj.weight", {heads, H}});
    s.push_back({p + "attn.q_conv1d.weight", {H, 1, 4}});
    s.push_back({p + "attn.k_conv1d.weight", {H, 1, 4}});
    s.push_back({p + "attn.v_conv1d.weight", {H, 1, 4}});
    s.push_back({p + "attn.o_norm.weight", {dh}});
    s.push_back({p + "attn.o_proj.weight", {H, H}});
    s.push_back({p + "mlp_norm.weight", {H}});
    s.push_back({p + "mlp.gate_proj.weight", {I, H}});
    s.push_back({p + "mlp.up_proj.weight", {I, H}});
    s.push_back({p + "mlp.down_proj.weight", {H, I}});
  }
  return s;
}

int64_t numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t x : s) n *= x;
  return n;
}

std::string g_path;
std::string g_first;  // first tensor in file order
int64_t g_file_bytes = 0;

uint64_t seed() {
  const char* e = std::getenv("STATECUT_SEED");
  return e ? std::strtoull(e, nullptr, 10) : 20260204ULL;
}

/// Writes the checkpoint; tensors borrow slices of one random bf16 pool (memory stays ~150 MB).
void write_checkpoint(const std::string& path, std::vector<uint16_t>& pool) {
  const auto shapes = delta_net_1p3b();
  int64_t largest = 0, total = 0;
  for (const auto& s : shapes) largest = std::max(largest, numel(s.shape)), total += numel(s.shape);
  std::mt19937_64 rng(seed());
  std::uniform_real_distribution<float> u(-0.05f, 0.05f);
  pool.resize(static_cast<std::size_t>(largest + 4096));
  for (auto& b : pool) {
    const float f = u(rng);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    b = static_cast<uint16_t>(bits >> 16);
  }
  io::SafetensorsWriter w;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const int64_t n = numel(shapes[i].shape);
    w.add_borrowed(shapes[i].name, io::DType::BF16, shapes[i].shape, pool.data() + (i * 97) % 4096,
                   static_cast<std::size_t>(n) * 2);
  }
  w.set_metadata({{"format", "pt"}});
  const auto t0 = std::chrono::steady_clock::now();
  w.write(path);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cerr << "wrote " << shapes.size() << " tensors, " << total << " params, " << fs::file_size(path)
            << " bytes in " << s << " s (" << fs::file_size(path) / s / 1e9 << " GB/s incl. fsync)\n";
}

/// The benchmark's own output check: counts and one tensor's bytes against the pool it came from.
bool check_checkpoint(const std::string& path, const std::vector<uint16_t>& pool) {
  const auto shapes = delta_net_1p3b();
  const auto f = io::SafetensorsFile::open(path);
  int64_t params = 0;
  for (const auto& n : f.names()) params += f.tensor(n).numel();
  if (f.names().size() != 339 || params != 1365677056) {
    std::cerr << "unexpected checkpoint: " << f.names().size() << " tensors, " << params << " params\n";
    return false;
  }
  const std::size_t i = 7;  // layer 0 q_conv1d: a small tensor at a known pool offset
  const auto& t = f.tensor(shapes[i].name);
  if (t.shape != shapes[i].shape || std::memcmp(t.data, pool.data() + (i * 97) % 4096, t.nbytes) != 0) {
    std::cerr << "tensor bytes differ from what was written\n";
    return false;
  }
  g_first = f.names().front();
  g_file_bytes = static_cast<int64_t>(fs::file_size(path));
  return true;
}

void BM_OpenAndReachFirstTensor(benchmark::State& state) {
  for (auto _ : state) {
    const auto f = io::SafetensorsFile::open(g_path);
    const auto& t = f.tensor(f.names().front());
    // "reach": read the first element's bytes and convert the first 1024 values
    io::TensorView head = t;
    head.nbytes = std::min<std::size_t>(t.nbytes, 2048);
    benchmark::DoNotOptimize(io::to_float(head));
  }
}
BENCHMARK(BM_OpenAndReachFirstTensor)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_ReadAllToFloat(benchmark::State& state) {
  for (auto _ : state) {
    const auto f = io::SafetensorsFile::open(g_path);
    double sum = 0;
    for (const auto& n : f.names()) {
      const std::vector<float> v = io::to_float(f.tensor(n));
      sum += v.empty() ? 0.0 : v[v.size() / 2];
    }
    benchmark::DoNotOptimize(sum);
  }
  state.SetBytesProcessed(state.iterations() * g_file_bytes);
}
BENCHMARK(BM_ReadAllToFloat)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

void BM_ReadAllToFloatBuffer(benchmark::State& state) {
  // The same conversion into one reused buffer: what loading into preallocated model tensors costs.
  std::vector<float> buf;
  for (auto _ : state) {
    const auto f = io::SafetensorsFile::open(g_path);
    double sum = 0;
    for (const auto& n : f.names()) {
      const auto& t = f.tensor(n);
      if (buf.size() < static_cast<std::size_t>(t.numel())) buf.resize(static_cast<std::size_t>(t.numel()));
      io::to_float(t, buf.data());
      sum += buf[static_cast<std::size_t>(t.numel()) / 2];
    }
    benchmark::DoNotOptimize(sum);
  }
  state.SetBytesProcessed(state.iterations() * g_file_bytes);
}
BENCHMARK(BM_ReadAllToFloatBuffer)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

void BM_ReadAllRawBytes(benchmark::State& state) {
  // Touches every byte of every tensor through the zero-copy views (the mmap + page-cache ceiling).
  for (auto _ : state) {
    const auto f = io::SafetensorsFile::open(g_path);
    uint64_t acc = 0;
    for (const auto& n : f.names()) {
      const auto& t = f.tensor(n);
      for (std::size_t i = 0; i + 8 <= t.nbytes; i += 8) {
        uint64_t x;
        std::memcpy(&x, t.data + i, 8);
        acc += x;
      }
    }
    benchmark::DoNotOptimize(acc);
  }
  state.SetBytesProcessed(state.iterations() * g_file_bytes);
}
BENCHMARK(BM_ReadAllRawBytes)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  const char* dir_env = std::getenv("STATECUT_BENCH_DIR");
  const fs::path dir = fs::path(dir_env ? dir_env : fs::temp_directory_path().string()) /
                       ("statecut_io_open_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  g_path = (dir / "model.safetensors").string();
  int rc = 0;
  try {
    std::vector<uint16_t> pool;
    write_checkpoint(g_path, pool);
    if (!check_checkpoint(g_path, pool)) rc = 1;
    else benchmark::RunSpecifiedBenchmarks();
  } catch (const std::exception& e) {
    std::cerr << "bench_io_open: " << e.what() << "\n";
    rc = 1;
  }
  statecut::remove_tree(dir.string());  // 2.7 GB: never leave it behind
  benchmark::Shutdown();
  return rc;
}

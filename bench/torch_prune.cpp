// End-to-end pruning of the shipped model (assets/byte_delta_net_4L, 3.56M parameters, bf16) on CPU:
// load + calibration of N × L tokens of pydocs_train + selection + surgery + atomic write (DESIGN.md §7:
// drrqr with 16 × 2048 tokens < 20 s on 2 cores). Each run first checks its own output: statecut.json
// keeps 32 of 64 channels in every head of the 4 layers, and the checkpoint reloads with k_proj [128, 256].
// Args: calibration sequences, tokens per sequence. STATECUT_BENCH_METHODS=drrqr,grad,... picks the methods.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "optimized/prune/prune.h"
#include "optimized/io/safetensors.h"
#include "optimized/io/remove_tree.h"

namespace fs = std::filesystem;

namespace {

const fs::path kRoot = fs::path(__FILE__).parent_path().parent_path();

std::string corpus() {
  const fs::path shared = kRoot / ".." / "shared" / "corpora" / "pydocs_train.txt";
  return (fs::exists(shared) ? shared : kRoot / "assets" / "corpora" / "pydocs_train.txt").string();
}

void BM_PruneShippedModel(benchmark::State& state, std::string method) {
  statecut::PruneOptions o;
  o.checkpoint = (kRoot / "assets" / "byte_delta_net_4L").string();
  o.method = method;
  o.ratio = 0.5;
  o.calib = {corpus()};
  o.calib_seqs = state.range(0);
  o.calib_len = state.range(1);
  double calib = 0, select = 0, total = 0;
  int n = 0;
  for (auto _ : state) {
    const fs::path out = fs::temp_directory_path() / ("statecut-bench-" + method + "-" + std::to_string(::getpid()));
    statecut::remove_tree(out.string());
    o.out = out.string();
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = statecut::prune_checkpoint(o);
    total += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    state.PauseTiming();
    bool ok = r.selection.size() == 4;
    for (const auto& s : r.selection) ok = ok && s.new_dim() == 32;
    const auto w = statecut::io::SafetensorsFile::open((out / "model.safetensors").string());
    ok = ok && w.tensor("model.layers.2.attn.k_proj.weight").shape == std::vector<int64_t>{128, 256};
    statecut::remove_tree(out.string());
    if (!ok) {
      state.SkipWithError("pruned checkpoint has the wrong shape");
      break;
    }
    calib += r.seconds_calibrate;
    select += r.seconds_select;
    ++n;
    state.ResumeTiming();
  }
  if (n) {
    state.counters["calibrate_s"] = calib / n;
    state.counters["select_s"] = select / n;
    state.counters["total_s"] = total / n;
    state.counters["tokens"] = static_cast<double>(o.calib_seqs * o.calib_len);
  }
}

int register_all() {
  const char* env = std::getenv("STATECUT_BENCH_METHODS");
  std::stringstream ss(env ? env : "drrqr,grad,swanda,pca,l1,rand");
  for (std::string m; std::getline(ss, m, ',');) {
    benchmark::RegisterBenchmark(("prune_shipped/" + m).c_str(), BM_PruneShippedModel, m)
        ->Args({16, 2048})
        ->Iterations(1)
        ->Unit(benchmark::kSecond)
        ->UseRealTime();
  }
  return 0;
}
const int registered = register_all();

}  // namespace

BENCHMARK_MAIN();

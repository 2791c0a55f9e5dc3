// Google Benchmark of the CUDA gated delta rule kernels (issue 6 shapes, from tests/gpu/gated_delta_cases.h).
// GPU time by CUDA events around the raw kernel launch (no host-side binding work inside the timed region), L2
// flushed by a 256 MiB memset before every iteration, every output checked once before timing.
// Counters: prefill TFLOP/s (prefill_flops of tests/gpu/gated_delta_cases.h), decode GB/s of state read + written and its share of the
// device copy bandwidth measured in the same run, speedup of each reduced dk over dk = 128, and, when
// STATECUT_FLA_TIMES names the file bench/cuda_fla_compare.py wrote, the ratio fla time / our time.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "tests/gpu/gated_delta_cases.h"

#ifdef STATECUT_WITH_CUDA_KERNELS
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime_api.h>
#include <torch/cuda.h>

#include "kernels/gated_delta.h"

namespace {

using namespace statecut::gpu_cases;
using statecut::cuda::GatedDeltaArgs;

#define CU(x)                                                                        \
  do {                                                                               \
    cudaError_t e_ = (x);                                                            \
    if (e_ != cudaSuccess) {                                                         \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
      std::abort();                                                                  \
    }                                                                                \
  } while (0)

struct Timer {
  cudaEvent_t a, b;
  void* flush = nullptr;
  size_t flush_bytes = size_t(256) << 20;
  Timer() {
    CU(cudaEventCreate(&a));
    CU(cudaEventCreate(&b));
    CU(cudaMalloc(&flush, flush_bytes));
  }
  template <typename F>
  double ms(F&& f) {  // one flushed, event-timed call
    CU(cudaMemsetAsync(flush, 0, flush_bytes, 0));
    CU(cudaEventRecord(a, 0));
    f();
    CU(cudaEventRecord(b, 0));
    CU(cudaEventSynchronize(b));
    float t = 0;
    CU(cudaEventElapsedTime(&t, a, b));
    return t;
  }
};
Timer& timer() {
  static Timer t;
  return t;
}

// Mean of the benchmark's iterations, each one flushed, event-timed call of launch().
template <typename F>
double timed_mean_ms(benchmark::State& st, F&& launch) {
  double total = 0;
  int n = 0;
  for (auto _ : st) {
    const double t = timer().ms(launch);
    st.SetIterationTime(t / 1e3);
    total += t, ++n;
  }
  return n > 0 ? total / n : 0.0;
}

double g_copy_gbs = 0;                        // device copy bandwidth measured in this run
std::map<std::string, double> g_ms;           // our time per shape, for dk speedups
std::map<std::string, double> load_fla() {    // "kind B T K ms" lines
  std::map<std::string, double> m;
  const char* path = std::getenv("STATECUT_FLA_TIMES");
  if (!path) return m;
  std::ifstream f(path);
  std::string kind;
  int B, T, K;
  double ms;
  while (f >> kind >> B >> T >> K >> ms) m[kind + " " + std::to_string(B) + " " + std::to_string(T) + " " + std::to_string(K)] = ms;
  return m;
}
const std::map<std::string, double>& fla() {
  static std::map<std::string, double> m = load_fla();
  return m;
}

void BM_CopyBandwidth(benchmark::State& st) {
  const size_t bytes = size_t(1) << 30;
  void *x, *y;
  CU(cudaMalloc(&x, bytes));
  CU(cudaMalloc(&y, bytes));
  CU(cudaMemset(x, 1, bytes));
  double best = 1e30;
  for (auto _ : st) {
    const double t = timer().ms([&] { CU(cudaMemcpyAsync(y, x, bytes, cudaMemcpyDeviceToDevice, 0)); });
    st.SetIterationTime(t / 1e3);
    best = std::min(best, t);
  }
  g_copy_gbs = 2.0 * bytes / (best / 1e3) / 1e9;
  st.counters["GB/s"] = g_copy_gbs;
  CU(cudaFree(x));
  CU(cudaFree(y));
}

// Device inputs of a benchmark shape, gates as in the models (log decay from a log-sigmoid, beta sigmoid).
struct Problem {
  GdCase c;
  GdInputs d;
  at::Tensor o, s;
  GatedDeltaArgs a;
};

Problem make_problem(int B, int T, int K, bool v_first, uint64_t seed) {
  Problem p;
  GdCase& c = p.c;
  c.B = B, c.T = T, c.H = 16, c.HV = 16, c.K = K, c.V = 128, c.v_first = v_first, c.init_state = true;
  c.g_lo = -1.0, c.g_hi = -0.01;
  p.d = to_device(make_inputs(c, seed));
  p.o = at::empty({B, T, c.HV, c.V}, p.d.v.options());
  p.s = p.d.s0.clone();
  GatedDeltaArgs& a = p.a;
  a.q = p.d.q.data_ptr(), a.k = p.d.k.data_ptr(), a.v = p.d.v.data_ptr(), a.o = p.o.data_ptr();
  a.g = p.d.g.data_ptr<float>(), a.beta = p.d.beta.data_ptr<float>();
  a.initial_state = p.s.data_ptr<float>(), a.final_state = p.s.data_ptr<float>();
  a.N = B, a.seq_len = T, a.H = 16, a.HV = 16, a.K = K, a.V = 128;
  a.scale = 1.f / std::sqrt(float(K));
  a.l2norm_qk = true;
  a.layout = v_first ? statecut::cuda::StateLayout::kVK : statecut::cuda::StateLayout::kKV;
  return p;
}

void BM_Prefill(benchmark::State& st) {
  const int B = st.range(0), T = st.range(1), K = st.range(2);
  Problem p = make_problem(B, T, K, /*v_first=*/false, 1000 + K);
  p.a.final_state = nullptr;
  p.a.initial_state = nullptr;
  {  // check once: chunked = recurrent on these inputs (2 bf16 units, as Meta_GatedDeltaCuda)
    auto [o_c, s_c] = run_cuda(Kernel::kChunk, p.c, p.d, at::Tensor(), p.a.scale);
    auto [o_r, s_r] = run_cuda(Kernel::kRecurrent, p.c, p.d, at::Tensor(), p.a.scale);
    const double e = rel_err(o_c, o_r);
    if (!(e <= 2.0 / 512)) {
      st.SkipWithError(("chunk vs recurrent error " + std::to_string(e)).c_str());
      return;
    }
    st.counters["check_err"] = e;
  }
  const double ms = timed_mean_ms(st, [&] { CU(statecut::cuda::gated_delta_chunk(p.a, 0)); });
  const std::string key = "prefill " + std::to_string(B) + " " + std::to_string(T);
  if (K == 128) g_ms[key] = ms;
  st.counters["ms"] = ms;
  st.counters["TFLOP/s"] = prefill_flops(double(B) * T, 16, K, 128) / (ms / 1e3) / 1e12;
  if (g_ms.count(key)) st.counters["speedup_vs_dk128"] = g_ms[key] / ms;
  const auto f = fla().find(key + " " + std::to_string(K));
  if (f != fla().end()) st.counters["vs_fla"] = f->second / ms;
}

void BM_Decode(benchmark::State& st) {
  const int B = st.range(0), K = st.range(1);
  const bool v_first = st.range(2) != 0;
  Problem p = make_problem(B, 1, K, v_first, 2000 + K);
  {  // check once against the one-step formula in fp32 torch ops
    at::Tensor k = p.d.k.to(at::kFloat).squeeze(1), q = p.d.q.to(at::kFloat).squeeze(1);  // [B,H,K]
    k = k / at::sqrt((k * k).sum(-1, true) + 1e-6);
    q = q / at::sqrt((q * q).sum(-1, true) + 1e-6) * p.a.scale;
    const at::Tensor v = p.d.v.to(at::kFloat).squeeze(1);                    // [B,H,V]
    const at::Tensor alpha = at::exp(p.d.g).squeeze(1).unsqueeze(-1).unsqueeze(-1);
    const at::Tensor beta = p.d.beta.squeeze(1).unsqueeze(-1);
    at::Tensor S = v_first ? p.d.s0.transpose(-1, -2) : p.d.s0;             // [B,H,K,V]
    S = S * alpha;
    const at::Tensor vn = beta * (v - at::einsum("bhkv,bhk->bhv", {S, k}));
    S = S + k.unsqueeze(-1) * vn.unsqueeze(-2);
    const at::Tensor o_ref = at::einsum("bhkv,bhk->bhv", {S, q});
    CU(statecut::cuda::gated_delta_recurrent(p.a, 0));
    CU(cudaDeviceSynchronize());
    const double eo = rel_err(p.o.squeeze(1), o_ref);
    const double es = rel_err(v_first ? p.s.transpose(-1, -2) : p.s, S);
    if (!(eo <= 2.0 / 512 && es <= 1e-5)) {
      st.SkipWithError(("decode check failed: o " + std::to_string(eo) + " state " + std::to_string(es)).c_str());
      return;
    }
  }
  const double us = timed_mean_ms(st, [&] { CU(statecut::cuda::gated_delta_recurrent(p.a, 0)); }) * 1e3;
  const double gbs = 2.0 * B * 16 * K * 128 * 4 / (us / 1e6) / 1e9;
  {  // a plain device copy of the same state bytes, the practical floor at this size
    at::Tensor dst = at::empty_like(p.s);
    const size_t bytes = p.s.numel() * sizeof(float);
    double ct = 0;
    for (int i = 0; i < 20; ++i)
      ct += timer().ms([&] {
        CU(cudaMemcpyAsync(dst.data_ptr(), p.s.data_ptr(), bytes, cudaMemcpyDeviceToDevice, 0));
      });
    ct = ct / 20 * 1e3;
    st.counters["same_size_copy_us"] = ct;
    st.counters["of_same_size_copy"] = ct / us;
  }
  const std::string key = "decode " + std::to_string(B) + " " + std::to_string(int(v_first));
  if (K == 128) g_ms[key] = us;
  st.counters["us"] = us;
  st.counters["GB/s"] = gbs;
  if (g_copy_gbs > 0) st.counters["of_copy"] = gbs / g_copy_gbs;
  if (g_ms.count(key)) st.counters["speedup_vs_dk128"] = g_ms[key] / us;
}

// Decode with a bf16 state (half the bytes): GB/s of bf16 state read + written.
void BM_DecodeBf16State(benchmark::State& st) {
  const int B = st.range(0), K = st.range(1);
  const bool v_first = st.range(2) != 0;
  Problem p = make_problem(B, 1, K, v_first, 3000 + K);
  at::Tensor sb = p.s.to(at::kBFloat16);
  at::Tensor sf = sb.to(at::kFloat);
  {  // check once: equal to the fp32 kernel on the widened state, its final state rounded once
    GatedDeltaArgs af = p.a;
    af.initial_state = af.final_state = sf.data_ptr<float>();
    at::Tensor of = at::empty_like(p.o);
    af.o = of.data_ptr();
    GatedDeltaArgs ab = p.a;
    ab.state_bf16 = true;
    ab.initial_state = ab.final_state = sb.data_ptr();
    CU(statecut::cuda::gated_delta_recurrent(af, 0));
    CU(statecut::cuda::gated_delta_recurrent(ab, 0));
    CU(cudaDeviceSynchronize());
    const double eo = rel_err(p.o, of), es = rel_err(sb.to(at::kFloat), sf.to(at::kBFloat16).to(at::kFloat));
    if (!(eo == 0.0 && es == 0.0)) {
      st.SkipWithError(("bf16-state check failed: o " + std::to_string(eo) + " state " + std::to_string(es)).c_str());
      return;
    }
  }
  p.a.state_bf16 = true;
  p.a.initial_state = p.a.final_state = sb.data_ptr();
  const double us = timed_mean_ms(st, [&] { CU(statecut::cuda::gated_delta_recurrent(p.a, 0)); }) * 1e3;
  const double gbs = 2.0 * B * 16 * K * 128 * 2 / (us / 1e6) / 1e9;
  st.counters["us"] = us;
  st.counters["GB/s"] = gbs;
  if (g_copy_gbs > 0) st.counters["of_copy"] = gbs / g_copy_gbs;
}

void add(const char* name, void (*fn)(benchmark::State&), const std::vector<int64_t>& args,
         const std::vector<std::string>& names, int iterations, benchmark::TimeUnit unit) {
  benchmark::RegisterBenchmark(name, fn)->Args(args)->ArgNames(names)->UseManualTime()->Iterations(iterations)->Unit(
      unit);
}

void register_all() {
  if (!torch::cuda::is_available()) return;
  benchmark::RegisterBenchmark("copy_1GiB", BM_CopyBandwidth)->UseManualTime()->Iterations(20)->Unit(benchmark::kMicrosecond);
  for (int vf : {1, 0})
    for (int B : {1, 8, 64, 256, 1024})
      for (int K : decode_dks()) add("decode", BM_Decode, {B, K, vf}, {"B", "dk", "vfirst"}, 50, benchmark::kMicrosecond);
  for (int vf : {1, 0})
    for (int B : {256, 1024})
      for (int K : {128, 64})
        add("decode_bf16_state", BM_DecodeBf16State, {B, K, vf}, {"B", "dk", "vfirst"}, 50, benchmark::kMicrosecond);
  for (const PrefillShape& s : prefill_shapes())
    for (int K : prefill_dks())
      add("prefill", BM_Prefill, {s.B, s.T, K}, {"B", "T", "dk"}, 10, benchmark::kMillisecond);
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
#else
int main() {
  std::puts("bench_cuda_gated_delta: built without the CUDA kernels (statecut_cuda_torch); nothing to run");
  return 0;
}
#endif

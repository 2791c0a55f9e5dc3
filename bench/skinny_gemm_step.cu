// The projections of one whole 1.3B decode step, kernels/skinny_gemm.cu against cuBLAS (issue 14).
//
// Part 1, checks: y = x · wᵀ of skinny_gemm_bf16 against an f64 reference on the host, every element within
// u_bf16 |ref| + K · 2^-23 · Σ|x w| (one bf16 rounding of an fp32 sum: skinny_gemm.h), on shapes with meaning
// (rows 1, 2, 9, 63, 64, 65, 127, 129, 256; N 1, 100, 129, 6160; K 8, 72, 2048, 5632: tails of every tile, every
// cluster size); and bit-equality of two runs.
// Part 2, timing: every projection of a step (each layer its own weights, so nothing stays in the 50 MB L2) as one
// CUDA graph, ours and cuBLAS's (cublasGemmEx, bf16, fp32 compute, the call LibTorch's linear makes), at rows 2..256,
// with the copy bandwidth of the same run. Shapes: fla-hub's DeltaNet 1.3B (24 layers: q|k|v|β 6160, o 2048, gate|up
// 11264, down 2048 x 5632) and its 50% prune (q|k|v|β 4112), Gated DeltaNet 1.3B (21 layers: q|k|v|z|β|α 9232, o
// 2048 x 3072), both with the 32,000-row head.
// Part 3: the same steps with a norm-like kernel after each GEMM (the model's small kernels, launched as programmatic
// dependents), cuBLAS against ours: where the early trigger of kernels/pdl.cuh lets the next GEMM stream its weights.
// Build: the CMake target bench_skinny_gemm_step, or nvcc -std=c++17 -O2 -I. -gencode=arch=compute_90a,code=sm_90a
//        bench/skinny_gemm_step.cu kernels/skinny_gemm.cu -lcublas -o skinny_gemm_step
// Run: ./skinny_gemm_step [seed]   (prints the seed; exit 1 when a check fails; SKINNY_NO_SHAPES=1 skips the table of
//      single shapes, SKINNY_ALL_MODELS=1 adds Gated DeltaNet 1.3B; SKINNY_PROFILE=M runs only each DeltaNet 1.3B
//      shape once at M rows, eager, ours then cuBLAS, for a profiler such as ncu; SKINNY_QUICK=1 times rows 8 and 64
//      only, ours at its own cluster choice)
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/pdl.cuh"
#include "kernels/skinny_gemm.h"

namespace {

#define CU(x)                                                                              \
  do {                                                                                     \
    cudaError_t e_ = (x);                                                                  \
    if (e_ != cudaSuccess) {                                                               \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));      \
      std::exit(2);                                                                        \
    }                                                                                      \
  } while (0)

using bf16 = __nv_bfloat16;

int check_shape(int M, int N, int K, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<bf16> hx(static_cast<size_t>(M) * K), hw(static_cast<size_t>(N) * K), hy(static_cast<size_t>(M) * N),
      hy2(hy.size());
  for (auto& v : hx) v = __float2bfloat16(u(rng));
  for (auto& v : hw) v = __float2bfloat16(u(rng));
  bf16 *x, *w, *y;
  CU(cudaMalloc(&x, hx.size() * 2));
  CU(cudaMalloc(&w, hw.size() * 2));
  CU(cudaMalloc(&y, hy.size() * 2));
  CU(cudaMemcpy(x, hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
  CU(cudaMemcpy(w, hw.data(), hw.size() * 2, cudaMemcpyHostToDevice));
  CU(cudaMemset(y, 0xff, hy.size() * 2));
  CU(statecut::cuda::skinny_gemm_bf16(x, w, y, M, N, K, false, nullptr));
  CU(cudaDeviceSynchronize());
  CU(cudaMemcpy(hy.data(), y, hy.size() * 2, cudaMemcpyDeviceToHost));
  CU(statecut::cuda::skinny_gemm_bf16(x, w, y, M, N, K, true, nullptr));
  CU(cudaMemcpy(hy2.data(), y, hy.size() * 2, cudaMemcpyDeviceToHost));
  int bad = 0;
  double worst = 0;
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double ref = 0, mag = 0;
      for (int k = 0; k < K; ++k) {
        const double p = static_cast<double>(__bfloat162float(hx[size_t(m) * K + k])) *
                         __bfloat162float(hw[size_t(n) * K + k]);
        ref += p, mag += std::fabs(p);
      }
      const double got = __bfloat162float(hy[size_t(m) * N + n]);
      const double bound = std::ldexp(std::fabs(ref), -8) + K * std::ldexp(mag, -23);
      const double err = std::fabs(got - ref);
      worst = std::max(worst, err / bound);
      if (!(err <= bound) && bad++ < 3)
        std::printf("  M=%d N=%d K=%d y[%d,%d] = %.6g, f64 %.6g (bound %.3g)\n", M, N, K, m, n, got, ref, bound);
      if (std::memcmp(&hy[size_t(m) * N + n], &hy2[size_t(m) * N + n], 2) != 0 && bad++ < 3)
        std::printf("  M=%d N=%d K=%d y[%d,%d] differs between two runs\n", M, N, K, m, n);
    }
  std::printf("check M=%3d N=%5d K=%5d cluster %d: %s (worst error / bound %.3f)\n", M, N, K,
              statecut::cuda::skinny_gemm_cluster(M, N, K), bad ? "FAIL" : "ok", worst);
  CU(cudaFree(x));
  CU(cudaFree(w));
  CU(cudaFree(y));
  return bad ? 1 : 0;
}

struct Gemm {
  int N, K;
};

std::vector<Gemm> step_of(int layers, int qkv, int o_in, bool head) {
  std::vector<Gemm> g;
  for (int l = 0; l < layers; ++l) g.push_back({qkv, 2048}), g.push_back({2048, o_in}), g.push_back({11264, 2048}),
                                  g.push_back({2048, 5632});
  if (head) g.push_back({32000, 2048});
  return g;
}

float time_graph(cudaGraphExec_t ge, cudaStream_t s, int reps) {
  cudaEvent_t a, b;
  CU(cudaEventCreate(&a));
  CU(cudaEventCreate(&b));
  std::vector<float> t;
  for (int r = 0; r < reps; ++r) {
    CU(cudaEventRecord(a, s));
    CU(cudaGraphLaunch(ge, s));
    CU(cudaEventRecord(b, s));
    CU(cudaEventSynchronize(b));
    float ms;
    CU(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

/// A stand-in for the small kernels between a step's GEMMs (norms, conv, silu·mul): a warp per row of z [M, 2048]
/// forms its rms and rescales the row in place; triggers and waits as the project's kernels do (kernels/pdl.cuh).
__global__ void mock_norm(bf16* z, int M) {
  statecut::cuda::pdl::trigger_then_wait(M >= 2);
  const int row = blockIdx.x * 8 + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= M) return;
  bf16* r = z + static_cast<size_t>(row) * 2048;
  float v[64], ss = 0;
  for (int i = 0; i < 64; ++i) v[i] = __bfloat162float(r[lane + 32 * i]), ss += v[i] * v[i];
  for (int o = 16; o; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  const float k = rsqrtf(ss / 2048 + 1e-6f);
  for (int i = 0; i < 64; ++i) r[lane + 32 * i] = __float2bfloat16(v[i] * k);
}

/// The step's projections at M rows as one graph, ms a replay: ours (cublas == nullptr; cluster 0: the kernel's
/// choice; pdl: each a programmatic dependent of the one before) or cuBLAS's; with z, a mock_norm over z after each
/// GEMM, launched as the model launches its small kernels (a programmatic dependent).
float time_step(const std::vector<Gemm>& g, const std::vector<bf16*>& ws, bf16* x, bf16* y, int M,
                cublasHandle_t cublas, cudaStream_t s, int cluster = 0, bool pdl = true, bf16* z = nullptr) {
  cudaGraph_t graph;
  CU(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  const float one = 1.f, zero = 0.f;
  for (size_t i = 0; i < g.size(); ++i) {
    if (cublas) {
      if (cublasGemmEx(cublas, CUBLAS_OP_T, CUBLAS_OP_N, g[i].N, M, g[i].K, &one, ws[i], CUDA_R_16BF, g[i].K, x,
                       CUDA_R_16BF, g[i].K, &zero, y, CUDA_R_16BF, g[i].N, CUBLAS_COMPUTE_32F,
                       CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS) {
        std::fprintf(stderr, "cublasGemmEx failed\n");
        std::exit(2);
      }
    } else {
      CU(statecut::cuda::skinny_gemm_bf16(x, ws[i], y, M, g[i].N, g[i].K, pdl && (i > 0 || z), s, cluster));
    }
    if (z) {
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3((M + 7) / 8);
      cfg.blockDim = dim3(256);
      cfg.stream = s;
      cudaLaunchAttribute at[1];
      at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      at[0].val.programmaticStreamSerializationAllowed = 1;
      cfg.attrs = at;
      cfg.numAttrs = 1;
      CU(cudaLaunchKernelEx(&cfg, mock_norm, z, M));
    }
  }
  CU(cudaStreamEndCapture(s, &graph));
  cudaGraphExec_t ge;
  CU(cudaGraphInstantiate(&ge, graph, 0));
  time_graph(ge, s, 3);
  const float ms = time_graph(ge, s, 20);
  CU(cudaGraphExecDestroy(ge));
  CU(cudaGraphDestroy(graph));
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  const unsigned seed = argc > 1 ? static_cast<unsigned>(std::strtoul(argv[1], nullptr, 10)) : 20261205u;
  std::printf("seed %u (./skinny_gemm_step SEED to repeat)\n", seed);
  if (!statecut::cuda::skinny_gemm_device_ok()) {
    std::printf("skinny_gemm: this device is not sm_90\n");
    return 2;
  }
  if (const char* pr = std::getenv("SKINNY_PROFILE")) {  // one eager launch each, ours then cuBLAS, for ncu
    const int M = std::atoi(pr);
    cublasHandle_t h;
    cublasCreate(&h);
    bf16 *x0, *y0, *w0;
    CU(cudaMalloc(&x0, 256 * 5632 * 2));
    CU(cudaMalloc(&y0, 256 * 32000 * 2));
    CU(cudaMalloc(&w0, 32000 * 2048 * 2));
    CU(cudaMemset(x0, 0, 256 * 5632 * 2));
    CU(cudaMemset(w0, 0, 32000 * 2048 * 2));
    const float one = 1.f, zero = 0.f;
    const Gemm shapes[] = {{6160, 2048}, {2048, 2048}, {11264, 2048}, {2048, 5632}, {32000, 2048}};
    for (const Gemm& sh : shapes) {
      std::printf("profile N=%d K=%d M=%d cluster %d\n", sh.N, sh.K, M,
                  statecut::cuda::skinny_gemm_cluster(M, sh.N, sh.K));
      CU(statecut::cuda::skinny_gemm_bf16(x0, w0, y0, M, sh.N, sh.K, false, nullptr));
      cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, sh.N, M, sh.K, &one, w0, CUDA_R_16BF, sh.K, x0, CUDA_R_16BF, sh.K,
                   &zero, y0, CUDA_R_16BF, sh.N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
      CU(cudaDeviceSynchronize());
    }
    return 0;
  }
  std::mt19937 rng(seed);
  int fails = 0;
  const int rows[] = {1, 2, 9, 63, 64, 65, 127, 129, 256};
  for (int M : rows) fails += check_shape(M, 129, 2048, rng);
  const int ns[] = {1, 100, 6160};
  for (int N : ns) fails += check_shape(64, N, 2048, rng);
  const int ks[] = {8, 72, 5632};
  for (int K : ks) fails += check_shape(65, 200, K, rng);
  fails += check_shape(256, 2048, 5632, rng);
  fails += check_shape(16, 2048, 2048, rng);
  std::printf("checks: %s\n", fails ? "FAILED" : "all ok");

  cudaStream_t s;
  CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cublasHandle_t cublas;
  cublasCreate(&cublas);
  cublasSetStream(cublas, s);
  // copy bandwidth of this run: 1 GiB device to device, best of 5
  {
    void *a, *b;
    const size_t bytes = size_t(1) << 30;
    CU(cudaMalloc(&a, bytes));
    CU(cudaMalloc(&b, bytes));
    cudaEvent_t e0, e1;
    CU(cudaEventCreate(&e0));
    CU(cudaEventCreate(&e1));
    float best = 1e9;
    for (int r = 0; r < 5; ++r) {
      CU(cudaEventRecord(e0, s));
      CU(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s));
      CU(cudaEventRecord(e1, s));
      CU(cudaEventSynchronize(e1));
      float ms;
      CU(cudaEventElapsedTime(&ms, e0, e1));
      best = std::min(best, ms);
    }
    std::printf("copy bandwidth %.2f TB/s (1 GiB read + written)\n", 2.0 * bytes / best / 1e9);
    CU(cudaFree(a));
    CU(cudaFree(b));
  }
  // Each projection shape of DeltaNet 1.3B alone: 24 copies, each its own weights, one graph; µs a GEMM.
  const bool quick = std::getenv("SKINNY_QUICK") != nullptr;
  if (!std::getenv("SKINNY_NO_SHAPES")) {
    bf16 *x0, *y0;
    CU(cudaMalloc(&x0, 256 * 5632 * 2));
    CU(cudaMalloc(&y0, 256 * 32000 * 2));
    CU(cudaMemset(x0, 0, 256 * 5632 * 2));
    const Gemm shapes[] = {{6160, 2048}, {2048, 2048}, {11264, 2048}, {2048, 5632}, {32000, 2048}};
    for (const Gemm& sh : shapes) {
      std::vector<Gemm> g(24, sh);
      std::vector<bf16*> ws;
      for (auto& gg : g) {
        bf16* w;
        CU(cudaMalloc(&w, size_t(gg.N) * gg.K * 2));
        CU(cudaMemset(w, 0, size_t(gg.N) * gg.K * 2));
        ws.push_back(w);
      }
      const double mb = 2.0 * sh.N * sh.K / 1e6;
      for (int M : {8, 64, 256}) {
        if (quick && M == 256) continue;
        std::printf("shape %5d x %4d (%.1f MB) rows %3d: cuBLAS %6.1f us", sh.N, sh.K, mb, M,
                    time_step(g, ws, x0, y0, M, cublas, s) * 1000 / 24);
        std::printf(" | ours auto(c%d) %6.1f, no PDL %6.1f", statecut::cuda::skinny_gemm_cluster(M, sh.N, sh.K),
                    time_step(g, ws, x0, y0, M, nullptr, s) * 1000 / 24,
                    time_step(g, ws, x0, y0, M, nullptr, s, 0, false) * 1000 / 24);
        for (int cs : {1, 2, 4, 8})
          if (!quick) std::printf(", c%d %6.1f", cs, time_step(g, ws, x0, y0, M, nullptr, s, cs) * 1000 / 24);
        std::printf("\n");
      }
      for (auto* w : ws) CU(cudaFree(w));
    }
    CU(cudaFree(x0));
    CU(cudaFree(y0));
  }
  struct Model {
    const char* name;
    std::vector<Gemm> g;
  } models[] = {{"DeltaNet 1.3B", step_of(24, 6160, 2048, true)},
                {"DeltaNet 1.3B 50%", step_of(24, 4112, 2048, true)},
                {"Gated DeltaNet 1.3B", step_of(21, 9232, 3072, true)}};
  const int nmodels = std::getenv("SKINNY_ALL_MODELS") ? 3 : 2;
  bf16 *x, *y;
  CU(cudaMalloc(&x, 256 * 11264 * 2));
  CU(cudaMalloc(&y, 256 * 32000 * 2));
  CU(cudaMemset(x, 0, 256 * 11264 * 2));
  for (int mi = 0; mi < nmodels; ++mi) {
    auto& md = models[mi];
    std::vector<bf16*> ws;
    double bytes = 0;
    for (auto& gg : md.g) {
      bf16* w;
      CU(cudaMalloc(&w, size_t(gg.N) * gg.K * 2));
      CU(cudaMemset(w, 0, size_t(gg.N) * gg.K * 2));
      ws.push_back(w);
      bytes += 2.0 * gg.N * gg.K;
    }
    std::printf("%s: %zu GEMMs, %.2f GB of weights\n", md.name, md.g.size(), bytes / 1e9);
    bf16* z;
    CU(cudaMalloc(&z, 256 * 2048 * 2));
    CU(cudaMemset(z, 0, 256 * 2048 * 2));
    for (int M : {2, 8, 16, 32, 64, 128, 256}) {
      if (quick && M != 8 && M != 64) continue;
      const float c0 = time_step(md.g, ws, x, y, M, cublas, s, 0, true, z);
      const float c1 = time_step(md.g, ws, x, y, M, nullptr, s, 0, true, z);
      std::printf("  rows %3d with a norm-like kernel after each GEMM: cuBLAS %.3f ms, ours %.3f (%.2fx)\n", M, c0,
                  c1, c0 / c1);
    }
    CU(cudaFree(z));
    for (int M : {2, 8, 16, 32, 64, 128, 256}) {
      if (quick && M != 8 && M != 64) continue;
      const float tc = time_step(md.g, ws, x, y, M, cublas, s);
      const float to = time_step(md.g, ws, x, y, M, nullptr, s);
      std::printf("  rows %3d: cuBLAS %.3f ms (%.2f TB/s)  ours %.3f ms (%.2f TB/s)  %.2fx\n", M, tc,
                  bytes / tc / 1e9, to, bytes / to / 1e9, tc / to);
    }
    for (auto* w : ws) CU(cudaFree(w));
  }
  return fails ? 1 : 0;
}

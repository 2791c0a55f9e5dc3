// Metamorphic relations of the CUDA gated delta rule kernels at sizes too large for the CPU loop:
// chunked = recurrent, state carried across calls, in-place decode = one multi-token call, bf16-state decode =
// fp32 decode rounded once, the decode kernel without its delta term = the linear-attention recurrence, the [V,K]
// kernel's packed instance = its strided one bit for bit, both state layouts,
// grouped values = explicit repetition of q/k heads, packed varlen = separate calls, and slices of a packed
// projection read in place = contiguous copies.
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <cmath>
#include <cstdio>

#include "tests/gpu/gated_delta_cases.h"

#ifdef STATECUT_WITH_CUDA_KERNELS
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime_api.h>

#include "kernels/gated_delta.h"
#endif

namespace {

#ifdef STATECUT_WITH_CUDA_KERNELS
using namespace statecut::gpu_cases;
#define STATECUT_REQUIRE_GPU() \
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device"
#else
#define STATECUT_REQUIRE_GPU() GTEST_SKIP() << "built without the CUDA kernels (statecut_cuda_torch)"
#endif

TEST(Meta_GatedDeltaCuda, chunkedMatchesRecurrent) {
  STATECUT_REQUIRE_GPU();
#ifdef STATECUT_WITH_CUDA_KERNELS
  for (int K : {128, 89, 256}) {
    GdCase c;
    c.B = 2, c.T = 4096, c.H = 4, c.HV = 8, c.K = K, c.V = 128, c.gate_in_kernel = true, c.beta_sigmoid = true;
    const GdInputs d = to_device(make_inputs(c, seed_from_env(7 + K)));
    const double scale = 1.0 / std::sqrt(double(K));
    auto [o_r, s_r] = run_cuda(Kernel::kRecurrent, c, d, d.s0, scale);
    auto [o_c, s_c] = run_cuda(Kernel::kChunk, c, d, d.s0, scale);
    const double eo = rel_err(o_c, o_r), es = rel_err(s_c, s_r);
    std::printf("[meta] chunk vs recurrent %s: o %.3e state %.3e\n", c.name().c_str(), eo, es);
    // Each o is a bf16 rounding (2^-9 per element) of nearly the same value: 2 bf16 units bound their distance.
    EXPECT_LE(eo, 2.0 / 512) << c.name();
    EXPECT_LE(es, 4 * kTf32Unit) << c.name();  // as the equivalence bound of the chunk state
  }
#endif
}

// A model's q, k and v are slices of one packed projection output [B, T, H K + H K + HV V (+ gate columns)]; the
// chunk op reads them in place (token strides) instead of copying them: the same kernel on the same values, so the
// outputs must be bit-identical to those of contiguous copies. dk 89 takes the element-wise row loads, dk 64 and 256
// the 16-byte copies (dk 256 / dv 512 on a full grid: one k buffer); 24 extra columns keep every stride a multiple
// of 8, 9 extra make it odd (all three copied). The extra columns hold NaN: a read past a slice poisons the output.
TEST(Meta_GatedDeltaCuda, chunkReadsSlicesOfAPackedProjectionInPlace) {
  STATECUT_REQUIRE_GPU();
#ifdef STATECUT_WITH_CUDA_KERNELS
  struct Shape { int B, T, H, K, V, extra; };
  for (const Shape sh : {Shape{2, 130, 2, 64, 128, 24}, Shape{1, 200, 8, 89, 128, 24}, Shape{8, 130, 6, 256, 512, 24},
                         Shape{2, 77, 2, 64, 64, 9}}) {
    GdCase c;
    c.B = sh.B, c.T = sh.T, c.H = sh.H, c.HV = sh.H, c.K = sh.K, c.V = sh.V;
    const GdInputs d = to_device(make_inputs(c, seed_from_env(23 + sh.K)));
    const int64_t Cq = int64_t(c.H) * c.K, Cv = int64_t(c.HV) * c.V;
    auto packed = at::full({c.B, c.T, 2 * Cq + Cv + sh.extra}, std::nan(""), d.q.options());
    packed.narrow(2, 0, Cq).copy_(d.q.reshape({c.B, c.T, Cq}));
    packed.narrow(2, Cq, Cq).copy_(d.k.reshape({c.B, c.T, Cq}));
    packed.narrow(2, 2 * Cq, Cv).copy_(d.v.reshape({c.B, c.T, Cv}));
    GdInputs sl = d;
    sl.q = packed.narrow(2, 0, Cq).view({c.B, c.T, c.H, c.K});
    sl.k = packed.narrow(2, Cq, Cq).view({c.B, c.T, c.H, c.K});
    sl.v = packed.narrow(2, 2 * Cq, Cv).view({c.B, c.T, c.HV, c.V});
    ASSERT_FALSE(sl.q.is_contiguous());
    const double scale = 1.0 / std::sqrt(double(c.K));
    auto [o_s, s_s] = run_cuda(Kernel::kChunk, c, sl, d.s0, scale);
    auto [o_c, s_c] = run_cuda(Kernel::kChunk, c, d, d.s0, scale);
    std::printf("[meta] packed slices %s, row stride %lld: o %.3e state %.3e\n", c.name().c_str(),
                static_cast<long long>(packed.size(2)), rel_err(o_s, o_c), rel_err(s_s, s_c));
    EXPECT_TRUE(at::equal(o_s, o_c)) << c.name();
    EXPECT_TRUE(at::equal(s_s, s_c)) << c.name();
  }
#endif
}

TEST(Meta_GatedDeltaCuda, stateCarriesAcrossCalls) {
  STATECUT_REQUIRE_GPU();
#ifdef STATECUT_WITH_CUDA_KERNELS
  for (bool v_first : {false, true}) {
    GdCase c;
    c.B = 3, c.T = 257, c.H = 2, c.HV = 4, c.K = 76, c.V = 128, c.v_first = v_first;
    const GdInputs d = to_device(make_inputs(c, seed_from_env(11)));
    const double scale = 1.0 / std::sqrt(76.0);
    const int T1 = 100;
    GdCase c1 = c, c2 = c;
    c1.T = T1, c2.T = c.T - T1;
    auto part = [](const GdInputs& x, int64_t a, int64_t b) {
      GdInputs y = x;
      y.q = x.q.narrow(1, a, b - a), y.k = x.k.narrow(1, a, b - a), y.v = x.v.narrow(1, a, b - a);
      y.g = x.g.narrow(1, a, b - a), y.beta = x.beta.narrow(1, a, b - a);
      return y;
    };
    for (Kernel kern : {Kernel::kChunk, Kernel::kRecurrent}) {
      auto [o_all, s_all] = run_cuda(kern, c, d, d.s0, scale);
      auto [o_1, s_1] = run_cuda(kern, c1, part(d, 0, T1), d.s0, scale);
      auto [o_2, s_2] = run_cuda(kern, c2, part(d, T1, c.T), s_1, scale);
      const double eo = rel_err(at::cat({o_1, o_2}, 1), o_all), es = rel_err(s_2, s_all);
      std::printf("[meta] split at %d (%s, vfirst=%d): o %.3e state %.3e\n", T1,
                  kern == Kernel::kChunk ? "chunk" : "recurrent", int(v_first), eo, es);
      if (kern == Kernel::kRecurrent) {  // the same fp32 operations in the same order: bit-identical
        EXPECT_EQ(eo, 0.0);
        EXPECT_EQ(es, 0.0);
      } else {  // other chunk boundaries: TF32 rounding differs
        EXPECT_LE(eo, 2.0 / 512);
        EXPECT_LE(es, 4 * kTf32Unit);
      }
    }
  }
#endif
}

TEST(Meta_GatedDeltaCuda, inPlaceDecodeEqualsMultiTokenCall) {
  STATECUT_REQUIRE_GPU();
#ifdef STATECUT_WITH_CUDA_KERNELS
  for (bool v_first : {false, true}) {
    GdCase c;
    c.B = 64, c.T = 8, c.H = 4, c.HV = 8, c.K = 89, c.V = 64, c.v_first = v_first, c.gate_in_kernel = true,
    c.beta_sigmoid = true;
    const GdInputs d = to_device(make_inputs(c, seed_from_env(13)));
    const double scale = 1.0 / std::sqrt(89.0);
    auto [o_all, s_all] = run_cuda(Kernel::kRecurrent, c, d, d.s0, scale);
    at::Tensor state = d.s0.clone();
    std::vector<at::Tensor> os;
    for (int t = 0; t < c.T; ++t) {
      os.push_back(statecut::cuda::gated_delta_rule_decode_(
          d.q.narrow(1, t, 1), d.k.narrow(1, t, 1), d.v.narrow(1, t, 1), d.g.narrow(1, t, 1),
          d.beta.narrow(1, t, 1), scale, state, c10::nullopt, true, true, d.A_log, d.dt_bias, true, v_first));
    }
    EXPECT_EQ(rel_err(at::cat(os, 1), o_all), 0.0);  // same fp32 operations in the same order
    EXPECT_EQ(rel_err(state, s_all), 0.0);
  }
#endif
}

// The decode kernel without its delta term (delta = false: Mamba-2's SSM step, S = exp(g) S + b k vᵀ, o = Sᵀ(scale q))
// against that recurrence in double on the host, both layouts, grouped values (1 key head, 4 value heads: one
// Mamba-2 group), dk 128 / 89 / 16 and three tokens a call; b and g given, or (dt_in_kernel: beta_dt, Mamba-2's
// decode step) formed in the kernel from one raw input a (bf16 read in place, as the packed projection holds it; fp32
// at dk 89), b = softplus(a + dt_bias), g = −exp(A_log) b, the reference forming them in double from the same bf16 a.
// State: fp32 sums of at most dk + 1 terms, 1e-5 normwise; o: the same plus one bf16 rounding (2^-9 relative), 2^-8
// with room for the state's error.
TEST(Meta_GatedDeltaCuda, linearAttentionDecodeMatchesTheRecurrenceInDouble) {
  STATECUT_REQUIRE_GPU();
#ifdef STATECUT_WITH_CUDA_KERNELS
  for (bool dt_in_kernel : {false, true})
    for (bool v_first : {false, true}) {
      for (int K : {128, 89, 16}) {
        GdCase c;
        c.B = 8, c.T = 3, c.H = 1, c.HV = 4, c.K = K, c.V = 64, c.v_first = v_first, c.l2norm = false;
        c.b_lo = 0.01, c.b_hi = 2.0;  // dt
        c.gate_in_kernel = dt_in_kernel;
        GdInputs h = make_inputs(c, seed_from_env(31 + K));
        // The raw dt input a in bf16 as the projection rounds it (read in place); at dk 89 in fp32 (the other read).
        if (dt_in_kernel && K != 89) h.g = h.g.to(at::kBFloat16);
        const GdInputs d = to_device(h);
        const double scale = 0.7;
        at::Tensor state = d.s0.clone();
        const auto opt = [](const at::Tensor& t) { return c10::optional<at::Tensor>(t); };
        const at::Tensor o =
            dt_in_kernel
                ? statecut::cuda::gated_delta_rule_decode_(d.q, d.k, d.v, opt(d.g), c10::nullopt, scale, state,
                                                           c10::nullopt, false, true, opt(d.A_log), opt(d.dt_bias),
                                                           false, v_first, /*round_beta=*/false, /*delta=*/false,
                                                           /*beta_dt=*/true)
                : statecut::cuda::gated_delta_rule_decode_(d.q, d.k, d.v, d.g, d.beta, scale, state, c10::nullopt,
                                                           false, false, c10::nullopt, c10::nullopt, false, v_first,
                                                           /*round_beta=*/false, /*delta=*/false);
        const auto f64 = [](const at::Tensor& t) { return t.to(at::kDouble); };
        at::Tensor G = f64(h.g), Bt = dt_in_kernel ? at::Tensor() : f64(h.beta);
        if (dt_in_kernel) {
          Bt = at::softplus(G + f64(h.dt_bias));
          G = -at::exp(f64(h.A_log)) * Bt;
        }
        at::Tensor S = f64(v_first ? h.s0.transpose(-1, -2) : h.s0);  // [B,HV,K,V]
        std::vector<at::Tensor> os;
        for (int t = 0; t < c.T; ++t) {
          const at::Tensor q = f64(h.q.select(1, t)).repeat_interleave(c.HV / c.H, 1) * scale;  // [B,HV,K]
          const at::Tensor k = f64(h.k.select(1, t)).repeat_interleave(c.HV / c.H, 1);
          const at::Tensor v = f64(h.v.select(1, t)), g = G.select(1, t), b = Bt.select(1, t);
          S = S * at::exp(g).unsqueeze(-1).unsqueeze(-1) + (b.unsqueeze(-1) * k).unsqueeze(-1) * v.unsqueeze(-2);
          os.push_back(at::einsum("bhkv,bhk->bhv", {S, q}));
        }
        const at::Tensor o_ref = at::stack(os, 1), s_got = (v_first ? state.transpose(-1, -2) : state).cpu();
        const double eo = rel_err(o.cpu(), o_ref), es = rel_err(s_got, S);
        std::printf("[meta] linear attention decode %s%s: o %.3e state %.3e\n", c.name().c_str(),
                    dt_in_kernel ? " dt in kernel" : "", eo, es);
        EXPECT_LE(es, 1e-5) << c.name() << (dt_in_kernel ? " dt in kernel" : "");
        EXPECT_LE(eo, 1.0 / 256) << c.name() << (dt_in_kernel ? " dt in kernel" : "");
      }
    }
#endif
}

TEST(Meta_GatedDeltaCuda, bf16StateDecodeEqualsRoundedFp32Decode) {
  STATECUT_REQUIRE_GPU();
#ifdef STATECUT_WITH_CUDA_KERNELS
  for (bool v_first : {false, true}) {
    for (int K : {128, 89, 32}) {
      GdCase c;
      c.B = 32, c.T = 3, c.H = 4, c.HV = 8, c.K = K, c.V = 128, c.v_first = v_first;
      const GdInputs d = to_device(make_inputs(c, seed_from_env(29 + K)));
      const at::Tensor s_bf = d.s0.to(at::kBFloat16);
      at::Tensor s_f = s_bf.to(at::kFloat);  // exact widening
      at::Tensor s_b = s_bf.clone();
      auto step = [&](at::Tensor& st) {
        return statecut::cuda::gated_delta_rule_decode_(d.q, d.k, d.v, d.g, d.beta, 0.1, st, c10::nullopt, true,
                                                        false, c10::nullopt, c10::nullopt, false, v_first);
      };
      const at::Tensor o_f = step(s_f), o_b = step(s_b);
      // Same fp32 arithmetic on the same (widened) numbers; the bf16 kernel rounds its final state once.
      EXPECT_EQ(rel_err(o_b, o_f), 0.0) << c.name();
      EXPECT_EQ(rel_err(s_b.to(at::kFloat), s_f.to(at::kBFloat16).to(at::kFloat)), 0.0) << c.name();
    }
  }
#endif
}

TEST(Meta_GatedDeltaCuda, layoutsAgree) {
  STATECUT_REQUIRE_GPU();
#ifdef STATECUT_WITH_CUDA_KERNELS
  GdCase c;
  c.B = 2, c.T = 300, c.H = 2, c.HV = 2, c.K = 179, c.V = 256;
  const GdInputs d = to_device(make_inputs(c, seed_from_env(17)));
  const double scale = 1.0 / std::sqrt(179.0);
  GdCase cv = c;
  cv.v_first = true;
  const at::Tensor s0v = d.s0.transpose(-1, -2).contiguous();
  for (Kernel kern : {Kernel::kChunk, Kernel::kRecurrent}) {
    auto [o_k, s_k] = run_cuda(kern, c, d, d.s0, scale);
    auto [o_v, s_v] = run_cuda(kern, cv, d, s0v, scale);
    const double eo = rel_err(o_v, o_k), es = rel_err(s_v.transpose(-1, -2), s_k);
    std::printf("[meta] layouts (%s): o %.3e state %.3e\n", kern == Kernel::kChunk ? "chunk" : "recurrent", eo, es);
    if (kern == Kernel::kChunk) {  // one kernel, only the state load/store differs: identical
      EXPECT_EQ(eo, 0.0);
      EXPECT_EQ(es, 0.0);
    } else {  // two kernels summing in different orders in fp32: a few ulps, then one bf16 rounding of o
      EXPECT_LE(eo, 1.0 / 512);
      EXPECT_LE(es, 1e-5);
    }
  }
#endif
}

TEST(Meta_GatedDeltaCuda, groupedValuesEqualRepeatedHeads) {
  STATECUT_REQUIRE_GPU();
#ifdef STATECUT_WITH_CUDA_KERNELS
  GdCase c;
  c.B = 2, c.T = 130, c.H = 2, c.HV = 6, c.K = 96, c.V = 128;
  const GdInputs d = to_device(make_inputs(c, seed_from_env(19)));
  GdInputs r = d;
  r.q = d.q.repeat_interleave(3, 2), r.k = d.k.repeat_interleave(3, 2);
  GdCase cr = c;
  cr.H = 6;
  for (Kernel kern : {Kernel::kChunk, Kernel::kRecurrent}) {
    auto [o_g, s_g] = run_cuda(kern, c, d, d.s0, 0.1);
    auto [o_r, s_r] = run_cuda(kern, cr, r, d.s0, 0.1);
    EXPECT_EQ(rel_err(o_g, o_r), 0.0);  // the kernels read the same numbers
    EXPECT_EQ(rel_err(s_g, s_r), 0.0);
  }
#endif
}

// The [V,K] decode kernel has a Packed instance (no token strides: one offset for q and k; the 29th-31st waves'
// regression fix) beside the strided one. Given the same packed tensors with strides 0 (Packed) and with the packed
// strides spelled out (strided), the entry point must return the same bits: same numbers, same sums, same order.
TEST(Meta_GatedDeltaCuda, packedInstanceEqualsTheStridedOneBitForBit) {
  STATECUT_REQUIRE_GPU();
#ifdef STATECUT_WITH_CUDA_KERNELS
  for (int K : {128, 89, 64}) {
    GdCase c;
    c.B = 16, c.T = 2, c.H = 2, c.HV = 4, c.K = K, c.V = 128, c.v_first = true;
    const GdInputs d = to_device(make_inputs(c, seed_from_env(37 + K)));
    auto run = [&](bool strided) {
      at::Tensor o = at::empty_like(d.v), s = d.s0.clone();
      statecut::cuda::GatedDeltaArgs a;
      a.q = d.q.data_ptr(), a.k = d.k.data_ptr(), a.v = d.v.data_ptr(), a.o = o.data_ptr();
      a.g = d.g.data_ptr<float>(), a.beta = d.beta.data_ptr<float>();
      a.initial_state = s.data_ptr<float>(), a.final_state = s.data_ptr<float>();
      a.N = c.B, a.seq_len = c.T, a.H = c.H, a.HV = c.HV, a.K = K, a.V = c.V, a.scale = 0.1f, a.l2norm_qk = true;
      a.layout = statecut::cuda::StateLayout::kVK;
      if (strided) a.q_stride = a.k_stride = int64_t{c.H} * K, a.v_stride = int64_t{c.HV} * c.V;
      EXPECT_EQ(statecut::cuda::gated_delta_recurrent(a, nullptr), cudaSuccess);
      EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      return std::make_pair(o, s);
    };
    const auto [o_p, s_p] = run(false);
    const auto [o_s, s_s] = run(true);
    EXPECT_TRUE(at::equal(o_p, o_s)) << c.name();
    EXPECT_TRUE(at::equal(s_p, s_s)) << c.name();
  }
#endif
}

TEST(Meta_GatedDeltaCuda, packedVarlenEqualsSeparateCalls) {
  STATECUT_REQUIRE_GPU();
#ifdef STATECUT_WITH_CUDA_KERNELS
  GdCase c;
  c.B = 1, c.K = 128, c.V = 128, c.seqlens = {300, 1, 64, 129}, c.T = 494;
  const GdInputs d = to_device(make_inputs(c, seed_from_env(23)));
  const double scale = 1.0 / std::sqrt(128.0);
  for (Kernel kern : {Kernel::kChunk, Kernel::kRecurrent}) {
    auto [o_p, s_p] = run_cuda(kern, c, d, d.s0, scale);
    int64_t off = 0;
    for (size_t n = 0; n < c.seqlens.size(); ++n) {
      const int64_t L = c.seqlens[n];
      GdCase cn = c;
      cn.seqlens.clear(), cn.T = static_cast<int>(L);
      GdInputs dn = d;
      dn.cu = at::Tensor();
      dn.q = d.q.narrow(1, off, L), dn.k = d.k.narrow(1, off, L), dn.v = d.v.narrow(1, off, L);
      dn.g = d.g.narrow(1, off, L), dn.beta = d.beta.narrow(1, off, L);
      auto [o_n, s_n] = run_cuda(kern, cn, dn, d.s0.narrow(0, n, 1), scale);
      EXPECT_EQ(rel_err(o_n, o_p.narrow(1, off, L)), 0.0) << "sequence " << n;
      EXPECT_EQ(rel_err(s_n, s_p.narrow(0, n, 1)), 0.0) << "sequence " << n;
      off += L;
    }
  }
#endif
}

// Gated DeltaNet 1.3B's packed projection holds a token's six beta logits and six gate inputs at offsets 9216 and
// 9222: at batch 1 their token stride (6) is no multiple of 4, and the gate inputs start 4 bytes off an 8-byte line.
// The kernel reads g and beta one element at a time, so it takes them in place there too: the step allocates no
// more than the same step with every slice aligned (before the 47th wave, two bf16 -> fp32 conversions a layer, two
// launches and two allocations more), and its result is that of the contiguous fp32 call bit for bit.
TEST(Meta_GatedDeltaCuda, decodeReadsOddlyPlacedGateAndBetaInPlace) {
  STATECUT_REQUIRE_GPU();
#ifdef STATECUT_WITH_CUDA_KERNELS
  const int64_t H = 2, K = 64, V = 128;
  const auto A_log = at::rand({8}).to(at::kCUDA), dt_bias = at::randn({8}).to(at::kCUDA);
  // One step of a packed [B, 1, q | k | v | b | a | pad] output: the allocations it makes, its o and state, and the
  // same step from contiguous fp32 copies.
  const auto step = [&](int64_t B, int64_t HV, int64_t pad, uint64_t seed) {
    const int64_t width = 2 * H * K + HV * V + 2 * HV + pad;
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    const auto y = at::randn({B, 1, width}, gen, at::TensorOptions().dtype(at::kFloat)).to(at::kCUDA, at::kBFloat16);
    int64_t off = 0;
    auto take = [&](int64_t n) { return y.narrow(-1, (off += n) - n, n); };
    const auto q = take(H * K).view({B, 1, H, K}), k = take(H * K).view({B, 1, H, K});
    const auto v = take(HV * V).view({B, 1, HV, V}), b = take(HV), a = take(HV);
    const auto s0 = at::randn({B, HV, K, V}, gen).to(at::kCUDA) * 0.1;
    const auto Al = A_log.narrow(0, 0, HV).contiguous(), dt = dt_bias.narrow(0, 0, HV).contiguous();
    auto run = [&](const at::Tensor& qq, const at::Tensor& kk, const at::Tensor& vv, const at::Tensor& aa,
                   const at::Tensor& bb, at::Tensor& st) {
      return statecut::cuda::gated_delta_rule_decode_(qq, kk, vv, aa, bb, 0.125, st, c10::nullopt, true, true, Al, dt,
                                                      /*use_beta_sigmoid_in_kernel=*/true, false, false);
    };
    at::Tensor st = s0.clone(), st_c = s0.clone();
    const auto qc = q.contiguous(), kc = k.contiguous(), vc = v.contiguous(), ac = a.to(at::kFloat),
               bc = b.to(at::kFloat);
    const int dev = static_cast<int>(y.device().index());
    torch::cuda::synchronize();
    const auto before = c10::cuda::CUDACachingAllocator::getDeviceStats(dev).allocation[0].allocated;
    const auto o = run(q, k, v, a, b, st);
    const auto allocations = c10::cuda::CUDACachingAllocator::getDeviceStats(dev).allocation[0].allocated - before;
    const auto o_c = run(qc, kc, vc, ac, bc, st_c);
    EXPECT_EQ(rel_err(o, o_c), 0.0) << "B=" << B << " HV=" << HV;
    EXPECT_EQ(rel_err(st, st_c), 0.0) << "B=" << B << " HV=" << HV;
    return allocations;
  };
  const auto aligned = step(1, 8, 8, seed_from_env(47));  // HV 8: token stride 8, every slice on an 8-byte line
  for (int64_t B : {1, 3}) {
    const auto odd = step(B, 6, 4, seed_from_env(48 + B));
    EXPECT_EQ(odd, aligned) << "B=" << B << ": allocations of the oddly placed step (" << odd
                            << ") beyond the aligned one's (" << aligned << "): a copy of g or beta";
  }
#endif
}

}  // namespace

// A decode step of a model hands the kernel slices of one packed projection output [B, 1, q | k | v | a | b]: the
// kernel reads them in place (token stride = the packed width; a and b in bf16, no conversion). Same numbers, same
// fp32 operations as the contiguous fp32 call: bit for bit. K = 64 (4-element loads on strided rows) and 89 (scalar).
// Then round_beta with the in-kernel sigmoid equals LibTorch's bf16 sigmoid handed over as fp32 beta (DeltaNet's
// rounding; the same 1 / (1 + expf(−x))).
TEST(Meta_GatedDeltaCuda, decodeReadsPackedSlicesInPlace) {
  STATECUT_REQUIRE_GPU();
#ifdef STATECUT_WITH_CUDA_KERNELS
  for (int K : {64, 89}) {
    const int64_t B = 33, H = 4, HV = 8, V = 64;
    const int64_t width = 2 * H * K + HV * V + 2 * HV + 8;  // + 8: the packed output is wider than its parts
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed_from_env(41 + K));
    const auto y = at::randn({B, 1, width}, gen, at::TensorOptions().dtype(at::kFloat)).to(at::kCUDA, at::kBFloat16);
    int64_t off = 0;
    auto take = [&](int64_t n) { return y.narrow(-1, (off += n) - n, n); };
    const auto q = take(H * K).view({B, 1, H, K}), k = take(H * K).view({B, 1, H, K});
    const auto v = take(HV * V).view({B, 1, HV, V}), a = take(HV), b_logits = take(HV);
    const auto b = at::sigmoid(b_logits);  // a beta in (0, 1), in bf16
    const auto A_log = at::rand({HV}, gen).to(at::kCUDA), dt_bias = at::randn({HV}, gen).to(at::kCUDA);
    const auto s0 = at::randn({B, HV, K, V}, gen).to(at::kCUDA) * 0.1;
    auto run = [&](const at::Tensor& qq, const at::Tensor& kk, const at::Tensor& vv, const at::Tensor& aa,
                   const at::Tensor& bb, bool sigmoid, bool round) {
      at::Tensor st = s0.clone();
      auto o = statecut::cuda::gated_delta_rule_decode_(qq, kk, vv, aa, bb, 0.125, st, c10::nullopt, true, true,
                                                        A_log, dt_bias, sigmoid, false, round);
      return std::make_pair(o, st);
    };
    ASSERT_FALSE(q.is_contiguous());
    const auto [o_in, s_in] = run(q, k, v, a, b, false, false);
    const auto [o_c, s_c] = run(q.contiguous(), k.contiguous(), v.contiguous(), a.to(at::kFloat), b.to(at::kFloat),
                                false, false);
    EXPECT_EQ(rel_err(o_in, o_c), 0.0) << "K=" << K;
    EXPECT_EQ(rel_err(s_in, s_c), 0.0) << "K=" << K;
    const auto [o_r, s_r] = run(q, k, v, a, b_logits, /*sigmoid=*/true, /*round=*/true);
    EXPECT_EQ(rel_err(o_r, o_in), 0.0) << "K=" << K << ": in-kernel sigmoid rounded to bf16 vs LibTorch's";
    EXPECT_EQ(rel_err(s_r, s_in), 0.0) << "K=" << K;
  }
#endif
}

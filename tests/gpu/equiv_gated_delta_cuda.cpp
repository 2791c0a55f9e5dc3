// Equivalence of the CUDA gated delta rule kernels (recurrent/decode and chunked prefill) with the double reference
// statecut::ref::gated_delta_recurrent, over the op registry of tests/gpu/gated_delta_cases.h. Verdict: normwise relative error of o and of
// the final state against bounds derived from a plain float loop over the same inputs.
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <cstdio>

#include "tests/gpu/gated_delta_cases.h"
#ifdef STATECUT_WITH_CUDA_KERNELS
#include "tests/gpu/gated_delta_reference.h"
#endif

namespace {

using statecut::gpu_cases::GdCase;

class Equiv_GatedDeltaCuda : public ::testing::TestWithParam<GdCase> {};

struct Errors {
  double o_rec, s_rec, o_chunk, s_chunk, o_plain, s_plain;
};

#ifdef STATECUT_WITH_CUDA_KERNELS
using namespace statecut::gpu_cases;

Errors measure(const GdCase& c, uint64_t seed) {
  const GdInputs in = make_inputs(c, seed);
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.K));
  at::Tensor o_ref, s_ref, o_pl, s_pl;
  reference_double(c, in, scale, o_ref, s_ref);
  loop_reference<float>(c, in, scale, o_pl, s_pl);
  const GdInputs d = to_device(in);
  auto [o_rec, s_rec] = run_cuda(Kernel::kRecurrent, c, d, d.s0, scale);
  auto [o_chk, s_chk] = run_cuda(Kernel::kChunk, c, d, d.s0, scale);
  Errors e;
  e.o_plain = rel_err(o_pl.to(c.dtype), o_ref);  // the plain loop's o rounded to the output dtype, as the kernels do
  e.s_plain = rel_err(s_pl, s_ref);
  e.o_rec = rel_err(o_rec, o_ref), e.s_rec = rel_err(s_rec, s_ref);
  e.o_chunk = rel_err(o_chk, o_ref), e.s_chunk = rel_err(s_chk, s_ref);
  std::printf("[errors] %s seed=%llu o: plain %.3e rec %.3e chunk %.3e | state: plain %.3e rec %.3e chunk %.3e\n",
              c.name().c_str(), static_cast<unsigned long long>(seed), e.o_plain, e.o_rec, e.o_chunk, e.s_plain,
              e.s_rec, e.s_chunk);
  return e;
}
#endif

constexpr double kFp32Unit = 1.0 / 16777216;  // 2^-24, fp32's unit roundoff

TEST_P(Equiv_GatedDeltaCuda, kernelsMatchDoubleLoop) {
#ifndef STATECUT_WITH_CUDA_KERNELS
  GTEST_SKIP() << "built without the CUDA kernels (statecut_cuda_torch)";
#else
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const GdCase& c = GetParam();
  const uint64_t seed = seed_from_env(20261130);
  const Errors e = measure(c, seed);
  ASSERT_TRUE(std::isfinite(e.o_rec) && std::isfinite(e.o_chunk) && std::isfinite(e.s_rec) && std::isfinite(e.s_chunk));
  // Recurrent kernel: same fp32 arithmetic as the plain loop, only summed in another order.
  EXPECT_LE(e.o_rec, 2 * e.o_plain) << c.name();
  // The plain loop's state error is one sample of an fp32 recurrence's error, not its bound: with weak decay the
  // state keeps every step's rounding, and the kernel's other order measured 3.5-4.5x the loop's there (no decay:
  // 1.19e-6 vs 3.4e-7; 32 x -20 then -1e-3: 2.5e-6 vs 5.6e-7 at T = 130), <= 1.4x elsewhere. So 2x the loop plus
  // T fp32 units: the first-order bound of T steps whose updates are contractive (alpha <= 1, ||I - b k k^T|| <= 1)
  // and each add at most one rounding of the state's size.
  EXPECT_LE(e.s_rec, 2 * e.s_plain + static_cast<double>(c.T) * kFp32Unit) << c.name();
  // Chunk kernel: o within 2x the plain loop (the bf16 output rounding dominates); for fp16 output, whose
  // rounding is finer than TF32's, within 2x the TF32 unit.
  EXPECT_LE(e.o_chunk, 2 * std::max(e.o_plain, kTf32Unit)) << c.name();
  // State: the last chunks' products on TF32 operands (earlier chunks' rounding decays away: no growth with T,
  // T = 4096 measured 0.45 units); 0.02-0.61 units over the registry on the H200. One unit: the old fp32 in-chunk
  // gate cumsum (issue 19.1) gave 2.0 units on the reset-token case (9.8e-4) and passed the former 4 units.
  EXPECT_LE(e.s_chunk, kTf32Unit) << c.name();
#endif
}

INSTANTIATE_TEST_SUITE_P(Registry, Equiv_GatedDeltaCuda, ::testing::ValuesIn(statecut::gpu_cases::equivalence_cases()),
                         [](const ::testing::TestParamInfo<GdCase>& i) {
                           return std::to_string(i.index) + "_" + i.param.gtest_name();
                         });

}  // namespace

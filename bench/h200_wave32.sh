#!/usr/bin/env bash
# Mamba-2's decode step on its own row kernels (kernels/mamba2_step.cu: the fp32-residual add + norm, the D skip +
# gated norm) with dt and its decay formed in the decode kernel (beta_dt), and the [V,K] decode kernel's Packed
# instance for binding calls whose strides are the packed ones.
#   A  configure + build; the GPU tests of the kernels and of decoding (mamba2_step_cuda new; metamorphic incl. the
#      Packed instance against the strided one and the dt-in-kernel case; fused ops; equivalence; golden models;
#      decode_equivalence's CUDA cases); Mamba-2 1.3B and its 50% prune through `statecut bench`; two planted bugs (the
#      D skip dropped; dt taken as 1) must fail their tests; a Kineto table of a Mamba-2 decode step at batch 1.
# Results under $OUT: 00_summary.log, bench_m2.json. Run: bash bench/h200_wave32.sh A
set -uo pipefail
PHASE=${1:-A}
TAG=w32
# shellcheck source=bench/device_env.sh
source "$(dirname "$0")/device_env.sh"
TESTS="mamba2_step_cuda metamorphic_gated_delta_cuda fused_ops_cuda equiv_gated_delta_cuda golden_models_cuda
  decode_equivalence"
if [ "$PHASE" = A ]; then
  # shellcheck disable=SC2086
  configure_and_build $TESTS
  # shellcheck disable=SC2086
  run_tests $TESTS
  grep -h "linear attention\|packed" "$LOGS/metamorphic_gated_delta_cuda.log" | head -16 >>"$S"
  grep -h "hf_mamba2" "$LOGS/decode_equivalence.log" | head -8 >>"$S"
  timeout 200 "$BUILD/tests/decode_equivalence" --gtest_filter='*mamba2*' >"$LOGS/decode_eq_m2.log" 2>&1 ||
    { rc=1; keep "$LOGS/decode_eq_m2.log"; }
  say "decode_equivalence *mamba2* (CPU and CUDA): $(grep -E '^\[  (PASSED|FAILED) ' "$LOGS/decode_eq_m2.log" | tr '\n' ' ')"
  checkpoint m2 --family mamba2 && pruned m2 && bench m2
  planted_bug kernels/mamba2_step.cu 's/__fmul_rn(xv\[i\], Dk\[(d + i) \/ P\])/0.f/' mamba2_step_cuda \
    '*gatedNorm*' "D skip dropped"
  planted_bug kernels/gated_delta_recurrent.cu 's/return detail::softplus(raw + (a.dt_bias ? a.dt_bias\[hv\] : 0.f));/return 1.f;/' \
    metamorphic_gated_delta_cuda '*linearAttention*' "dt taken as 1"
  cmake --build "$BUILD" -j"$(nproc)" --target statecut-profile-step >"$LOGS/rebuild.log" 2>&1
  [ "$(elapsed)" -lt "${PROFILE_DEADLINE:-470}" ] && profile_decode m2 1
fi
say "phase $PHASE done at $(elapsed) s, rc $rc"
exit $rc

#!/usr/bin/env bash
# Mamba-2's decode step on the decode kernel (its SSM step: the kernel without the delta term, delta = false, x scaled
# by dt in the kernel) and the [V,K] decode kernel's offsets as walking pointers (the 29th wave's bisection).
#   A  the probe of the 29th wave on the new kernel source (.probe/vk/vk_new; vk_old and vk_head beside it); configure
#      + build; the GPU tests of the kernels and of decoding (metamorphic incl. the new linear-attention case,
#      equivalence, bad input, golden models, decode_equivalence's CUDA cases); Mamba-2 1.3B and its 50% prune
#      through `statecut bench`; the delta flag ignored in the [V,K] kernel must fail the new test; a Kineto table of
#      a Mamba-2 decode step at batch 1.
# Results under $OUT: 00_summary.log, bench_m2.json. Run: bash bench/h200_wave30.sh A
set -uo pipefail
PHASE=${1:-A}
TAG=w30
# shellcheck source=bench/device_env.sh
source "$(dirname "$0")/device_env.sh"
TESTS="metamorphic_gated_delta_cuda equiv_gated_delta_cuda badinput_gated_delta_cuda golden_models_cuda
  decode_equivalence"
if [ "$PHASE" = A ]; then
  for v in new old head; do timeout 60 .probe/vk/vk_$v $v 2>&1 | grep -E 'dk 128' >>"$S" || say "probe $v rc=$?"; done
  # shellcheck disable=SC2086
  configure_and_build $TESTS
  # shellcheck disable=SC2086
  run_tests $TESTS
  grep -h "linear attention" "$LOGS/metamorphic_gated_delta_cuda.log" >>"$S"
  grep -h "hf_mamba2_bf16_cuda" "$LOGS/decode_equivalence.log" | head -6 >>"$S"
  checkpoint m2 --family mamba2 && pruned m2 && bench m2
  planted_bug kernels/gated_delta_recurrent.cu 's/a.delta ? vv\[r\] - alpha \* sa : vv\[r\]/vv[r] - alpha * sa/' \
    metamorphic_gated_delta_cuda '*linearAttention*' "delta ignored in [V,K]"
  cmake --build "$BUILD" -j"$(nproc)" --target statecut-profile-step >"$LOGS/rebuild.log" 2>&1
  [ "$(elapsed)" -lt "${PROFILE_DEADLINE:-420}" ] && profile_decode m2 1
fi
say "phase $PHASE done at $(elapsed) s, rc $rc"
exit $rc

#!/usr/bin/env bash
# Issue 14 (fifth wave) on one H200: where a whole-model decode step goes, launch by launch, and fewer launches per
# layer (kernels/fused_layer_ops.cu).
#   P  configure + build (Release, sm_90a, the profile tool); random fla DeltaNet 1.3B and Gated DeltaNet 1.3B;
#      Kineto kernel sums of 32 eager decode steps at batch 1 and 64 (prompt 16), restricted to the decode steps.
#   F  the same build of the working tree and every GPU test (ctest -L GPU); three deliberate bugs (beta not rounded
#      in the decode kernel, the residual add not rounded before the norm, the GEMV's warp sum a level short) must
#      fail their tests;
#      both 1.3B shapes pruned to 50% (rand), `statecut bench` full vs 50% (prefill 1x2048 and 8x2048, decode
#      1/64/256 after a 512-token prompt, 128 steps, CUDA graphs); the decode profile again.
#   Q  the same build; a random Qwen3.5-style hybrid (statecut-random-checkpoint --family qwen3_5: hidden 2048, 24
#      layers, every 4th full attention, 2.3B parameters) and its 50% rand prune through `statecut bench` as in F.
# Results under $OUT: 00_summary.log (verdicts, tables), bench_*.json, failing logs.
# Run from the repository root: bash bench/h200_wave5.sh P|F|Q
set -uo pipefail
PHASE=${1:-P}
TAG=w5
# shellcheck source=bench/device_env.sh
source "$(dirname "$0")/device_env.sh"
TESTS="fused_ops_cuda decode_equivalence golden_models_cuda"

mutant() {  # deliberate bugs must fail their tests: beta not rounded to bf16; the add not rounded before the norm
  cp kernels/gated_delta_recurrent.cu "$LOGS/rec.orig"; cp kernels/fused_layer_ops.cu "$LOGS/flo.orig"
  sed -i 's/return a.beta_round ? to_f<T>(detail::from_f<T>(b)) : b;/return b;/' kernels/gated_delta_recurrent.cu
  sed -i 's/v\[i\] = to_f<T>(from_f<T>(v\[i\] + dv\[i\]));/v[i] = v[i] + dv[i];/' kernels/fused_layer_ops.cu
  sed -i 's/for (int off = 16; off > 0; off >>= 1) acc\[m\]/for (int off = 16; off > 1; off >>= 1) acc[m]/' kernels/fused_layer_ops.cu
  if cmp -s kernels/gated_delta_recurrent.cu "$LOGS/rec.orig" || cmp -s kernels/fused_layer_ops.cu "$LOGS/flo.orig"; then
    say "mutant: sed did not apply"
  else
    cmake --build "$BUILD" -j"$(nproc)" --target metamorphic_gated_delta_cuda fused_ops_cuda >"$LOGS/build_mut.log" 2>&1
    timeout 120 "$BUILD/tests/metamorphic_gated_delta_cuda" --gtest_filter='*PackedSlices*' >"$LOGS/mut1.log" 2>&1
    say "mutant beta not rounded: exit $? — $(grep -m1 -A2 Failure "$LOGS/mut1.log" | tr '\n' ' ' | cut -c1-250)"
    timeout 120 "$BUILD/tests/fused_ops_cuda" --gtest_filter='*addRmsNorm*' >"$LOGS/mut2.log" 2>&1
    say "mutant add not rounded: exit $? — $(grep -c Failure "$LOGS/mut2.log") failures; $(grep -m1 -A2 Failure "$LOGS/mut2.log" | tr '\n' ' ' | cut -c1-250)"
    timeout 120 "$BUILD/tests/fused_ops_cuda" --gtest_filter='*gemv*' >"$LOGS/mut3.log" 2>&1
    say "mutant gemv warp sum short a level: exit $? — $(grep -c Failure "$LOGS/mut3.log") failures; $(grep -m1 -A2 Failure "$LOGS/mut3.log" | tr '\n' ' ' | cut -c1-250)"
  fi
  cp "$LOGS/rec.orig" kernels/gated_delta_recurrent.cu; cp "$LOGS/flo.orig" kernels/fused_layer_ops.cu
  cmake --build "$BUILD" -j"$(nproc)" --target statecut metamorphic_gated_delta_cuda fused_ops_cuda >>"$LOGS/build_mut.log" 2>&1
}

if [ "$PHASE" = P ]; then
  configure_and_build
  checkpoint dn13 && { profile_decode dn13 1; profile_decode dn13 64; }
  checkpoint gdn13 --family gated_deltanet && { profile_decode gdn13 1; profile_decode gdn13 64; }
elif [ "$PHASE" = F ]; then
  configure_and_build $TESTS metamorphic_gated_delta_cuda equiv_gated_delta_cuda badinput_gated_delta_cuda \
    calibration_cuda
  (cd "$BUILD" && timeout 400 ctest -L GPU --output-on-failure -j4 >"$LOGS/ctest_gpu.log" 2>&1) ||
    { rc=1; keep "$LOGS/ctest_gpu.log"; }
  say "ctest -L GPU: $(grep -E 'tests passed|tests failed' "$LOGS/ctest_gpu.log")"
  grep -E "^\s+[0-9]+ - .*\(Failed|Timeout|SEGFAULT" "$LOGS/ctest_gpu.log" | head -20 >>"$S"
  mutant
  for n in dn13 gdn13; do
    f=""; [ $n = gdn13 ] && f="--family gated_deltanet"
    # shellcheck disable=SC2086
    checkpoint $n $f && pruned $n && bench $n
  done
  profile_decode dn13 1; profile_decode dn13 64
elif [ "$PHASE" = Q ]; then
  configure_and_build
  checkpoint q35 --family qwen3_5 && pruned q35 && bench q35
fi
say "phase $PHASE done at $(elapsed) s, rc $rc"
exit $rc

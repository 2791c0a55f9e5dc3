#!/usr/bin/env bash
# After the 31st wave's fix of the [V,K] decode kernel (its Packed instance, now also taken by binding calls with
# packed strides) and the 32nd wave's Mamba-2 step kernels (the gated norm now 512 threads a row, its h kept in
# registers): a reduced gate (ci/device.sh BENCH=1 did not fit the device time left) and Mamba-2 1.3B again.
#   A  configure + build; mamba2_step_cuda and metamorphic_gated_delta_cuda; bench_cuda_gated_delta's decode cases
#      and bench/compare.py's decode lines against bench/baselines/h200.json; a random Mamba-2 1.3B and its 50% prune
#      through `statecut bench` (decode 1 / 64 / 256); Kineto tables of their batch-1 steps while time is left.
# Results under $OUT: 00_summary.log, bench_decode_kernels.json, bench_m2_decode.json. Run: bash bench/h200_wave33.sh A
set -uo pipefail
PHASE=${1:-A}
TAG=w33
# shellcheck source=bench/device_env.sh
source "$(dirname "$0")/device_env.sh"
TESTS="mamba2_step_cuda metamorphic_gated_delta_cuda"
if [ "$PHASE" = A ]; then
  BENCH=ON
  # shellcheck disable=SC2086
  configure_and_build bench_cuda_gated_delta $TESTS
  # shellcheck disable=SC2086
  run_tests $TESTS
  timeout 150 "$BUILD/bench/bench_cuda_gated_delta" --benchmark_filter='decode' \
    --benchmark_out="$OUT/bench_decode_kernels.json" --benchmark_out_format=json >"$LOGS/bench_k.log" 2>&1 ||
    say "kernel bench rc=$?"
  python3 bench/compare.py bench/baselines/h200.json "$OUT/bench_decode_kernels.json" >"$LOGS/compare.log" 2>&1
  grep -E "decode" "$LOGS/compare.log" | head -12 >>"$S"
  checkpoint m2 --family mamba2 && pruned m2 && bench_decode m2 decode 1,64,256
  [ "$(elapsed)" -lt 420 ] && profile_decode m2 1 && [ "$(elapsed)" -lt 470 ] && profile_decode m2_p50 1
fi
say "phase $PHASE done at $(elapsed) s, rc $rc"
exit $rc

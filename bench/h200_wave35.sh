#!/usr/bin/env bash
# A batch-1 decode step's residual add and norm inside the GEMV that reads them (kernels/gemv.cu gemv_norm: every
# block forms the normalised row itself; layers_common.h add_rms_norm_linear / add_rms_norm_gated_mlp): two launches
# a layer fewer for the fla families. The calls ran the Qwen3.5 hybrid with its MLP's and head's norms fused too; it
# gained nothing (1.936 -> 1.943 ms) and was left on the two launches, so its rows now time the same path twice.
#   A  configure + build; fused_ops_cuda (the new kernel bit for bit against the norm kernel then the GEMV);
#      decode_equivalence's CUDA cases; `statecut bench --decode 1,8` of the random DeltaNet / Gated DeltaNet 1.3B and
#      the Qwen3.5 hybrid with their 50% prunes, STATECUT_NORM_GEMV=0 (two launches) then on, same call; a planted bug
#      (the one-vector row norm's weight offset dropped) must fail the new test; then every GPU test (ctest -L GPU).
# The first call of this wave ran the kernel with the warp's weight rows prefetched into L2 (prefetch.global.L2)
# during the norm; a second, on a throwaway tree, timed it without the prefetch and with plain GEMVs prefetching
# before their wait (bench/README.md, 35th wave); this script is the landed kernel's.
# Results under $OUT: 00_summary.log, bench_*.json, failing logs. Run: bash bench/h200_wave35.sh A
set -uo pipefail
PHASE=${1:-A}
TAG=w35
# shellcheck source=bench/device_env.sh
source "$(dirname "$0")/device_env.sh"
if [ "$PHASE" = A ]; then
  gpu_tests=$(for f in tests/gpu/*.cpp; do basename "$f" .cpp; done | tr '\n' ' ')
  # shellcheck disable=SC2086
  configure_and_build $gpu_tests decode_equivalence
  run_tests fused_ops_cuda decode_equivalence
  for n in dn13 gdn13 q35; do
    f=""; [ $n = gdn13 ] && f="--family gated_deltanet"; [ $n = q35 ] && f="--family qwen3_5"
    # shellcheck disable=SC2086
    checkpoint $n $f && pruned $n || continue
    export STATECUT_NORM_GEMV=0; bench_decode $n two_launches 1,8
    unset STATECUT_NORM_GEMV; bench_decode $n fused 1,8
  done
  planted_bug kernels/rms_norm_row.cuh 's/(v\[i\] \* inv) \* (w_offset + wv\[i\])/(v[i] * inv) * wv[i]/' \
    fused_ops_cuda '*gemvNorm*' "the one-vector row norm drops its weight offset"
  [ "$(elapsed)" -lt 420 ] && {
    (cd "$BUILD" && cmake --build . -j"$(nproc)" --target fused_ops_cuda >/dev/null 2>&1 && ctest -L GPU -j4 --timeout 200) \
      >"$LOGS/ctest_gpu.log" 2>&1 || { rc=1; keep "$LOGS/ctest_gpu.log"; }
    say "ctest -L GPU: $(grep -E 'tests passed|tests failed' "$LOGS/ctest_gpu.log" | tail -1) at $(elapsed) s"
    grep -E "^ *[0-9]+/[0-9]+ Test.*(Failed|Not Run)" "$LOGS/ctest_gpu.log" | tee -a "$S"
  }
  [ "$(elapsed)" -lt 520 ] && profile_decode dn13 1
fi
say "phase $PHASE done at $(elapsed) s, rc $rc"
exit $rc

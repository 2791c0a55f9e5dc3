#!/usr/bin/env bash
# Issue 14, the Gated DeltaNet 1.3B prefill (0.91x fla's model forward in the twelfth wave): the thirteenth wave found
# the chunk state kernel at dk 256 / dv 512 at 0.76x fla's kernel (1.63 vs 1.23 ms at 8 x 2048, H 6) while it is 1.70x
# at dk 128: with double-buffered k rows a dk-256 block takes 136 KiB of shared memory, one block per SM. One k
# buffer (103 KiB) lets two blocks share an SM.
#   K  configure + build (Release, sm_90a, the CLI and tools, the kernel tests); the kernel tests as chosen, then
#      with every dk > 128 case forced through one and through two k buffers (STATECUT_CHUNK_K_BUFFERS); the chunk
#      kernel against fla's at H 6, dk 256 / 128, dv 512, 8 x 2048, with one and with two buffers; statecut bench of
#      a random Gated DeltaNet 1.3B and its 50% prune, prefill 8 x 2048, and fla's model forward on the same two.
# Results under $OUT: 00_summary.log, fla_gdn_kb*.txt, bench_gdn13.json. Run: bash bench/h200_wave14.sh K
set -uo pipefail
PHASE=${1:-K}
TAG=w14
# shellcheck source=bench/device_env.sh
source "$(dirname "$0")/device_env.sh"
TESTS="equiv_gated_delta_cuda metamorphic_gated_delta_cuda badinput_gated_delta_cuda"
if [ "$PHASE" = K ]; then
  # shellcheck disable=SC2086
  configure_and_build $TESTS
  # shellcheck disable=SC2086
  run_tests $TESTS
  for kb in 1 2; do
    say "--- forced STATECUT_CHUNK_K_BUFFERS=$kb"
    STATECUT_CHUNK_K_BUFFERS=$kb run_tests equiv_gated_delta_cuda
  done
  grep -h "dk=256" "$LOGS/equiv_gated_delta_cuda.log" | head -6 >>"$S"
  if [ -d .fla/fla ]; then
    for kb in 2 ""; do
      STATECUT_CHUNK_K_BUFFERS=$kb FLA_H=6 FLA_K=256,128 FLA_V=512 FLA_SHAPES=8x2048 PYTHONPATH=.fla timeout 200 \
        python3 bench/cuda_fla_compare.py "$BUILD/kernels/libstatecut_cuda_torch.so" "$OUT/fla_gdn_kb${kb:-auto}.txt" \
        >"$LOGS/fla_gdn_$kb.log" 2>&1 || rc=1
      say "--- chunk kernel vs fla at H 6, dv 512, 8 x 2048; k buffers: ${kb:-chosen}"
      tail -4 "$LOGS/fla_gdn_$kb.log" >>"$S"
    done
  fi
  checkpoint gdn13 --family gated_deltanet && pruned gdn13 && bench_prefill gdn13 8x2048 &&
    fla_prefill 570 gdn13 gdn13_p50
fi
say "phase $PHASE done at $(elapsed) s, rc $rc"
exit $rc

#!/usr/bin/env bash
# The 56th wave (2026-12-06): a decode step's short conv in the epilogue of the batch-1 GEMV that forms q|k|v|…
# (kernels/gemv.cu gemv_norm_conv): the conv-step launch of a layer goes where the decode fold does not take the conv
# (Gated DeltaNet 1.3B, dv 512; DeltaNet 1.3B keeps the fold), and in the Qwen3.5 hybrid's linear layers, which also
# take the plain GEMV with the same epilogue (gemv_conv; a first form there, the add + norm in the launch too, call 1,
# was 0.4% slower on the full hybrid).
#   A  build; fused_ops_cuda (the epilogue bit for bit the two launches), decode_fold_cuda, decode_equivalence's CUDA
#      cases; a planted bug (the conv bias dropped in the epilogue) must fail fused_ops_cuda;
#      `statecut bench --decode 1` of Gated DeltaNet 1.3B, the Qwen3.5-style hybrid and (DN=1) DeltaNet 1.3B (a control:
#      the fold) against their 50% prunes, with the epilogue off (STATECUT_GEMV_CONV=0) and on, two rounds interleaved.
#   B  the hybrid's form alone (build; fused_ops_cuda; decode_equivalence's Qwen3.5 CUDA cases; one bench round).
# Results under $OUT: 00_summary.log, bench_*.json, failing logs. Run: bash bench/h200_wave56.sh A
set -uo pipefail
PHASE=${1:-A}
TAG=w56
# shellcheck source=bench/device_env.sh
source "$(dirname "$0")/device_env.sh"
if [ "$PHASE" = A ]; then
  configure_and_build fused_ops_cuda decode_fold_cuda decode_equivalence
  run_tests fused_ops_cuda decode_fold_cuda decode_equivalence
  checkpoint gdn13 --family gated_deltanet && pruned gdn13
  checkpoint q35 --family qwen3_5 && pruned q35
  [ "${DN:-0}" = 1 ] && checkpoint dn13 && pruned dn13
  for round in 1 2; do
    for n in gdn13 q35 $([ "${DN:-0}" = 1 ] && echo dn13); do
      export STATECUT_GEMV_CONV=0; bench_decode $n "off_r$round" 1
      unset STATECUT_GEMV_CONV; bench_decode $n "on_r$round" 1
    done
    [ "$(elapsed)" -gt 330 ] && break
  done
  planted_bug kernels/gemv.cu 's/if (conv.bias) a += bias;/if (false) a += bias;/' fused_ops_cuda '*gemvConv*' \
    "the conv bias dropped in the GEMV's epilogue"
fi
if [ "$PHASE" = B ]; then  # the short form for a short budget: the hybrid's gemv_conv, its tests, one round
  configure_and_build fused_ops_cuda decode_equivalence
  run_tests fused_ops_cuda
  timeout 120 "$BUILD/tests/decode_equivalence" --gtest_filter='*qwen*cuda*' >"$LOGS/deq.log" 2>&1 || { rc=1; keep "$LOGS/deq.log"; }
  say "decode_equivalence qwen cuda: $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]+ test' "$LOGS/deq.log" | tr '\n' ' ')"
  checkpoint q35 --family qwen3_5 && pruned q35
  export STATECUT_GEMV_CONV=0; bench_decode q35 off_r1 1
  unset STATECUT_GEMV_CONV; bench_decode q35 on_r1 1
fi
say "phase $PHASE done at $(elapsed) s, rc $rc"
exit $rc

#!/usr/bin/env bash
# The 56th wave (2026-12-06): a decode step's short conv in the epilogue of the batch-1 GEMV that forms q|k|v|…
# (kernels/gemv.cu gemv_norm_conv): the conv-step launch of a layer goes where the decode fold does not take the conv
# (Gated DeltaNet 1.3B, dv 512; DeltaNet 1.3B keeps the fold), and in the Qwen3.5 hybrid's linear layers, which also
# gain the add + norm in the same launch (they had none at batch 1). As run (2026-12-06 19:52 UTC); the hybrid's form
# was then taken back (bench/README.md, 56th wave): on main the hybrid keeps its launches, so its off / on rows here
# now time the same path. Branch exp/qwen-gemv-conv has a second form and `bash bench/h200_wave56.sh B`, not run.
#   A  build; fused_ops_cuda (the epilogue bit for bit the two launches), decode_fold_cuda, decode_equivalence's CUDA
#      cases; a planted bug (the conv bias dropped in the epilogue) must fail fused_ops_cuda;
#      `statecut bench --decode 1` of Gated DeltaNet 1.3B, the Qwen3.5-style hybrid and DeltaNet 1.3B (a control: the
#      fold) against their 50% prunes, with the epilogue off (STATECUT_GEMV_CONV=0) and on, two rounds interleaved.
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
  checkpoint dn13 && pruned dn13
  for round in 1 2; do
    for n in gdn13 q35 dn13; do
      export STATECUT_GEMV_CONV=0; bench_decode $n "off_r$round" 1
      unset STATECUT_GEMV_CONV; bench_decode $n "on_r$round" 1
    done
    [ "$(elapsed)" -gt 330 ] && break
  done
  planted_bug kernels/gemv.cu 's/if (conv.bias) a += bias;/if (false) a += bias;/' fused_ops_cuda '*gemvNormConv*' \
    "the conv bias dropped in the GEMV's epilogue"
fi
say "phase $PHASE done at $(elapsed) s, rc $rc"
exit $rc

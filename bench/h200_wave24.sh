#!/usr/bin/env bash
# Issue 14: the gated MLP's gate|up GEMV with silu·mul in its epilogue (kernels/gemv.cu, one launch a layer fewer at
# batch <= 8), and the GEMV's launch shape at batch 1 (STATECUT_GEMV_SHAPE, measurement only); issue 13's Gated
# DeltaNet recipe step with the CUDA conv backward when time is left.
#   A  configure + build (Release, sm_90a); fused_ops_cuda, golden_models_cuda, decode_equivalence's CUDA cases; a
#      deliberate bug (the gate not rounded before silu) must fail the bit-for-bit test; random DeltaNet and Gated
#      DeltaNet 1.3B and their 50% rand prunes; `statecut bench` decode 1 / 8 with the fused epilogue off and on, and
#      with shapes 1-3; Gated DeltaNet's LoRA + KD finetune (bf16, 4 x 2048 tokens a step).
# (STATECUT_GEMV_SILU, STATECUT_GEMV_SHAPE and STATECUT_GEMV_ROWS were measurement switches of the tree this ran on;
# main kept none: run on main, the script measures the landed path under each label. bench/README.md has the figures.)
# Results under $OUT: 00_summary.log, bench_*.json, ft_*.json. Run: bash bench/h200_wave24.sh A
set -uo pipefail
PHASE=${1:-A}
TAG=w24
# shellcheck source=bench/device_env.sh
source "$(dirname "$0")/device_env.sh"
TESTS="fused_ops_cuda golden_models_cuda decode_equivalence"
if [ "$PHASE" = A ]; then
  # shellcheck disable=SC2086
  configure_and_build $TESTS
  # shellcheck disable=SC2086
  run_tests $TESTS
  checkpoint dn13 && pruned dn13
  STATECUT_GEMV_SILU=0 bench_decode dn13 silu0 1,8
  bench_decode dn13 silu1 1,8
  for sh in 1 2 3; do STATECUT_GEMV_SHAPE=$sh bench_decode dn13 "shape$sh" 1; done
  checkpoint gdn13 --family gated_deltanet && pruned gdn13
  STATECUT_GEMV_SILU=0 bench_decode gdn13 silu0 1,8
  bench_decode gdn13 silu1 1,8
  planted_bug kernels/gemv.cu 's/const float g = to_f<T>(from_f<T>(acc\[0\]\[m\])), u/const float g = acc[0][m], u/' \
    fused_ops_cuda '*gemvSiluMul*' 'the gate not rounded'
  [ "$(elapsed)" -lt "${FT_BY:-470}" ] && FT_TIMEOUT=100 ft gdn_lora_bf16_cudaconv gdn13_p50 gdn13 --steps 6 --precision bf16
fi
say "phase $PHASE done at $(elapsed) s, rc $rc"
exit $rc

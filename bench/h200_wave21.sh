#!/usr/bin/env bash
# Issue 14 and 13 in one call.
#   C  configure + build (Release, sm_90a); fused_ops_cuda (the conv step now 8 channels a thread, W compiled in),
#      golden_models_cuda, decode_equivalence's CUDA cases, train_cuda; a deliberate bug (the state not shifted)
#      must fail the conv step test; random DeltaNet and Gated DeltaNet 1.3B and their 50% rand prunes; `statecut
#      bench` decode 1 / 64 / 256; a Kineto table of DeltaNet 1.3B's decode at 256; `statecut finetune --device
#      cuda` of each prune from its full model (LoRA + KD, bf16, 4 x 2048 tokens a step) with the WY system
#      through the explicit unit lower inverse (optimized/models/unit_lower_inverse.h) and the scan node writing in
#      place; the decode benches with STATECUT_PDL=0 and =1, decode_equivalence's CUDA cases with =1 (kernels/pdl.cuh: the
#      step's own kernels launched as programmatic dependents of the kernel before them).
# Results under $OUT: 00_summary.log, bench_*.json, ft_*.json. Run: bash bench/h200_wave21.sh C
set -uo pipefail
PHASE=${1:-C}
TAG=w21
# shellcheck source=bench/device_env.sh
source "$(dirname "$0")/device_env.sh"
mutant() {  # the conv step writes the state back unshifted: fused_ops_cuda's step test must fail
  cp kernels/fused_layer_ops.cu "$LOGS/flo.orig"
  sed -i 's/store_vec<T, V>(st + static_cast<int64_t>(j) \* C, win\[j + 1\]);/store_vec<T, V>(st + static_cast<int64_t>(j) * C, win[j]);/' \
    kernels/fused_layer_ops.cu
  if cmp -s kernels/fused_layer_ops.cu "$LOGS/flo.orig"; then
    say "mutant: sed did not apply"
  else
    cmake --build "$BUILD" -j"$(nproc)" --target fused_ops_cuda >"$LOGS/build_mut.log" 2>&1
    timeout 120 "$BUILD/tests/fused_ops_cuda" --gtest_filter='*conv1dStep*' >"$LOGS/mut.log" 2>&1
    say "mutant (state not shifted): exit $? — $(grep -cE 'Failure' "$LOGS/mut.log") failures; first: $(grep -m1 -A3 Failure "$LOGS/mut.log" | tr '\n' ' ' | cut -c1-300)"
  fi
  cp "$LOGS/flo.orig" kernels/fused_layer_ops.cu
  cmake --build "$BUILD" -j"$(nproc)" --target fused_ops_cuda statecut >>"$LOGS/build_mut.log" 2>&1
}
if [ "$PHASE" = C ]; then
  configure_and_build fused_ops_cuda golden_models_cuda decode_equivalence train_cuda metamorphic_gated_delta_cuda
  run_tests fused_ops_cuda golden_models_cuda decode_equivalence train_cuda metamorphic_gated_delta_cuda
  checkpoint dn13 && pruned dn13 && checkpoint gdn13 --family gated_deltanet && pruned gdn13
  STATECUT_PDL=0 bench_decode dn13 conv 1,64,256
  STATECUT_PDL=1 bench_decode dn13 pdl 1,64,256
  STATECUT_PDL=0 bench_decode gdn13 conv 1,64,256
  STATECUT_PDL=1 bench_decode gdn13 pdl 1,64,256
  STATECUT_PDL=1 timeout 300 "$BUILD/tests/decode_equivalence" --gtest_filter='*cuda*' >"$LOGS/deq_pdl.log" 2>&1 ||
    { rc=1; keep "$LOGS/deq_pdl.log"; }
  say "decode_equivalence, STATECUT_PDL=1: $(grep -E '^\[  (PASSED|FAILED) ' "$LOGS/deq_pdl.log" | tr '\n' ' ')"
  profile_decode dn13 256
  ft dn_lora_bf16 dn13_p50 dn13 --steps 8 --precision bf16
  [ "$(elapsed)" -lt "${GDN_BY:-420}" ] && ft gdn_lora_bf16 gdn13_p50 gdn13 --steps 6 --precision bf16
  [ "$(elapsed)" -lt "${MUTANT_BY:-480}" ] && mutant
fi
say "phase $PHASE done at $(elapsed) s, rc $rc"
exit $rc

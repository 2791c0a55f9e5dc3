#!/usr/bin/env bash
# Where the skinny GEMM's time goes at 64 rows (2026-12-05, 44th wave):
#   A  one build; the GPU tests of the step kernels (e6f954e's binding changes had only been compiled); `statecut
#      bench` of DeltaNet 1.3B and Gated DeltaNet 1.3B against their 50% prunes at 1, 8, 64, 256 as it is and with
#      STATECUT_PDL_TRIGGER=0 STATECUT_SKINNY_GEMM=0; a Kineto table of a DeltaNet 1.3B step at batch 64; Nsight
#      Compute's sections (speed of light, memory, warp states) of the skinny GEMM and cuBLAS on each DeltaNet 1.3B
#      shape at 64 and 8 rows (bench/skinny_gemm_step.cu with SKINNY_PROFILE).
#   B  the gated MLP's silu·mul in the skinny GEMM's epilogue (skinny_gemm_silu_mul_bf16): the GPU tests, a planted
#      bug (the up rows read from the gate rows) that skinny_gemm_cuda must catch, `statecut bench` of both 1.3B
#      shapes and their prunes at 8 and 64 as it is and with STATECUT_SKINNY_SILU_MUL=0, twice each, interleaved.
#   C  where the skinny GEMM's time goes: bench/skinny_gemm_step.cu (SKINNY_QUICK: each 1.3B shape at 8 and 64 rows,
#      whole steps' projections with and without a norm-like kernel after each) built from kernels/skinny_gemm.cu as it
#      is and edited: nomma (no wgmma: the ring still streams), noepi (no partial tile, no cluster reduction, nothing
#      written), stream (neither, and no x: only w's boxes through the ring), l2none (the tensor maps without L2
#      promotion), fill50 / fill85 (the cluster rule covering 0.50 / 0.85 of the SMs instead of 0.65). Only the
#      timings of the edited ones mean anything; their checks fail by design.
#   D  B's bench of both 1.3B shapes and their prunes at 1, 8, 64, 256 as it is and with STATECUT_PDL_TRIGGER=0
#      STATECUT_SKINNY_GEMM=0 (the tree before the 43rd wave), then C (its variants built beside the main build).
#   E  the epilogue made cheaper (a lone block skips the cluster barriers, the last barrier orders nothing, a cluster's
#      loads issued together): the harness from the tree against it from .old/skinny_gemm_head.cu (the kernel before,
#      carried), the GPU tests, `statecut bench` of both 1.3B shapes and their prunes at 1, 8, 64, 256.
#   F  (prepared for the next session, not run yet) what the epilogue still holds, C's way: the harness as it is and
#      edited: nostore (the bf16 stores of y skipped: what their landing before the dependent's wait costs), nobar (the
#      first cluster barrier skipped: wrong sums at cluster > 1, timing only), noload (the partials not read: zeros
#      stored), noepi (C's: no epilogue at all).
# Run: bash bench/h200_wave44.sh A|B|C|D|E|F
set -uo pipefail
PHASE=${1:-A}
TAG=w44
# shellcheck source=bench/device_env.sh
source "$(dirname "$0")/device_env.sh"
both_models_ready() {  # dn13 | gdn13: the random 1.3B checkpoint (DeltaNet or Gated DeltaNet) and its 50% prune
  local f=""
  [ "$1" = gdn13 ] && f="--family gated_deltanet"
  # shellcheck disable=SC2086
  checkpoint "$1" $f && pruned "$1"
}
new_and_before() {  # name: statecut bench at 1, 8, 64, 256 as it is and as the tree before the 43rd wave
  bench_decode "$1" new 1,8,64,256
  STATECUT_PDL_TRIGGER=0 STATECUT_SKINNY_GEMM=0 bench_decode "$1" before 1,8,64,256
}
ncu_gemms() {  # rows: ncu over the harness's one launch of each shape, ours and cuBLAS's
  local m=$1
  timeout 150 ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
    --section LaunchStats --section Occupancy "$BUILD/bench/bench_skinny_gemm_step" >"$OUT/ncu_rows$m.txt" 2>&1 \
    < /dev/null
  say "ncu rows $m rc=$? at $(elapsed) s"
  grep -E "^  [a-zA-Z_].*\(|Duration|DRAM Throughput|Memory Throughput|L2 Cache Throughput|Compute \(SM\) Throughput|Grid Size|Cluster Size" \
    "$OUT/ncu_rows$m.txt" | head -120 >>"$S"
}
if [ "$PHASE" = A ]; then
  BENCH=ON configure_and_build skinny_gemm_cuda fused_ops_cuda decode_equivalence decode_fold_cuda mamba2_step_cuda \
    golden_models_cuda bench_skinny_gemm_step
  run_tests skinny_gemm_cuda fused_ops_cuda decode_equivalence decode_fold_cuda mamba2_step_cuda golden_models_cuda
  SKINNY_PROFILE=64 ncu_gemms 64
  SKINNY_PROFILE=8 ncu_gemms 8
  for n in dn13 gdn13; do both_models_ready $n && new_and_before $n; done
  [ "$(elapsed)" -lt 480 ] && profile_decode dn13 64
fi
if [ "$PHASE" = B ]; then
  BENCH=ON configure_and_build skinny_gemm_cuda fused_ops_cuda decode_equivalence golden_models_cuda
  run_tests skinny_gemm_cuda fused_ops_cuda decode_equivalence golden_models_cuda
  for n in dn13 gdn13; do
    both_models_ready $n || continue
    bench_decode $n fused 1,8,64
    STATECUT_SKINNY_SILU_MUL=0 bench_decode $n unfused 8,64
    bench_decode $n fused_again 8,64
    STATECUT_SKINNY_SILU_MUL=0 bench_decode $n unfused_again 8,64
  done
  # last: it leaves the library built with the bug
  planted_bug kernels/skinny_gemm.cu 's/k, N + tile \* 64);/k, tile * 64);/' skinny_gemm_cuda '*siluMul*' \
    "the up rows read from the gate rows"
fi
variant() { skinny_variant "$@"; }
build_variants() {
  local noepi='s|__syncthreads();  // every stage read and every copy landed: the stages become the partial tile|__syncthreads(); return;|'
  local nomma='s/mma<NB>(d, smem_desc/if (0) mma<NB>(d, smem_desc/'
  variant base &
  variant nomma "$nomma" &
  variant noepi "$noepi" &
  variant stream "$nomma" "$noepi" 's/mbar_expect_tx(full(i), P::kStageBytes)/mbar_expect_tx(full(i), P::kWBytes)/' \
    's/mbar_expect_tx(full(s), P::kStageBytes)/mbar_expect_tx(full(s), P::kWBytes)/' 's/load_x(i, i);/;/' 's/load_x(i, s);/;/' &
  variant l2none 's/CU_TENSOR_MAP_L2_PROMOTION_L2_256B/CU_TENSOR_MAP_L2_PROMOTION_NONE/' &
  variant fill50 's/65LL \* sms/50LL * sms/' &
  variant fill85 's/65LL \* sms/85LL * sms/' &
  wait
}
run_variants() {
  for v in base nomma noepi stream l2none fill50 fill85; do
    [ -x "$LOGS/v_$v/harness" ] || continue
    SKINNY_QUICK=1 timeout 100 "$LOGS/v_$v/harness" >"$OUT/harness_$v.log" 2>&1
    say "--- $v (rc $?) at $(elapsed) s"
    grep -E "^shape|rows|copy bandwidth|checks:" "$OUT/harness_$v.log" >>"$S"
    [ "$(elapsed)" -lt "${1:-500}" ] || { say "variants after $v stopped at $(elapsed) s"; break; }
  done
}
if [ "$PHASE" = C ]; then
  build_variants
  say "variants built at $(elapsed) s"
  run_variants
fi
if [ "$PHASE" = D ]; then
  (build_variants; echo "variants built at $(elapsed) s" >>"$LOGS/variants.log") &
  vb=$!
  configure_and_build skinny_gemm_cuda decode_equivalence
  run_tests skinny_gemm_cuda decode_equivalence
  for n in dn13 gdn13; do both_models_ready $n && new_and_before $n; done
  wait $vb
  say "$(cat "$LOGS/variants.log")"
  run_variants 480
fi
if [ "$PHASE" = E ]; then
  (variant new; mkdir -p "$LOGS/v_old/kernels" && cp kernels/*.cuh kernels/*.h "$LOGS/v_old/kernels/" &&
   cp .old/skinny_gemm_head.cu "$LOGS/v_old/kernels/skinny_gemm.cu" &&
   nvcc -std=c++17 -O2 -I"$LOGS/v_old" -gencode=arch=compute_90a,code=sm_90a bench/skinny_gemm_step.cu \
     "$LOGS/v_old/kernels/skinny_gemm.cu" -lcublas -o "$LOGS/v_old/harness" >"$LOGS/v_old/build.log" 2>&1) &
  vb=$!
  configure_and_build skinny_gemm_cuda decode_equivalence
  wait $vb
  for v in old new; do
    SKINNY_QUICK=1 SKINNY_NO_SHAPES=1 timeout 60 "$LOGS/v_$v/harness" >"$OUT/harness_$v.log" 2>&1
    say "--- harness $v (rc $?) at $(elapsed) s"
    grep -E "rows|checks:" "$OUT/harness_$v.log" >>"$S"
  done
  run_tests skinny_gemm_cuda decode_equivalence
  for n in dn13 gdn13; do both_models_ready $n && bench_decode $n new 1,8,64,256; done
fi
if [ "$PHASE" = F ]; then
  noepi='s|__syncthreads();  // every stage read and every copy landed: the stages become the partial tile|__syncthreads(); return;|'
  variant base &
  variant nostore 's|\*reinterpret_cast<uint2\*>(out) = packed;|if (packed.x == 0x7fc17fc1u) *reinterpret_cast<uint2*>(out) = packed;|' &
  variant nobar 's|    cluster_sync();  // every partial tile of the cluster written|    __syncthreads();  // every partial tile of the cluster written|' &
  variant noload 's|float4 acc = reduced(m \* ld + 4 \* q);|float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);|' &
  variant noepi "$noepi" &
  wait
  say "variants built at $(elapsed) s"
  for v in base nostore nobar noload noepi; do
    [ -x "$LOGS/v_$v/harness" ] || continue
    SKINNY_QUICK=1 timeout 100 "$LOGS/v_$v/harness" >"$OUT/harness_$v.log" 2>&1
    say "--- $v (rc $?) at $(elapsed) s"
    grep -E "^shape|rows|copy bandwidth|checks:" "$OUT/harness_$v.log" >>"$S"
  done
fi
say "phase $PHASE done at $(elapsed) s, rc $rc"
exit $rc

#!/usr/bin/env bash
# Mamba-2's prompt and whole-sequence SSD on the chunk kernel without its delta term (kernels/gated_delta_chunk_prep.cu:
# A = 0 so T = I, and b e^G rk = 0 so Y = diag(b) V; linear_attention_forward in optimized/models/recurrence_cuda.cpp).
#   A  configure + build; every GPU test (ctest -L GPU: the registry's new cases without the delta term on both
#      kernels, the Mamba-2 golden on CUDA with its layers' states against f64); a random Mamba-2 1.3B and its 50%
#      prune through `statecut bench --prefill 1x2048,8x2048` (decode 1); the kernels of its 8 x 2048 prefill; a
#      planted bug (the chunk kernel's A kept without the delta term) must fail the registry's nodelta cases.
#   B  (after the prep kernel skips Kr Kr^T and the solve without the delta term) the whole gate, `ci/device.sh` with
#      BENCH=1 SKIP_SANITIZER=1, its files under $OUT/gate; then the Mamba-2 1.3B bench of A again on its build.
#   C  golden_models_cuda over tests/data/variants (the twelve fla / transformers checkpoints with other configs): fp32
#      on CUDA against the library's logits, bf16 on the kernels within twice the CPU bf16 error, each layer's final
#      state against f64; then over the fixtures as ctest runs it.
# Results under $OUT: 00_summary.log, bench_m2.json, ctest_gpu.log on failure. Run: bash bench/h200_wave34.sh A|B|C
set -uo pipefail
PHASE=${1:-A}
TAG=w34
# shellcheck source=bench/device_env.sh
source "$(dirname "$0")/device_env.sh"
if [ "$PHASE" = A ]; then
  gpu_tests=$(for f in tests/gpu/*.cpp; do basename "$f" .cpp; done | tr '\n' ' ')
  # shellcheck disable=SC2086
  configure_and_build $gpu_tests decode_equivalence
  (cd "$BUILD" && ctest -L GPU -V -j4 --timeout 400) >"$LOGS/ctest_gpu.log" 2>&1 || { rc=1; keep "$LOGS/ctest_gpu.log"; }
  say "ctest -L GPU: $(grep -E 'tests passed|tests failed' "$LOGS/ctest_gpu.log" | tail -1) at $(elapsed) s"
  grep -E "^[0-9]+/[0-9]+ Test.*(Failed|Not Run|Skipped)" "$LOGS/ctest_gpu.log" | tee -a "$S"
  grep -E "Failure" -A4 "$LOGS/ctest_gpu.log" | head -40 >>"$S"
  grep -ohE "\[errors\].*nodelta.*" "$LOGS/ctest_gpu.log" | cut -c1-260 | sort -u >>"$S"
  grep -ohE "\[bf16\] hf_mamba2.*" "$LOGS/ctest_gpu.log" | sort -u >>"$S"
  run_tests decode_equivalence
  checkpoint m2 --family mamba2 && pruned m2 && bench_prefill m2 1x2048,8x2048
  [ "$(elapsed)" -lt 440 ] && profile_prefill m2 8 2048
  [ "$(elapsed)" -lt 480 ] && planted_bug kernels/gated_delta_chunk_prep.cu 's/(c < r \&\& a.delta)/(c < r)/' \
    equiv_gated_delta_cuda '*nodelta*' "the chunk kernel keeps A without the delta term"
fi
if [ "$PHASE" = B ]; then
  OUT="$OUT/gate" BENCH=1 SKIP_SANITIZER=1 BUILD="$BUILD" bash ci/device.sh >"$LOGS/gate.log" 2>&1 || rc=1
  say "gate: $(tail -1 "$LOGS/gate.log") at $(elapsed) s"
  checkpoint m2 --family mamba2 && pruned m2 && bench_prefill m2 1x2048,8x2048
fi
if [ "$PHASE" = C ]; then
  configure_and_build golden_models_cuda
  mkdir -p "$WORK/vroot" && ln -sfn "$PWD/tests/data/variants" "$WORK/vroot/fixtures"
  STATECUT_SHARED_ROOT="$WORK/vroot" timeout 300 "$BUILD/tests/golden_models_cuda" >"$LOGS/variants.log" 2>&1 ||
    { rc=1; keep "$LOGS/variants.log"; }
  say "golden_models_cuda over the variants: $(grep -E '^\[  (PASSED|FAILED) ' "$LOGS/variants.log" | tr '\n' ' ')"
  grep -E "Failure" -A4 "$LOGS/variants.log" | head -40 >>"$S"
  grep -E "^\[(fp32|bf16)\]" "$LOGS/variants.log" | grep -v "layer" | cut -c1-200 >>"$S"
  grep -E "^\[bf16\].*layer" "$LOGS/variants.log" | sort -t' ' -k9 -g | tail -4 >>"$S"
  run_tests golden_models_cuda
fi
say "phase $PHASE done at $(elapsed) s, rc $rc"
exit $rc

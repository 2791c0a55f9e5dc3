#!/usr/bin/env bash
# The whole GPU check in one command, for a machine with an NVIDIA GPU (sm_90) and a CUDA LibTorch (the H200 of
# bench/README.md): configure a Release CUDA build, build the GPU tests, the CLI and the kernels' benchmark, run every
# test labelled GPU (kernel equivalence with the double reference, metamorphic relations, bad input, the model
# families and the calibration on CUDA), the CLI's CUDA test and the CUDA cases of tests/torch/decode_equivalence.cpp
# (prompt + decoded steps = one forward, every family: an L0 file, so ctest -L GPU does not run it), then
# compute-sanitizer's memcheck and racecheck over
# the kernels' bad-input test, the fused layer kernels' test (norms, conv, GEMVs: 8 s and 20 s on the H200, 36th wave;
# synccheck and initcheck clean too), the decode fold's test (its shared v staging and barriers) and a slice of the
# equivalence cases.
# $OUT (default /tmp/statecut-device) gets few files, so a tool that returns only some of them keeps the verdict:
# 00_summary.log (every step's result, the error lines the tests print, failed test names), bench.log and bench.json
# and model_bench.json (BENCH=1, with bench_compare.log: bench/compare.py against bench/baselines/h200.json, the model's
# figures against h100.json on an H100), and the
# full log of any step that failed. Full logs stay in $LOGS (default /tmp/statecut-device-logs).
# Env: BUILD (default build-gpu-device), SKIP_TESTS=1 (build and run no test: with BENCH=1, only the benchmarks and
# their gate), SKIP_SANITIZER=1, SANITIZE_TOOLS (default "memcheck racecheck"),
# SANITIZE_TIMEOUT (s per run, default 300), SANITIZE_FILTER, BENCH=1 (also run bench_cuda_gated_delta and the model
# benchmark, and the regression gate over both), BENCH_FILTER, MODEL_BENCH_ARGS / _DEVICE / _PREFILL / _DECODE,
# MODEL_BASELINE (the file the model's figures are held to).
set -uo pipefail
OUT=${OUT:-/tmp/statecut-device}
LOGS=${LOGS:-/tmp/statecut-device-logs}
BUILD=${BUILD:-build-gpu-device}
mkdir -p "$OUT" "$LOGS"
SUM="$OUT/00_summary.log"
say() { echo "$*" | tee -a "$SUM"; }
keep() { cp "$1" "$OUT/" 2>/dev/null; }  # a failed step's full log
TORCH_PREFIX=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
{
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  git log -1 --format='commit %H %cd' 2>/dev/null
  date -u
} | tee -a "$SUM"
t0=$(date +%s)
# The benchmarks are configured on always: the build below always makes bench_cuda_gated_delta, and a build folder
# configured before without them (the wave scripts' configure_and_build) would otherwise have no such target.
bench_opt=(-DSTATECUT_BENCH=ON)
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTATECUT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
  "${bench_opt[@]}" -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" >"$LOGS/configure.log" 2>&1 ||
  { keep "$LOGS/configure.log"; say "configure FAILED"; tail -30 "$LOGS/configure.log"; exit 1; }
gpu_tests=""
[ "${SKIP_TESTS:-0}" = 1 ] ||
  gpu_tests="logits_cmd decode_equivalence $(for f in tests/gpu/*.cpp; do basename "$f" .cpp; done | tr '\n' ' ')"
# shellcheck disable=SC2086
cmake --build "$BUILD" -j"$(nproc)" --target statecut statecut-random-checkpoint bench_cuda_gated_delta $gpu_tests >"$LOGS/build.log" 2>&1 ||
  { keep "$LOGS/build.log"; say "build FAILED"; grep -E "error|FAILED" -A3 "$LOGS/build.log" | head -60; exit 1; }
say "build $(( $(date +%s) - t0 )) s"
rc=0
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  (cd "$BUILD" && ctest -L GPU -V -j4 --timeout 400) >"$LOGS/ctest_gpu.log" 2>&1 || { rc=1; keep "$LOGS/ctest_gpu.log"; }
  say "ctest -L GPU: $(grep -E 'tests passed|tests failed' "$LOGS/ctest_gpu.log" | tail -1)"
  grep -E "^[0-9]+/[0-9]+ Test.*(Failed|Not Run|Skipped)" "$LOGS/ctest_gpu.log" | tee -a "$SUM"
  grep -ohE "\[(errors|meta)\].*" "$LOGS/ctest_gpu.log" | sed 's/gated_delta(//' | cut -c1-230 | sort -u >>"$SUM"
  "$BUILD/tests/logits_cmd" --gtest_filter='*cuda*:*Cuda*' >"$LOGS/logits_cuda.log" 2>&1 || { rc=1; keep "$LOGS/logits_cuda.log"; }
  say "logits_cmd (CUDA): $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$LOGS/logits_cuda.log" | tr '\n' ' ')"
  timeout 300 "$BUILD/tests/decode_equivalence" --gtest_filter='*cuda*' >"$LOGS/decode_cuda.log" 2>&1 ||
    { rc=1; keep "$LOGS/decode_cuda.log"; }
  say "decode_equivalence (CUDA): $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$LOGS/decode_cuda.log" | tr '\n' ' ')"
  grep -E "^\[  FAILED  \]" "$LOGS/decode_cuda.log" | head -20 >>"$SUM"
fi
if [ "${SKIP_SANITIZER:-0}" != 1 ] && [ "${SKIP_TESTS:-0}" != 1 ] && command -v compute-sanitizer >/dev/null; then
  for tool in ${SANITIZE_TOOLS:-memcheck racecheck}; do
    for t in badinput_gated_delta_cuda fused_ops_cuda decode_fold_cuda "equiv_gated_delta_cuda --gtest_filter=${SANITIZE_FILTER:-*dk_89*:*dk_179*:*varlen*}"; do
      log="$LOGS/sanitize_${tool}_${t%% *}.log"
      # shellcheck disable=SC2086
      timeout "${SANITIZE_TIMEOUT:-300}" compute-sanitizer --tool "$tool" --error-exitcode 9 "$BUILD"/tests/$t >"$log" 2>&1
      r=$?
      say "compute-sanitizer $tool $t: rc=$r $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -1)"
      [ $r -ne 0 ] && { rc=1; keep "$log"; }
    done
  done
fi
if [ "${BENCH:-0}" = 1 ]; then
  timeout 240 "$BUILD/bench/bench_cuda_gated_delta" ${BENCH_FILTER:+--benchmark_filter=$BENCH_FILTER} \
    --benchmark_out="$OUT/bench.json" --benchmark_out_format=json >"$OUT/bench.log" 2>&1
  r=$?
  [ $r -ne 0 ] && rc=1
  say "bench rc=$r ($(grep -c manual_time "$OUT/bench.log") timings)"
  # The model benchmark of the baselines' "model" figures: a random DeltaNet at the 1.3B shape (MODEL_BENCH_ARGS: the
  # random-checkpoint tool's options, for a smaller model) and its 50% rand prune, `statecut bench` as
  # bench/baselines/h200.json's measured.model says (prefill 1x2048 and 8x2048, decode 1 / 8 / 64 / 256 after a
  # 512-token prompt, 128 steps, CUDA graphs).
  mb="$LOGS/model_bench"
  rm -rf "$mb" && mkdir -p "$mb"
  # shellcheck disable=SC2086
  { "$BUILD/cli/statecut-random-checkpoint" --out "$mb/full" ${MODEL_BENCH_ARGS:-} &&
    "$BUILD/cli/statecut" prune --checkpoint "$mb/full" --method rand --ratio 0.5 --device "${MODEL_BENCH_DEVICE:-cuda}" \
      --out "$mb/p50" &&
    timeout 300 "$BUILD/cli/statecut" bench --checkpoint "$mb/full" --compare "$mb/p50" \
      --device "${MODEL_BENCH_DEVICE:-cuda}" --prefill "${MODEL_BENCH_PREFILL:-1x2048,8x2048}" \
      --decode "${MODEL_BENCH_DECODE:-1,8,64,256}" --prompt 512 --new-tokens 128 --json >"$OUT/model_bench.json"; } \
    >"$LOGS/model_bench.log" 2>&1
  r=$?
  [ $r -ne 0 ] && { rc=1; keep "$LOGS/model_bench.log"; }
  say "model bench rc=$r"
  rm -rf "$mb"
  # the regression gate: the ratios of bench/baselines/h200.json (speedup vs dk 128, fraction of copy bandwidth; the
  # prune's speedup and the step against its byte floor). On an H100 the model's figures are held to h100.json
  # instead (its byte floors are ~1.45x the H200's, so the step's multiples of them differ; MODEL_BASELINE overrides),
  # and the kernels' to h200.json (their ratios held on an H100 too: 10 of 10, 46th wave).
  mbj=()
  [ -s "$OUT/model_bench.json" ] && mbj=("$OUT/model_bench.json")  # a failed model bench: the kernels' figures still
  model_base=${MODEL_BASELINE:-bench/baselines/h200.json}
  nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | grep -q H100 &&
    model_base=${MODEL_BASELINE:-bench/baselines/h100.json}
  # compare.py skips a kind of figure no result file of that kind was given for: the kernels' run, then the model's
  python3 bench/compare.py bench/baselines/h200.json "$OUT/bench.json" >"$OUT/bench_compare.log" 2>&1
  r=$?
  [ ${#mbj[@]} -gt 0 ] && { python3 bench/compare.py "$model_base" "${mbj[@]}" >>"$OUT/bench_compare.log" 2>&1 || r=1; }
  [ $r -ne 0 ] && rc=1
  say "bench/compare.py rc=$r: $(grep -E "figures hold against" "$OUT/bench_compare.log" | tr "\n" " ")"
  grep -E "SLOWER|MISSING" "$OUT/bench_compare.log" | tee -a "$SUM"
fi
say "device.sh rc=$rc, $(( $(date +%s) - t0 )) s"
exit $rc

#!/usr/bin/env bash
# The whole GPU check in one command, for a machine with an NVIDIA GPU (sm_90) and a CUDA LibTorch (the H200 of
# bench/README.md): configure a Release CUDA build, build the GPU tests, the CLI and the kernels' benchmark, run every
# test labelled GPU (kernel equivalence with the double reference, metamorphic relations, bad input, the model
# families on CUDA) and the CLI's CUDA test, then compute-sanitizer's memcheck and racecheck over the kernels' bad-input
# test and a slice of the equivalence cases. Logs under $OUT (default /tmp/statecut-device).
# Env: BUILD (default build-gpu-device), SKIP_SANITIZER=1, SANITIZE_TOOLS (default "memcheck racecheck"),
# SANITIZE_TIMEOUT (s per run, default 300), SANITIZE_FILTER, BENCH=1 (also run bench_cuda_gated_delta), BENCH_FILTER.
set -uo pipefail
OUT=${OUT:-/tmp/statecut-device}
BUILD=${BUILD:-build-gpu-device}
mkdir -p "$OUT"
TORCH_PREFIX=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
{
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  git log -1 --format='commit %H %cd' 2>/dev/null
  date -u
} | tee "$OUT/device.log"
t0=$(date +%s)
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTATECUT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" >"$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
gpu_tests=$(for f in tests/gpu/*.cpp; do basename "$f" .cpp; done | tr '\n' ' ')
# shellcheck disable=SC2086
cmake --build "$BUILD" -j"$(nproc)" --target statecut logits_cmd bench_cuda_gated_delta $gpu_tests >"$OUT/build.log" 2>&1 ||
  { grep -E "error|FAILED" -A3 "$OUT/build.log" | head -60; exit 1; }
echo "build $(( $(date +%s) - t0 )) s" | tee -a "$OUT/device.log"
rc=0
(cd "$BUILD" && ctest -L GPU --output-on-failure -j4 --timeout 400) >"$OUT/ctest_gpu.log" 2>&1 || rc=1
tail -4 "$OUT/ctest_gpu.log" | tee -a "$OUT/device.log"
grep -E "\*\*\*Failed|Not Run|Skipped" "$OUT/ctest_gpu.log" | head -20
"$BUILD/tests/logits_cmd" --gtest_filter='*cuda*:*Cuda*' >"$OUT/logits_cuda.log" 2>&1 || rc=1
grep -E "^\[  (PASSED|FAILED|SKIPPED) " "$OUT/logits_cuda.log" | tee -a "$OUT/device.log"
if [ "${SKIP_SANITIZER:-0}" != 1 ] && command -v compute-sanitizer >/dev/null; then
  for tool in ${SANITIZE_TOOLS:-memcheck racecheck}; do
    for t in badinput_gated_delta_cuda "equiv_gated_delta_cuda --gtest_filter=${SANITIZE_FILTER:-*dk_89*:*dk_179*:*varlen*}"; do
      # shellcheck disable=SC2086
      timeout "${SANITIZE_TIMEOUT:-300}" compute-sanitizer --tool "$tool" --error-exitcode 9 "$BUILD"/tests/$t >"$OUT/sanitize.log" 2>&1
      r=$?
      echo "compute-sanitizer $tool $t: rc=$r $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize.log" | tail -1)" | tee -a "$OUT/device.log"
      [ $r -ne 0 ] && { rc=1; grep -m5 -E "Invalid|Race|Error" "$OUT/sanitize.log"; }
    done
  done
fi
if [ "${BENCH:-0}" = 1 ]; then
  timeout 240 "$BUILD/bench/bench_cuda_gated_delta" ${BENCH_FILTER:+--benchmark_filter=$BENCH_FILTER} \
    --benchmark_out="$OUT/bench.json" --benchmark_out_format=json >"$OUT/bench.log" 2>&1 || rc=1
  grep -vE "^\s*$" "$OUT/bench.log" | cut -c1-200 | tail -70
fi
echo "device.sh rc=$rc, $(( $(date +%s) - t0 )) s" | tee -a "$OUT/device.log"
exit $rc

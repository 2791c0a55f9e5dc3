#!/usr/bin/env bash
# One device call: configure + build the GPU targets, run the GPU tests, the fla comparison and the benchmark.
# Run from the repository root on the GPU machine (fla's source in the ignored folder .fla); logs under $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/statecut-out}
mkdir -p "$OUT"
TORCH_PREFIX=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
git log -1 --format='commit %H %cd' | tee -a "$OUT/gpu.txt"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTATECUT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" >"$OUT/configure.log" 2>&1 || { tail -40 "$OUT/configure.log"; exit 1; }
TARGETS=${TARGETS:-"equiv_gated_delta_cuda metamorphic_gated_delta_cuda badinput_gated_delta_cuda bench_cuda_gated_delta"}
# shellcheck disable=SC2086
cmake --build build-gpu -j16 --target $TARGETS >"$OUT/build.log" 2>&1 || { grep -E "error|FAILED" -A3 "$OUT/build.log" | head -60; exit 1; }
echo "build ok"
rc=0
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  for t in badinput_gated_delta_cuda metamorphic_gated_delta_cuda equiv_gated_delta_cuda; do
    timeout 240 "build-gpu/tests/$t" >"$OUT/$t.log" 2>&1
    r=$?
    [ $r -ne 0 ] && rc=$r
    echo "$t: rc=$r $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/$t.log" | tr '\n' ' ')"
    grep -E "^\[  FAILED  \]|Failure|Expected|Which is|actual" "$OUT/$t.log" | head -20
  done
  grep -h "^\[errors\]\|^\[meta\]" "$OUT"/*.log | sed 's/gated_delta(//' | cut -c1-220 >"$OUT/errors.txt"
fi
if [ "${SKIP_FLA:-0}" != 1 ]; then
  PYTHONPATH=.fla PYTHONUNBUFFERED=1 timeout 300 python3 bench/cuda_fla_compare.py \
    build-gpu/kernels/libstatecut_cuda_torch.so "$OUT/fla_times.txt" >"$OUT/fla_compare.log" 2>&1
  echo "fla compare rc=$?"; tail -20 "$OUT/fla_compare.log"
fi
STATECUT_FLA_TIMES="$OUT/fla_times.txt" timeout 200 build-gpu/bench/bench_cuda_gated_delta \
  --benchmark_out="$OUT/bench.json" --benchmark_out_format=json ${BENCH_FILTER:+--benchmark_filter=$BENCH_FILTER} \
  >"$OUT/bench.log" 2>&1
echo "bench rc=$?"
grep -vE "^\s*$" "$OUT/bench.log" | cut -c1-200 | tail -60
exit $rc

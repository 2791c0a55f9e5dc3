#!/usr/bin/env bash
# One device call: configure + build the GPU targets, run the GPU tests, the fla comparison, the benchmark and
# one Nsight Compute profile per kernel. Run from the repository root on the GPU machine (fla's source in the
# ignored folder .fla). Logs under $OUT (at most 8 files come back).
# Env: SKIP_TESTS=1, SKIP_FLA=1 (then FLA_TIMES names an earlier fla_times.txt), SKIP_NCU=1, BENCH_FILTER,
# NCU_PREFILL (benchmark filter of the profiled prefill shape), NCU_PREFILL_ONLY=1, BUILD (build folder, default
# build-gpu), NCU_SOURCE=1 (per-instruction SASS counters of the two prefill kernels into ncu_source.csv.gz).
set -uo pipefail
OUT=${OUT:-/tmp/statecut-out}
mkdir -p "$OUT"
LOG=/tmp/statecut-logs
BUILD=${BUILD:-build-gpu}
mkdir -p "$LOG"
TORCH_PREFIX=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
  git log -1 --format='commit %H %cd'
  date -u
} | tee "$OUT/tests.log"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTATECUT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" >"$LOG/configure.log" 2>&1 || { cp "$LOG/configure.log" "$OUT/"; tail -40 "$LOG/configure.log"; exit 1; }
TARGETS=${TARGETS:-"equiv_gated_delta_cuda metamorphic_gated_delta_cuda badinput_gated_delta_cuda bench_cuda_gated_delta"}
# shellcheck disable=SC2086
cmake --build "$BUILD" -j16 --target $TARGETS >"$LOG/build.log" 2>&1 || { cp "$LOG/build.log" "$OUT/"; grep -E "error|FAILED" -A3 "$LOG/build.log" | head -60; exit 1; }
echo "build ok"
rc=0
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  for t in badinput_gated_delta_cuda metamorphic_gated_delta_cuda equiv_gated_delta_cuda; do
    timeout 240 "$BUILD/tests/$t" >"$LOG/$t.log" 2>&1
    r=$?
    [ $r -ne 0 ] && rc=$r
    cat "$LOG/$t.log" >>"$OUT/tests.log"
    echo "$t: rc=$r $(grep -E '^\[  (PASSED|FAILED) ' "$LOG/$t.log" | tr '\n' ' ' | cut -c1-300)"
    grep -E "Failure|Expected|actual" "$LOG/$t.log" | head -20
  done
  grep -h "^\[errors\]\|^\[meta\]" "$LOG"/*.log | sed 's/gated_delta(//' | cut -c1-220 >"$OUT/errors.txt"
fi
FLA_TIMES=${FLA_TIMES:-$OUT/fla_times.txt}
if [ "${SKIP_FLA:-0}" != 1 ]; then
  PYTHONPATH=.fla PYTHONUNBUFFERED=1 timeout 300 python3 bench/cuda_fla_compare.py \
    "$BUILD/kernels/libstatecut_cuda_torch.so" "$FLA_TIMES" >"$OUT/fla_compare.log" 2>&1
  echo "fla compare rc=$?"; tail -20 "$OUT/fla_compare.log"
fi
STATECUT_FLA_TIMES="$FLA_TIMES" timeout 200 "$BUILD/bench/bench_cuda_gated_delta" \
  --benchmark_out="$OUT/bench.json" --benchmark_out_format=json ${BENCH_FILTER:+--benchmark_filter=$BENCH_FILTER} \
  >"$OUT/bench.log" 2>&1
echo "bench rc=$?"
grep -vE "^\s*$" "$OUT/bench.log" | sed 's/iterations:[0-9]*\/manual_time//' | cut -c1-200 | tail -60
if [ "${SKIP_NCU:-0}" != 1 ]; then
  NCU="ncu --clock-control none --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section LaunchStats --section MemoryWorkloadAnalysis"
  {
    $NCU -k regex:'prep_kernel|state_kernel' -c ${NCU_COUNT:-2} "$BUILD/bench/bench_cuda_gated_delta" --benchmark_filter="${NCU_PREFILL:-prefill/B:8/T:2048/dk:128/}"
    if [ "${NCU_PREFILL_ONLY:-0}" != 1 ]; then
      $NCU -c 1 -k regex:recurrent_vk "$BUILD/bench/bench_cuda_gated_delta" --benchmark_filter='decode/B:256/dk:128/vfirst:1/'
      $NCU -c 1 -k regex:recurrent_kv "$BUILD/bench/bench_cuda_gated_delta" --benchmark_filter='decode/B:256/dk:64/vfirst:0/'
    fi
  } >"$OUT/ncu.txt" 2>&1
  if [ "${NCU_SOURCE:-0}" = 1 ]; then
    ncu --clock-control none --section SourceCounters --section WarpStateStats --section InstructionStats \
      -k regex:'prep_kernel|state_kernel' -c 2 -f -o "$LOG/prefill_src" "$BUILD/bench/bench_cuda_gated_delta" \
      --benchmark_filter="${NCU_PREFILL:-prefill/B:8/T:2048/dk:128/}" >"$LOG/ncu_src.log" 2>&1
    ncu -i "$LOG/prefill_src.ncu-rep" --page source --csv --print-source sass >"$LOG/ncu_source.csv" 2>&1
    ncu -i "$LOG/prefill_src.ncu-rep" --page details >>"$OUT/ncu.txt" 2>&1
    tail -3 "$LOG/ncu_src.log"; wc -c "$LOG/ncu_source.csv"
    gzip -c "$LOG/ncu_source.csv" >"$OUT/ncu_source.csv.gz"
  fi
  grep -E "^  [a-z_]+.*\(|Duration|Memory Throughput|Compute \(SM\)|Registers Per|Achieved Occupancy|Theoretical Occ|Stall|Warp Cycles Per Issued|Issued Warp|No Eligible|Block Limit" "$OUT/ncu.txt" | cut -c1-150 | head -80
fi
exit $rc

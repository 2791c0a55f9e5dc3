#!/usr/bin/env bash
# Prefill check in one device call (prefill engineer, session 4): build the kernel tests and the benchmark, run the
# bad-input, metamorphic and equivalence tests, the whole prefill benchmark (fla ratios from STATECUT_FLA_TIMES),
# compute-sanitizer memcheck over the varlen equivalence cases, then two deliberate breakages of the state kernel's
# per-chunk stepping (sed on the source, rebuild, the equivalence tests must fail; the source is restored).
# Run from the repository root on the GPU machine; at most 8 files go to $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/pf-out}; mkdir -p "$OUT"; B=${BUILD:-build-gpu-prefill}; S="$OUT/00_summary.txt"
say() { echo "$*" | tee -a "$S"; }
say "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) $(date -u +%FT%TZ)"
TP=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
t0=$(date +%s)
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTATECUT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DCMAKE_PREFIX_PATH="$TP" >/tmp/cfg.log 2>&1 || { tail -30 /tmp/cfg.log; exit 1; }
cmake --build "$B" -j16 --target equiv_gated_delta_cuda metamorphic_gated_delta_cuda badinput_gated_delta_cuda \
  bench_cuda_gated_delta >/tmp/build.log 2>&1 || { grep -E "error" -A3 /tmp/build.log | head -40; exit 1; }
say "build $(( $(date +%s) - t0 )) s"
rc=0
for t in badinput_gated_delta_cuda metamorphic_gated_delta_cuda equiv_gated_delta_cuda; do
  timeout 150 "$B/tests/$t" >/tmp/$t.log 2>&1; r=$?; [ $r -ne 0 ] && rc=1
  say "$t: rc=$r $(grep -E '^\[  (PASSED|FAILED) ' /tmp/$t.log | tr '\n' ' ')"
  grep -E "FAILED  \]|Failure" /tmp/$t.log | head -10 | tee -a "$S"
done
grep -h "^\[errors\]\|^\[meta\]" /tmp/*_gated_delta_cuda.log | sed 's/gated_delta(//' | cut -c1-230 >"$OUT/errors.txt"
STATECUT_FLA_TIMES=${STATECUT_FLA_TIMES:-.fla/fla_times.txt} timeout 150 "$B/bench/bench_cuda_gated_delta" \
  --benchmark_filter="${BENCH_FILTER:-prefill}" --benchmark_out="$OUT/bench.json" --benchmark_out_format=json \
  >"$OUT/bench.log" 2>&1
r=$?; [ $r -ne 0 ] && rc=1
say "bench rc=$r"; grep -E "^prefill" "$OUT/bench.log" | sed 's/iterations:[0-9]*\/manual_time//' | cut -c1-190 | tee -a "$S"
if command -v compute-sanitizer >/dev/null; then
  timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 "$B/tests/equiv_gated_delta_cuda" \
    --gtest_filter='*varlen*' >/tmp/memcheck.log 2>&1
  r=$?; [ $r -ne 0 ] && rc=1
  say "memcheck equiv *varlen*: rc=$r $(grep -E 'ERROR SUMMARY' /tmp/memcheck.log | tail -1) $(grep -E '^\[  (PASSED|FAILED) ' /tmp/memcheck.log | tr '\n' ' ')"
fi
# deliberate breakages: each must make equivalence cases fail
F=kernels/gated_delta_chunk.cu; cp $F /tmp/chunk_orig.cu
i=0
for expr in 's/    if (more) decay = __ldg(wsS + so + 4 \* C - m0 - g);/    \/\/ broken: decay not advanced/' \
            's/    pass = dr \* a.H \* a.K;/    pass = dr * a.K;/'; do
  i=$((i + 1)); cp /tmp/chunk_orig.cu $F; sed -i "$expr" $F
  if cmp -s $F /tmp/chunk_orig.cu; then say "breakage $i: sed did not apply"; rc=1; continue; fi
  cmake --build "$B" -j16 --target equiv_gated_delta_cuda >/tmp/bbuild$i.log 2>&1 || { say "breakage $i: build failed"; continue; }
  timeout 150 "$B/tests/equiv_gated_delta_cuda" >/tmp/break$i.log 2>&1; r=$?
  say "breakage $i ($(diff /tmp/chunk_orig.cu $F | grep '^>' | sed 's/^> *//')): equiv rc=$r $(grep -E '^\[  (PASSED|FAILED) ' /tmp/break$i.log | tr '\n' ' ')"
  grep -E "^\[  FAILED  \] [0-9]" /tmp/break$i.log | sed 's/gated_delta_//' | cut -c1-150 >"$OUT/break$i.txt"
  grep -h "^\[errors\]" /tmp/break$i.log | sed 's/gated_delta(//' | cut -c1-200 >>"$OUT/break$i.txt"
  [ $r -eq 0 ] && rc=1
done
cp /tmp/chunk_orig.cu $F
say "rc=$rc total $(( $(date +%s) - t0 )) s"
exit $rc

#!/usr/bin/env bash
# Is the main job's table unchanged by a refactor? Builds the CLI of this tree and of an older tree (OLD, default
# .old: `git archive <commit> | tar -x -C .old`, carried to the machine) side by side on one machine and runs the
# main job with both; diffs the two tables. Used on the GPU machine's 16 cores (its CPU LibTorch), where the two
# builds take minutes instead of the 2-core machine's half hour. Results: $OUT/main_new.txt, main_old.txt, diff.
set -uo pipefail
OUT=${OUT:-/tmp/statecut-main-compare}
OLD=${OLD:-.old}
mkdir -p "$OUT"
TORCH_PREFIX=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)' 2>/dev/null || true)
build() {  # build SRC DIR
  cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" \
    -DSTATECUT_CUDA=OFF -DSTATECUT_BENCH=OFF ${TORCH_PREFIX:+-DCMAKE_PREFIX_PATH=$TORCH_PREFIX} >"$OUT/configure_$3.log" 2>&1 &&
    cmake --build "$2" -j"${JOBS:-8}" --target statecut >"$OUT/build_$3.log" 2>&1
}
t0=$(date +%s)
build . build-main-new new & p1=$!
build "$OLD" build-main-old old & p2=$!
wait $p1; r1=$?; wait $p2; r2=$?
echo "builds: new rc=$r1 old rc=$r2 in $(( $(date +%s) - t0 )) s" | tee "$OUT/00_summary.log"
[ $r1 -eq 0 ] && [ $r2 -eq 0 ] || { tail -30 "$OUT"/build_*.log >>"$OUT/00_summary.log"; exit 1; }
STATECUT_BUILD=$PWD/build-main-new bash ci/main_job.sh >"$OUT/main_new.txt" 2>"$OUT/main_new.err" &
STATECUT_BUILD=$PWD/build-main-old bash "$OLD/ci/main_job.sh" >"$OUT/main_old.txt" 2>"$OUT/main_old.err" &
wait
# The last line is JSON with timings; the table above it must be identical.
diff <(grep -v '^{' "$OUT/main_old.txt" | cut -c1-64) <(grep -v '^{' "$OUT/main_new.txt" | cut -c1-64) >"$OUT/diff.txt"
echo "table diff (old vs new, without the timing column): $(wc -l <"$OUT/diff.txt") lines" | tee -a "$OUT/00_summary.log"
cat "$OUT/main_new.txt" >>"$OUT/00_summary.log"
echo "done in $(( $(date +%s) - t0 )) s" | tee -a "$OUT/00_summary.log"

# The common start of the H200 scripts (bench/decode_h200_wave3.sh, h200_wave4.sh, h200_wave5.sh), sourced with the script's
# tag and phase set: TAG=w4 PHASE=K. Sets OUT (what comes back: 00_summary.log $S, results), BUILD, WORK (checkpoints),
# LOGS (full logs that stay), SC (the CLI in BUILD), rc = 0 (the script's exit), and say (a summary line), keep (copy a failing log into OUT), elapsed (seconds since
# t0), run_tests (GPU test executables of BUILD by name: a summary line each, failures set rc), bench (`statecut bench`
# of WORK/NAME against WORK/NAME_p50 on the issue-14 shapes, its table into the summary); writes the machine, the date
# and the phase at the top of the summary; configure_and_build (Release, sm_90a, the CLI, the random-checkpoint and profile tools
# and the extra targets given), checkpoint NAME ARGS (a random checkpoint in WORK), pruned NAME (its 50% rand prune),
# skinny_variant NAME SED... (the skinny GEMM harness from an edited kernel), profile_decode NAME B (a Kineto profile of 32 eager decode steps at batch B, its kernel table into the summary),
# profile_prefill NAME B T (the same for one prefill of B x T tokens), planted_bug FILE SED TARGET FILTER LABEL (a
# deliberate bug must fail the named test), random_tokens (WORK/tok.bin), ft LABEL STUDENT
# TEACHER OPTIONS (a finetune of 4 x 2048 tokens a step from WORK/tok.bin, its steady rate from loss.csv into the
# summary; TEACHER "" = --no-kd), bench_prefill NAME SHAPES (`statecut bench` of WORK/NAME against NAME_p50 at
# the prefill shapes, decode batch 1), bench_decode NAME LABEL BATCHES (the same, decode only), gpu_gate
# (SKIP_SANITIZER=1 ci/device.sh: every GPU test under OUT/gate), bench_gate
# (ci/device.sh BENCH=1: the benchmarks and the regression gate under OUT/bench), fla_prefill DEADLINE NAME... (fla's model forward 8 x 2048 on those checkpoints,
# stopped DEADLINE seconds after the script's start), profile_train STUDENT TEACHER (two bf16 LoRA + KD
# finetune steps of 4 x 2048 random tokens, the kernel table and the time by operator, without and with the
# operators' input shapes, into the summary).
# Each may be overridden from the environment.
# The device's pip LibTorch exports its own std::filesystem::remove_all from libtorch.so, which an executable linking it
# binds before libstdc++'s; it crashes on a null call (seen under cuda-gdb in TempDir's destructor and in the trainer's
# state cleanup: every in-process finetune test and the profile tool died of SIGSEGV). The project no longer calls it
# (optimized/io/remove_tree.h; ci/device.sh without the preload: ctest -L GPU 87/87, 36th wave); the preload stays
# for the earlier waves' scripts, whose figures were taken with it.
export LD_PRELOAD="$(g++ -print-file-name=libstdc++.so.6)${LD_PRELOAD:+:$LD_PRELOAD}"
OUT=${OUT:-/tmp/statecut-$TAG}
BUILD=${BUILD:-build-gpu-device}
WORK=${WORK:-/tmp/statecut-$TAG-work}
LOGS=${LOGS:-/tmp/statecut-$TAG-logs}
mkdir -p "$OUT" "$WORK" "$LOGS"
S="$OUT/00_summary.log"
SC="$BUILD/cli/statecut"
rc=0
say() { echo "$*" | tee -a "$S"; }
keep() { cp "$1" "$OUT/" 2>/dev/null; return 0; }
t0=$(date +%s)
elapsed() { echo $(( $(date +%s) - t0 )); }
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; echo "phase $PHASE"; } | tee -a "$S"
run_tests() {  # test executable names; decode_equivalence runs its CUDA cases only
  local t f
  for t in "$@"; do
    f=""; [ "$t" = decode_equivalence ] && f="--gtest_filter=*cuda*"
    timeout 300 "$BUILD/tests/$t" $f >"$LOGS/$t.log" 2>&1 || { rc=1; keep "$LOGS/$t.log"; }
    say "$t: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$LOGS/$t.log" | tr '\n' ' ')"
    grep -E "^\[  FAILED  \]|Failure" -A3 "$LOGS/$t.log" | head -20 >>"$S"
  done
}
bench() {  # NAME: WORK/NAME vs its 50% prune WORK/NAME_p50, prefill 1x2048 and 8x2048, decode 1/64/256 (graphs)
  local n=$1
  timeout 200 "$SC" bench --checkpoint "$WORK/$n" --compare "$WORK/${n}_p50" --device cuda --prefill 1x2048,8x2048 \
    --decode 1,64,256 --prompt 512 --new-tokens 128 --json >"$OUT/bench_$n.json" 2>"$LOGS/bench_$n.err" ||
    { rc=1; keep "$LOGS/bench_$n.err"; say "bench $n FAILED"; return 0; }
  say "--- bench $n full vs 50% (graphs) at $(elapsed) s"
  python3 bench/bench_table.py "$OUT/bench_$n.json" >>"$S" 2>&1
}
bench_decode() {  # name, label, batches: WORK/NAME vs NAME_p50 decode only (graphs; prefill 1x16), the table into the summary
  local n=$1 label=$2 batches=$3
  timeout 150 "$SC" bench --checkpoint "$WORK/$n" --compare "$WORK/${n}_p50" --device cuda --prefill 1x16 \
    --decode "$batches" --prompt 512 --new-tokens 128 --json >"$OUT/bench_${n}_$label.json" 2>"$LOGS/bench_${n}_$label.err" ||
    { rc=1; keep "$LOGS/bench_${n}_$label.err"; say "bench $n $label FAILED"; return 0; }
  say "--- statecut bench $n, $label, at $(elapsed) s"
  python3 bench/bench_table.py "$OUT/bench_${n}_$label.json" >>"$S" 2>&1
}
bench_prefill() {  # name, prefill shapes: WORK/NAME vs WORK/NAME_p50, decode batch 1 (graphs), the table into the summary
  local n=$1 shapes=$2
  timeout 150 "$SC" bench --checkpoint "$WORK/$n" --compare "$WORK/${n}_p50" --device cuda --prefill "$shapes" \
    --decode 1 --json >"$OUT/bench_$n.json" 2>"$LOGS/bench_$n.err" || { rc=1; keep "$LOGS/bench_$n.err"; }
  say "--- statecut bench $n at $(elapsed) s"
  python3 bench/bench_table.py "$OUT/bench_$n.json" >>"$S" 2>&1
}

gpu_gate() {  # SKIP_SANITIZER=1 ci/device.sh under OUT/gate (every GPU test, the CLI's CUDA logits, decode_equivalence's
  # CUDA cases), its summary without the per-case SKIPPED lines into the summary
  local r
  SKIP_SANITIZER=1 OUT="$OUT/gate" LOGS="$LOGS/gate" bash ci/device.sh
  r=$?
  [ $r -ne 0 ] && rc=1
  say "gate: rc $r at $(elapsed) s"
  grep -v "SKIPPED" "$OUT/gate/00_summary.log" >>"$S"
}

bench_gate() {  # SKIP_TESTS=1 BENCH=1 ci/device.sh (the kernels' and the model benchmark, the regression gate over both)
  # under OUT/bench, its summary and the model bench's table into the summary
  local r
  SKIP_TESTS=1 BENCH=1 OUT="$OUT/bench" LOGS="$LOGS/bench" bash ci/device.sh
  r=$?
  [ $r -ne 0 ] && rc=1
  say "bench gate: rc $r at $(elapsed) s"
  cat "$OUT/bench/00_summary.log" >>"$S"
  [ -s "$OUT/bench/model_bench.json" ] && python3 bench/bench_table.py "$OUT/bench/model_bench.json" >>"$S" 2>&1
}

fla_prefill() {  # deadline (seconds since t0), checkpoint names: fla's own model forward, prefill 8x2048 (.fla carried)
  local deadline=$1
  shift
  [ -d .fla/fla ] || { say "fla not carried (.fla/fla): no fla prefill"; return 0; }
  local dirs=()
  for n in "$@"; do dirs+=("$WORK/$n"); done
  PYTHONPATH=.fla timeout $(( deadline - $(elapsed) )) python3 bench/fla_model_decode.py "${dirs[@]}" --decode "" \
    --prefill 8x2048 >"$OUT/fla_prefill.jsonl" 2>"$LOGS/fla.err" || { rc=1; tail -3 "$LOGS/fla.err" | cut -c1-300 >>"$S"; }
  say "--- fla's models, prefill 8x2048, at $(elapsed) s"; cat "$OUT/fla_prefill.jsonl" >>"$S"
}

configure_and_build() {
  TORCH_PREFIX=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTATECUT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
    -DSTATECUT_BENCH="${BENCH:-OFF}" -DSTATECUT_PROFILE_TOOL=ON -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" >"$LOGS/configure.log" 2>&1 ||
    { keep "$LOGS/configure.log"; say "configure FAILED"; exit 1; }
  cmake --build "$BUILD" -j"$(nproc)" --target statecut statecut-random-checkpoint statecut-profile-step "$@" \
    >"$LOGS/build.log" 2>&1 ||
    { keep "$LOGS/build.log"; say "build FAILED"; grep -E "error|FAILED" -A3 "$LOGS/build.log" | head -80 >>"$S"; exit 1; }
  say "build $(elapsed) s"
}

planted_bug() {  # file, sed expression, test target, gtest filter, label: the test must fail with the bug planted
  local f=$1 expr=$2 target=$3 filter=$4 label=$5 orig="$LOGS/planted.orig"
  cp "$f" "$orig"
  sed -i "$expr" "$f"
  if cmp -s "$f" "$orig"; then
    say "planted bug ($label): sed did not apply"
  else
    cmake --build "$BUILD" -j"$(nproc)" --target "$target" >"$LOGS/build_planted.log" 2>&1
    timeout 120 "$BUILD/tests/$target" --gtest_filter="$filter" >"$LOGS/planted.log" 2>&1
    say "planted bug ($label): exit $? — $(grep -cE 'Failure' "$LOGS/planted.log") failures; first: $(grep -m1 -A3 Failure "$LOGS/planted.log" | tr '\n' ' ' | cut -c1-300)"
  fi
  cp "$orig" "$f"  # the library is left built with the bug: rebuild what runs next
}

checkpoint() {  # name, random-checkpoint args
  local n=$1; shift
  [ -f "$WORK/$n/model.safetensors" ] || "$BUILD/cli/statecut-random-checkpoint" --out "$WORK/$n" "$@" >/dev/null 2>&1 ||
    { say "random $n FAILED"; return 1; }
}

pruned() {  # name: its 50% rand prune
  local n=$1
  [ -f "$WORK/${n}_p50/model.safetensors" ] && return 0
  timeout 200 "$SC" prune --checkpoint "$WORK/$n" --method rand --ratio 0.5 --device cuda --out "$WORK/${n}_p50" \
    >"$LOGS/prune_$n.log" 2>&1 || { keep "$LOGS/prune_$n.log"; say "prune $n FAILED"; return 1; }
}

profile_prefill() {  # name, batch, tokens: one eager prefill of B x T under Kineto, its kernel table into the summary
  local n=$1 b=$2 t=$3
  timeout 120 "$BUILD/cli/statecut-profile-step" "$WORK/$n" "$LOGS/prefill_${n}_$b.json" "$b" "$t" 0 >/dev/null 2>&1 ||
    { say "profile prefill $n FAILED"; return 0; }
  say "--- kernels of a $n prefill of $b x $t (eager, Kineto)"
  python3 bench/profile_summary.py "$LOGS/prefill_${n}_$b.json" 25 --within statecut_prefill >>"$S" 2>&1
}

profile_decode() {  # name, batch
  local n=$1 b=$2
  timeout 120 "$BUILD/cli/statecut-profile-step" "$WORK/$n" "$LOGS/decode_${n}_$b.json" "$b" 16 32 >/dev/null 2>&1 ||
    { say "profile $n B=$b FAILED"; return 0; }
  say "--- kernels of a $n decode step at batch $b (eager, Kineto, 32 steps)"
  python3 bench/profile_summary.py "$LOGS/decode_${n}_$b.json" 22 --within statecut_decode_step >>"$S" 2>&1
}

random_tokens() {  # WORK/tok.bin: 4M uniform token ids below 32000 (uint16), once
  [ -f "$WORK/tok.bin" ] || python3 -c "import numpy as np; np.random.default_rng(0).integers(0, 32000, 4_000_000, \
dtype=np.uint16).tofile('$WORK/tok.bin')"
}

profile_train() {  # student, teacher: two bf16 LoRA + KD steps of 4 x 2048 random tokens under Kineto
  local st=$1 te=$2
  random_tokens
  timeout 150 "$BUILD/cli/statecut-profile-step" --train "$WORK/$st" "$WORK/$te" "$WORK/tok.bin" \
    "$LOGS/train_$st.json" 4 2048 2 bf16 >"$LOGS/profile_train_$st.log" 2>&1 ||
    { keep "$LOGS/profile_train_$st.log"; say "profile train $st FAILED"; return 0; }
  say "--- kernels of a bf16 LoRA + KD finetune step of $st from $te (4 x 2048, Kineto)"
  python3 bench/profile_summary.py "$LOGS/train_$st.json" 40 --within statecut_train_step --by-op --shapes >>"$S" 2>&1
}

rate() {
  awk -F, 'NR == 2 { t1 = $7; s1 = $8 } NR > 2 { t = $7; s = $8; n = $1 }
    END { if (n) printf "%d steps, steady %.0f tokens/s (%.3f s a step over steps 2..%d; first step done at %.1f s), loss %s -> %s",
                        n, (t - t1) / (s - s1), (s - s1) / (n - 1), n, s1, first, last }
    NR == 2 { first = $3 } { last = $3 }' "$1"
}

ft() {  # label, student, teacher ("" = --no-kd), extra finetune options
  local label=$1 st=$2 te=$3
  shift 3
  local tea=(--no-kd)
  random_tokens
  [ -n "$te" ] && tea=(--teacher "$WORK/$te")
  rm -rf "$WORK/ft_$label" "$WORK/ft_$label.state"
  timeout "${FT_TIMEOUT:-150}" "$SC" finetune --checkpoint "$WORK/$st" "${tea[@]}" --text "$WORK/tok.bin" --seq-len 2048 \
    --batch 4 --device cuda --out "$WORK/ft_$label" --quiet --json "$@" >"$OUT/ft_$label.json" 2>"$LOGS/ft_$label.err" ||
    { rc=1; keep "$LOGS/ft_$label.err"; say "finetune $label FAILED: $(tail -2 "$LOGS/ft_$label.err" | cut -c1-300)"; return 0; }
  say "finetune $label ($*): $(rate "$WORK/ft_$label/loss.csv")"
}

skinny_variant() {  # name, sed expressions...: bench/skinny_gemm_step.cu's harness built from an edited copy of
  # kernels/skinny_gemm.cu into LOGS/v_NAME/harness (only the timings of an edited one mean anything)
  local name=$1 d="$LOGS/v_$1"
  shift
  mkdir -p "$d/kernels" && cp kernels/*.cu kernels/*.cuh kernels/*.h "$d/kernels/"
  for e in "$@"; do sed -i "$e" "$d/kernels/skinny_gemm.cu"; done
  nvcc -std=c++17 -O2 -I"$d" -gencode=arch=compute_90a,code=sm_90a bench/skinny_gemm_step.cu "$d/kernels/skinny_gemm.cu" \
    -lcublas -o "$d/harness" >"$d/build.log" 2>&1 || echo "variant $name: build FAILED" >>"$S"
}

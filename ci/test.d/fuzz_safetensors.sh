#!/usr/bin/env bash
# Bounded libFuzzer run over the safetensors parser (DESIGN.md §6). Usage: fuzz_safetensors.sh <repo root>
# Builds fuzz/fuzz_safetensors.cpp + optimized/io/safetensors{,_writer}.cpp with clang-14 (outside the main CMake
# build: libFuzzer needs clang, the project builds with g++), then fuzzes for FUZZ_SECONDS (default 60)
# starting from the committed corpus fuzz/corpus/. Any crash, sanitizer report, leak or escaping
# exception fails the script; the crashing input is printed as hex so CI logs alone reproduce it.
set -euo pipefail
root="$(cd "${1:-$(dirname "$0")/../..}" && pwd)"
out="${STATECUT_FUZZ_BUILD:-$root/build-fuzz}"
seconds="${FUZZ_SECONDS:-60}"
cxx="${FUZZ_CXX:-clang++-14}"
command -v "$cxx" >/dev/null || { echo "fuzz_safetensors: $cxx not found (apt-get install clang-14 libclang-rt-14-dev)" >&2; exit 1; }
mkdir -p "$out"
bin="$out/fuzz_safetensors"
srcs=("$root/fuzz/fuzz_safetensors.cpp" "$root/optimized/io/safetensors.cpp" "$root/optimized/io/safetensors_writer.cpp"
      "$root/optimized/io/safetensors.h" "$root/optimized/io/safetensors_internal.h")
# Rebuild only when a source is newer than the binary (the compile is most of the cost).
rebuild=0
[ -x "$bin" ] || rebuild=1
for s in "${srcs[@]}"; do [ "$s" -nt "$bin" ] && rebuild=1; done
if [ "$rebuild" = 1 ]; then
  echo "fuzz_safetensors: building with $cxx" >&2
  "$cxx" -std=c++17 -O1 -g -fno-omit-frame-pointer \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I"$root" "${srcs[0]}" "${srcs[1]}" "${srcs[2]}" -o "$bin.tmp"
  mv "$bin.tmp" "$bin"
fi
# Fuzz into a scratch corpus seeded from the committed one, so the repository is never modified.
work="$(mktemp -d "${TMPDIR:-/tmp}/statecut_fuzz.XXXXXX")"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus" "$work/artifacts"
status=0
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ASAN_OPTIONS=detect_leaks=1 \
  "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
  -dict="$root/fuzz/safetensors.dict" -artifact_prefix="$work/artifacts/" -print_final_stats=1 \
  "$work/corpus" "$root/fuzz/corpus" >"$work/log" 2>&1 || status=$?
grep -E '^stat::(number_of_executed_units|new_units_added)|Done [0-9]+ runs' "$work/log" >&2 || true
if [ "$status" != 0 ]; then
  tail -n 60 "$work/log" >&2
  for a in "$work"/artifacts/*; do
    [ -e "$a" ] || continue
    echo "fuzz_safetensors: crashing input $(basename "$a") ($(stat -c %s "$a") bytes):" >&2
    od -An -tx1 -v "$a" | head -n 64 >&2
  done
  echo "fuzz_safetensors: FAILED (exit $status)" >&2
  exit 1
fi
echo "fuzz_safetensors: ok (${seconds}s, no crash)" >&2

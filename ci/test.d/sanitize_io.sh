#!/usr/bin/env bash
# The I/O tests under AddressSanitizer + UndefinedBehaviorSanitizer (DESIGN.md §6). Usage: sanitize_io.sh <repo root>
# A separate, torch-free build (build-asan/, or $STATECUT_ASAN_BUILD) with -DSTATECUT_SANITIZE=ON; only the
# statecut_io library and the tests/io executables are built, then ctest runs them. Any sanitizer report
# aborts the test (-fno-sanitize-recover, halt_on_error) and fails this script.
set -euo pipefail
root="$(cd "${1:-$(dirname "$0")/../..}" && pwd)"
build="${STATECUT_ASAN_BUILD:-$root/build-asan}"
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Debug -DSTATECUT_SANITIZE=ON \
    -DSTATECUT_TORCH=OFF -DSTATECUT_CUDA=OFF -DSTATECUT_BENCH=OFF >/dev/null
else
  cmake -S "$root" -B "$build" >/dev/null  # pick up new test files (globs)
fi
# The tests/io executables are named after their files.
targets=()
for f in "$root"/tests/io/*.cpp; do targets+=("$(basename "${f%.cpp}")"); done
cmake --build "$build" -j "${STATECUT_JOBS:-$(nproc)}" --target "${targets[@]}"
cd "$build"
# gtest_discover_tests names tests Suite.test; select the io executables through their suites' files.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1 \
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --output-on-failure -j "${STATECUT_JOBS:-$(nproc)}" -L L0 -R "$(
    # ctest -R matches test names, not executables: list the io executables' tests.
    for t in "${targets[@]}"; do "$build/tests/$t" --gtest_list_tests | awk '/^[^ ]/{s=$1} /^  /{print s $1}'; done |
      sed 's/[.]/[.]/g' | paste -sd'|' -)"
echo "sanitize_io: ok (${#targets[@]} test executables under ASan/UBSan)" >&2

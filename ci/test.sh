#!/usr/bin/env bash
# The README's test command: build (with reference/ coverage) and run every L0 test, the
# reference coverage gate, the sanitizer build of the I/O tests and a bounded fuzz run.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${STATECUT_BUILD:-$root/build}"
# -O2 without -g: debug info is ~30% of a LibTorch TU's compile and most of a test executable's 170 MB; CI never
# reads it (a failure is reproduced from its printed seed in a local RelWithDebInfo build).
# Unity batches (README "Layout"): each LibTorch file spends most of its ~25 s on headers and on the same template
# instantiations, which a batch of 8 does once; one test executable per folder.
STATECUT_BUILD="$build" "$root/ci/build.sh" -DSTATECUT_COVERAGE=ON "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=${STATECUT_CI_CXXFLAGS:--O2 -DNDEBUG}" \
  "-DCMAKE_UNITY_BUILD=${STATECUT_UNITY:-ON}"
cd "$build"
find . -name '*.gcda' -delete
ctest -L L0 --output-on-failure -j "${STATECUT_JOBS:-$(nproc)}" --timeout 900
cmake --build . --target coverage
for extra in "$root"/ci/test.d/*.sh; do
  [ -e "$extra" ] || continue
  echo "== $(basename "$extra")" >&2
  bash "$extra" "$root"
done

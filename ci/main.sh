#!/usr/bin/env bash
# The README's first command: install what is missing, build only what the main job runs (the statecut CLI and its
# SentencePiece helper; no tests, no benchmarks, no CUDA kernels: the main job runs on the CPU), run the main job.
# Build folder: build-main (STATECUT_MAIN_BUILD), apart from ci/test.sh's build/ so neither reconfigures the other.
# -O2 without debug info: the same code as ci/test.sh's RelWithDebInfo build, so the same figures, built faster.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${STATECUT_MAIN_BUILD:-$root/build-main}"
"$root/ci/setup.sh"
t0=$SECONDS
if [ ! -f "$build/CMakeCache.txt" ]; then
  gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
  launcher=(); command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  cmake -S "$root" -B "$build" "${gen[@]}" "${launcher[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" -DSTATECUT_CUDA=OFF -DSTATECUT_BENCH=OFF >/dev/null
fi
cmake --build "$build" -j "${STATECUT_JOBS:-$(nproc)}" --target statecut  # its helpers (statecut-spm, statecut-random-checkpoint) come with it
echo "ci/main.sh: built the CLI in $((SECONDS - t0)) s" >&2
STATECUT_BUILD="$build" exec "$root/ci/main_job.sh"

#!/usr/bin/env bash
# Configure and build into build/ (or $STATECUT_BUILD). Extra arguments go to cmake's configure.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${STATECUT_BUILD:-$root/build}"
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
elif [ $# -gt 0 ]; then
  cmake -S "$root" -B "$build" "$@"
fi
cmake --build "$build" -j "${STATECUT_JOBS:-$(nproc)}"

#!/usr/bin/env bash
# The README's first command: install what is missing, build, run the main job.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/ci/setup.sh"
"$root/ci/build.sh"
exec "$root/ci/main_job.sh"

#!/usr/bin/env bash
# The session's last device seconds: the [V,K] decode kernel with packed inputs on its old offsets again (a Packed
# instance beside the strided one), measured by the 29th wave's probe, and every GPU test of the kernels and of
# decoding on the final tree.
#   A  probe .probe/vk/vk_new2 (this tree's kernel), vk_old (4c59ffe), vk_head (the 28th wave's); configure + build
#      the GPU tests of the decode kernel and of decoding (the device time left allowed no more); run them.
# Results under $OUT: 00_summary.log. Run: bash bench/h200_wave31.sh A
set -uo pipefail
PHASE=${1:-A}
TAG=w31
# shellcheck source=bench/device_env.sh
source "$(dirname "$0")/device_env.sh"
TESTS="metamorphic_gated_delta_cuda equiv_gated_delta_cuda decode_equivalence"
if [ "$PHASE" = A ]; then
  for v in new2 old head; do timeout 60 .probe/vk/vk_$v $v 2>&1 | grep -E 'dk 128' >>"$S" || say "probe $v rc=$?"; done
  TORCH_PREFIX=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTATECUT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
    -DSTATECUT_BENCH=OFF -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" >"$LOGS/configure.log" 2>&1 ||
    { keep "$LOGS/configure.log"; say "configure FAILED"; exit 1; }
  # shellcheck disable=SC2086
  cmake --build "$BUILD" -j"$(nproc)" --target $TESTS >"$LOGS/build.log" 2>&1 ||
    { keep "$LOGS/build.log"; say "build FAILED"; grep -E "error|FAILED" -A3 "$LOGS/build.log" | head -60 >>"$S"; }
  say "build $(elapsed) s"
  # shellcheck disable=SC2086
  run_tests $TESTS
fi
say "phase $PHASE done at $(elapsed) s, rc $rc"
exit $rc

#!/usr/bin/env bash
# The session's last device seconds: every GPU test on the final tree (the GEMV at batch 1 only and the fused gate|up
# GEMV change which path every CUDA caller of `linear` takes at 2..8 rows).
#   A  configure; build the GPU test executables and decode_equivalence only (no CLI: the time is short); run them,
#      fastest first, each line into the summary as it ends.
# Results under $OUT: 00_summary.log. Run: bash bench/h200_wave27.sh A
set -uo pipefail
PHASE=${1:-A}
TAG=w27
# shellcheck source=bench/device_env.sh
source "$(dirname "$0")/device_env.sh"
TESTS="fused_ops_cuda golden_models_cuda badinput_gated_delta_cuda metamorphic_gated_delta_cuda conv1d_backward_cuda
  train_cuda equiv_gated_delta_cuda calibration_cuda decode_equivalence"
if [ "$PHASE" = A ]; then
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

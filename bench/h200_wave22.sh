#!/usr/bin/env bash
# The training conv's CUDA backward (kernels/conv1d_backward.h, optimized/models/conv1d_autograd.h) and the conv
# step's weights as 16-byte loads, on the H200, in one short call (the session had 435 s of device time left):
#   configure + build (Release, sm_90a) the CLI, the random-checkpoint tool and the three GPU tests that cover the
#   change (conv1d_backward_cuda, fused_ops_cuda, train_cuda); run them; a random DeltaNet 1.3B and its 50% rand
#   prune; `statecut finetune --device cuda` of the prune from the full model (LoRA + KD, bf16, 4 x 2048 tokens a
#   step) with the CUDA conv backward, then with STATECUT_FUSED=0 (the LibTorch conv, the twenty-first wave's path)
#   when time is left.
# Results under $OUT: 00_summary.log, ft_*.json. Run: bash bench/h200_wave22.sh
set -uo pipefail
PHASE=F
TAG=w22
# shellcheck source=bench/device_env.sh
source "$(dirname "$0")/device_env.sh"
TESTS="conv1d_backward_cuda fused_ops_cuda train_cuda"
TORCH_PREFIX=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTATECUT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DSTATECUT_BENCH=OFF -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" >"$LOGS/configure.log" 2>&1 ||
  { keep "$LOGS/configure.log"; say "configure FAILED"; exit 1; }
# shellcheck disable=SC2086
cmake --build "$BUILD" -j"$(nproc)" --target statecut statecut-random-checkpoint $TESTS >"$LOGS/build.log" 2>&1 ||
  { keep "$LOGS/build.log"; say "build FAILED"; grep -E "error|FAILED" -A3 "$LOGS/build.log" | head -80 >>"$S"; exit 1; }
say "build $(elapsed) s"
# shellcheck disable=SC2086
run_tests $TESTS
checkpoint dn13 && pruned dn13 && ft dn_lora_bf16_cudaconv dn13_p50 dn13 --steps 8 --precision bf16
[ "$(elapsed)" -lt "${AB_BY:-230}" ] &&
  STATECUT_FUSED=0 ft dn_lora_bf16_libtorchconv dn13_p50 dn13 --steps 8 --precision bf16
say "done at $(elapsed) s, rc $rc"
exit $rc

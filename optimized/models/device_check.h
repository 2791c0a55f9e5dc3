/// `--device cuda` on a machine without a CUDA device: one check and one message for every command (logits, generate,
/// bench, eval, rank, prune, finetune/train, verify). Refused up front rather than run quietly on the CPU. Commands
/// exit 1 on it; verify maps it to its "could not run" exit 2, so a CI job can tell it from a failed check.
#pragma once
#include <torch/cuda.h>
#include <torch/types.h>

#include <stdexcept>

namespace statecut {

struct DeviceUnavailable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Throws DeviceUnavailable when `device` is a CUDA device and none is available.
inline void require_device_available(const torch::Device& device) {
  if (device.is_cuda() && !torch::cuda::is_available())
    throw DeviceUnavailable("--device cuda: no CUDA device available");
}

}  // namespace statecut

// The LibTorch side of `statecut info` (cmd_info.cpp registers the command; this file only answers for LibTorch).
#include <nlohmann/json.hpp>
#include <torch/torch.h>
#include <torch/version.h>

#include "optimized/models/model_registry.h"
#include "optimized/models/recurrence.h"
#include "optimized/text/tokenizer.h"

namespace statecut::cli {

nlohmann::json torch_build_info() {
  register_builtin_families();
  const bool cuda = torch::cuda::is_available();
  const int64_t devices = cuda ? static_cast<int64_t>(torch::cuda::device_count()) : 0;
  std::string helper;
  const auto formats = tokenizer_formats(&helper);
  return {{"torch_version", TORCH_VERSION},
          {"cuda", {{"kernels_built", cuda_kernels_built()}, {"available", cuda}, {"devices", devices}}},
          {"families", registered_model_families()},
          {"tokenizers", formats},
          {"sentencepiece_helper", helper.empty() ? nlohmann::json(nullptr) : nlohmann::json(helper)}};
}

}  // namespace statecut::cli

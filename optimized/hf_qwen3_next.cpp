// transformers Qwen3NextForCausalLM: the hybrid of hf_qwen3_5.cpp in the packed projection layout.
#include "optimized/hf_qwen3_next.h"

#include "optimized/hf_qwen3_5.h"
#include "optimized/model_registry.h"

namespace statecut {

void register_hf_qwen3_next() {
  register_model_family("qwen3_next", [](const nlohmann::json& c, const WeightSource& w, torch::Dtype dt,
                                         torch::Device dev) {
    return make_qwen_hybrid(c, w, dt, dev, QwenLinearLayout::Packed, "qwen3_next", "model.");
  });
}

}  // namespace statecut

// transformers Qwen3NextForCausalLM: the hybrid of hf_qwen3_5.cpp in the packed projection layout.
#include "optimized/models/families/hf_qwen3_next.h"

#include "optimized/models/families/hf_qwen3_5.h"
#include "optimized/models/model_registry.h"

namespace statecut {

void register_hf_qwen3_next() {
  FamilySpec spec;
  spec.model_type = "qwen3_next";
  spec.build = [](const nlohmann::json& c, const WeightSource& w, torch::Dtype dt, torch::Device dev) {
    return make_qwen_hybrid(c, w, dt, dev, QwenLinearLayout::Packed, "qwen3_next", "model.");
  };
  spec.prunable_layers = [](const nlohmann::json& c, const std::string& origin) {
    return qwen_prunable_layers(c, QwenLinearLayout::Packed, "model.", origin);
  };
  spec.pruned_config = qwen_pruned_config;
  spec.caps = {/*delta_rule=*/true, /*gated=*/true};
  register_family(std::move(spec));
}

}  // namespace statecut

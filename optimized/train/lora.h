/// LoRA on the q, k and v projections of every linear-attention layer (paper recipe, anchor-original §5):
///   W_eff[rows] = W0[rows] + (α/r)·B·A,   A [r, in] ~ U(±1/√in) (PEFT's kaiming_uniform(a=√5)), B [rows, r] = 0,
/// one adapter per row block, on exactly the q/k/v rows of a packed projection (lora_blocks below).
///
/// How it reaches the model without touching the families: the model reads its weights from the tensors that
/// named_parameters() hands out (the same TensorImpl), so the adapter MATERIALISES W_eff into the parameter before each
/// forward (materialise(), under no-grad) and the parameter is made a grad-collecting leaf. Autograd then gives
/// G = ∂L/∂W_eff, and since W_eff is linear in B for fixed A (and in A for fixed B) the chain rule is exact:
///   ∂L/∂B = s·G[rows]·Aᵀ,   ∂L/∂A = s·Bᵀ·G[rows],   s = α/r                                    (backprop())
/// G is linear in the loss, so it may accumulate over micro-batches (and be all-reduced) before backprop().
/// The merged checkpoint is the parameter itself: merge is W0 + s·B·A, exactly what the last forward used.
/// Row blocks per family (from PrunableLayer, the one source of the q/k geometry; v by the family's layout):
///   delta_net, gated_deltanet   q_proj, k_proj, v_proj (every row; v_proj named after q_proj)
///   qwen3_5_text, qwen3_5       in_proj_qkv rows [0, Hk·dk) q, [Hk·dk, 2Hk·dk) k, [2Hk·dk, end) v
///   qwen3_next                  in_proj_qkvz per key head group [q dk | k dk | v r·dv | z r·dv] (stride = group)
///   mamba2                      in_proj [z I | x I | B G·N | C G·N | dt H]: q = C, k = B, v = x
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "optimized/models/model.h"

namespace statecut {

/// Rows offset + h·stride + c (h < heads, c < rows_per_head) of the parameter `weight` ([rows_total, in]).
struct RowBlock {
  std::string weight;
  std::string role;  ///< "q", "k" or "v"
  int layer = 0;
  int64_t offset = 0, stride = 0, heads = 1, rows_per_head = 0;
  int64_t rows() const { return heads * rows_per_head; }
  bool contiguous() const { return heads == 1 || stride == rows_per_head; }
  /// The row indices [rows] int64 on `device`.
  torch::Tensor index(torch::Device device) const;
};

/// The q, k, v row blocks of every prunable layer of `model` (table above); shape_of(name) gives a parameter's shape.
/// Throws std::runtime_error "finetune: ..." for a model_type without a rule or a block outside its weight.
std::vector<RowBlock> lora_blocks(const std::string& model_type, const std::vector<PrunableLayer>& layers,
                                  const std::function<std::vector<int64_t>(const std::string&)>& shape_of);

struct LoraConfig {
  int rank = 32;
  double alpha = 64;
  double scale() const { return alpha / rank; }
};

struct LoraAdapter {
  RowBlock block;
  torch::Tensor param;   ///< the computing model's parameter (shared with the model); its .grad() is G
  torch::Tensor master;  ///< the master model's parameter (the same tensor when one model does both)
  torch::Tensor w0;      ///< [rows, in] the block's base rows (the master dtype)
  torch::Tensor A, B;   ///< [r, in], [rows, r]; their gradients in A.grad() / B.grad() after backprop()
  torch::Tensor index;  ///< row indices when the block is strided (undefined: contiguous)
};

class Lora {
 public:
  /// Adapters on `blocks` of `model`; A from a std::mt19937_64 seeded with `seed` (the same on every platform), B = 0.
  /// W0, A and B take the dtype of `master`'s parameters (mixed precision: an fp32 master model beside a bf16 `model`
  /// that computes; the same model otherwise). Sets requires_grad on `model`'s adapted parameters only (the caller
  /// decides the others). Throws when a block names no parameter of either model.
  Lora(CausalLM& model, CausalLM& master, std::vector<RowBlock> blocks, const LoraConfig& cfg, uint64_t seed);
  Lora(CausalLM& model, std::vector<RowBlock> blocks, const LoraConfig& cfg, uint64_t seed)
      : Lora(model, model, std::move(blocks), cfg, seed) {}

  /// W_eff = W0 + s·B·A (in the master dtype) into each adapted parameter's rows of the computing model (no grad).
  void materialise();
  /// The same W_eff into the master model's rows (what the output checkpoint is written from); materialise() has
  /// done it already when one model does both.
  void merge_into_masters();
  /// From the adapted parameters' .grad() (cast to the master dtype): adds s·G·Aᵀ to B.grad() and s·Bᵀ·G to A.grad()
  /// (setting them when undefined), then clears the parameters' gradients. A parameter without a gradient adds zeros.
  void backprop();
  /// Every adapter's A and B (what the optimizer updates and a resumable state saves), in a fixed order.
  std::vector<std::pair<std::string, torch::Tensor>> tensors();
  const std::vector<LoraAdapter>& adapters() const { return adapters_; }
  std::vector<LoraAdapter>& adapters() { return adapters_; }
  const LoraConfig& config() const { return cfg_; }
  int64_t num_parameters() const;

 private:
  LoraConfig cfg_;
  std::vector<LoraAdapter> adapters_;
};

/// The recipe's fully trained parameters: every name containing "conv1d", "norm" or "bias" (GDN's dt_bias included).
bool recipe_trains_fully(const std::string& parameter_name);

}  // namespace statecut

/// The model API every family implements and the pipeline codes against (LibTorch, namespace statecut).
///
/// Layout is seq-first like fla: activations [B, T, H, D]; recurrent states key-major [B, Hv, dk, dv] fp32.
/// A CausalLM is built from a checkpoint directory (config.json + model.safetensors, or a sharded
/// model.safetensors.index.json) by load_causal_lm, which dispatches on config.json's "model_type" through
/// model_registry.h. Parameters are stored in the requested dtype; recurrences and norms run in fp32
/// (f64 when the model is f64), like fla.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "optimized/models/decode_cache.h"

namespace statecut {

enum class RecurrenceMode { Recurrent, Chunk };

/// Tensors at the recurrence boundary of one linear-attention layer (what calibration and `rank` read).
struct LayerBoundary {
  torch::Tensor attn_in;      ///< [B,T,hidden] the attention-norm output feeding the q/k projections (S-Wanda RMS)
  /// [B,T,Hk,dk] after the short conv and the activation, before the per-head L2 norm that the recurrence applies
  /// (qk_norm "l2"); with qk_norm "sum" they are already divided by their sum (fla does so before its kernel).
  /// Mamba-2: C and B per group, [B,T,G,N].
  torch::Tensor q, k;
  torch::Tensor v;            ///< [B,T,Hv,dv] (Mamba-2: x per head, before multiplying by dt)
  torch::Tensor beta;         ///< [B,T,Hv] after sigmoid (x2 if allow_neg_eigval); undefined for Mamba-2
  torch::Tensor g;            ///< [B,T,Hv] log decay in fp32 (GDN: -exp(A_log)*softplus(a+dt_bias); Mamba-2: dt*A); undefined for DeltaNet
  torch::Tensor final_state;  ///< [B,Hv,dk,dv] key-major fp32
};

/// Called by forward() before the embedding (block −1), before each block i (0 … num_layers − 1) and before the final
/// norm and head (block num_layers): where a StreamedModel (streamed_model.h) brings that block's weights in.
using BlockHook = std::function<void(int64_t block)>;

struct ForwardOptions {
  RecurrenceMode mode = RecurrenceMode::Chunk;
  bool output_hidden_states = false;  ///< residual stream after the embedding and after each block (as the library returns it)
  bool capture_boundary = false;      ///< fill ForwardResult::boundary for every linear-attention layer
  /// false: forward() stops after the last block (no final norm, no head; logits and the last hidden state are left
  /// out), for passes that read only the layer boundaries (calibration, rank). forward_cached ignores it.
  bool logits = true;
  /// forward_cached only: the logits of the last position alone ([B, 1, V]; the final norm's and head's work on the
  /// other positions is skipped). A prompt's pass in `generate` reads nothing else, and a whole prompt's logits are
  /// large: Qwen3.5's 151k vocabulary over 2,048 tokens is 1.2 GB of fp32 and ~1.3 TFLOP of head at hidden 2048.
  /// The cache it leaves is the same; hidden_states (when asked for) keep every position.
  bool last_logits = false;
  /// forward() only: false runs the final norm (the last entry of hidden_states, when asked for) but not the head, and
  /// leaves logits undefined: a pass that compares final hidden states (verify's invariance rows, in f64) does not form
  /// [B, T, V] logits (at a 152k vocabulary, 4 x 512 tokens: 2.5 GB of f64, then 1.2 GB of fp32).
  bool head = true;
  BlockHook before_block;  ///< forward() only (not forward_cached)
  /// With capture_boundary, forward() hands each linear-attention layer's boundary to this callback as soon as its
  /// block has run and then drops it (ForwardResult::boundary keeps undefined tensors for it): a pass that folds
  /// the boundaries into statistics (calibration) holds one layer's, not every layer's (for a 1.3B model at 2048
  /// tokens: 67 MB instead of 1.6 GB per sequence).
  std::function<void(int64_t layer, LayerBoundary& boundary)> on_boundary;
};

/// x [B, T, …] restricted to its last position when `last` (T > 1), else x itself; undefined stays undefined.
inline torch::Tensor last_position_if(const torch::Tensor& x, bool last) {
  return last && x.defined() && x.size(1) > 1 ? x.narrow(1, x.size(1) - 1, 1) : x;
}

struct ForwardResult {
  torch::Tensor logits;                      ///< [B,T,V] fp32
  std::vector<torch::Tensor> hidden_states;  ///< if requested: num_layers + 1 entries
  std::vector<LayerBoundary> boundary;       ///< index = layer; entries of full-attention layers have undefined tensors
};

/// Runs opt.before_block(block) when set (the families' forward() calls it at each block boundary).
inline void enter_block(const ForwardOptions& opt, int64_t block) {
  if (opt.before_block) opt.before_block(block);
}

/// After block `layer` of forward(): hands its captured boundary to opt.on_boundary, when set, and drops it.
inline void hand_over_boundary(const ForwardOptions& opt, ForwardResult& res, size_t layer) {
  if (!opt.on_boundary || layer >= res.boundary.size() || !res.boundary[layer].q.defined()) return;
  opt.on_boundary(static_cast<int64_t>(layer), res.boundary[layer]);
  res.boundary[layer] = LayerBoundary();
}

/// Key/query geometry of one prunable layer (what selection and surgery need).
struct PrunableLayer {
  int layer = 0;          ///< block index
  int num_key_heads = 0;  ///< Hk (Mamba-2: n_groups)
  int head_k_dim = 0;     ///< dk (Mamba-2: state_size)
  std::string q_weight, k_weight;              ///< tensor names of the q/k projection weights (Qwen3.5/Mamba-2: the packed weight)
  int64_t q_row_offset = 0, k_row_offset = 0;  ///< first row of the q/k block inside a packed weight
  /// Rows of key head h start at offset + h·stride: 0 means dk (the heads' rows are contiguous). Qwen3-Next packs
  /// [q | k | v | z] per key head, so there the stride is the whole per-head group 2dk + 2r·dv.
  int64_t q_row_stride = 0, k_row_stride = 0;
  std::string q_conv, k_conv;                  ///< conv weight names (may be equal: packed conv), with channel offsets:
  int64_t q_conv_offset = 0, k_conv_offset = 0;
};

/// The row stride between key heads of a q/k block: the stored stride, or dk when it is 0 (heads contiguous).
inline int64_t head_row_stride(int64_t stride, int dk) { return stride > 0 ? stride : dk; }

/// The [heads·dk, in] rows of a q or k block of weight (or gradient) w: rows offset + h·stride + c.
inline torch::Tensor head_block_rows(const torch::Tensor& w, int64_t offset, int64_t stride, int heads, int dk) {
  stride = head_row_stride(stride, dk);
  if (stride == dk) return w.narrow(0, offset, static_cast<int64_t>(heads) * dk);
  auto idx = torch::arange(dk, torch::TensorOptions().dtype(torch::kInt64).device(w.device()));
  idx = (idx.unsqueeze(0) + torch::arange(heads, idx.options()).unsqueeze(1) * stride + offset).reshape({-1});
  return w.index_select(0, idx);
}
inline torch::Tensor q_block_rows(const torch::Tensor& w, const PrunableLayer& L) {
  return head_block_rows(w, L.q_row_offset, L.q_row_stride, L.num_key_heads, L.head_k_dim);
}
inline torch::Tensor k_block_rows(const torch::Tensor& w, const PrunableLayer& L) {
  return head_block_rows(w, L.k_row_offset, L.k_row_stride, L.num_key_heads, L.head_k_dim);
}

class CausalLM {
 public:
  virtual ~CausalLM() = default;
  /// input_ids [B,T] int64 (on any device; moved to the model's device).
  virtual ForwardResult forward(const torch::Tensor& input_ids, const ForwardOptions& opt = {}) = 0;
  /// Incremental decoding: input_ids [B,T] (T ≥ 1) continue the sequences whose state `cache` holds (an empty cache:
  /// positions from 0), and the cache is updated. Logits [B,T,V] equal forward() of the whole sequence at these
  /// positions up to rounding (tests/torch/decode_equivalence.cpp). T > 1 (a prefill) runs opt.mode, one token the
  /// recurrent step (CUDA: the decode kernel). hidden_states as forward() fills them (these positions only);
  /// boundary is not filled. Default: throws.
  virtual ForwardResult forward_cached(const torch::Tensor& input_ids, DecodeCache& cache, const ForwardOptions& opt = {}) {
    (void)input_ids, (void)cache, (void)opt;
    throw std::runtime_error("model_type '" + model_type() + "' has no incremental decoding (forward_cached)");
  }
  virtual const std::string& model_type() const = 0;
  virtual int64_t vocab_size() const = 0;
  /// The layers whose key/query channels can be pruned, in block order: prunable_layers_from_config
  /// (optimized/prune/surgery.h) of the config the model was built from, set by build_causal_lm.
  const std::vector<PrunableLayer>& prunable_layers() const { return prunable_; }
  void set_prunable_layers(std::vector<PrunableLayer> layers) { prunable_ = std::move(layers); }
  /// All parameters by checkpoint name (for autograd: grad-based selection needs d loss / d Wq, Wk).
  virtual std::vector<std::pair<std::string, torch::Tensor>> named_parameters() = 0;
  /// The output head [V, hidden]: the embedding table itself (same storage) when the config ties them; undefined for
  /// a model that has none (test doubles).
  virtual const torch::Tensor& output_head() const {
    static const torch::Tensor none;
    return none;
  }

 private:
  std::vector<PrunableLayer> prunable_;
};

/// Loads config.json + model.safetensors (or sharded) from dir; validates shapes and values (throws io::Error with a
/// one-line message naming the file and the tensor); dtype: kFloat32, kBFloat16, kFloat64 (CPU); device cpu or cuda.
std::unique_ptr<CausalLM> load_causal_lm(const std::string& dir, torch::Dtype dtype, torch::Device device);

}  // namespace statecut

/// StreamedModel: a model larger than memory, run with one block's large weights resident at a time (issue 19.7).
///
/// The model is built from WeightSource::checks_only(min_numel): every tensor is checked as load_causal_lm checks it
/// (present, shape implied by the config, finite), the small ones (norms, biases, convs, decay parameters: fewer
/// than min_numel elements) are copied as usual and the large ones (projections, embedding, head) are bound as
/// placeholders. A forward run with options() calls enter(b) at each block boundary (ForwardOptions::before_block):
/// enter copies block b's large tensors from the mapped checkpoint, converted to the model's dtype exactly as a
/// load converts them, and gives every other block's back. WeightSource gives the file pages back once a tensor is
/// copied, so the process holds neither the whole checkpoint nor the whole model: one block (or the embedding, or
/// the head) plus the small tensors and the activations.
///
/// Block of a tensor: the number after "layers." in its name (model.layers.i, backbone.layers.i,
/// model.language_model.layers.i: every registered family's naming). The other tensors are outer: block −1 (before
/// the embedding) holds those named like an embedding ("embed"), or every outer tensor when none is; block
/// num_layers (before the final norm and head) holds every outer tensor, since the head may be the tied embedding.
///
/// A tensor outside its block holds no storage (shape [0]): a family that read a weight outside the block the hook
/// announced would fail on its shape instead of reading stale memory (tests/torch/streamed_model.cpp runs every
/// family streamed against the same model loaded whole). On the CPU only: on CUDA the families pack weights at
/// construction, and a model that fits the device needs no streaming. forward_cached does not stream.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "optimized/models/model.h"
#include "optimized/models/weight_source.h"

namespace statecut {

class StreamedModel {
 public:
  /// Tensors of at least this many elements are streamed (256 KiB in fp32): every projection of a real model, none
  /// of its norms, biases or short convs.
  static constexpr int64_t kDefaultMinNumel = int64_t{1} << 16;

  /// Loads dir as load_causal_lm(dir, dtype, CPU) does, with the large tensors left in the file. Throws as it does.
  static StreamedModel load(const std::string& dir, torch::Dtype dtype, int64_t min_numel = kDefaultMinNumel);

  CausalLM& model() { return *model_; }
  /// `opt` with before_block set to enter(): pass it to model().forward.
  ForwardOptions options(ForwardOptions opt = {});
  /// Makes block b's large tensors resident (−1: the embedding, num_blocks(): the outer tensors) and gives the
  /// others back. Entering the resident block again is free.
  void enter(int64_t block);
  /// Gives every streamed tensor back (placeholders only).
  void release_all();

  int64_t num_blocks() const { return num_blocks_; }
  /// Bytes of the streamed tensors resident now, and the most ever resident at once.
  int64_t resident_bytes() const { return resident_bytes_; }
  int64_t peak_resident_bytes() const { return peak_resident_bytes_; }
  /// Bytes all streamed tensors would take resident (what load_causal_lm would hold beyond the small tensors).
  int64_t streamed_bytes() const { return streamed_bytes_; }

 private:
  struct Entry {
    std::string name;
    torch::Tensor t;  ///< the model's own tensor (same TensorImpl): filled and emptied in place with set_
    std::vector<int64_t> shape;
    torch::Dtype dtype = torch::kFloat32;  ///< as the family bound it
    int64_t block = 0;  ///< layer index, or −1 for an outer tensor
    bool embedding = false;
    bool resident = false;
  };
  StreamedModel() = default;
  bool wanted(const Entry& e, int64_t block) const;
  void give_back(Entry& e);

  std::unique_ptr<CausalLM> model_;
  WeightSource source_ = WeightSource::from_tensors({});
  std::vector<Entry> entries_;
  int64_t num_blocks_ = 0;
  bool any_embedding_ = false;
  int64_t resident_bytes_ = 0, peak_resident_bytes_ = 0, streamed_bytes_ = 0;
};

/// A model for a no-grad pass (calibration): loaded whole by load_causal_lm, or a StreamedModel (CPU) when `stream`.
/// prune and verify's certificate check decide `stream` by one rule (should_stream_weights).
class PassModel {
 public:
  PassModel(const std::string& dir, torch::Dtype dtype, torch::Device device, bool stream);
  CausalLM& model() { return streamed_ ? streamed_->model() : *whole_; }
  /// The forward hook to pass on (empty for a whole model).
  BlockHook hook() { return streamed_ ? streamed_->options().before_block : BlockHook(); }
  bool streamed() const { return streamed_ != nullptr; }

 private:
  std::unique_ptr<CausalLM> whole_;
  std::unique_ptr<StreamedModel> streamed_;
};

/// Bytes of dir's tensors converted to dtype (from the safetensors headers alone).
int64_t weights_bytes_as(const std::string& dir, torch::Dtype dtype);
/// The memory available to a new allocation now: MemAvailable of /proc/meminfo, or less where a cgroup memory limit
/// of this process (a container's, a CI job's; v1 or v2) leaves less room; −1 where neither can be read.
/// root: a folder standing for / (tests give a fake /proc and /sys/fs/cgroup).
int64_t available_memory_bytes(const std::string& root = "");
/// True when dir's weights in dtype take at most half the available memory (the rest: activations, the calibration
/// statistics, the file pages), or when the available memory is unknown: `prune --stream-weights auto`'s rule.
bool weights_fit_in_memory(const std::string& dir, torch::Dtype dtype);
/// `--stream-weights` MODE ("on", "off" or "auto") for a pass over dir's fp32 model on `device`: never off the CPU
/// or for a pass that needs gradients (every block at once); "auto" streams when !weights_fit_in_memory.
bool should_stream_weights(const std::string& mode, const std::string& dir, torch::Device device, bool needs_grad);

}  // namespace statecut

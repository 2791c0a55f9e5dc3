/// WeightSource: the tensors of a checkpoint by name, converted to torch::Tensor on request, with the shape and
/// value checks every model family needs when it binds its parameters.
///
/// Backed either by an io::Checkpoint (model.safetensors, or the shards a model.safetensors.index.json names; the
/// files stay memory-mapped while the source lives) or by an in-memory name → tensor map (tests, surgery).
/// Every failure is an io::Error with one line "<file>: <tensor>: <problem>".
#pragma once
#include <torch/torch.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "optimized/io/safetensors.h"

namespace statecut {

class WeightSource {
 public:
  /// Opens dir through io::Checkpoint: config.json must be there; dir/model.safetensors, else the shards listed in
  /// dir/model.safetensors.index.json ("weight_map", checked against what the shards hold).
  static WeightSource open_dir(const std::string& dir);
  /// Opens one safetensors file.
  static WeightSource open_file(const std::string& path);
  /// In-memory tensors; `origin` names them in error messages.
  static WeightSource from_tensors(std::map<std::string, torch::Tensor> tensors, std::string origin = "<memory>");
  /// Tensors made on request (a fresh model, `statecut train`): get(name, shape, ...) returns make(name, shape), checked
  /// and cast like a stored tensor; has() is true for every name, names() is empty, shape() and raw() throw.
  using TensorMaker = std::function<torch::Tensor(const std::string& name, const std::vector<int64_t>& shape)>;
  static WeightSource generated(TensorMaker make, std::string origin = "<init>");

  bool has(const std::string& name) const;
  std::vector<std::string> names() const;  ///< sorted
  /// Shape as stored; throws "<origin>: missing tensor '<name>'".
  std::vector<int64_t> shape(const std::string& name) const;
  /// The file (or origin) holding `name`, for error messages.
  std::string origin(const std::string& name) const;

  /// The tensor converted to dtype/device (a fresh copy, contiguous). Throws when it is missing, when its shape differs
  /// from `expected_shape` ("shape [a,b] but the config implies [c,d]"), or when it holds NaN/Inf.
  torch::Tensor get(const std::string& name, const std::vector<int64_t>& expected_shape, torch::Dtype dtype,
                    torch::Device device) const;
  /// A source that checks every get() exactly as this one does (presence, shape, stored values finite) but returns
  /// an uninitialised tensor (torch::empty: no page is touched until written) instead of a copy for every tensor of
  /// at least `min_numel` elements (smaller ones are copied as get() copies them): a model built from it proves the
  /// checkpoint loads while holding none of its weights (prune's data-free methods, min_numel 0), or holds only the
  /// small ones (StreamedModel, which brings the large ones in block by block; issue 19.7).
  WeightSource checks_only(int64_t min_numel = 0) const;
  /// Like get() but returns an undefined tensor when `name` is absent.
  torch::Tensor get_optional(const std::string& name, const std::vector<int64_t>& expected_shape, torch::Dtype dtype,
                             torch::Device device) const;
  /// The tensor as stored (dtype of the file), on CPU, without shape or value checks.
  torch::Tensor raw(const std::string& name) const;
  /// Whether get() or raw() was asked for `name` (by this source or a copy of it, checks_only's included): after a
  /// model is built from the source, the stored tensors it did not bind (unused_tensors, model_registry.h).
  bool used(const std::string& name) const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
  int64_t placeholders_from_ = -1;  ///< checks_only(n): tensors of >= n elements come back as placeholders
};

/// torch dtype of a safetensors dtype; throws io::Error for dtypes LibTorch cannot hold (U16, U32, U64, F8).
torch::Dtype torch_dtype(io::DType d);
/// A CPU tensor that copies the bytes of `view`.
torch::Tensor tensor_from_view(const io::TensorView& view);

}  // namespace statecut

// WeightSource: checkpoint tensors by name (safetensors files or memory), with shape and finiteness checks.
#include "optimized/models/weight_source.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>

#include "optimized/io/checkpoint.h"

namespace statecut {

struct WeightSource::Impl {
  std::unique_ptr<io::Checkpoint> checkpoint;  // open_dir: config.json + model.safetensors or its shards
  std::unique_ptr<io::SafetensorsFile> file;   // open_file
  std::map<std::string, torch::Tensor> memory;
  TensorMaker make;    // generated
  std::string origin;  // for in-memory and generated sources
  mutable std::mutex used_mutex;
  mutable std::set<std::string> used;  // every name get() or raw() returned (used())

  void mark_used(const std::string& name) const {
    const std::lock_guard<std::mutex> lock(used_mutex);
    used.insert(name);
  }

  /// Whether a file or the memory map holds `name` (not what make() would build).
  bool stores(const std::string& name) const { return view(name) != nullptr || memory.count(name) != 0; }
  /// The stored view of `name` and the file holding it, or nullptr when no file holds it.
  const io::TensorView* view(const std::string& name, std::string* path = nullptr) const {
    if (checkpoint && checkpoint->has(name)) {
      if (path) *path = checkpoint->file_of(name);
      return &checkpoint->tensor(name);
    }
    if (file && file->has(name)) {
      if (path) *path = file->path();
      return &file->tensor(name);
    }
    return nullptr;
  }
  /// The mapped pages of `name` given back once it is checked or copied (io::SafetensorsFile::release): loading or
  /// checking a checkpoint then holds one tensor's file pages at a time, not the whole file.
  void release(const std::string& name) const {
    if (checkpoint && checkpoint->has(name)) checkpoint->release(name);
    else if (file && file->has(name)) file->release(file->tensor(name));
  }
};

namespace {

/// Whether every element of a stored float tensor is finite, read from its bits where it lies (an exponent of all
/// ones is NaN or Inf in every IEEE format): no copy, so checking a mapped checkpoint adds no memory. Non-float dtypes
/// hold no NaN.
template <typename Bits>
bool bits_finite(const std::byte* data, std::size_t n, Bits exponent_mask) {
  for (std::size_t i = 0; i < n; ++i) {
    Bits b;
    std::memcpy(&b, data + i * sizeof(Bits), sizeof(Bits));
    if ((b & exponent_mask) == exponent_mask) return false;
  }
  return true;
}

bool view_finite(const io::TensorView& v) {
  const auto n = static_cast<std::size_t>(v.numel());
  switch (v.dtype) {
    case io::DType::F16: return bits_finite<uint16_t>(v.data, n, 0x7C00u);
    case io::DType::BF16: return bits_finite<uint16_t>(v.data, n, 0x7F80u);
    case io::DType::F32: return bits_finite<uint32_t>(v.data, n, 0x7F800000u);
    case io::DType::F64: return bits_finite<uint64_t>(v.data, n, 0x7FF0000000000000ull);
    default: return true;
  }
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::ostringstream o;
  o << '[';
  for (std::size_t i = 0; i < s.size(); ++i) o << (i ? "," : "") << s[i];
  o << ']';
  return o.str();
}

}  // namespace

torch::Dtype torch_dtype(io::DType d) {
  switch (d) {
    case io::DType::BOOL: return torch::kBool;
    case io::DType::U8: return torch::kUInt8;
    case io::DType::I8: return torch::kInt8;
    case io::DType::I16: return torch::kInt16;
    case io::DType::I32: return torch::kInt32;
    case io::DType::I64: return torch::kInt64;
    case io::DType::F16: return torch::kFloat16;
    case io::DType::BF16: return torch::kBFloat16;
    case io::DType::F32: return torch::kFloat32;
    case io::DType::F64: return torch::kFloat64;
    default: break;
  }
  throw io::Error(std::string("dtype ") + io::dtype_name(d) + " has no LibTorch equivalent here");
}

torch::Tensor tensor_from_view(const io::TensorView& view) {
  torch::Dtype dt;
  try {
    dt = torch_dtype(view.dtype);
  } catch (const io::Error& e) {
    throw io::Error(view.name + ": " + e.what());
  }
  auto t = torch::empty(view.shape, torch::TensorOptions().dtype(dt));
  TORCH_CHECK(static_cast<std::size_t>(t.nbytes()) == view.nbytes, view.name, ": byte size does not match its shape");
  if (view.nbytes) std::memcpy(t.data_ptr(), view.data, view.nbytes);
  return t;
}

WeightSource WeightSource::open_file(const std::string& path) {
  auto impl = std::make_shared<Impl>();
  impl->file = std::make_unique<io::SafetensorsFile>(io::SafetensorsFile::open(path));
  WeightSource w;
  w.impl_ = std::move(impl);
  return w;
}

WeightSource WeightSource::open_dir(const std::string& dir) {
  auto impl = std::make_shared<Impl>();
  impl->checkpoint = std::make_unique<io::Checkpoint>(io::Checkpoint::open(dir));
  WeightSource w;
  w.impl_ = std::move(impl);
  return w;
}

WeightSource WeightSource::from_tensors(std::map<std::string, torch::Tensor> tensors, std::string origin) {
  auto impl = std::make_shared<Impl>();
  impl->memory = std::move(tensors);
  impl->origin = std::move(origin);
  WeightSource w;
  w.impl_ = std::move(impl);
  return w;
}

WeightSource WeightSource::generated(TensorMaker make, std::string origin) {
  auto impl = std::make_shared<Impl>();
  impl->make = std::move(make);
  impl->origin = std::move(origin);
  WeightSource w;
  w.impl_ = std::move(impl);
  return w;
}

bool WeightSource::has(const std::string& name) const {
  return impl_->make || impl_->view(name) != nullptr || impl_->memory.count(name);
}

std::vector<std::string> WeightSource::names() const {
  std::vector<std::string> out;
  if (impl_->checkpoint) out = impl_->checkpoint->names();
  if (impl_->file) out = impl_->file->names();
  for (const auto& [n, _] : impl_->memory) out.push_back(n);
  std::sort(out.begin(), out.end());
  return out;
}

std::string WeightSource::origin(const std::string& name) const {
  std::string path;
  if (impl_->view(name, &path)) return path;
  if (!impl_->origin.empty()) return impl_->origin;
  if (impl_->checkpoint) return impl_->checkpoint->dir();
  return impl_->file ? impl_->file->path() : std::string("<memory>");
}

std::vector<int64_t> WeightSource::shape(const std::string& name) const {
  if (const auto* v = impl_->view(name)) return v->shape;
  auto m = impl_->memory.find(name);
  if (m != impl_->memory.end()) return m->second.sizes().vec();
  throw io::Error(
      io::missing_tensor_message(origin(name), name, [this](const std::string& n) { return impl_->stores(n); }));
}

bool WeightSource::used(const std::string& name) const {
  const std::lock_guard<std::mutex> lock(impl_->used_mutex);
  return impl_->used.count(name) > 0;
}

torch::Tensor WeightSource::raw(const std::string& name) const {
  impl_->mark_used(name);
  std::string path;
  if (const auto* v = impl_->view(name, &path)) {
    try {
      auto t = tensor_from_view(*v);
      impl_->release(name);  // a copy: the mapped pages are not needed any more
      return t;
    } catch (const io::Error& e) {
      throw io::Error(path + ": " + e.what());
    }
  }
  auto m = impl_->memory.find(name);
  if (m != impl_->memory.end()) return m->second.detach().to(torch::kCPU);
  throw io::Error(
      io::missing_tensor_message(origin(name), name, [this](const std::string& n) { return impl_->stores(n); }));
}

torch::Tensor WeightSource::get(const std::string& name, const std::vector<int64_t>& expected_shape, torch::Dtype dtype,
                                torch::Device device) const {
  if (impl_->make) {
    auto t = impl_->make(name, expected_shape);
    if (t.sizes().vec() != expected_shape)
      throw io::Error(origin(name) + ": " + name + ": made " + shape_str(t.sizes().vec()) + " for " + shape_str(expected_shape));
    return t.to(device, dtype).contiguous().clone();
  }
  impl_->mark_used(name);
  const auto s = shape(name);
  if (s != expected_shape)
    throw io::Error(origin(name) + ": " + name + ": shape " + shape_str(s) + " but the config implies " +
                    shape_str(expected_shape));
  int64_t numel = 1;
  for (const int64_t d : expected_shape) numel *= d;
  const bool placeholder = placeholders_from_ >= 0 && numel >= placeholders_from_;
  // A model's weights are floats: an integer or quantised tensor cast to the model dtype would run as weights of
  // arbitrary scale (verify's load check says the same)
  // Finite where stored but beyond the compute dtype's range (F64 1e300 as F32, F32 1e5 as F16): the cast made it
  // Inf, which would surface as the text's overflow far from its cause.
  const auto in_range = [&](torch::Tensor out, torch::ScalarType stored) {
    const bool narrows = torch::isFloatingType(dtype) && torch::isFloatingType(stored) &&
                         (stored == torch::kFloat64 ? dtype != torch::kFloat64 : dtype == torch::kFloat16 && stored != torch::kFloat16);
    if (narrows && out.numel() > 0 && !torch::isfinite(out).all().item<bool>())
      throw io::Error(origin(name) + ": " + name + ": finite values beyond the range of " +
                      (dtype == torch::kFloat16 ? "float16" : dtype == torch::kBFloat16 ? "bfloat16" : "float32") +
                      ", the dtype the model computes in");
    return out;
  };
  const auto not_float = [&](const std::string& dt) {
    return io::Error(origin(name) + ": " + name + ": dtype " + dt + " (the models load F32, BF16, F16, F64)");
  };
  if (const auto* v = impl_->view(name)) {  // a mapped file: checked in place, copied once
    const bool is_float = v->dtype == io::DType::F16 || v->dtype == io::DType::BF16 || v->dtype == io::DType::F32 ||
                          v->dtype == io::DType::F64;
    if (!is_float && torch::isFloatingType(dtype)) throw not_float(io::dtype_name(v->dtype));
    if (!view_finite(*v)) throw io::Error(origin(name) + ": " + name + ": holds NaN or Inf values");
    if (placeholder) {
      impl_->release(name);
      return torch::empty(expected_shape, torch::TensorOptions().dtype(dtype).device(device));
    }
    // raw() is a fresh copy; .to copies only to change it
    return in_range(raw(name).to(device, dtype).contiguous(), is_float ? torch_dtype(v->dtype) : dtype);
  }
  auto t = raw(name);
  if (!t.is_floating_point() && torch::isFloatingType(dtype)) throw not_float(std::string(c10::toString(t.scalar_type())));
  if (t.is_floating_point() && t.numel() > 0 && !torch::isfinite(t).all().item<bool>())
    throw io::Error(origin(name) + ": " + name + ": holds NaN or Inf values");
  if (placeholder) return torch::empty(expected_shape, torch::TensorOptions().dtype(dtype).device(device));
  return in_range(t.to(device, dtype).contiguous().clone(), t.scalar_type());
}

WeightSource WeightSource::checks_only(int64_t min_numel) const {
  if (min_numel < 0) throw std::invalid_argument("WeightSource::checks_only: min_numel must be >= 0");
  WeightSource w = *this;
  w.placeholders_from_ = min_numel;
  return w;
}

torch::Tensor WeightSource::get_optional(const std::string& name, const std::vector<int64_t>& expected_shape,
                                         torch::Dtype dtype, torch::Device device) const {
  if (!has(name)) return torch::Tensor();
  return get(name, expected_shape, dtype, device);
}

}  // namespace statecut

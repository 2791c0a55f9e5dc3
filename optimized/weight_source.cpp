// WeightSource: checkpoint tensors by name (safetensors files or memory), with shape and finiteness checks.
#include "optimized/weight_source.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace statecut {
namespace fs = std::filesystem;

struct WeightSource::Impl {
  std::vector<io::SafetensorsFile> files;
  std::map<std::string, std::size_t> file_of;  // name → index into files
  std::map<std::string, torch::Tensor> memory;
  std::string origin;  // for in-memory sources

  void add_file(io::SafetensorsFile f) {
    const std::size_t idx = files.size();
    for (const auto& n : f.names()) {
      auto [it, fresh] = file_of.emplace(n, idx);
      if (!fresh) throw io::Error(f.path() + ": " + n + ": tensor also present in " + files[it->second].path());
    }
    files.push_back(std::move(f));
  }
};

namespace {

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
  impl->add_file(io::SafetensorsFile::open(path));
  WeightSource w;
  w.impl_ = std::move(impl);
  return w;
}

WeightSource WeightSource::open_dir(const std::string& dir) {
  if (!fs::is_directory(dir)) throw io::Error(dir + ": not a directory");
  const fs::path single = fs::path(dir) / "model.safetensors";
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  auto impl = std::make_shared<Impl>();
  if (fs::exists(index)) {
    std::ifstream in(index);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(in);
    } catch (const std::exception& e) {
      throw io::Error(index.string() + ": malformed JSON (" + std::string(e.what()).substr(0, 120) + ")");
    }
    if (!j.contains("weight_map") || !j["weight_map"].is_object())
      throw io::Error(index.string() + ": no \"weight_map\" object");
    std::vector<std::string> shards;
    for (const auto& [name, shard] : j["weight_map"].items()) {
      if (!shard.is_string()) throw io::Error(index.string() + ": " + name + ": shard name is not a string");
      const auto s = shard.get<std::string>();
      if (s.find('/') != std::string::npos || s == ".." || s.empty())
        throw io::Error(index.string() + ": " + name + ": bad shard file name '" + s + "'");
      if (std::find(shards.begin(), shards.end(), s) == shards.end()) shards.push_back(s);
    }
    for (const auto& s : shards) impl->add_file(io::SafetensorsFile::open((fs::path(dir) / s).string()));
    for (const auto& [name, shard] : j["weight_map"].items()) {
      auto it = impl->file_of.find(name);
      if (it == impl->file_of.end())
        throw io::Error(index.string() + ": " + name + ": listed in weight_map but missing from " +
                        shard.get<std::string>());
    }
  } else if (fs::exists(single)) {
    impl->add_file(io::SafetensorsFile::open(single.string()));
  } else {
    throw io::Error(dir + ": no model.safetensors or model.safetensors.index.json");
  }
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

bool WeightSource::has(const std::string& name) const {
  return impl_->file_of.count(name) || impl_->memory.count(name);
}

std::vector<std::string> WeightSource::names() const {
  std::vector<std::string> out;
  for (const auto& [n, _] : impl_->file_of) out.push_back(n);
  for (const auto& [n, _] : impl_->memory) out.push_back(n);
  std::sort(out.begin(), out.end());
  return out;
}

std::string WeightSource::origin(const std::string& name) const {
  auto it = impl_->file_of.find(name);
  if (it != impl_->file_of.end()) return impl_->files[it->second].path();
  if (!impl_->origin.empty()) return impl_->origin;
  return impl_->files.empty() ? std::string("<memory>") : impl_->files.front().path();
}

std::vector<int64_t> WeightSource::shape(const std::string& name) const {
  auto it = impl_->file_of.find(name);
  if (it != impl_->file_of.end()) return impl_->files[it->second].tensor(name).shape;
  auto m = impl_->memory.find(name);
  if (m != impl_->memory.end()) return m->second.sizes().vec();
  throw io::Error(origin(name) + ": missing tensor '" + name + "'");
}

torch::Tensor WeightSource::raw(const std::string& name) const {
  auto it = impl_->file_of.find(name);
  if (it != impl_->file_of.end()) {
    try {
      return tensor_from_view(impl_->files[it->second].tensor(name));
    } catch (const io::Error& e) {
      throw io::Error(impl_->files[it->second].path() + ": " + e.what());
    }
  }
  auto m = impl_->memory.find(name);
  if (m != impl_->memory.end()) return m->second.detach().to(torch::kCPU);
  throw io::Error(origin(name) + ": missing tensor '" + name + "'");
}

torch::Tensor WeightSource::get(const std::string& name, const std::vector<int64_t>& expected_shape, torch::Dtype dtype,
                                torch::Device device) const {
  const auto s = shape(name);
  if (s != expected_shape)
    throw io::Error(origin(name) + ": " + name + ": shape " + shape_str(s) + " but the config implies " +
                    shape_str(expected_shape));
  auto t = raw(name);
  if (t.is_floating_point() && t.numel() > 0 && !torch::isfinite(t).all().item<bool>())
    throw io::Error(origin(name) + ": " + name + ": holds NaN or Inf values");
  return t.to(device, dtype).contiguous().clone();
}

torch::Tensor WeightSource::get_optional(const std::string& name, const std::vector<int64_t>& expected_shape,
                                         torch::Dtype dtype, torch::Device device) const {
  if (!has(name)) return torch::Tensor();
  return get(name, expected_shape, dtype, device);
}

}  // namespace statecut

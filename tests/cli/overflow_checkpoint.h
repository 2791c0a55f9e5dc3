// A checkpoint whose weights are all finite but whose forward overflows: the shipped byte-level model with its final
// norm's weights set to 3e38 (the largest f32 is 3.4e38), so every hidden state times the norm weight, and then the
// logits, are Inf and log-softmax gives NaN. The loader accepts it (every stored value is finite): only the commands
// that look at the logits can tell. The shipped model is bf16: 3e38 rounds to bf16's 2.99e38, still finite.
#pragma once
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "optimized/io/safetensors.h"

namespace statecut::test {

/// Writes the overflowing copy of `source` (config.json + model.safetensors, f32 or bf16) into `dir`; returns dir.
inline std::string overflowing_checkpoint(const std::filesystem::path& source, const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  fs::copy_file(source / "config.json", dir / "config.json", fs::copy_options::overwrite_existing);
  io::SafetensorsWriter w;
  std::map<std::string, std::vector<unsigned char>> keep;
  const auto f = io::SafetensorsFile::open((source / "model.safetensors").string());
  for (const auto& n : f.names()) {
    const auto& t = f.tensor(n);
    auto& b = keep[n];
    const auto* p = reinterpret_cast<const unsigned char*>(t.data);
    b.assign(p, p + t.nbytes);
    if (n == "model.norm.weight") {
      if (t.dtype == io::DType::F32) {
        const float big = 3e38f;
        for (std::size_t i = 0; i + 4 <= b.size(); i += 4) std::memcpy(b.data() + i, &big, 4);
      } else if (t.dtype == io::DType::BF16) {  // 0x7F61 = 2.99e38
        const uint16_t big = 0x7F61;
        for (std::size_t i = 0; i + 2 <= b.size(); i += 2) std::memcpy(b.data() + i, &big, 2);
      }
    }
    w.add(n, t.dtype, t.shape, b.data(), b.size());
  }
  w.write((dir / "model.safetensors").string());
  return dir.string();
}

}  // namespace statecut::test

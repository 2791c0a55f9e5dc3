// The shipped model (assets/byte_delta_net_4L) is the shared fp32 checkpoint rounded to bf16 tensor by tensor
// (LibTorch's round-to-nearest-even conversion as the independent oracle), with the same names and shapes.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstring>
#include <filesystem>

#include "optimized/io/safetensors.h"

namespace fs = std::filesystem;
using namespace statecut;

TEST(Golden_ShippedModel, isTheSharedCheckpointRoundedToBf16) {
  const fs::path asset = fs::path(STATECUT_SOURCE_DIR) / "assets" / "byte_delta_net_4L" / "model.safetensors";
  const fs::path orig = fs::path(STATECUT_SOURCE_DIR) / ".." / "shared" / "models" / "byte_delta_net_4L" / "model.safetensors";
  if (!fs::exists(orig)) GTEST_SKIP() << "no ../shared/models";
  const auto a = io::SafetensorsFile::open(asset.string()), o = io::SafetensorsFile::open(orig.string());
  ASSERT_EQ(a.names().size(), o.names().size());
  for (const auto& name : o.names()) {
    const auto& to = o.tensor(name);
    const auto& ta = a.tensor(name);
    ASSERT_EQ(to.dtype, io::DType::F32) << name;
    ASSERT_EQ(ta.dtype, io::DType::BF16) << name;
    ASSERT_EQ(ta.shape, to.shape) << name;
    std::vector<float> f(to.numel());
    std::memcpy(f.data(), to.data, to.nbytes);
    const torch::Tensor want = torch::from_blob(f.data(), {to.numel()}, torch::kFloat32).to(torch::kBFloat16);
    ASSERT_EQ(ta.nbytes, static_cast<size_t>(want.numel() * 2)) << name;
    EXPECT_EQ(std::memcmp(ta.data, want.data_ptr(), ta.nbytes), 0) << name << " is not RNE(bf16) of the original";
  }
}

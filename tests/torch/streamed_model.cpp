// StreamedModel (optimized/models/streamed_model.h): every family run with one block's weights resident at a time
// gives exactly the whole model's logits and layer boundaries (the same weights, converted the same way, through the
// same operations: bitwise), holds at most one block's (or the outer tensors') bytes at once, and calibration
// through it collects exactly what it collects on the whole model.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>

#include "optimized/models/model_registry.h"
#include "optimized/models/streamed_model.h"
#include "optimized/prune/calibration.h"
#include "tests/torch/pipeline_util.h"

namespace fs = std::filesystem;
using namespace statecut;

namespace {

const fs::path kStreamRoot = pipeline_test::fixture_root();

/// The fixtures of every registered family with linear-attention layers.
const char* const kStreamFamilies[] = {"fla_delta_net", "fla_gated_deltanet", "hf_mamba2", "hf_qwen3_5", "hf_qwen3_next"};

torch::Tensor stream_ids(const CausalLM& m, int64_t n, int64_t len, uint64_t seed) {
  torch::manual_seed(seed);
  return torch::randint(0, std::min<int64_t>(m.vocab_size(), 256), {n, len}, torch::kInt64);
}

/// The most bytes one block boundary may hold, formed from the whole model's own tensors (not from StreamedModel):
/// the largest "layers.<i>." group, or every outer tensor (before the head: the head may be the tied embedding).
int64_t largest_block_bytes(CausalLM& whole) {
  static const std::regex layer_re(R"((^|\.)layers\.(\d+)\.)");
  std::map<int64_t, int64_t> bytes;  // layer → bytes; −1: outer
  for (const auto& [name, t] : whole.named_parameters()) {
    std::smatch m;
    const int64_t b = std::regex_search(name, m, layer_re) ? std::stoll(m[2].str()) : -1;
    bytes[b] += static_cast<int64_t>(t.nbytes());
  }
  int64_t most = 0;
  for (const auto& [b, n] : bytes) most = std::max(most, n);
  return most;
}

}  // namespace

TEST(Unit_StreamedModel, everyFamilyStreamedGivesTheWholeModelsLogitsAndBoundaries) {
  const uint64_t seed = pipeline_test::master_seed();
  for (const char* family : kStreamFamilies) {
    const fs::path dir = kStreamRoot / family;
    if (!fs::exists(dir / "config.json")) GTEST_SKIP() << "no fixture " << dir;
    SCOPED_TRACE(std::string(family) + " seed " + std::to_string(seed));
    auto whole = load_causal_lm(dir.string(), torch::kFloat32, torch::kCPU);
    // min_numel 1 streams every tensor, norms and decay parameters included: a family that kept anything derived
    // from a weight at construction, or read a weight outside the block it announced, fails here.
    StreamedModel streamed = StreamedModel::load(dir.string(), torch::kFloat32, /*min_numel=*/1);
    const torch::Tensor ids = stream_ids(*whole, 2, 33, seed);
    torch::NoGradGuard ng;
    ForwardOptions fo;
    fo.capture_boundary = true;
    const ForwardResult want = whole->forward(ids, fo);
    const ForwardResult got = streamed.model().forward(ids, streamed.options(fo));
    EXPECT_TRUE(torch::equal(got.logits, want.logits)) << "max |Δ| " << (got.logits - want.logits).abs().max().item<double>();
    ASSERT_EQ(got.boundary.size(), want.boundary.size());
    for (size_t l = 0; l < want.boundary.size(); ++l) {
      if (!want.boundary[l].q.defined()) continue;  // a softmax layer
      EXPECT_TRUE(torch::equal(got.boundary[l].q, want.boundary[l].q)) << "layer " << l;
      EXPECT_TRUE(torch::equal(got.boundary[l].k, want.boundary[l].k)) << "layer " << l;
      EXPECT_TRUE(torch::equal(got.boundary[l].attn_in, want.boundary[l].attn_in)) << "layer " << l;
    }
    // Every tensor was streamed, and no more than the largest block (or the outer tensors) was ever held at once.
    int64_t all_bytes = 0;
    for (const auto& [n, t] : whole->named_parameters()) all_bytes += static_cast<int64_t>(t.nbytes());
    EXPECT_EQ(streamed.streamed_bytes(), all_bytes);
    EXPECT_EQ(streamed.peak_resident_bytes(), largest_block_bytes(*whole));
    EXPECT_LT(streamed.peak_resident_bytes(), all_bytes);
  }
}

// ForwardOptions::on_boundary: each linear-attention layer's boundary is handed over once, in layer order, as soon as
// its block has run (the same tensors a forward without the callback returns), and dropped from the result; with a
// StreamedModel's hook the handed-over layer is the resident block. Calibration folds boundaries this way, so its
// pass holds one layer's boundary instead of every layer's.
TEST(Unit_StreamedModel, boundariesAreHandedOverLayerByLayerAndDropped) {
  const uint64_t seed = pipeline_test::master_seed();
  for (const char* family : kStreamFamilies) {
    const fs::path dir = kStreamRoot / family;
    if (!fs::exists(dir / "config.json")) GTEST_SKIP() << "no fixture " << dir;
    SCOPED_TRACE(std::string(family) + " seed " + std::to_string(seed));
    StreamedModel s = StreamedModel::load(dir.string(), torch::kFloat32, 1);
    auto whole = load_causal_lm(dir.string(), torch::kFloat32, torch::kCPU);
    const torch::Tensor ids = stream_ids(*whole, 2, 17, seed);
    torch::NoGradGuard ng;
    ForwardOptions fo;
    fo.capture_boundary = true;
    const ForwardResult want = whole->forward(ids, fo);
    std::vector<int64_t> order;
    int64_t entered = -2;
    fo.logits = false;
    fo = s.options(fo);
    const BlockHook enter = fo.before_block;
    fo.before_block = [&](int64_t b) { entered = b, enter(b); };
    fo.on_boundary = [&](int64_t layer, LayerBoundary& bd) {
      order.push_back(layer);
      EXPECT_EQ(entered, layer) << "handed over while its block is resident";
      EXPECT_TRUE(torch::equal(bd.q, want.boundary[layer].q)) << "layer " << layer;
      EXPECT_TRUE(torch::equal(bd.attn_in, want.boundary[layer].attn_in)) << "layer " << layer;
    };
    const ForwardResult got = s.model().forward(ids, fo);
    std::vector<int64_t> linear;
    for (size_t l = 0; l < want.boundary.size(); ++l)
      if (want.boundary[l].q.defined()) linear.push_back(static_cast<int64_t>(l));
    EXPECT_EQ(order, linear);
    for (const auto& b : got.boundary) EXPECT_FALSE(b.q.defined()) << "dropped after the hand-over";
    EXPECT_FALSE(got.logits.defined()) << "logits = false stops before the head";
  }
}

// A tensor outside the resident block holds no storage: a read of it cannot silently see stale weights.
TEST(Unit_StreamedModel, tensorsOutsideTheResidentBlockHoldNoStorage) {
  const fs::path dir = kStreamRoot / "fla_delta_net";
  if (!fs::exists(dir / "config.json")) GTEST_SKIP() << "no fixture " << dir;
  StreamedModel s = StreamedModel::load(dir.string(), torch::kFloat32, 1);
  ASSERT_GE(s.num_blocks(), 2);
  EXPECT_EQ(s.resident_bytes(), 0) << "nothing resident after load";
  s.enter(1);
  int64_t held = 0;
  for (const auto& [name, t] : s.model().named_parameters()) {
    const bool in_block = name.find("layers.1.") != std::string::npos;
    EXPECT_EQ(t.numel() > 0, in_block) << name;
    held += static_cast<int64_t>(t.nbytes());
  }
  EXPECT_EQ(held, s.resident_bytes());
  s.enter(-1);  // the embedding alone
  for (const auto& [name, t] : s.model().named_parameters())
    EXPECT_EQ(t.numel() > 0, name.find("embed") != std::string::npos) << name;
  s.release_all();
  EXPECT_EQ(s.resident_bytes(), 0);
}

// Tensors below the threshold are copied at load and stay (a real model's norms, biases and short convs); only the
// others are streamed.
TEST(Unit_StreamedModel, tensorsBelowTheThresholdAreLoadedAndStay) {
  const fs::path dir = kStreamRoot / "fla_gated_deltanet";
  if (!fs::exists(dir / "config.json")) GTEST_SKIP() << "no fixture " << dir;
  constexpr int64_t kMin = 1024;
  auto whole = load_causal_lm(dir.string(), torch::kFloat32, torch::kCPU);
  StreamedModel s = StreamedModel::load(dir.string(), torch::kFloat32, kMin);
  const auto params = whole->named_parameters();
  const std::map<std::string, torch::Tensor> want(params.begin(), params.end());
  int64_t large = 0, small = 0;
  for (const auto& [name, t] : s.model().named_parameters()) {
    if (want.at(name).numel() >= kMin) {
      EXPECT_EQ(t.numel(), 0) << name << ": streamed, so without storage until its block is entered";
      large += static_cast<int64_t>(want.at(name).nbytes());
    } else {
      EXPECT_TRUE(torch::equal(t, want.at(name))) << name;
      ++small;
    }
  }
  EXPECT_GT(small, 0);
  EXPECT_EQ(s.streamed_bytes(), large);
}

TEST(Unit_StreamedModel, calibrationStreamedCollectsExactlyWhatItCollectsWhole) {
  const fs::path dir = kStreamRoot / "hf_qwen3_5";
  if (!fs::exists(dir / "config.json")) GTEST_SKIP() << "no fixture " << dir;
  const uint64_t seed = pipeline_test::master_seed();
  auto whole = load_causal_lm(dir.string(), torch::kFloat32, torch::kCPU);
  StreamedModel s = StreamedModel::load(dir.string(), torch::kFloat32, 1);
  const torch::Tensor ids = stream_ids(*whole, 3, 17, seed);
  CalibrationNeeds nd;
  nd.features = nd.pca = nd.rms = true;
  nd.batch = 2;
  const Calibration want = calibrate(*whole, ids, nd);
  const Calibration got = calibrate(s.model(), ids, nd, {}, s.options().before_block);
  ASSERT_EQ(got.layers.size(), want.layers.size());
  for (size_t l = 0; l < want.layers.size(); ++l) {
    for (size_t h = 0; h < want.layers[l].r.size(); ++h)
      EXPECT_TRUE(torch::equal(got.layers[l].r[h], want.layers[l].r[h])) << "layer " << l << " head " << h << " seed " << seed;
    EXPECT_TRUE(torch::equal(got.layers[l].rms(), want.layers[l].rms())) << "layer " << l;
    EXPECT_TRUE(torch::equal(got.layers[l].pca_outer_q[0], want.layers[l].pca_outer_q[0])) << "layer " << l;
  }
  nd = CalibrationNeeds();
  nd.grad = true;
  try {
    calibrate(s.model(), ids, nd, {}, s.options().before_block);
    FAIL() << "the gradient pass cannot stream";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("gradient pass"), std::string::npos) << e.what();
  }
}

namespace {
void put_file(const fs::path& f, const std::string& text) {
  fs::create_directories(f.parent_path());
  std::ofstream(f) << text;
}
}  // namespace

// `prune --stream-weights auto` decides on the memory a new allocation can get: /proc/meminfo's MemAvailable, or less
// where a cgroup limit of the process or of an ancestor leaves less (containers and CI jobs; /proc/meminfo shows the
// host). A fake / with both cgroup versions: the tightest level wins, reclaimable file pages count as room, "max" and
// v1's 2^63 are no limit.
TEST(Unit_StreamedModel, availableMemoryHonoursTheTightestCgroupLimit) {
  pipeline_test::TempDir d("memroot");
  const fs::path r = d.path;
  put_file(r / "proc/meminfo", "MemTotal:       24000000 kB\nMemAvailable:   20000000 kB\n");
  EXPECT_EQ(available_memory_bytes(r.string()), int64_t{20000000} * 1024) << "no cgroup file: MemAvailable";
  put_file(r / "proc/self/cgroup", "4:memory:/job/step\n0::/\n");
  const fs::path v1 = r / "sys/fs/cgroup/memory";
  put_file(v1 / "memory.limit_in_bytes", "9223372036854771712\n");  // the root: no limit
  put_file(v1 / "memory.usage_in_bytes", "1000\n");
  put_file(v1 / "job/memory.limit_in_bytes", "3000000000\n");
  put_file(v1 / "job/memory.usage_in_bytes", "1000000000\n");
  put_file(v1 / "job/memory.stat", "cache 5\ntotal_inactive_file 200000000\n");
  put_file(v1 / "job/step/memory.limit_in_bytes", "9223372036854771712\n");
  put_file(v1 / "job/step/memory.usage_in_bytes", "900000000\n");
  EXPECT_EQ(available_memory_bytes(r.string()), int64_t{3000000000} - 1000000000 + 200000000) << "the parent's limit";
  put_file(v1 / "job/step/memory.limit_in_bytes", "1500000000\n");
  EXPECT_EQ(available_memory_bytes(r.string()), int64_t{1500000000} - 900000000) << "the tighter leaf";
  put_file(r / "proc/self/cgroup", "0::/pod\n");  // cgroup v2
  const fs::path v2 = r / "sys/fs/cgroup";
  put_file(v2 / "pod/memory.max", "max\n");
  put_file(v2 / "pod/memory.current", "5\n");
  EXPECT_EQ(available_memory_bytes(r.string()), int64_t{20000000} * 1024) << "v2 'max': no limit";
  put_file(v2 / "pod/memory.max", "4000000000\n");
  put_file(v2 / "pod/memory.current", "1000000000\n");
  put_file(v2 / "pod/memory.stat", "anon 1\ninactive_file 100\n");
  EXPECT_EQ(available_memory_bytes(r.string()), int64_t{3000000100});
}

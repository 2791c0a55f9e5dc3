// `statecut train` (optimized/train/init.h + trainer.h with a config): a fresh model of every family builds from its
// config, runs, and is the same for the same seed; the init follows the stated rules; training a tiny DeltaNet from
// scratch lowers the loss and writes a checkpoint that loads back.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "optimized/io/checkpoint.h"
#include "optimized/train/init.h"
#include "optimized/train/trainer.h"
#include "tests/test_files.h"
#include "tests/torch/train_util.h"

namespace fs = std::filesystem;
using namespace statecut;

namespace {

class Train_Init : public ::testing::TestWithParam<std::string> {};

TEST_P(Train_Init, freshModelRunsAndIsTheSameForTheSameSeed) {
  REQUIRE_FIXTURE(GetParam());
  const std::string cfg_path = statecut::test::fixture_dir(GetParam()) + "/config.json";
  const auto cfg = io::read_json_file(cfg_path);
  auto a = fresh_causal_lm(cfg, cfg_path, torch::kFloat32, torch::kCPU, 7);
  auto b = fresh_causal_lm(cfg, cfg_path, torch::kFloat32, torch::kCPU, 7);
  auto c = fresh_causal_lm(cfg, cfg_path, torch::kFloat32, torch::kCPU, 8);
  const auto pa = a->named_parameters(), pb = b->named_parameters(), pc = c->named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  int differ = 0;
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_TRUE(torch::equal(pa[i].second, pb[i].second)) << pa[i].first;
    differ += torch::equal(pa[i].second, pc[i].second) ? 0 : 1;
  }
  EXPECT_GT(differ, 0) << "the seed changes nothing";
  torch::NoGradGuard no_grad;
  const auto logits = a->forward(train_test::random_ids(1, 40, a->vocab_size(), 3)).logits;
  EXPECT_TRUE(torch::isfinite(logits).all().item<bool>());
}

INSTANTIATE_TEST_SUITE_P(Families, Train_Init, ::testing::ValuesIn(train_test::families()),
                         [](const auto& info) { return info.param; });

/// The rules of init.h on fla DeltaNet and Qwen3.5: σ of linear weights, the prenorm rescale, norms, conv bounds.
TEST(Train_Init, followsTheLibrariesRules) {
  const nlohmann::json fla = {{"model_type", "delta_net"}, {"num_hidden_layers", 8}, {"initializer_range", 0.02}};
  const auto w = initial_parameter(fla, "model.layers.0.attn.q_proj.weight", {256, 256}, 1);
  EXPECT_NEAR(w.std().item<double>(), 0.02, 0.002);
  EXPECT_NEAR(w.mean().item<double>(), 0.0, 0.001);
  const auto o = initial_parameter(fla, "model.layers.0.attn.o_proj.weight", {256, 256}, 1);
  EXPECT_NEAR(o.std().item<double>(), 0.02 / 4.0, 0.0005);  // ÷ √(2·8)
  EXPECT_TRUE(torch::equal(initial_parameter(fla, "model.norm.weight", {8}, 1), torch::ones({8}, torch::kFloat64)));
  const auto conv = initial_parameter(fla, "model.layers.0.attn.q_conv1d.weight", {64, 1, 4}, 1);
  EXPECT_LE(conv.abs().max().item<double>(), 0.5);
  EXPECT_GT(conv.abs().max().item<double>(), 0.4);
  const nlohmann::json qwen = {{"model_type", "qwen3_5_text"}, {"num_hidden_layers", 4}};
  EXPECT_TRUE(torch::equal(initial_parameter(qwen, "model.layers.0.input_layernorm.weight", {8}, 1),
                           torch::zeros({8}, torch::kFloat64)));
  EXPECT_TRUE(torch::equal(initial_parameter(qwen, "model.layers.0.linear_attn.norm.weight", {8}, 1),
                           torch::ones({8}, torch::kFloat64)));
  const auto A = initial_parameter(qwen, "model.layers.0.linear_attn.A_log", {1000}, 1).exp();
  EXPECT_GT(A.min().item<double>(), 0.0);
  EXPECT_LT(A.max().item<double>(), 16.0);
  const nlohmann::json gdn = {{"model_type", "gated_deltanet"}};
  const auto dt = torch::softplus(initial_parameter(gdn, "model.layers.0.attn.dt_bias", {1000}, 1));
  EXPECT_GE(dt.min().item<double>(), 0.001 * 0.999);
  EXPECT_LE(dt.max().item<double>(), 0.1 * 1.001);
}

/// `train` from a config, in fp32 and in bf16 mixed precision: the tiny DeltaNet learns and loads back; the bf16 run's
/// checkpoint holds its fp32 masters (values bf16 cannot represent), not the bf16 copy that computed.
class Train_Scratch : public ::testing::TestWithParam<TrainPrecision> {};

TEST_P(Train_Scratch, tinyDeltaNetLearnsAndLoadsBack) {
  REQUIRE_FIXTURE("fla_delta_net");
  statecut::test::TempDir tmp("train-scratch");
  FinetuneOptions o;
  o.config = statecut::test::fixture_dir("fla_delta_net") + "/config.json";
  o.full = true;
  o.no_kd = true;
  o.text = {std::string(STATECUT_SOURCE_DIR) + "/assets/corpora/pydocs_train.txt"};
  o.out = tmp / "out";
  o.steps = 30;
  o.seq_len = 64;
  o.batch = 4;
  o.lr = 3e-3;
  o.warmup = 3;
  o.seed = train_test::seed();
  o.precision = GetParam();
  const auto r = finetune(o);
  ASSERT_TRUE(r.completed);
  ASSERT_EQ(r.history.size(), 30u);
  // Uniform guessing is ln 256 = 5.55 nats; 30 small steps learn at least the byte frequencies.
  EXPECT_GT(r.history.front().ce, 5.0);
  EXPECT_LT(r.history.back().ce, 4.0);
  auto m = load_causal_lm(o.out, torch::kFloat32, torch::kCPU);
  EXPECT_EQ(m->vocab_size(), 256);
  int64_t beyond_bf16 = 0;
  for (const auto& [n, t] : m->named_parameters())
    beyond_bf16 += (t != t.to(torch::kBFloat16).to(torch::kFloat32)).sum().item<int64_t>();
  EXPECT_GT(beyond_bf16, 0) << "the checkpoint holds bf16-rounded values, not the fp32 masters";
  const auto rec = io::read_json_file(tmp / "out/statecut.json");
  ASSERT_TRUE(rec.contains("train"));
  EXPECT_EQ(rec["train"]["recipe"]["mode"], "scratch");
  EXPECT_EQ(rec["train"]["recipe"]["precision"], GetParam() == TrainPrecision::Bf16 ? "bf16" : "f32");
  EXPECT_EQ(io::read_json_file(tmp / "out/config.json")["model_type"], "delta_net");
}

INSTANTIATE_TEST_SUITE_P(Precisions, Train_Scratch, ::testing::Values(TrainPrecision::Full, TrainPrecision::Bf16),
                         [](const auto& info) { return std::string(info.param == TrainPrecision::Bf16 ? "bf16" : "f32"); });

}  // namespace

// What a config.json leaves out or says twice is read as transformers reads it, or refused — never read another way
// without a word (the config-key audit of 2026-12-04):
// - Qwen3.5 / Qwen3-Next: no partial_rotary_factor rotates a quarter of each head (their configs' __post_init__), no
//   head_dim is 256, no num_key_value_heads 4 / 2, no num_experts 512 (a sparse-MoE model, refused);
// - Mamba-2: no n_groups is 8 groups (Mamba2Config's default, Codestral's);
// - tie_word_embeddings beside a stored lm_head.weight that differs from the embeddings: refused as ambiguous; one
//   equal to them loads; the multimodal Qwen3.5 config whose two levels disagree on the tie: refused.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "optimized/models/model_registry.h"
#include "tests/torch/golden_hf_util.h"
#include "tests/torch/verify_test_util.h"

namespace {

using namespace statecut;
using nlohmann::json;
using verify_test::copy_checkpoint;
using verify_test::edit_json;
using verify_test::edit_tensor;
using verify_test::TempDir;
namespace fs = std::filesystem;

json fixture_config(const std::string& dir) {
  std::ifstream f(dir + "/config.json");
  return json::parse(f);
}

/// The one-line error building `config` over `dir`'s weights gives ("" when it builds).
std::string build_error(const json& config, const std::string& dir) {
  try {
    build_causal_lm(config, WeightSource::open_dir(dir), torch::kFloat32, torch::kCPU);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace

// The fixtures rotate a quarter of each 32-wide head (partial_rotary_factor 0.25, written twice): with the key removed
// from both places the model must still match transformers' golden, as transformers itself would read that config.
TEST(Golden_ConfigDefaults, qwenWithoutARotaryFactorRotatesAQuarterOfEachHead) {
  for (const char* name : {"hf_qwen3_5", "hf_qwen3_next"}) {
    const std::string dir = golden_hf::fixture_dir(name);
    if (dir.empty()) GTEST_SKIP() << "fixture " << name << " not found";
    json c = fixture_config(dir);
    ASSERT_EQ(c["partial_rotary_factor"], 0.25) << name;
    c.erase("partial_rotary_factor");
    c["rope_parameters"].erase("partial_rotary_factor");
    auto model = build_causal_lm(c, WeightSource::open_dir(dir), torch::kFloat32, torch::kCPU);
    golden_hf::expect_matches_golden(*model, WeightSource::open_file(dir + "/golden.safetensors"), "run0",
                                     RecurrenceMode::Recurrent, 5e-4, name, /*n_hidden=*/5);
  }
}

// transformers renames the legacy layer types on load ("mamba" -> linear_attention, "attention" -> full_attention,
// remap_legacy_layer_types): a config written with them is the fixture's own model, not a refused one (audit 24 D7).
TEST(Golden_ConfigDefaults, qwenLegacyLayerTypeNamesAreTheCurrentOnes) {
  for (const char* name : {"hf_qwen3_5", "hf_qwen3_next"}) {
    const std::string dir = golden_hf::fixture_dir(name);
    if (dir.empty()) GTEST_SKIP() << "fixture " << name << " not found";
    json c = fixture_config(dir);
    ASSERT_TRUE(c["layer_types"].is_array()) << name;
    for (auto& t : c["layer_types"]) t = t == "full_attention" ? "attention" : "mamba";
    auto model = build_causal_lm(c, WeightSource::open_dir(dir), torch::kFloat32, torch::kCPU);
    golden_hf::expect_matches_golden(*model, WeightSource::open_file(dir + "/golden.safetensors"), "run0",
                                     RecurrenceMode::Recurrent, 5e-4, name, /*n_hidden=*/5);
  }
}

// The fixtures state head_dim 32, one key-value head and no experts; without the keys the config means transformers'
// defaults, which these weights do not have: the load names the tensor whose shape the default implies.
TEST(BadInput_ConfigDefaults, qwenWithoutHeadSizesTakesTransformersDefaults) {
  struct Case {
    const char* fixture;
    std::vector<const char*> keys;
    std::string needle;
  };
  // (2 heads: 4 key-value heads do not divide them; Qwen3-Next's 2 do, and its k_proj is then 2 x 32 rows.)
  for (const Case& k :
       {Case{"hf_qwen3_5", {"head_dim"}, "q_proj.weight: shape [128,64] but the config implies [1024,64]"},
        Case{"hf_qwen3_5", {"num_key_value_heads"}, "num_attention_heads must be a multiple of num_key_value_heads"},
        Case{"hf_qwen3_next", {"num_key_value_heads"}, "k_proj.weight: shape [32,64] but the config implies [64,64]"},
        Case{"hf_qwen3_next", {"num_experts", "mlp_only_layers"}, "layer 0 is a sparse-MoE layer (num_experts 512)"}}) {
    const std::string dir = golden_hf::fixture_dir(k.fixture);
    if (dir.empty()) GTEST_SKIP() << "fixture " << k.fixture << " not found";
    json c = fixture_config(dir);
    for (const char* key : k.keys) {
      ASSERT_TRUE(c.contains(key)) << k.fixture << " " << key;
      c.erase(key);
    }
    const std::string err = build_error(c, dir);
    EXPECT_NE(err.find(k.needle), std::string::npos) << k.fixture << " without " << k.keys.front() << ": " << err;
  }
}

TEST(BadInput_ConfigDefaults, mamba2WithoutNGroupsHasEightGroups) {
  const std::string dir = golden_hf::fixture_dir("hf_mamba2");
  if (dir.empty()) GTEST_SKIP() << "fixture hf_mamba2 not found";
  json c = fixture_config(dir);
  ASSERT_EQ(c["n_groups"], 1);
  ASSERT_EQ(c["num_heads"], 4);
  c.erase("n_groups");
  EXPECT_NE(build_error(c, dir).find("num_heads must be a multiple of n_groups"), std::string::npos);
  c["num_heads"] = 8;  // 8 groups of one 16-wide head: the weights (4 heads of 32, 1 group) no longer fit
  c["head_dim"] = 16;
  EXPECT_NE(build_error(c, dir).find("in_proj.weight: shape"), std::string::npos) << build_error(c, dir);
}

// Each family: the fixture made tied (tie_word_embeddings true) keeps its own random lm_head.weight, which differs
// from the embeddings: refused naming the file. With the head replaced by a copy of the embeddings it loads, and its
// logits are those of the same model with the head dropped.
TEST(BadInput_ConfigDefaults, tiedConfigBesideADifferentStoredHeadIsRefused) {
  struct Case {
    const char* fixture;
    const char* embeddings;
  };
  for (const Case& k : {Case{"fla_delta_net", "model.embeddings.weight"}, Case{"hf_mamba2", "backbone.embeddings.weight"},
                        Case{"hf_qwen3_5", "model.embed_tokens.weight"}}) {
    const std::string src = golden_hf::fixture_dir(k.fixture);
    if (src.empty()) GTEST_SKIP() << "fixture " << k.fixture << " not found";
    TempDir tmp("tied-head");
    const std::string dir = tmp / "ckpt";
    copy_checkpoint(src, dir);
    edit_json(dir + "/config.json", [](json& j) { j["tie_word_embeddings"] = true; });
    try {
      load_causal_lm(dir, torch::kFloat32, torch::kCPU);
      ADD_FAILURE() << k.fixture << ": a tied config loaded beside a different lm_head.weight";
    } catch (const std::exception& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind(dir + "/model.safetensors: lm_head.weight differs from the embeddings (" + k.embeddings +
                              ") while config.json ties them",
                          0),
                0u)
          << msg;
    }
    const torch::Tensor emb = WeightSource::open_dir(dir).raw(k.embeddings);
    edit_tensor(dir, "lm_head.weight", [&](torch::Tensor& t) { t.copy_(emb); });
    auto with_head = load_causal_lm(dir, torch::kFloat32, torch::kCPU);
    const torch::Tensor ids = torch::arange(0, 12, torch::kInt64).remainder(7).reshape({1, 12});
    const torch::Tensor a = with_head->forward(ids).logits;
    // the same checkpoint without the stored head
    statecut::io::SafetensorsWriter w;
    {
      const auto f = statecut::io::SafetensorsFile::open(dir + "/model.safetensors");
      for (const auto& n : f.names())
        if (n != "lm_head.weight") w.add(f.tensor(n));
      w.set_metadata(f.metadata());
      w.write(dir + "/model.safetensors.new");
    }
    fs::rename(dir + "/model.safetensors.new", dir + "/model.safetensors");
    const torch::Tensor b = load_causal_lm(dir, torch::kFloat32, torch::kCPU)->forward(ids).logits;
    EXPECT_TRUE(torch::equal(a, b)) << k.fixture;
  }
}

TEST(BadInput_ConfigDefaults, nestedQwenWhoseTwoTieKeysDisagreeIsRefused) {
  const std::string dir = golden_hf::fixture_dir("hf_qwen3_5");
  if (dir.empty()) GTEST_SKIP() << "fixture hf_qwen3_5 not found";
  json text = fixture_config(dir);
  text["tie_word_embeddings"] = true;
  const json nested = {{"model_type", "qwen3_5"}, {"tie_word_embeddings", false}, {"text_config", text}};
  EXPECT_NE(build_error(nested, dir).find("'tie_word_embeddings' is false but text_config's is true: which output head "
                                          "is meant is ambiguous"),
            std::string::npos)
      << build_error(nested, dir);
}

// transformers divides by decoder_sparse_step (ZeroDivisionError at 0); statecut read a non-positive step as "no
// sparse layer" and built a dense model of a config transformers cannot build.
TEST(BadInput_ConfigDefaults, qwenNextSparseStepMustBePositive) {
  const std::string dir = golden_hf::fixture_dir("hf_qwen3_next");
  if (dir.empty()) GTEST_SKIP() << "fixture hf_qwen3_next not found";
  json c = fixture_config(dir);
  c["num_experts"] = 4;
  for (const int step : {0, -2}) {
    c["decoder_sparse_step"] = step;
    EXPECT_NE(build_error(c, dir).find("'decoder_sparse_step' must be positive, got " + std::to_string(step)),
              std::string::npos)
        << build_error(c, dir);
  }
}

// Every size, head count and head dim of a Qwen3.5 / Qwen3-Next config is refused at 0 on its own (a mutation
// sample of optimized/models left the rule's ors turned into ands unheld: dk 0 beside a positive dv passed it). The
// layer count has its own message (cfg_layer_count); the others share the rule's.
TEST(BadInput_ConfigDefaults, qwenEachSizeAtZeroIsRefusedOnItsOwn) {
  for (const char* name : {"hf_qwen3_5", "hf_qwen3_next"}) {
    const std::string dir = golden_hf::fixture_dir(name);
    if (dir.empty()) GTEST_SKIP() << "fixture " << name << " not found";
    for (const char* key : {"vocab_size", "hidden_size", "intermediate_size", "linear_num_key_heads",
                            "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim",
                            "linear_conv_kernel_dim", "num_attention_heads", "num_key_value_heads"}) {
      json c = fixture_config(dir);
      c[key] = 0;
      EXPECT_NE(build_error(c, dir).find("sizes, head counts and head dims must be positive"), std::string::npos)
          << name << " " << key << " 0: " << build_error(c, dir);
    }
  }
}

// layer_types that is not a list ("full_attention", 4, an object) or holds a non-string is refused, as transformers'
// validation refuses it; it was read as absent, and the default every-4th-full layout ran without a word. null is
// absent, as in transformers.
TEST(BadInput_ConfigDefaults, qwenLayerTypesThatIsNotAListOfTypesIsRefused) {
  for (const char* name : {"hf_qwen3_5", "hf_qwen3_next"}) {
    const std::string dir = golden_hf::fixture_dir(name);
    if (dir.empty()) GTEST_SKIP() << "fixture " << name << " not found";
    for (const json& bad : {json("full_attention"), json(4), json{{"a", 1}}}) {
      json c = fixture_config(dir);
      c["layer_types"] = bad;
      EXPECT_NE(build_error(c, dir).find("'layer_types': expected a list of"), std::string::npos)
          << name << " " << bad.dump() << ": " << build_error(c, dir);
    }
    json c = fixture_config(dir);
    c["layer_types"][0] = 7;
    EXPECT_NE(build_error(c, dir).find("'layer_types': unknown layer type '7'"), std::string::npos) << build_error(c, dir);
    c["layer_types"] = nullptr;  // the default layout: every 4th layer full attention, the fixtures' own
    EXPECT_EQ(build_error(c, dir), "") << name;
    c["full_attention_interval"] = 4.0;  // only arithmetic is done with it, so an integral float reads as in Python
    EXPECT_EQ(build_error(c, dir), "") << name;
    c["full_attention_interval"] = 4.5;
    EXPECT_NE(build_error(c, dir).find("'full_attention_interval': expected an integer"), std::string::npos) << name;
  }
}

// transformers' Mamba-2 divides the sequence into chunk_size pieces: 0 or a negative size cannot run there and is
// refused, naming the key (statecut ignored it: verify passed and prune copied it); absent is its 256.
TEST(BadInput_ConfigDefaults, mamba2ChunkSizeMustBePositive) {
  const std::string dir = golden_hf::fixture_dir("hf_mamba2");
  if (dir.empty()) GTEST_SKIP() << "fixture hf_mamba2 not found";
  for (const int bad : {0, -64}) {
    json c = fixture_config(dir);
    c["chunk_size"] = bad;
    EXPECT_NE(build_error(c, dir).find("'chunk_size' must be positive"), std::string::npos) << bad;
  }
  json c = fixture_config(dir);
  c.erase("chunk_size");
  EXPECT_EQ(build_error(c, dir), "");
}

// fla's DeltaNet and Gated DeltaNet layers assert attn_mode in {chunk, fused_recurrent}: another mode cannot load in
// fla, and was passed by verify and carried into pruned checkpoints.
TEST(BadInput_ConfigDefaults, flaAttnModeOtherThanChunkOrFusedRecurrentIsRefused) {
  for (const char* name : {"fla_delta_net", "fla_gated_deltanet"}) {
    const std::string dir = golden_hf::fixture_dir(name);
    if (dir.empty()) GTEST_SKIP() << "fixture " << name << " not found";
    json c = fixture_config(dir);
    for (const char* bad : {"bogus", "fused_chunk"}) {
      c["attn_mode"] = bad;
      EXPECT_NE(build_error(c, dir).find("'attn_mode': fla runs chunk or fused_recurrent, got '" + std::string(bad)),
                std::string::npos) << name << ": " << build_error(c, dir);
    }
    for (const json& good : {json("chunk"), json("fused_recurrent"), json(nullptr)}) {
      c["attn_mode"] = good;
      EXPECT_EQ(build_error(c, dir), "") << name << " " << good.dump();
    }
  }
}

// Qwen3-Next's mlp_only_layers is a list of layer indices: "all" or a list holding a non-integer cannot be read by
// transformers (`i in "all"` is a TypeError) and is refused naming the key; it was read as no layer.
TEST(BadInput_ConfigDefaults, qwenNextMlpOnlyLayersMustBeAListOfIndices) {
  const std::string dir = golden_hf::fixture_dir("hf_qwen3_next");
  if (dir.empty()) GTEST_SKIP() << "fixture hf_qwen3_next not found";
  for (const json& bad : {json("all"), json{0, "1"}, json(3)}) {
    json c = fixture_config(dir);
    c["mlp_only_layers"] = bad;
    EXPECT_NE(build_error(c, dir).find("'mlp_only_layers': expected a list of layer indices"), std::string::npos)
        << bad.dump() << ": " << build_error(c, dir);
  }
  for (const json& good : {json::array(), json{0, 2}, json(nullptr)}) {
    json c = fixture_config(dir);
    c["mlp_only_layers"] = good;
    EXPECT_EQ(build_error(c, dir), "") << good.dump();
  }
}

// Bad checkpoints through the real binary: each malformed checkpoint makes `statecut logits`, `statecut eval` and
// `statecut prune` exit 1 (not a signal) with exactly one stderr line naming the offending file and the problem,
// nothing on stdout, and no output file or directory left behind. The malformed checkpoints are made from a good fla
// DeltaNet one (truncated or corrupted safetensors, lying offsets, malformed or disagreeing config, unknown
// model_type, missing tensor or shard, NaN weights, finite weights whose forward overflows).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "optimized/io/safetensors.h"
#include "tests/cli/badinput_io_util.h"
#include "tests/io/io_test_util.h"

namespace statecut::io {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

/// A good small fla delta_net checkpoint: a committed copy, else the shared fixture, else the shipped model.
fs::path good_checkpoint() {
  const fs::path root(STATECUT_SOURCE_DIR);
  for (const fs::path& p : {root / "tests/data/fixtures/fla_delta_net", root / "../shared/fixtures/fla_delta_net",
                            root / "assets/byte_delta_net_4L"})
    if (fs::exists(p / "config.json") && fs::exists(p / "model.safetensors")) return p;
  return {};
}

using test::CliRun;
using test::slurp;
using test::expect_one_line_error;
using test::run_statecut;

bool has_torch_commands() {
  return run_statecut("info").out.find("\"torch\": true") != std::string::npos;
}

/// Copies the good checkpoint into dir/<name> and returns its path.
std::string copy_good(const TempDir& dir, const std::string& name = "ck") {
  const fs::path ck = dir.path / name;
  fs::create_directories(ck);
  for (const char* f : {"config.json", "model.safetensors"}) fs::copy_file(good_checkpoint() / f, ck / f);
  return ck.string();
}

/// Rewrites ck/model.safetensors through our writer after `edit` changed the tensor list.
template <typename Edit>
void rewrite_weights(const std::string& ck, Edit&& edit) {
  const std::string p = ck + "/model.safetensors";
  std::map<std::string, std::vector<unsigned char>> bytes;
  std::map<std::string, TensorView> views;
  {
    const auto f = SafetensorsFile::open(p);
    for (const auto& n : f.names()) {
      const auto& t = f.tensor(n);
      bytes[n].assign(reinterpret_cast<const unsigned char*>(t.data), reinterpret_cast<const unsigned char*>(t.data) + t.nbytes);
      views[n] = t;
    }
  }
  edit(views, bytes);
  SafetensorsWriter w;
  for (auto& [n, v] : views) w.add(n, v.dtype, v.shape, bytes[n].data(), bytes[n].size());
  w.write(p);
}

void edit_config(const std::string& ck, const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json c = nlohmann::json::parse(slurp(ck + "/config.json"));
  edit(c);
  std::ofstream(ck + "/config.json") << c.dump(2);
}

/// Inputs for the three checkpoint_commands in `d` and their command lines on `ck`; outputs go to d/pruned and d/logits.safetensors.
/// prune uses drrqr with a short calibration, so it loads the whole model as logits and eval do (the data-free
/// methods are checked below with l1).
std::vector<std::pair<std::string, std::string>> checkpoint_commands(const TempDir& d, const std::string& ck,
                                                          const std::string& prune_method = "drrqr") {
  std::ofstream text(d / "text.txt");
  for (int i = 0; i < 40; ++i) text << "Bad checkpoints must fail with one clear line. ";
  text.close();
  SafetensorsWriter w;
  const std::vector<int64_t> ids = {72, 101, 108, 108, 111, 33};
  w.add("input_ids", DType::I64, {1, 6}, ids.data(), ids.size() * sizeof(int64_t));
  w.write(d / "tokens.safetensors");
  return {
      {"logits", "logits --checkpoint " + ck + " --tokens " + (d / "tokens.safetensors") + " --out " +
                     (d / "logits.safetensors")},
      {"eval", "eval --checkpoint " + ck + " --text " + (d / "text.txt")},
      // Calibration options only for the methods that read them (l1/rand would warn that they are ignored).
      {"prune", "prune --checkpoint " + ck + " --method " + prune_method + " --ratio 0.5" +
                    (prune_method == "l1" || prune_method == "rand"
                         ? std::string()
                         : " --calib " + (d / "text.txt") + " --calib-seqs 1 --calib-len 64") +
                    " --out " + (d / "pruned")},
  };
}

/// Runs logits, eval and prune on `ck`; each must fail cleanly with a line containing every needle.
void expect_checkpoint_failure(const std::string& ck, const std::vector<std::string>& needles,
                          const std::string& prune_method = "drrqr", const std::vector<std::string>& absent = {}) {
  TempDir d("cli_io_run");
  const std::string out_dir = d / "pruned", out_file = d / "logits.safetensors";
  for (const auto& [cmd, args] : checkpoint_commands(d, ck, prune_method)) {
    SCOPED_TRACE(args);
    const std::string line = expect_one_line_error(run_statecut(args), "statecut " + cmd + ": error: ");
    for (const auto& n : needles) EXPECT_NE(line.find(n), std::string::npos) << "expected '" << n << "' in: " << line;
    for (const auto& n : absent) EXPECT_EQ(line.find(n), std::string::npos) << "unexpected '" << n << "' in: " << line;
    EXPECT_FALSE(fs::exists(out_dir)) << "partial output directory left behind";
    EXPECT_FALSE(fs::exists(out_file)) << "partial output file left behind";
  }
}

class BadInput_CliCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    if (good_checkpoint().empty()) GTEST_SKIP() << "no small fla checkpoint available";
    if (!has_torch_commands()) GTEST_SKIP() << "statecut built without LibTorch";
  }
  TempDir dir{"cli_badck"};
};

// The positive control: the unbroken copy passes all three checkpoint_commands, so each failure below is the file's doing.
TEST_F(BadInput_CliCheckpoint, goodCheckpointPassesEveryCommand) {
  const std::string ck = copy_good(dir);
  TempDir d("cli_io_good");
  for (const auto& [cmd, args] : checkpoint_commands(d, ck)) {
    const CliRun r = run_statecut(args);
    EXPECT_EQ(r.code, 0) << args << "\n" << r.err;
  }
  EXPECT_TRUE(fs::exists(d / "logits.safetensors"));
  EXPECT_TRUE(fs::exists(d / "pruned/model.safetensors"));
}

TEST_F(BadInput_CliCheckpoint, truncatedWeightsFile) {
  const std::string ck = copy_good(dir);
  fs::resize_file(ck + "/model.safetensors", fs::file_size(ck + "/model.safetensors") / 2);
  expect_checkpoint_failure(ck, {ck + "/model.safetensors", "run past the data buffer"});
}

TEST_F(BadInput_CliCheckpoint, headerLengthPastEndOfFile) {
  const std::string ck = copy_good(dir);
  std::fstream f(ck + "/model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
  const uint64_t n = uint64_t{1} << 24;  // 16 MiB header in a sub-MiB file
  f.write(reinterpret_cast<const char*>(&n), 8);
  f.close();
  expect_checkpoint_failure(ck, {ck + "/model.safetensors", "runs past the end of the file"});
}

TEST_F(BadInput_CliCheckpoint, lyingOffsetsInHeader) {
  const std::string ck = copy_good(dir);
  std::string b = slurp(ck + "/model.safetensors");
  const auto pos = b.find("\"data_offsets\":[0,");
  ASSERT_NE(pos, std::string::npos);
  b[pos + 16] = '8';  // [0,N] → [8,N]: the first tensor's span no longer matches its shape
  std::ofstream(ck + "/model.safetensors", std::ios::binary) << b;
  expect_checkpoint_failure(ck, {ck + "/model.safetensors", "does not match the byte span"});
}

TEST_F(BadInput_CliCheckpoint, malformedConfig) {
  const std::string ck = copy_good(dir);
  std::ofstream(ck + "/config.json") << "{\"model_type\": \"delta_net\", \"hidden_size\": 64,";
  // (io says "malformed JSON", prune's own config reader "invalid JSON": either names the file and the problem)
  expect_checkpoint_failure(ck, {ck + "/config.json", "JSON"});
}

TEST_F(BadInput_CliCheckpoint, unknownModelType) {
  const std::string ck = copy_good(dir);
  edit_config(ck, [](nlohmann::json& c) { c["model_type"] = "retnet"; });
  // (logits/eval: "unknown model_type 'retnet'"; prune: "model_type 'retnet' cannot be pruned (supported: ...)")
  expect_checkpoint_failure(ck, {"config.json", "model_type 'retnet'"});
}

// One config reader with the loader's strictness (issue 19.5): a head count that is not an integer — 16.5 (no
// truncation to 16) or the string "2" (no default) — is the same one-line error naming the file and the key in
// every command, prune's data-free path (which reads config.json before any weights) included. 2^64 - 1 is no int64
// (nlohmann reads it unsigned; it wrapped to -1 and was named as a head count that does not divide the key dim).
TEST_F(BadInput_CliCheckpoint, nonIntegerHeadCountNamesTheFileAndKey) {
  // 16.0 too: torch and Python refuse a float as a size (nn.Linear(64.0, ...)), so fla / transformers cannot load it
  for (const nlohmann::json& bad : {nlohmann::json(16.5), nlohmann::json("2"), nlohmann::json(16.0),
                                    nlohmann::json(UINT64_MAX)}) {
    SCOPED_TRACE(bad.dump());
    TempDir d("cli_badheads");
    const std::string ck = copy_good(d);
    edit_config(ck, [&](nlohmann::json& c) { c["num_heads"] = bad; });
    const std::vector<std::string> needles = {ck + "/config.json", "'num_heads'", "expected an integer"};
    expect_checkpoint_failure(ck, needles);  // logits, eval, prune --method drrqr
    const std::string line = test::expect_one_line_error(
        run_statecut("prune --checkpoint " + ck + " --method l1 --ratio 0.5 --out " + (d / "pruned")),
        "statecut prune: error: ");
    for (const auto& n : needles) EXPECT_NE(line.find(n), std::string::npos) << "expected '" << n << "' in: " << line;
    EXPECT_FALSE(fs::exists(d / "pruned"));
  }
}

TEST_F(BadInput_CliCheckpoint, configShapesDisagreeWithWeights) {
  const std::string ck = copy_good(dir);
  edit_config(ck, [](nlohmann::json& c) { c["vocab_size"] = c["vocab_size"].get<int>() + 1; });
  expect_checkpoint_failure(ck, {"model.safetensors", "shape"});
}

TEST_F(BadInput_CliCheckpoint, missingTensor) {
  const std::string ck = copy_good(dir);
  rewrite_weights(ck, [](auto& views, auto& bytes) {
    views.erase("model.norm.weight");
    bytes.erase("model.norm.weight");
  });
  // no other layout's name for it is in the folder either: the line names none (a source claiming to hold every name
  // would send the user to a 'model.language_model.norm.weight' that is not there)
  expect_checkpoint_failure(ck, {"missing tensor 'model.norm.weight'"}, "drrqr", {"the folder has"});
}

// Release layouts statecut does not read are named, not only found wanting (audit 24 D4): a tensor under another
// layout's name (mamba_ssm's backbone.embedding, here model.embedding), mamba_ssm's own config, weights only in
// pytorch_model.bin.
TEST_F(BadInput_CliCheckpoint, aTensorUnderAnotherLayoutsNameIsNamed) {
  const std::string ck = copy_good(dir);
  rewrite_weights(ck, [](auto& views, auto& bytes) {
    views["model.embedding.weight"] = views.at("model.embeddings.weight");
    bytes["model.embedding.weight"] = bytes.at("model.embeddings.weight");
    views.erase("model.embeddings.weight");
    bytes.erase("model.embeddings.weight");
  });
  expect_checkpoint_failure(ck, {"missing tensor 'model.embeddings.weight' (the folder has 'model.embedding.weight'"});
}

TEST_F(BadInput_CliCheckpoint, aMambaSsmConfigIsNamedAsSuch) {
  const std::string ck = copy_good(dir);
  std::ofstream(ck + "/config.json") << R"({"d_model": 64, "n_layer": 2, "vocab_size": 256, "ssm_cfg": {"layer": "Mamba2"}})";
  expect_checkpoint_failure(ck, {ck + "/config.json", "no \"model_type\" string", "a mamba_ssm config"});
}

TEST_F(BadInput_CliCheckpoint, weightsOnlyInPytorchModelBinAreNamedAsAFormatNotRead) {
  const std::string ck = copy_good(dir);
  fs::rename(ck + "/model.safetensors", ck + "/pytorch_model.bin");
  expect_checkpoint_failure(ck, {"no model.safetensors or model.safetensors.index.json (pytorch_model.bin is a format"});
}

// A stored weight in a layer the model binds that its config gives no use — here fla's attention-residual weights
// (attnres_*) under a config that does not ask for them — is refused: computing without it would be a silently wrong
// model. The config switch itself is refused by name.
TEST_F(BadInput_CliCheckpoint, weightOfAnUnimplementedOptionInABoundLayer) {
  const std::string ck = copy_good(dir);
  rewrite_weights(ck, [](auto& views, auto& bytes) {
    views["model.layers.1.attnres_proj.weight"] = views.at("model.norm.weight");
    bytes["model.layers.1.attnres_proj.weight"] = bytes.at("model.norm.weight");
  });
  expect_checkpoint_failure(ck, {ck + "/model.safetensors", "model.layers.1.attnres_proj.weight", "no use"});
  expect_checkpoint_failure(ck, {"model.layers.1.attnres_proj.weight"}, "l1");  // the data-free path binds too
  edit_config(ck, [](nlohmann::json& c) { c["attnres_block_size"] = 2; });
  expect_checkpoint_failure(ck, {ck + "/config.json", "'attnres_block_size'", "not supported"});
}

// A weight outside the layers that the config gives no use (an output-head bias, a final-norm bias, a stray tensor)
// is refused as one inside a layer is: logits, eval, generate and rank ran without it, silently, and prune copied it.
TEST_F(BadInput_CliCheckpoint, weightOutsideTheLayersThatTheConfigDoesNotUseIsRefused) {
  for (const char* extra : {"lm_head.bias", "model.norm.bias", "foo.bar"}) {
    SCOPED_TRACE(extra);
    const std::string ck = copy_good(dir);
    rewrite_weights(ck, [&](auto& views, auto& bytes) {
      views[extra] = views.at("model.norm.weight");
      bytes[extra] = bytes.at("model.norm.weight");
    });
    expect_checkpoint_failure(ck, {ck + "/model.safetensors", std::string(extra) + ": a weight that", "no use"});
    expect_checkpoint_failure(ck, {extra}, "l1");  // the data-free path too
    fs::remove_all(ck);
  }
}

// Weights of more layers than config.json's num_hidden_layers (a 2-layer checkpoint told it has 1, or a stray
// model.layers.7): every command once scored the truncation silently, and prune copied the extra layer unpruned into
// an output that contradicted its own config; now one line naming the first such tensor.
TEST_F(BadInput_CliCheckpoint, layersPastTheConfiguredCountAreRefused) {
  const std::string ck = copy_good(dir);
  edit_config(ck, [](nlohmann::json& c) { c["num_hidden_layers"] = c["num_hidden_layers"].get<int>() - 1; });
  expect_checkpoint_failure(ck, {ck + "/model.safetensors", "a layer past num_hidden_layers"});
  expect_checkpoint_failure(ck, {"a layer past num_hidden_layers"}, "l1");
}

// What is not the model's passes: the layers of a multi-token-prediction head (Qwen's mtp.*) and a rotary
// inverse-frequency buffer that older transformers saved inside a layer.
TEST_F(BadInput_CliCheckpoint, tensorsOutsideTheBoundLayersAreNotTheModelsConcern) {
  const std::string ck = copy_good(dir);
  rewrite_weights(ck, [](auto& views, auto& bytes) {
    for (const char* n : {"mtp.layers.0.norm.weight", "model.layers.0.attn.rotary_emb.inv_freq"}) {
      views[n] = views.at("model.norm.weight");
      bytes[n] = bytes.at("model.norm.weight");
    }
  });
  TempDir d("cli_io_extra");
  for (const auto& [cmd, args] : checkpoint_commands(d, ck)) {
    const CliRun r = run_statecut(args);
    EXPECT_EQ(r.code, 0) << args << "\n" << r.err;
  }
  // verify's load check agrees (it once failed both as unexpected tensors), and so for an lm_head.weight kept beside
  // tied embeddings, which the loaders set aside as transformers' tie_weights does
  const CliRun v = run_statecut("verify --quiet --only load --checkpoint " + ck);
  EXPECT_EQ(v.code, 0) << v.out << v.err;
  rewrite_weights(ck, [](auto& views, auto& bytes) {
    for (const auto& [n, v] : views)
      if (n.find("embed") != std::string::npos) {
        views["lm_head.weight"] = v;
        bytes["lm_head.weight"] = bytes.at(n);
        return;
      }
  });
  edit_config(ck, [](nlohmann::json& c) { c["tie_word_embeddings"] = true; });
  const CliRun tied = run_statecut("verify --quiet --only load --checkpoint " + ck);
  EXPECT_EQ(tied.code, 0) << tied.out << tied.err;
  const CliRun e = run_statecut("eval --checkpoint " + ck + " --text " + (d / "text.txt"));
  EXPECT_EQ(e.code, 0) << e.err;
}

TEST_F(BadInput_CliCheckpoint, nanWeight) {
  const std::string ck = copy_good(dir);
  rewrite_weights(ck, [](auto& views, auto& bytes) {
    auto& b = bytes.at("model.norm.weight");
    const TensorView& v = views.at("model.norm.weight");
    if (v.dtype == DType::F32) {
      const float nan = std::nanf("");
      std::memcpy(b.data() + 4, &nan, 4);
    } else {
      const uint16_t nan = 0x7FC0;  // bf16 and f16 NaN both have this bit pattern's exponent all ones
      std::memcpy(b.data() + 2, &nan, 2);
    }
  });
  expect_checkpoint_failure(ck, {"model.norm.weight", "NaN"});
}

// An integer tensor where a weight belongs (a quantised export, a relabelled span: same bytes, dtype I16): every
// command once cast it to the model dtype and ran with weights of arbitrary scale; only verify refused it.
TEST_F(BadInput_CliCheckpoint, integerWeightIsRefusedNotCast) {
  const std::string ck = copy_good(dir);
  rewrite_weights(ck, [](auto& views, auto&) {
    for (auto& [n, v] : views)
      if (n.find("q_proj.weight") != std::string::npos && (v.dtype == DType::BF16 || v.dtype == DType::F16)) {
        v.dtype = DType::I16;
        return;
      }
    for (auto& [n, v] : views)  // an F32 checkpoint: the same bytes as I32
      if (n.find("q_proj.weight") != std::string::npos) {
        v.dtype = DType::I32;
        return;
      }
  });
  expect_checkpoint_failure(ck, {"q_proj.weight", "dtype I", "F32, BF16, F16, F64"});
}

// model.safetensors or config.json as a link to nothing: named as a broken link, not as a missing file.
TEST_F(BadInput_CliCheckpoint, brokenLinksInTheCheckpointAreNamedAsLinks) {
  const std::string ck = copy_good(dir);
  fs::remove(ck + "/model.safetensors");
  fs::create_symlink(dir / "elsewhere.safetensors", ck + "/model.safetensors");
  expect_checkpoint_failure(ck, {ck + "/model.safetensors: a symbolic link to", "which does not exist"});
  const std::string ck2 = copy_good(dir, "cfg");
  fs::remove(ck2 + "/config.json");
  fs::create_symlink(ck2 + "/config.json", ck2 + "/config.json");
  expect_checkpoint_failure(ck2, {ck2 + "/config.json: a symbolic link loop"});
}

// A FIFO in place of the weights or of config.json blocked every command forever in open(); a config.json with a
// UTF-8 byte order mark, which Python's json (and so transformers and fla) refuses, was read as if it had none.
TEST_F(BadInput_CliCheckpoint, aFifoOrAByteOrderMarkIsRefusedAtOnce) {
  const std::string ck = copy_good(dir);
  fs::remove(ck + "/model.safetensors");
  ASSERT_EQ(::mkfifo((ck + "/model.safetensors").c_str(), 0600), 0);
  expect_checkpoint_failure(ck, {ck + "/model.safetensors: not a regular file"});
  const std::string ck2 = copy_good(dir, "cfg");
  fs::remove(ck2 + "/config.json");
  ASSERT_EQ(::mkfifo((ck2 + "/config.json").c_str(), 0600), 0);
  expect_checkpoint_failure(ck2, {ck2 + "/config.json: not a regular file"});
  const std::string ck3 = copy_good(dir, "bom");
  const std::string cfg = statecut::test::slurp(ck3 + "/config.json");
  std::ofstream(ck3 + "/config.json", std::ios::binary) << "\xEF\xBB\xBF" << cfg;
  expect_checkpoint_failure(ck3, {ck3 + "/config.json: starts with a UTF-8 byte order mark"});
}

// An F64 weight finite in the file but beyond the compute dtype's range (1e300) turned Inf in the cast, and eval
// blamed the text ("its forward overflows on this text"); the loader names the tensor and the range.
TEST_F(BadInput_CliCheckpoint, f64WeightBeyondTheComputeRangeIsNamedAtLoad) {
  const std::string ck = copy_good(dir);
  rewrite_weights(ck, [](auto& views, auto& bytes) {
    for (auto& [n, v] : views)
      if (n.find("layers.0.attn.q_proj.weight") != std::string::npos) {
        int64_t numel = 1;
        for (const int64_t d : v.shape) numel *= d;
        std::vector<unsigned char> b(static_cast<std::size_t>(numel) * 8);
        for (int64_t i = 0; i < numel; ++i) {
          const double big = i % 2 ? 1e300 : 0.25;
          std::memcpy(b.data() + i * 8, &big, 8);
        }
        bytes[n] = std::move(b);
        v.dtype = DType::F64;
        return;
      }
  });
  expect_checkpoint_failure(ck, {"layers.0.attn.q_proj.weight", "finite values beyond the range of float32"});
}

// A layer count no checkpoint can hold: prune (data-free) and verify once listed every configured layer before
// reading a tensor and ran out of memory; now one line at once. Verify on a model_type that is not a string reads it
// as missing: its table, the load row failed, exit 1 (it once printed nlohmann's type_error and nothing else).
TEST_F(BadInput_CliCheckpoint, absurdLayerCountAndNonStringModelTypeAreNamed) {
  const std::string ck = copy_good(dir);
  edit_config(ck, [](nlohmann::json& c) { c["num_hidden_layers"] = 1000000000000LL; });
  const std::string line = expect_one_line_error(
      run_statecut("prune --checkpoint " + ck + " --method l1 --ratio 0.5 --out " + (dir / "p")), "statecut prune: error: ");
  EXPECT_NE(line.find("num_hidden_layers 1000000000000 is more than any model has"), std::string::npos) << line;
  EXPECT_FALSE(fs::exists(dir / "p"));
  const std::string ck2 = copy_good(dir, "mt");
  edit_config(ck2, [](nlohmann::json& c) { c["model_type"] = 5; });
  const auto r = run_statecut("verify --quiet --only load,config --checkpoint " + ck2);
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_EQ(r.err.find("type_error"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("model_type"), std::string::npos) << r.out;
}

// Finite weights too large for fp32 (layer 0's q/k projections at 3e38; a bf16 copy: 2.99e38) pass the loader, and
// the calibration forward overflows: each calibrating method of prune says so in one line naming the checkpoint, the
// layer, the head and that the activations are not finite. drrqr said "select: head 0: M has NaN or Inf" (no file,
// no layer, no cause), pca "pca: covariance has NaN or Inf", swanda "top-k: scores contain NaN".
TEST_F(BadInput_CliCheckpoint, hugeFiniteWeightsAreACalibrationOverflowNamingCheckpointAndLayer) {
  const std::string ck = copy_good(dir);
  rewrite_weights(ck, [](auto& views, auto& bytes) {
    for (const char* n : {"model.layers.0.attn.q_proj.weight", "model.layers.0.attn.k_proj.weight"}) {
      auto& b = bytes.at(n);
      if (views.at(n).dtype == DType::F32) {
        const float big = 3e38f;
        for (std::size_t i = 0; i + 4 <= b.size(); i += 4) std::memcpy(b.data() + i, &big, 4);
      } else {
        ASSERT_EQ(views.at(n).dtype, DType::BF16);
        const uint16_t big = 0x7F61;  // 2.99e38
        for (std::size_t i = 0; i + 2 <= b.size(); i += 2) std::memcpy(b.data() + i, &big, 2);
      }
    }
  });
  TempDir d("cli_io_overflow");
  // swanda reads the input of the q/k projections, which the overflow reaches in layer 1; the others read layer 0's
  // q and k (grad: located by a forward once the loss is not finite).
  for (const std::string method : {"drrqr", "drrqr --faithful", "pca", "grad", "swanda"}) {
    SCOPED_TRACE(method);
    const std::string prune = checkpoint_commands(d, ck, method).back().second;  // on d/text.txt, out d/pruned
    const std::string line =
        expect_one_line_error(run_statecut(prune), "statecut prune: error: " + ck + ": calibration: ");
    const std::string where = method == "swanda" ? "layer 1: the input of the q/k projections is" : "layer 0 head 0: ";
    EXPECT_NE(line.find(where), std::string::npos) << line;
    EXPECT_NE(line.find("not finite (NaN or Inf): the model's forward overflows"), std::string::npos) << line;
    EXPECT_FALSE(fs::exists(d / "pruned")) << "partial output directory left behind";
  }
}

TEST_F(BadInput_CliCheckpoint, noWeightsFile) {
  const std::string ck = copy_good(dir);
  fs::remove(ck + "/model.safetensors");
  expect_checkpoint_failure(ck, {ck, "model.safetensors"});
}

TEST_F(BadInput_CliCheckpoint, indexNamesAMissingShard) {
  const std::string ck = copy_good(dir);
  fs::rename(ck + "/model.safetensors", ck + "/model-00001-of-00002.safetensors");
  nlohmann::json idx;
  {
    const auto f = SafetensorsFile::open(ck + "/model-00001-of-00002.safetensors");
    for (const auto& n : f.names()) idx["weight_map"][n] = "model-00001-of-00002.safetensors";
  }
  idx["weight_map"]["model.norm.weight"] = "model-00002-of-00002.safetensors";
  std::ofstream(ck + "/model.safetensors.index.json") << idx.dump();
  expect_checkpoint_failure(ck, {"model-00002-of-00002.safetensors"});
}

// Known gap (reported, optimized/prune/prune.cpp belongs to the pipeline): the data-free methods (l1, rand) read only the
// q/k projections, so `prune --method l1` on a checkpoint with a NaN, a missing tensor or a config that disagrees with
// the weights exits 0 and writes a pruned copy of the broken checkpoint. Enable once prune validates the whole
// checkpoint for every method.
TEST_F(BadInput_CliCheckpoint, dataFreePruneRejectsNanWeights) {
  const std::string ck = copy_good(dir);
  rewrite_weights(ck, [](auto& views, auto& bytes) {
    const float nan = std::nanf("");
    ASSERT_EQ(views.at("model.norm.weight").dtype, DType::F32);
    std::memcpy(bytes.at("model.norm.weight").data() + 4, &nan, 4);
  });
  expect_checkpoint_failure(ck, {"model.norm.weight", "NaN"}, "l1");
}

}  // namespace
}  // namespace statecut::io

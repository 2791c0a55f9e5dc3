// tools/statecut-random-checkpoint (the writer behind bench/torch_prune_gpu.sh) on a small shape: the tensor list,
// shapes and parameter count of an fla delta_net and of a transformers Mamba-2, bf16, norms exactly 1, the same bytes
// for the same seed, and checkpoints that `statecut prune` loads, calibrates and cuts. Bad sizes or an occupied folder: one line, exit 1.
#include "tests/cli/prune_cli_util.h"

using namespace pipeline_cli;
using nlohmann::json;

namespace {

const fs::path kWriter = fs::path(STATECUT_CLI).parent_path() / "statecut-random-checkpoint";
// hidden 128, 2 heads (dk 64), 2 layers, MLP 256, vocab 300
const std::string kSmall = " --hidden 128 --heads 2 --layers 2 --intermediate 256 --vocab 300";

CliRun run_writer(const std::string& args) { return run_program(kWriter.string(), args); }

}  // namespace

TEST(Cli_RandomCheckpoint, writesDeltaNetShapesThatPruneLoadsAndCuts) {
  TempDir d("random");
  const CliRun w = run_writer("--out " + (d / "m") + kSmall);
  ASSERT_EQ(w.code, 0) << w.err;
  const auto f = statecut::io::SafetensorsFile::open(d / "m/model.safetensors");
  const int64_t H = 128, V = 300, I = 256, L = 2, heads = 2;
  EXPECT_EQ(f.names().size(), static_cast<size_t>(3 + 14 * L));
  int64_t params = 0;
  for (const auto& n : f.names()) {
    const auto& t = f.tensor(n);
    EXPECT_EQ(t.dtype, statecut::io::DType::BF16) << n;
    params += t.numel();
    if (n.find("norm.weight") != std::string::npos)
      for (double x : statecut::io::to_double(t)) ASSERT_EQ(x, 1.0) << n;
  }
  EXPECT_EQ(params, 2 * V * H + H + L * (H + 4 * H * H + heads * H + 3 * H * 4 + H / heads + H + 3 * I * H));
  EXPECT_EQ(f.tensor("model.layers.1.attn.k_proj.weight").shape, (std::vector<int64_t>{H, H}));
  head_bytes(kCorpora / "pydocs_train.txt", d / "calib.txt", 4096);
  const CliRun p = run_statecut("prune --json --quiet --method drrqr --ratio 0.5 --calib-seqs 2 --calib-len 256 --tokenizer bytes --checkpoint " +
                                (d / "m") + " --calib " + (d / "calib.txt") + " --out " + (d / "p"));
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_EQ(json::parse(p.out)["new_head_k_dim"], 32);
  const auto g = statecut::io::SafetensorsFile::open(d / "p/model.safetensors");
  EXPECT_EQ(g.tensor("model.layers.1.attn.k_proj.weight").shape, (std::vector<int64_t>{heads * 32, H}));
}

TEST(Cli_RandomCheckpoint, writesMamba2ShapesThatPruneLoadsAndCuts) {
  TempDir d("random_mamba2");
  // hidden 64 → inner 128 = 4 heads of 32, state 16, 2 layers, vocab 300
  const CliRun w = run_writer("--out " + (d / "m") + " --family mamba2 --hidden 64 --heads 4 --state 16 --layers 2 "
                              "--vocab 300");
  ASSERT_EQ(w.code, 0) << w.err;
  const auto f = statecut::io::SafetensorsFile::open(d / "m/model.safetensors");
  const int64_t H = 64, V = 300, L = 2, heads = 4, N = 16, inner = 2 * H, conv = inner + 2 * N;
  EXPECT_EQ(f.names().size(), static_cast<size_t>(3 + 9 * L));
  int64_t params = 0;
  for (const auto& n : f.names()) params += f.tensor(n).numel();
  EXPECT_EQ(params, 2 * V * H + H + L * (H + (inner + conv + heads) * H + conv * 4 + conv + 3 * heads + inner + H * inner));
  EXPECT_EQ(f.tensor("backbone.layers.1.mixer.in_proj.weight").shape, (std::vector<int64_t>{inner + conv + heads, H}));
  const json cfg = json::parse(slurp(d.path / "m/config.json"));
  EXPECT_EQ(cfg["model_type"], "mamba2");
  EXPECT_EQ(cfg["head_dim"], 32);
  const CliRun p = run_statecut("prune --json --quiet --method rand --ratio 0.5 --checkpoint " + (d / "m") +
                                " --out " + (d / "p"));
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_EQ(json::parse(p.out)["new_head_k_dim"], N / 2);
  const auto g = statecut::io::SafetensorsFile::open(d / "p/model.safetensors");
  EXPECT_EQ(g.tensor("backbone.layers.1.mixer.conv1d.weight").shape, (std::vector<int64_t>{inner + N, 1, 4}));
}

TEST(Cli_RandomCheckpoint, sameSeedSameBytesOtherSeedOtherBytes) {
  TempDir d("seed");
  ASSERT_EQ(run_writer("--out " + (d / "a") + kSmall + " --seed 7").code, 0);
  ASSERT_EQ(run_writer("--out " + (d / "b") + kSmall + " --seed 7").code, 0);
  ASSERT_EQ(run_writer("--out " + (d / "c") + kSmall + " --seed 8").code, 0);
  EXPECT_TRUE(slurp(d.path / "a/model.safetensors") == slurp(d.path / "b/model.safetensors"));
  EXPECT_FALSE(slurp(d.path / "a/model.safetensors") == slurp(d.path / "c/model.safetensors"));
  EXPECT_EQ(slurp(d.path / "a/config.json"), slurp(d.path / "c/config.json"));
}

TEST(BadInput_RandomCheckpoint, indivisibleHeadsOrOccupiedFolderIsOneLine) {
  TempDir d("bad");
  const CliRun h = run_writer("--out " + (d / "m") + " --hidden 100 --heads 3");
  EXPECT_EQ(h.code, 1);
  ASSERT_EQ(lines(h.err).size(), 1u) << h.err;
  EXPECT_NE(h.err.find("divisible"), std::string::npos) << h.err;
  EXPECT_FALSE(fs::exists(d.path / "m" / "model.safetensors"));
  const CliRun m = run_writer("--out " + (d / "m") + " --family mamba2 --hidden 64 --heads 3");
  EXPECT_EQ(m.code, 1);
  ASSERT_EQ(lines(m.err).size(), 1u) << m.err;
  EXPECT_NE(m.err.find("divisible"), std::string::npos) << m.err;
  ASSERT_EQ(run_writer("--out " + (d / "m") + kSmall).code, 0);
  const CliRun o = run_writer("--out " + (d / "m") + kSmall);
  EXPECT_EQ(o.code, 1);
  ASSERT_EQ(lines(o.err).size(), 1u) << o.err;
  EXPECT_NE(o.err.find("already holds model.safetensors"), std::string::npos) << o.err;
}

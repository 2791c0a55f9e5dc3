// `statecut verify` end to end: the exit codes (0 every check holds, 1 a check fails, 2 the input cannot be read),
// the table on stdout, progress on stderr (none with --quiet), one JSON object with --json.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>

#include "optimized/io/safetensors.h"
#include "tests/cli/cli_run.h"
#include "tests/cli/overflow_checkpoint.h"
#include "tests/test_env.h"

namespace {
namespace fs = std::filesystem;
using statecut::test::run_statecut;
using statecut::test::TempDir;

const std::string kFast = " --windows 1 --len 70";

std::string fixture_or_skip(const std::string& name) { return statecut::test::fixture_dir(name); }

bool contains(const std::string& s, const std::string& n) { return s.find(n) != std::string::npos; }

/// Every '<' opens a tag (a '<=' from a limit written raw into the SVG breaks every viewer).
bool only_tags_open_angle_brackets(const std::string& svg) {
  for (size_t p = svg.find('<'); p != std::string::npos; p = svg.find('<', p + 1))
    if (p + 1 >= svg.size() || !(std::isalpha(static_cast<unsigned char>(svg[p + 1])) || svg[p + 1] == '/')) return false;
  return true;
}

/// A copy of `src` whose tensor `name` (F32) holds a NaN at flat index 3.
void copy_with_nan(const std::string& src, const std::string& dst, const std::string& name) {
  fs::create_directories(dst);
  for (const auto& e : fs::directory_iterator(src))
    if (e.path().filename() != "model.safetensors") fs::copy_file(e.path(), fs::path(dst) / e.path().filename());
  const auto f = statecut::io::SafetensorsFile::open(src + "/model.safetensors");
  statecut::io::SafetensorsWriter w;
  for (const auto& n : f.names()) {
    const auto& v = f.tensor(n);
    if (n != name) {
      w.add(v);
      continue;
    }
    ASSERT_EQ(v.dtype, statecut::io::DType::F32);
    std::vector<float> x(static_cast<size_t>(v.numel()));
    std::memcpy(x.data(), v.data, v.nbytes);
    x[3] = std::numeric_limits<float>::quiet_NaN();
    w.add(n, v.dtype, v.shape, x.data(), v.nbytes);
  }
  w.write(dst + "/model.safetensors");
}

TEST(Cli_Verify, fixturePassesWithExitZeroAndATable) {
  const std::string dir = fixture_or_skip("fla_gated_deltanet");
  if (dir.empty()) GTEST_SKIP() << "fixture not found";
  const auto r = run_statecut("verify --checkpoint " + dir + kFast + " --quiet");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;  // --quiet: no progress
  for (const char* s : {"load", "reference", "chunk-recurrent", "state-carry", "theorems.eff-rank", "determinism",
                        "limit:", "OK:"})
    EXPECT_TRUE(contains(r.out, s)) << s << "\n" << r.out;
}

TEST(Cli_Verify, progressGoesToStderr) {
  const std::string dir = fixture_or_skip("fla_delta_net");
  if (dir.empty()) GTEST_SKIP() << "fixture not found";
  const auto r = run_statecut("verify --checkpoint " + dir + kFast + " --only load,determinism");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_TRUE(contains(r.err, "verify [")) << r.err;
  EXPECT_FALSE(contains(r.out, "verify [")) << r.out;
}

TEST(Cli_Verify, jsonIsOneObjectWithEveryRow) {
  const std::string dir = fixture_or_skip("hf_mamba2");
  if (dir.empty()) GTEST_SKIP() << "fixture not found";
  const auto r = run_statecut("verify --checkpoint " + dir + kFast + " --json --quiet");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["passed"].get<bool>());
  EXPECT_EQ(j["model_type"], "mamba2");
  ASSERT_TRUE(j["checks"].is_array());
  bool saw_reference = false;
  for (const auto& c : j["checks"]) {
    for (const char* k : {"name", "status", "figure", "threshold", "relation", "reason", "where", "message", "details"})
      EXPECT_TRUE(c.contains(k)) << k << " missing in " << c.dump();
    EXPECT_TRUE(c["details"].is_object()) << c.dump();
    if (c["status"] == "skip") EXPECT_TRUE(c["figure"].is_null()) << "a skipped check has no figure: " << c.dump();
    if (c["name"] == "reference") {
      saw_reference = true;
      EXPECT_EQ(c["status"], "pass");
      EXPECT_FALSE(c["reason"].get<std::string>().empty());
    }
  }
  EXPECT_TRUE(saw_reference);
}

TEST(Cli_Verify, nanWeightExitsOneNamingTheTensor) {
  const std::string src = fixture_or_skip("fla_delta_net");
  if (src.empty()) GTEST_SKIP() << "fixture not found";
  TempDir tmp("verify-cli-nan");
  const std::string bad = "model.layers.0.attn.q_conv1d.weight";
  copy_with_nan(src, tmp / "ckpt", bad);
  const auto r = run_statecut("verify --checkpoint " + (tmp / "ckpt") + kFast + " --quiet");
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "FAIL")) << r.out;
  EXPECT_TRUE(contains(r.out, bad)) << r.out;
  // One problem, said once: the scan's count and first index, not again in the loader's words.
  const auto j =
      nlohmann::json::parse(run_statecut("verify --json --only load --checkpoint " + (tmp / "ckpt") + kFast).out);
  const auto& load = j["checks"][0];
  EXPECT_EQ(load["figure"], 1) << load.dump();
  EXPECT_TRUE(contains(load["message"], "1 NaN and 0 Inf values (first at")) << load.dump();
  EXPECT_FALSE(contains(load["message"], "holds NaN")) << load.dump();
}

TEST(Cli_Verify, unreadableCheckpointExitsTwoWithOneLine) {
  TempDir tmp("verify-cli-unreadable");
  auto r = run_statecut("verify --checkpoint " + (tmp / "missing") + " --quiet");
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_TRUE(contains(r.err, tmp / "missing")) << r.err;

  const std::string src = fixture_or_skip("fla_delta_net");
  if (src.empty()) GTEST_SKIP() << "fixture not found";
  const std::string dir = tmp / "truncated";
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(src)) fs::copy_file(e.path(), fs::path(dir) / e.path().filename());
  fs::resize_file(fs::path(dir) / "model.safetensors", 64);
  r = run_statecut("verify --checkpoint " + dir + " --quiet");
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_TRUE(contains(r.err, "model.safetensors")) << r.err;
}

TEST(Cli_Verify, svgDrawsEveryCheckAgainstItsLimitAndTheUtilization) {
  TempDir tmp("verify-cli-svg");
  const std::string model = std::string(STATECUT_SOURCE_DIR) + "/assets/byte_delta_net_4L";
  const auto r = run_statecut("verify --checkpoint " + model + kFast + " --json --quiet --svg " + (tmp / "plots"));
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const std::string svg = statecut::test::slurp(tmp / "plots/report.svg");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_TRUE(contains(svg, "every check holds")) << svg;
  EXPECT_TRUE(only_tags_open_angle_brackets(svg)) << svg;
  const nlohmann::json report = nlohmann::json::parse(r.out);
  for (const auto& c : report["checks"])
    EXPECT_TRUE(contains(svg, ">" + c["name"].get<std::string>())) << c["name"] << " not drawn";
  EXPECT_TRUE(contains(svg, "rank utilization u")) << svg;
  EXPECT_TRUE(contains(svg, "layer 3 head 1: u ")) << "the u map misses the shipped model's last layer";
  // An existing folder is refused before any check runs: one line, exit 2, nothing on stdout.
  const auto again = run_statecut("verify --checkpoint " + model + kFast + " --quiet --svg " + (tmp / "plots"));
  EXPECT_EQ(again.code, 2) << again.err;
  EXPECT_TRUE(again.out.empty()) << again.out;
  EXPECT_EQ(std::count(again.err.begin(), again.err.end(), '\n'), 1) << again.err;
  EXPECT_TRUE(contains(again.err, "plots")) << again.err;
}

TEST(Cli_Verify, svgOfAFailingCheckpointShowsTheFailure) {
  const std::string src = fixture_or_skip("fla_delta_net");
  if (src.empty()) GTEST_SKIP() << "fixture not found";
  TempDir tmp("verify-cli-svg-nan");
  copy_with_nan(src, tmp / "ckpt", "model.layers.0.attn.q_conv1d.weight");
  const auto r = run_statecut("verify --checkpoint " + (tmp / "ckpt") + kFast + " --quiet --svg " + (tmp / "p"));
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  const std::string svg = statecut::test::slurp(tmp / "p/report.svg");
  EXPECT_TRUE(contains(svg, "a check FAILS")) << svg;
  EXPECT_TRUE(only_tags_open_angle_brackets(svg)) << svg;
  EXPECT_TRUE(contains(svg, "#d62728")) << "no red bar or label";
}

TEST(Cli_Verify, unknownCheckIsRejected) {
  const std::string dir = fixture_or_skip("fla_delta_net");
  if (dir.empty()) GTEST_SKIP() << "fixture not found";
  const auto r = run_statecut("verify --checkpoint " + dir + " --only loud --quiet");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "statecut verify: usage: unknown check 'loud'")) << r.err;  // worded as every usage error
  // A row's name says it is one, and which check holds it.
  const auto row = run_statecut("verify --checkpoint " + dir + " --only pruned.weights --quiet");
  EXPECT_EQ(row.code, 2);
  EXPECT_TRUE(contains(row.err, "'pruned.weights' is a row of the check 'pruned'")) << row.err;
  // Options that leave no check are a usage error, not a run that checked nothing (NOTHING CHECKED, exit 1).
  const auto none = run_statecut("verify --checkpoint " + dir + " --only load --skip load --quiet");
  EXPECT_EQ(none.code, 2) << none.out << none.err;
  EXPECT_TRUE(contains(none.err, "statecut verify: usage: --only and --skip leave no check to run")) << none.err;
  // A seed below 0 or past 2^64 - 1 and a device that is not one are usage errors (they wrapped, saturated, or
  // printed LibTorch's device list blamed on the checkpoint).
  for (const std::string bad : {"--seed -1", "--seed 99999999999999999999", "--device tpu", "--only ''", "--svg ''"}) {
    const auto u = run_statecut("verify --checkpoint " + dir + " --quiet " + bad);
    EXPECT_EQ(u.code, 2) << bad << ": " << u.err;
    EXPECT_EQ(u.err.find('\n'), u.err.size() - 1) << bad << ": " << u.err;
    EXPECT_FALSE(contains(u.err, "xpu")) << u.err;
  }
}

// Every selected check skipped (--only kernels on the CPU) is no pass: exit 1, "NOTHING CHECKED"; an unreadable
// --source is exit 2 naming it, as the help says (it was a FAIL row, exit 1).
TEST(Cli_Verify, nothingCheckedIsNoPassAndAMissingSourceIsUnreadable) {
  const std::string model = (fs::path(STATECUT_SOURCE_DIR) / "assets" / "byte_delta_net_4L").string();
  const auto r = run_statecut("verify --checkpoint " + model + " --only kernels --quiet");
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "NOTHING CHECKED: 0 passed, 0 failed, 1 skipped")) << r.out;
  TempDir tmp("verify-cli-source");
  const auto s = run_statecut("verify --checkpoint " + model + " --source " + (tmp / "none") + kFast + " --quiet");
  EXPECT_EQ(s.code, 2) << s.out << s.err;
  EXPECT_TRUE(contains(s.err, (tmp / "none") + ": no such checkpoint folder")) << s.err;
  EXPECT_TRUE(s.out.empty()) << s.out;
}

// A --source folder that is there but cannot be read — weights cut short, no config.json, a config that is not JSON —
// exits 2 with one line naming the file, as the checkpoint itself does (it was a FAIL row of `pruned`, exit 1).
TEST(Cli_Verify, anUnreadableSourceExitsTwoNamingTheFile) {
  const std::string model = (fs::path(STATECUT_SOURCE_DIR) / "assets" / "byte_delta_net_4L").string();
  TempDir tmp("verify-cli-badsource");
  const auto make = [&](const std::string& name) {
    const std::string d = tmp / name;
    fs::create_directories(d);
    for (const char* f : {"config.json", "model.safetensors"}) fs::copy_file(fs::path(model) / f, fs::path(d) / f);
    return d;
  };
  const std::string cut = make("cut"), noconfig = make("noconfig"), notjson = make("notjson");
  fs::resize_file(fs::path(cut) / "model.safetensors", fs::file_size(fs::path(cut) / "model.safetensors") / 2);
  fs::remove(fs::path(noconfig) / "config.json");
  std::ofstream(fs::path(notjson) / "config.json", std::ios::trunc) << "{ not json";
  for (const auto& [dir, file] : {std::pair{cut, cut + "/model.safetensors"}, {noconfig, noconfig + "/config.json"},
                                  {notjson, notjson + "/config.json"}}) {
    SCOPED_TRACE(dir);
    const auto r = run_statecut("verify --quiet --checkpoint " + model + " --source " + dir + kFast);
    EXPECT_EQ(r.code, 2) << r.out << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_TRUE(contains(r.err, file)) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

// A shard index pointing outside the checkpoint folder (../x, an absolute path) is refused as the loaders refuse it:
// exit 2 naming the index (verify read whatever file the index named).
TEST(Cli_Verify, shardIndexPointingOutsideTheFolderIsUnreadable) {
  const fs::path model = fs::path(STATECUT_SOURCE_DIR) / "assets" / "byte_delta_net_4L";
  TempDir tmp("verify-cli-index");
  const fs::path ck = tmp.path / "ck";
  fs::create_directories(ck);
  fs::copy_file(model / "config.json", ck / "config.json");
  fs::copy_file(model / "model.safetensors", tmp.path / "outside.safetensors");
  const std::string outside = (tmp.path / "outside.safetensors").string();
  for (const std::string& shard : {std::string("../outside.safetensors"), outside}) {
    nlohmann::json map = nlohmann::json::object();
    const auto weights = statecut::io::SafetensorsFile::open((model / "model.safetensors").string());
    for (const auto& n : weights.names()) map[n] = shard;
    std::ofstream(ck / "model.safetensors.index.json") << nlohmann::json{{"weight_map", map}}.dump();
    const auto r = run_statecut("verify --checkpoint " + ck.string() + kFast + " --quiet");
    EXPECT_EQ(r.code, 2) << r.out << r.err;
    EXPECT_TRUE(contains(r.err, "model.safetensors.index.json: ")) << r.err;
    EXPECT_TRUE(contains(r.err, "is not a file name in the checkpoint directory")) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

// A tokenizer with more ids than the model embeds (here a Qwen-vocabulary tokenizer.json beside a 256-token model):
// every other command refuses text from it, so `load` fails naming it (it passed).
TEST(Cli_Verify, tokenizerLargerThanTheEmbeddingFailsLoad) {
  const fs::path root(STATECUT_SOURCE_DIR);
  TempDir tmp("verify-cli-tokenizer");
  const fs::path ck = tmp.path / "ck";
  fs::copy(root / "assets" / "byte_delta_net_4L", ck, fs::copy_options::recursive);
  fs::copy_file(root / "tests" / "data" / "tokenizer_bpe" / "tokenizer.json", ck / "tokenizer.json");
  const auto r = run_statecut("verify --checkpoint " + ck.string() + " --only load --json --quiet");
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["checks"].size(), 1u);
  EXPECT_EQ(j["checks"][0]["status"], "fail");
  EXPECT_EQ(j["checks"][0]["where"], "tokenizer");
  EXPECT_TRUE(contains(j["checks"][0]["message"].get<std::string>(),
                       "ids but config.json's vocab_size is 256: text would give ids the model cannot embed"))
      << j["checks"][0]["message"];
  // Text through it: the tokenizer is named as the file at fault, not the text (which blamed the text: audit 24 D6).
  const std::string text = (root / "assets" / "corpora" / "pydocs_valid.txt").string();
  for (const std::string cmd : {"eval", "verify"}) {
    const auto t = run_statecut(cmd + " --checkpoint " + ck.string() + " --text " + text + " --quiet");
    EXPECT_EQ(t.code, cmd == "verify" ? 2 : 1) << t.err;
    EXPECT_TRUE(contains(t.err, "statecut " + cmd + ": error: " + (ck / "tokenizer.json").string() + ": gives id "))
        << t.err;
    EXPECT_TRUE(contains(t.err, "more than the model embeds")) << t.err;
  }
}

TEST(Cli_Verify, prunedCheckpointPassesWithItsSource) {
  const std::string src = fixture_or_skip("hf_qwen3_5");
  if (src.empty()) GTEST_SKIP() << "fixture not found";
  TempDir tmp("verify-cli-pruned");
  const auto p = run_statecut("prune --quiet --checkpoint " + src + " --method l1 --ratio 0.5 --out " + (tmp / "out"));
  ASSERT_EQ(p.code, 0) << p.err;
  const auto r = run_statecut("verify --checkpoint " + (tmp / "out") + " --source " + src + kFast + " --json --quiet");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const auto& c : j["checks"])
    if (c["name"] == "pruned.weights") EXPECT_EQ(c["status"], "pass") << c.dump();
}

// A bf16 model pruned to one key channel per head: its L2-normalised q and k are sign(q), sign(k), which bf16 rounding
// flips where the channel is near 0, so its logits are 0.12 from f64 with every op right, past the fixed 0.1 it failed.
// reference.model holds it to its measured conditioning instead (check_reference.cpp, kRoundingsPerWeight); the
// unpruned model keeps the fixed limit, and a non-finite figure still fails: the same prune of a model whose final
// norm overflows.
TEST(Cli_Verify, bf16KeyDimOneIsHeldToItsConditioningAndAnOverflowStillFails) {
  const fs::path model = fs::path(STATECUT_SOURCE_DIR) / "assets" / "byte_delta_net_4L";
  TempDir tmp("verify-cli-dk1");
  auto model_row = [](const std::string& out) {
    const nlohmann::json j = nlohmann::json::parse(out);
    for (const auto& c : j["checks"])
      if (c["name"] == "reference.model") return c;
    return nlohmann::json::object();
  };
  const auto p = run_statecut("prune --quiet --checkpoint " + model.string() + " --method l1 --keep 1 --out " +
                              (tmp / "dk1"));
  ASSERT_EQ(p.code, 0) << p.err;
  const auto r = run_statecut("verify --checkpoint " + (tmp / "dk1") + " --json --quiet");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  const nlohmann::json m = model_row(r.out);
  EXPECT_EQ(m.value("status", ""), "pass") << m.dump();
  const nlohmann::json none;
  ASSERT_TRUE(m.value("figure", none).is_number() && m.value("threshold", none).is_number()) << m.dump();
  EXPECT_GT(m["figure"].get<double>(), 0.1) << m.dump();  // past the well-conditioned limit: the case of this test
  EXPECT_TRUE(m.value("details", nlohmann::json::object()).value("sensitivity", none).is_number()) << m.dump();
  EXPECT_TRUE(contains(m.value("reason", ""), "ill-conditioned")) << m.dump();

  const auto r0 = run_statecut("verify --checkpoint " + model.string() + " --only reference --json --quiet");
  EXPECT_EQ(r0.code, 0) << r0.out << r0.err;
  const nlohmann::json m0 = model_row(r0.out);
  EXPECT_EQ(m0.value("threshold", none), 0.1) << m0.dump();
  EXPECT_FALSE(m0.value("details", nlohmann::json::object()).contains("sensitivity")) << m0.dump();

  const std::string big = statecut::test::overflowing_checkpoint(model, tmp.path / "big");
  const auto pb = run_statecut("prune --quiet --checkpoint " + big + " --method l1 --keep 1 --out " + (tmp / "big1"));
  ASSERT_EQ(pb.code, 0) << pb.err;
  const auto rb = run_statecut("verify --checkpoint " + (tmp / "big1") + " --json --quiet");
  EXPECT_EQ(rb.code, 1) << rb.out << rb.err;
  const nlohmann::json mb = model_row(rb.out);
  EXPECT_EQ(mb.value("status", ""), "fail") << mb.dump();
  EXPECT_TRUE(mb.contains("figure") && mb["figure"].is_null()) << mb.dump();  // NaN: the bf16 logits are not finite
}

}  // namespace

namespace {
/// A copy of the fla_delta_net fixture with `record` as its statecut.json, verified with --only load,pruned.
statecut::test::CliRun verify_with_record(const std::string& src, const nlohmann::json& record, TempDir& d) {
  const std::string dir = d / "ckpt";
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(src)) fs::copy_file(e.path(), fs::path(dir) / e.path().filename());
  std::ofstream(fs::path(dir) / "statecut.json") << record.dump();
  return run_statecut("verify --quiet --json --only load,pruned --checkpoint " + dir + " --source " + src);
}

// statecut train and a fine-tune of an unpruned model write a statecut.json with no pruning in it: verify skips the
// pruned check saying so (it failed every such checkpoint: "new_head_k_dim -1 but config.json gives dk 32"); a record
// that claims a pruning and lacks its selection still fails.
TEST(Cli_Verify, aTrainOrFinetuneRecordIsNoPruningRecord) {
  const std::string src = fixture_or_skip("fla_delta_net");
  if (src.empty()) GTEST_SKIP() << "fixture not found";
  for (const auto& [record, what] : std::vector<std::pair<nlohmann::json, std::string>>{
           {{{"train", {{"steps", 2}}}}, "records statecut train, no pruning"},
           {{{"finetune", {{"steps", 1}, {"changed_tensors", nlohmann::json::array()}}}}, "records statecut finetune, no pruning"},
           {{{"train", {{"steps", 2}}}, {"finetune", {{"steps", 1}}}}, "records statecut train and statecut finetune"}}) {
    TempDir d("verify-train-record");
    const auto r = verify_with_record(src, record, d);
    EXPECT_EQ(r.code, 0) << r.out << r.err;
    const auto j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j["checks"].size(), 2u) << r.out;
    const auto& row = j["checks"][1];
    EXPECT_EQ(row["name"], "pruned");
    EXPECT_EQ(row["status"], "skip");
    EXPECT_TRUE(contains(row["message"].get<std::string>(), what)) << row["message"];
  }
  TempDir d("verify-bare-record");
  const auto r = verify_with_record(src, {{"method", "l1"}}, d);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "no selection.layers")) << r.out;
}

// A drrqr prune calibrated with --tokenizer bytes records "tokenizer": "bytes"; verify's certificate recomputes the
// calibration with that tokenizer, not with what the source folder would choose (here a tokenizer.json whose ids lie
// past the model's 256: it failed, and verify has no --tokenizer to say otherwise).
TEST(Cli_Verify, drrqrCertificateRecomputesWithTheRecordsTokenizer) {
  const fs::path root(STATECUT_SOURCE_DIR);
  TempDir d("verify-cert-bytes");
  const std::string src = d / "src", out = d / "p50";
  fs::copy(root / "assets" / "byte_delta_net_4L", src, fs::copy_options::recursive);
  fs::copy_file(root / "tests" / "data" / "tokenizer_bpe" / "tokenizer.json", fs::path(src) / "tokenizer.json");
  const auto p = run_statecut("prune --quiet --checkpoint " + src + " --method drrqr --ratio 0.5 --tokenizer bytes --calib " +
                              (root / "assets" / "corpora" / "pydocs_train.txt").string() +
                              " --calib-seqs 2 --calib-len 64 --out " + out);
  ASSERT_EQ(p.code, 0) << p.err;
  const auto r = run_statecut("verify --quiet --json --only pruned --checkpoint " + out + " --source " + src);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  bool seen = false;
  const auto report = nlohmann::json::parse(r.out);
  for (const auto& c : report["checks"])
    if (c["name"] == "pruned.certificate") {
      seen = true;
      EXPECT_EQ(c["status"], "pass") << c.dump();
    }
  EXPECT_TRUE(seen) << r.out;
}

// A Qwen3.5 whose every layer is full attention (the fixture's one full-attention layer, alone) loads and runs as
// transformers runs it: load and determinism pass, the rows about linear-attention layers are skipped saying so, exit 0.
// The load row failed it with prune's "no linear-attention layer to prune"; prune itself still refuses it.
TEST(Cli_Verify, aQwenOfFullAttentionLayersOnlyLoadsAndSkipsTheLinearAttentionRows) {
  const std::string src = fixture_or_skip("hf_qwen3_5");
  if (src.empty()) GTEST_SKIP() << "fixture not found";
  TempDir d("verify-full-attention");
  const std::string dir = d / "q";
  fs::create_directories(dir);
  nlohmann::json cfg = nlohmann::json::parse(statecut::test::slurp(src + "/config.json"));
  const auto types = cfg["layer_types"].get<std::vector<std::string>>();
  const auto full = std::find(types.begin(), types.end(), "full_attention");
  ASSERT_NE(full, types.end()) << "the fixture has a full-attention layer";
  const std::string from = "model.layers." + std::to_string(full - types.begin()) + ".";
  cfg["num_hidden_layers"] = 1;
  cfg["layer_types"] = {"full_attention"};
  std::ofstream(dir + "/config.json") << cfg.dump();
  const auto f = statecut::io::SafetensorsFile::open(src + "/model.safetensors");
  statecut::io::SafetensorsWriter w;
  for (const auto& n : f.names()) {
    if (n.rfind("model.layers.", 0) != 0) {
      w.add(f.tensor(n));
    } else if (n.rfind(from, 0) == 0) {
      const auto& t = f.tensor(n);
      w.add("model.layers.0." + n.substr(from.size()), t.dtype, t.shape, t.data, t.nbytes);
    }
  }
  w.write(dir + "/model.safetensors");
  const auto r = run_statecut("verify --quiet --json --checkpoint " + dir + kFast);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const auto j = nlohmann::json::parse(r.out);
  std::map<std::string, nlohmann::json> rows;
  for (const auto& c : j["checks"]) rows[c["name"].get<std::string>()] = c;
  EXPECT_EQ(rows["load"]["status"], "pass") << rows["load"].dump();
  EXPECT_EQ(rows["determinism"]["status"], "pass") << rows["determinism"].dump();
  for (const char* name : {"config", "reference", "chunk-recurrent", "theorems"}) {
    EXPECT_EQ(rows[name]["status"], "skip") << name;
    EXPECT_TRUE(contains(rows[name].dump(), "every layer of " + dir + "/config.json is full attention")) << rows[name].dump();
  }
  const auto p = run_statecut("prune --quiet --checkpoint " + dir + " --method l1 --ratio 0.5 --out " + (d / "out"));
  EXPECT_EQ(p.code, 1) << p.err;
  EXPECT_TRUE(contains(p.err, "no linear-attention layer to prune")) << p.err;
}

// A config.json that is JSON but not a model the loader can read fails the load row, which names the key once (the
// geometry reader and the loader said it twice); an empty --checkpoint is named as empty, not as the folder "".
TEST(Cli_Verify, aConfigTheLoaderCannotReadIsNamedOnceAndAnEmptyPathAsEmpty) {
  const std::string src = fixture_or_skip("fla_delta_net");
  if (src.empty()) GTEST_SKIP() << "fixture not found";
  TempDir tmp("verify-badkey");
  const std::string dir = tmp / "ck";
  fs::create_directories(dir);
  for (const char* f : {"config.json", "model.safetensors"}) fs::copy_file(src + "/" + f, dir + "/" + f);
  nlohmann::json c = nlohmann::json::parse(statecut::test::slurp(dir + "/config.json"));
  c["hidden_size"] = "64";
  std::ofstream(dir + "/config.json") << c.dump();
  const auto r = run_statecut("verify --quiet --json --only load --checkpoint " + dir);
  EXPECT_EQ(r.code, 1) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const std::string msg = j["checks"][0]["message"].get<std::string>();
  const std::string key = "'hidden_size': expected an integer, got \"64\"";
  ASSERT_NE(msg.find(key), std::string::npos) << msg;
  EXPECT_EQ(msg.find(key, msg.find(key) + 1), std::string::npos) << "said twice: " << msg;
  const auto e = run_statecut("verify --checkpoint ''");
  EXPECT_EQ(e.code, 2) << e.err;
  EXPECT_TRUE(contains(e.err, "verify: error: an empty path where a checkpoint folder was expected")) << e.err;
}

// verify takes --tokenizer as every command that reads text does (README): a checkpoint with neither a tokenizer file
// nor a 256-id vocabulary cannot read --text (exit 2, naming the folder), and with --tokenizer bytes it is verified on
// the text's bytes, which its input record names.
TEST(Cli_Verify, tokenizerBytesReadsTheTextAsBytes) {
  TempDir tmp("verify-tokenizer");
  const std::string dir = tmp / "ck", text = tmp / "t.txt";
  const auto w = statecut::test::run_program(
      (fs::path(STATECUT_CLI).parent_path() / "statecut-random-checkpoint").string(),
      "--out " + dir + " --family delta_net --hidden 32 --heads 2 --layers 1 --intermediate 32 --vocab 300");
  ASSERT_EQ(w.code, 0) << w.err;
  std::ofstream(text) << "Hello, world! The state of a linear-attention layer is a matrix.";
  const std::string base = "verify --quiet --json --only load --windows 1 --len 16 --checkpoint " + dir + " --text " + text;
  const auto r = run_statecut(base);
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_TRUE(contains(r.err, dir)) << r.err;
  const auto b = run_statecut(base + " --tokenizer bytes");
  ASSERT_EQ(b.code, 0) << b.out << b.err;
  const auto j = nlohmann::json::parse(b.out);
  EXPECT_EQ(j["input"]["tokenizer"], "bytes") << j["input"].dump();
}

// Without --text the windows are drawn from the whole vocabulary, not only the 256 byte ids every vocabulary starts
// with: on a 5,003-token model 64 draws all below 256 has probability (256/5003)^64 < 1e-80.
TEST(Cli_Verify, randomWindowsDrawFromTheWholeVocabulary) {
  TempDir tmp("verify-vocab");
  const std::string dir = tmp / "ck";
  const auto w = statecut::test::run_program(
      (fs::path(STATECUT_CLI).parent_path() / "statecut-random-checkpoint").string(),
      "--out " + dir + " --family delta_net --hidden 32 --heads 2 --layers 1 --intermediate 32 --vocab 5003");
  ASSERT_EQ(w.code, 0) << w.err;
  const auto r = run_statecut("verify --quiet --json --windows 1 --len 64 --only load,reference --checkpoint " + dir);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["input"]["kind"], "random");
  const int64_t max_id = j["input"]["max_id"];
  EXPECT_GE(max_id, 256) << j["input"].dump();
  EXPECT_LT(max_id, 5003) << j["input"].dump();
  EXPECT_TRUE(contains(j["input"]["description"].get<std::string>(), "[0, 5003)")) << j["input"].dump();
}

}  // namespace

// CLI end to end: `statecut generate` on the shipped byte-level model (assets/byte_delta_net_4L).
//   - greedy decoding with the state cache equals "argmax of a full forward, repeated": one `statecut logits` over
//     prompt + continuation must put its argmax at every position on the next generated token (a position whose top
//     two logits lie within 1e-4 may flip between the chunked forward and the recurrent steps: allowed, counted);
//   - seeded sampling (temperature, top-k, top-p) is reproducible, and another seed gives another text;
//   - bad input (a missing prompt file, an empty prompt, bad sampling values, a missing checkpoint) is one line on
//     stderr and exit code 1, with nothing on stdout; no prompt or two prompts is a usage error (exit 2).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "optimized/io/safetensors.h"
#include "tests/cli/cli_run.h"
#include "tests/cli/overflow_checkpoint.h"

namespace fs = std::filesystem;

namespace {

using statecut::test::run_program;
using statecut::test::run_statecut;
using statecut::test::TempDir;

const std::string kGenerateModel = (fs::path(STATECUT_SOURCE_DIR) / "assets" / "byte_delta_net_4L").string();
const std::string kPrompt = "def read_config(path):\n    \"\"\"Read the";

nlohmann::json generate_json(const std::string& extra) {
  const auto r = run_statecut("generate --checkpoint " + kGenerateModel + " --prompt '" + kPrompt + "' --json " + extra);
  EXPECT_EQ(r.code, 0) << r.err;
  if (r.code != 0) return {};
  return nlohmann::json::parse(r.out);
}

TEST(Cli_Generate, greedyContinuationIsArgmaxOfFullForward) {
  const int64_t n = 48;
  const auto j = generate_json("--max-new-tokens " + std::to_string(n));
  ASSERT_FALSE(j.is_null());
  const auto ids = j.at("ids").get<std::vector<int64_t>>();
  ASSERT_EQ(static_cast<int64_t>(ids.size()), n);
  ASSERT_EQ(j.at("prompt_tokens").get<int64_t>(), static_cast<int64_t>(kPrompt.size()));  // byte-level: one id a byte
  std::string bytes;
  for (int64_t id : ids) bytes.push_back(static_cast<char>(id));
  EXPECT_EQ(j.at("text").get<std::string>(), bytes);

  // One full forward over prompt + continuation.
  TempDir tmp("generate");
  std::vector<int64_t> all(kPrompt.begin(), kPrompt.end());
  all.insert(all.end(), ids.begin(), ids.end());
  statecut::io::SafetensorsWriter w;
  w.add("input_ids", statecut::io::DType::I64, {1, static_cast<int64_t>(all.size())}, all.data(),
        all.size() * sizeof(int64_t));
  w.write(tmp / "ids.safetensors");
  const auto r = run_statecut("logits --checkpoint " + kGenerateModel + " --tokens " + (tmp / "ids.safetensors") + " --out " +
                              (tmp / "logits.safetensors"));
  ASSERT_EQ(r.code, 0) << r.err;
  auto f = statecut::io::SafetensorsFile::open(tmp / "logits.safetensors");
  const auto logits = statecut::io::to_double(f.tensor("logits"));
  const int64_t V = 256, P = static_cast<int64_t>(kPrompt.size());
  int64_t near_ties = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double* row = logits.data() + (P - 1 + i) * V;
    int64_t best = 0;
    for (int64_t v = 1; v < V; ++v)
      if (row[v] > row[best]) best = v;
    if (best == ids[i]) continue;
    const double gap = row[best] - row[ids[i]];
    EXPECT_LT(gap, 1e-4) << "step " << i << ": generated " << ids[i] << ", full forward's argmax " << best;
    ++near_ties;
  }
  std::printf("[generate] %lld greedy tokens, %lld near-tie flips; text: %s\n", static_cast<long long>(n),
              static_cast<long long>(near_ties), bytes.c_str());
}

TEST(Cli_Generate, seededSamplingIsReproducible) {
  const std::string s = "--max-new-tokens 40 --temperature 0.9 --top-k 40 --top-p 0.95 ";
  const auto a = generate_json(s + "--seed 7"), b = generate_json(s + "--seed 7"), c = generate_json(s + "--seed 8");
  ASSERT_FALSE(a.is_null() || b.is_null() || c.is_null());
  EXPECT_EQ(a.at("ids"), b.at("ids"));
  EXPECT_NE(a.at("ids"), c.at("ids"));
  const auto greedy = generate_json("--max-new-tokens 40");
  EXPECT_NE(a.at("ids"), greedy.at("ids"));  // temperature 0.9 does sample
}

TEST(Cli_Generate, humanOutputIsThePromptContinuation) {
  const auto r = run_statecut("generate --checkpoint " + kGenerateModel + " --prompt '" + kPrompt + "' --max-new-tokens 20");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = generate_json("--max-new-tokens 20");
  EXPECT_EQ(r.out, j.at("text").get<std::string>() + "\n");
  EXPECT_NE(r.err.find("tokens/s"), std::string::npos) << r.err;
  const auto q = run_statecut("generate --quiet --checkpoint " + kGenerateModel + " --prompt '" + kPrompt +
                              "' --max-new-tokens 20");
  ASSERT_EQ(q.code, 0) << q.err;
  EXPECT_EQ(q.out, r.out);
  EXPECT_EQ(q.err, "") << "--quiet: no summary line";
}

// Text and summary sent to one file (`> log 2>&1`, as CI logs and `nohup` do): the text's last line is written
// before the summary line, not after it (stdout is fully buffered into a file, stderr is not).
TEST(Cli_Generate, textEndsBeforeTheSummaryInOneFile) {
  const std::string gen = "generate --checkpoint " + kGenerateModel + " --prompt 'def f' --max-new-tokens 20";
  const auto j = run_statecut(gen + " --json");
  ASSERT_EQ(j.code, 0) << j.err;
  const std::string text = nlohmann::json::parse(j.out).at("text").get<std::string>();
  const auto r = run_program("/bin/sh", "-c \"" + std::string(STATECUT_CLI) + " " + gen + " 2>&1\"");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind(text + "\nstatecut generate: 20 tokens", 0), 0u) << r.out;
}

// --max-new-tokens 0 runs the prompt alone: no token, no text, but the prefill happened and left its state (the shipped
// model's 4 layers x 4 heads x 64 x 64 fp32 states and conv windows: 292 KiB, bench/README.md).
TEST(Cli_Generate, zeroNewTokensRunsThePromptAndReportsItsState) {
  const auto j = generate_json("--max-new-tokens 0");
  ASSERT_FALSE(j.is_null());
  EXPECT_TRUE(j.at("ids").empty());
  EXPECT_EQ(j.at("text").get<std::string>(), "");
  EXPECT_GT(j.at("state_bytes").get<int64_t>(), 4 * 4 * 64 * 64 * 4) << j.dump();
  const auto r = run_statecut("generate --checkpoint " + kGenerateModel + " --prompt '" + kPrompt + "' --max-new-tokens 0");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "\n");
}

// A SentencePiece checkpoint (the shipped model with assets/spm_pydocs256/tokenizer.model, vocab 256: the numbers
// mean nothing, the plumbing does) prints text, not ids: --json's "text" is statecut-spm's own DecodeIds of the
// ids, and the streamed human output is that text.
TEST(Cli_Generate, sentencePieceCheckpointPrintsDecodedText) {
  const fs::path helper = fs::path(STATECUT_CLI).parent_path() / "statecut-spm";
  if (!fs::exists(helper)) GTEST_SKIP() << "built without libsentencepiece: no statecut-spm";
  TempDir d("genspm");
  const fs::path dir = d.path / "model";
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(kGenerateModel)) fs::copy_file(e.path(), dir / e.path().filename());
  const fs::path spm = fs::path(STATECUT_SOURCE_DIR) / "assets" / "spm_pydocs256" / "tokenizer.model";
  fs::copy_file(spm, dir / "tokenizer.model");
  const std::string base = "generate --checkpoint " + dir.string() + " --prompt '" + kPrompt + "' --max-new-tokens 24 ";
  const auto rj = run_statecut(base + "--json");
  ASSERT_EQ(rj.code, 0) << rj.err;
  const auto j = nlohmann::json::parse(rj.out);
  const auto ids = j.at("ids").get<std::vector<int64_t>>();
  ASSERT_EQ(ids.size(), 24u);
  EXPECT_EQ(j.at("tokenizer").get<std::string>().rfind("sentencepiece:", 0), 0u);
  {
    std::ofstream f(d / "ids.txt");
    for (int64_t id : ids) f << id << ' ';
    f << '\n';
  }
  const auto dec = statecut::test::run_program(helper.string(), spm.string() + " decode < " + (d / "ids.txt"));
  ASSERT_EQ(dec.code, 0) << dec.err;
  const std::string want = dec.out.substr(dec.out.find('\n') + 1);  // "<n>\n<text>"
  EXPECT_FALSE(want.empty());
  EXPECT_EQ(j.at("text").get<std::string>(), want);
  const auto rh = run_statecut(base);
  ASSERT_EQ(rh.code, 0) << rh.err;
  EXPECT_EQ(rh.out, want + "\n") << "streamed text = the decoded ids";
  EXPECT_EQ(rh.err.find("token ids"), std::string::npos) << rh.err;
}

/// One line naming `needle`, nothing on stdout: exit 1 (a failure), or 2 (`code`: an option out of its range).
void expect_one_line_failure(const std::string& args, const std::string& needle, int code = 1) {
  const auto r = run_statecut("generate " + args);
  EXPECT_EQ(r.code, code) << args << "\n" << r.err;
  EXPECT_NE(r.err.find(code == 2 ? ": usage: " : ": error: "), std::string::npos) << r.err;
  EXPECT_FALSE(r.signaled);
  EXPECT_TRUE(r.out.empty()) << r.out;
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "not one line: " << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
}

TEST(BadInput_Generate, noPromptOrTwoPromptsIsAUsageError) {
  const std::string m = "generate --checkpoint " + kGenerateModel + " ";
  for (const std::string args : {m, m + "--prompt x --prompt-file /nonexistent/p.txt"}) {
    const auto r = run_statecut(args);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "not one line: " << r.err;
    EXPECT_NE(r.err.find("exactly one of --prompt"), std::string::npos) << r.err;
  }
}

TEST(BadInput_Generate, badInputIsOneLineAndExitOne) {
  const std::string m = "--checkpoint " + kGenerateModel + " ";
  TempDir d("genbad");
  std::ofstream(d / "empty.txt").close();
  expect_one_line_failure(m + "--prompt-file /nonexistent/p.txt", "/nonexistent/p.txt");
  expect_one_line_failure(m + "--prompt-file " + (d / "empty.txt"), d / "empty.txt" + ": the prompt is empty");
  expect_one_line_failure("--checkpoint /nonexistent/model --prompt x", "/nonexistent/model");
}

// Options out of their range are usage errors (exit 2), checked before the prompt file is read.
TEST(BadInput_Generate, optionsOutOfRangeAreUsageErrors) {
  const std::string m = "--checkpoint " + kGenerateModel + " ";
  expect_one_line_failure(m + "--prompt ''", "--prompt: the prompt is empty", 2);
  expect_one_line_failure(m + "--prompt x --temperature -1", "--temperature", 2);
  expect_one_line_failure(m + "--prompt x --temperature 1 --top-p 0", "--top-p", 2);
  expect_one_line_failure(m + "--prompt x --top-k -3", "--top-k", 2);
  expect_one_line_failure(m + "--prompt x --max-new-tokens -1", "--max-new-tokens", 2);
  expect_one_line_failure(m + "--prompt-file /nonexistent/p.txt --top-k -3", "--top-k", 2);
}

// Greedy or sampled, a continuation drawn from non-finite logits is noise that looks like text: refused after the
// prompt with one line naming the checkpoint, exit 1, nothing printed.
TEST(BadInput_Generate, overflowingForwardIsAnErrorNotNoise) {
  TempDir d("genoverflow");
  const std::string ck = statecut::test::overflowing_checkpoint(kGenerateModel, d / "ck");
  for (const std::string extra : {"", " --temperature 1 --seed 3"}) {
    SCOPED_TRACE(extra);
    expect_one_line_failure("--checkpoint " + ck + " --prompt x --max-new-tokens 4" + extra,
                            ck + ": the model's logits are not finite");
  }
}

}  // namespace

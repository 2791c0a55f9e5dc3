// No command overwrites a file the user already has: `tokenize --out` and `eval --niah --svg` pointed at a
// checkpoint's own model.safetensors / config.json (or any existing file) fail with one line naming it, before any
// work, and leave it byte for byte; a missing parent folder is refused the same way. (logits --out:
// logits_text_cli.cpp; prune/rank/verify folders: AtomicDir.)
#include "tests/cli/prune_cli_util.h"

using namespace pipeline_cli;

namespace {

/// A copy of the shipped model that a test may point outputs into.
fs::path model_copy(const TempDir& d) {
  const fs::path m = d.path / "model";
  fs::copy(kModel, m, fs::copy_options::recursive);
  return m;
}

void expect_refused_and_kept(const CliRun& r, const fs::path& file, const std::string& before,
                             const std::string& option) {
  EXPECT_EQ(r.code, 1) << r.err;
  ASSERT_EQ(lines(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find(file.string() + ": " + option + " already exists"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(file), before);
  EXPECT_TRUE(r.out.empty()) << r.out;
}

}  // namespace

TEST(BadInput_OutputFiles, tokenizeOutNeverOverwritesTheCheckpointsWeights) {
  TempDir d("outfiles");
  const fs::path m = model_copy(d), w = m / "model.safetensors";
  head_bytes(kCorpora / "fortunes.txt", d / "t.txt", 200);
  const std::string before = slurp(w);
  expect_refused_and_kept(run_statecut("tokenize --checkpoint " + m.string() + " --text " + (d / "t.txt") +
                                       " --out " + w.string()),
                          w, before, "--out");
  const CliRun orphan = run_statecut("tokenize --checkpoint " + m.string() + " --text " + (d / "t.txt") + " --out " +
                                     (d / "no/such/ids.safetensors"));
  EXPECT_EQ(orphan.code, 1);
  ASSERT_EQ(lines(orphan.err).size(), 1u) << orphan.err;
  EXPECT_NE(orphan.err.find("parent directory"), std::string::npos) << orphan.err;
  const CliRun ok = run_statecut("tokenize --checkpoint " + m.string() + " --text " + (d / "t.txt") + " --out " +
                                 (d / "ids.safetensors"));
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_TRUE(fs::exists(d.path / "ids.safetensors"));
}

TEST(BadInput_OutputFiles, niahSvgNeverOverwritesTheCheckpointsConfig) {
  TempDir d("outfiles");
  const fs::path m = model_copy(d), cfg = m / "config.json";
  const std::string before = slurp(cfg);
  expect_refused_and_kept(run_statecut("eval --niah --checkpoint " + m.string() + " --text " +
                                       (kCorpora / "fortunes.txt").string() + " --svg " + cfg.string()),
                          cfg, before, "--svg");
}

// Linux file names are bytes: a checkpoint or --out whose name is not valid UTF-8 is pruned and reported, the JSON
// (stdout, statecut.json) carrying U+FFFD for the bad byte — nlohmann's type_error 316 failed the whole prune, after
// the work, and with --json left the complete output folder behind an exit 1.
TEST(Cli_OutputFiles, namesThatAreNotUtf8AreWrittenWithAReplacementCharacter) {
  TempDir d("outfiles");
  const fs::path m = d.path / "model\xff";
  fs::copy(kModel, m, fs::copy_options::recursive);
  const std::string out = d / "out\xfe";
  const CliRun r = run_statecut("prune --quiet --json --method l1 --ratio 0.5 --checkpoint " + m.string() + " --out " +
                                out);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["out"], d / "out\xef\xbf\xbd");  // U+FFFD in UTF-8
  const auto rec = nlohmann::json::parse(slurp(fs::path(out) / "statecut.json"));
  EXPECT_EQ(rec["source"]["checkpoint"], (d.path / "model\xef\xbf\xbd").string());
}

// A write that fails inside an output folder (a full disk; here the file-size limit, which fails the same write()
// with EFBIG) is one line naming the folder the user asked for, not the hidden temporary it was being written into,
// and leaves neither the folder nor the temporary.
namespace {
/// `statecut <args>` under a 32 KiB file-size limit. A coverage build's own profile writes fail under it too
/// ("libgcov profiling error: ..." at exit): those lines are the instrumentation's, not the program's, and are dropped.
CliRun run_with_small_file_limit(const std::string& args) {
  CliRun r = run_program(std::string("ulimit -f 64; trap '' XFSZ; ") + STATECUT_CLI, args);
  std::string kept;
  for (const std::string& line : lines(r.err))
    if (line.rfind("libgcov profiling error", 0) != 0) kept += line + "\n";
  r.err = kept;
  return r;
}
}  // namespace

TEST(BadInput_OutputFiles, aFailedWriteNamesTheOutputFolderNotItsTemporary) {
  TempDir d("outfiles-full");
  const fs::path out = d.path / "pruned";
  const CliRun r = run_with_small_file_limit("prune --quiet --checkpoint " + kModel.string() +
                                             " --method l1 --ratio 0.5 --out " + out.string());
  EXPECT_EQ(r.code, 1) << r.err;
  ASSERT_EQ(lines(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find(out.string() + "/model.safetensors: write failed: File too large"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(".tmp-"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
  EXPECT_TRUE(fs::is_empty(d.path)) << "a temporary was left behind";
  // A single output file is written to "<file>.tmp.<pid>.<n>" and renamed: the same line names the file.
  const fs::path ids = d.path / "ids.safetensors";
  const CliRun t = run_with_small_file_limit("tokenize --checkpoint " + kModel.string() + " --text " +
                                             (kCorpora / "fortunes.txt").string() + " --out " + ids.string());
  EXPECT_EQ(t.code, 1) << t.err;
  ASSERT_EQ(lines(t.err).size(), 1u) << t.err;
  EXPECT_NE(t.err.find(ids.string() + ": write failed: File too large"), std::string::npos) << t.err;
  EXPECT_TRUE(fs::is_empty(d.path)) << "a temporary was left behind";
}

// Invalid UTF-8 read through a tokenizer that is not byte-level is refused by every command that tokenises text, as
// eval refused it (tokenize wrote the ids of its U+FFFD repair, prune calibrated on it); a byte-level model reads it.
TEST(BadInput_OutputFiles, invalidUtf8IsRefusedByEveryTokenisingCommand) {
  const fs::path root(STATECUT_SOURCE_DIR);
  TempDir d("invalid-utf8");
  const fs::path ck = d.path / "bpe", bad = d.path / "bad.txt";
  fs::copy(kModel, ck, fs::copy_options::recursive);
  fs::copy_file(root / "tests" / "data" / "tokenizer_bpe" / "tokenizer.json", ck / "tokenizer.json");
  std::ofstream(bad, std::ios::binary) << "hello \xFF\xFE world \xC3\x28 more text here, and more of it";
  const std::string needle = bad.string() + ": invalid UTF-8 at byte 6: the tokenizer would read its repair";
  for (const std::string& args :
       {"tokenize --checkpoint " + ck.string() + " --text " + bad.string(),
        "generate --checkpoint " + ck.string() + " --prompt-file " + bad.string() + " --max-new-tokens 1",
        "prune --checkpoint " + ck.string() + " --method drrqr --ratio 0.5 --calib " + bad.string() +
            " --calib-seqs 1 --calib-len 4 --out " + (d.path / "p").string()}) {
    const CliRun r = run_statecut(args);
    EXPECT_EQ(r.code, 1) << args << "\n" << r.err;
    ASSERT_EQ(lines(r.err).size(), 1u) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << args << "\n" << r.err;
  }
  EXPECT_FALSE(fs::exists(d.path / "p"));
  const CliRun bytes = run_statecut("tokenize --checkpoint " + kModel.string() + " --text " + bad.string());
  EXPECT_EQ(bytes.code, 0) << bytes.err;
}

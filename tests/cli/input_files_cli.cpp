// A path named as input text — tokenize's --text, generate's --prompt-file, prune's --calib, eval's and verify's
// --text — that is a directory or does not exist: every command says so in one line naming the path, exits non-zero
// (verify: 2, its "cannot read the input") and writes nothing. (A directory once read as empty text: tokenize wrote an
// empty token file and exited 0, generate called the prompt empty, prune called the folder "not found".)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/cli/cli_run.h"

namespace fs = std::filesystem;

namespace {

using statecut::test::run_statecut;
using statecut::test::TempDir;

const std::string kInputTextModel = (fs::path(STATECUT_SOURCE_DIR) / "assets" / "byte_delta_net_4L").string();

struct InputCase {
  std::string args;  // after the path is substituted for @
  int code;
  std::string out;   // what must not exist afterwards ("" = nothing written to check)
};

void expect_input_refused(const TempDir& tmp, const std::string& path, const std::string& problem) {
  const std::string out = tmp / "out";
  const InputCase cases[] = {
      {"tokenize --checkpoint " + kInputTextModel + " --text @ --out " + out + "/ids.safetensors", 1, out + "/ids.safetensors"},
      {"generate --checkpoint " + kInputTextModel + " --prompt-file @", 1, ""},
      {"prune --checkpoint " + kInputTextModel + " --method drrqr --ratio 0.5 --calib @ --out " + out + "/p", 1, out + "/p"},
      {"eval --checkpoint " + kInputTextModel + " --text @", 1, ""},
      {"verify --checkpoint " + kInputTextModel + " --text @", 2, ""},
      {"logits --checkpoint " + kInputTextModel + " --text @ --out " + out + "/l.safetensors", 1,
       out + "/l.safetensors"},
      {"logits --checkpoint " + kInputTextModel + " --tokens @ --out " + out + "/l.safetensors", 1,
       out + "/l.safetensors"},
  };
  fs::create_directories(out);
  for (const auto& c : cases) {
    std::string args = c.args;
    args.replace(args.find('@'), 1, path);
    const auto r = run_statecut(args);
    EXPECT_EQ(r.code, c.code) << args << "\n" << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << args << ": not one line: " << r.err;
    EXPECT_NE(r.err.find(path + ": "), std::string::npos) << args << ": " << r.err;
    EXPECT_NE(r.err.find(problem), std::string::npos) << args << ": " << r.err;
    if (!c.out.empty()) EXPECT_FALSE(fs::exists(c.out)) << args << " wrote " << c.out;
  }
  EXPECT_TRUE(fs::is_empty(out)) << "something was written under " << out;
}

TEST(BadInput_InputFiles, aDirectoryAsInputTextIsRefusedByEveryCommand) {
  TempDir tmp("input_dir");
  const std::string dir = tmp / "a_folder";
  fs::create_directories(dir);
  expect_input_refused(tmp, dir, "is a directory");
}

TEST(BadInput_InputFiles, aMissingInputTextIsRefusedByEveryCommand) {
  TempDir tmp("input_missing");
  expect_input_refused(tmp, tmp / "no_such.txt", "no such file");
}

// A link to nothing (or a loop) is named as what it is, not as an absent file.
TEST(BadInput_InputFiles, aBrokenSymbolicLinkIsNamedAsOne) {
  TempDir tmp("input_link");
  const std::string link = tmp / "dangling.txt", loop = tmp / "loop.txt";
  fs::create_symlink(tmp / "gone.txt", link);
  expect_input_refused(tmp, link, "a symbolic link to '" + (tmp / "gone.txt") + "', which does not exist");
  fs::create_symlink(loop, loop);
  expect_input_refused(tmp, loop, "a symbolic link loop");
}

// tokenize with a tokenizer whose ids the checkpoint's model cannot take (Qwen3's 151,643-piece BPE beside a
// vocab_size of 512) refuses the token file, naming the text, the id and the config: eval and generate would only
// refuse it later. The same folder with a vocabulary that holds the ids writes it.
TEST(BadInput_InputFiles, tokenizeRefusesIdsOutsideTheModelsVocabulary) {
  TempDir tmp("tokenize_vocab");
  const std::string ck = tmp / "ck", text = tmp / "t.txt", out = tmp / "ids.safetensors";
  fs::create_directories(ck);
  fs::copy_file(fs::path(STATECUT_SOURCE_DIR) / "tests" / "data" / "tokenizer_bpe" / "tokenizer.json",
                fs::path(ck) / "tokenizer.json");
  std::ofstream(ck + "/config.json") << R"({"model_type": "delta_net", "vocab_size": 512})";
  std::ofstream(text) << "Hello, world!";
  const auto r = run_statecut("tokenize --checkpoint " + ck + " --text " + text + " --out " + out);
  if (r.err.find("needs PCRE2") != std::string::npos) GTEST_SKIP() << "built without PCRE2";
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  EXPECT_NE(r.err.find(text + ": token 0 = 9707 is outside the model's vocabulary [0, 512) in " + ck + "/config.json"),
            std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
  std::ofstream(ck + "/config.json") << R"({"model_type": "delta_net", "vocab_size": 151936})";
  const auto ok = run_statecut("tokenize --checkpoint " + ck + " --text " + text + " --out " + out);
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_TRUE(fs::exists(out));
}

// tokenize reads text: a token file given as --text (which every other command reads as ids) is refused rather than
// its bytes tokenised as if they were text, and an empty text writes no 0-token file that every reader would refuse.
TEST(BadInput_InputFiles, tokenizeRefusesATokenFileAndAnEmptyText) {
  TempDir tmp("tokenize_kinds");
  const std::string ids = tmp / "ids.safetensors", empty = tmp / "empty.txt", text = tmp / "t.txt";
  std::ofstream(text) << "ab";
  std::ofstream(empty).close();
  const std::string tokenize = "tokenize --checkpoint " + kInputTextModel + " --text ";
  ASSERT_EQ(run_statecut(tokenize + text + " --out " + ids).code, 0);
  std::ofstream(tmp / "raw.bin") << "abcd";
  for (const std::string& f : {ids, tmp / "raw.bin"}) {
    const auto r = run_statecut(tokenize + f + " --out " + (tmp / "again.safetensors"));
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
    EXPECT_NE(r.err.find(f + ": a token file (.safetensors, .bin) holds ids already"), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
  const auto e = run_statecut(tokenize + empty + " --out " + (tmp / "again.safetensors"));
  EXPECT_EQ(e.code, 1) << e.err;
  EXPECT_NE(e.err.find(empty + ": empty: no tokens"), std::string::npos) << e.err;
  EXPECT_FALSE(fs::exists(tmp / "again.safetensors"));
}

}  // namespace

// `statecut finetune` end to end: a short run on the fixtures writes a checkpoint that `statecut eval` reads, with
// statecut.json's finetune record, loss.csv and loss.svg; Ctrl-C-style stops resume; bad input (and a run that
// diverges) is one line, exit 1, nothing left behind; a bad flag is a usage error (exit 2).
#include <netinet/in.h>
#include <map>
#include <sys/socket.h>

#include "tests/cli/prune_cli_util.h"

using namespace pipeline_cli;
using nlohmann::json;

namespace {

std::string fixture(const std::string& name) { return (kFixtures / name).string(); }

std::string train_text(const TempDir& d) {
  const std::string p = d / "train.txt";
  head_bytes(kCorpora / "pydocs_train.txt", p, 20000);
  return p;
}

std::string quick_args(const TempDir& d, int steps) {
  return " --checkpoint " + fixture("fla_delta_net_pruned50") + " --teacher " + fixture("fla_delta_net") + " --text " +
         train_text(d) + " --steps " + std::to_string(steps) + " --seq-len 32 --batch 2 --lora-rank 4 --lora-alpha 8 --quiet";
}

/// One line naming `needle`, nothing written: exit 1 "error:" for a failure, exit 2 "usage:" for an option out of range.
void expect_finetune_failure(const CliRun& r, const std::string& needle, const fs::path& out, int code = 1) {
  EXPECT_EQ(r.code, code) << r.err;
  const auto l = lines(r.err);
  ASSERT_EQ(l.size(), 1u) << "want one line, got:\n" << r.err;
  EXPECT_EQ(l[0].rfind(code == 2 ? "statecut finetune: usage: " : "statecut finetune: error: ", 0), 0u) << l[0];
  EXPECT_NE(l[0].find(needle), std::string::npos) << "'" << needle << "' not in: " << l[0];
  EXPECT_FALSE(fs::exists(out)) << "failed run left " << out;
  if (fs::exists(out.parent_path()))
    EXPECT_TRUE(entries_containing(out.parent_path(), ".tmp-").empty()) << "temporary left behind";
}

/// A TCP port that was free a moment ago (bound to port 0 and released).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    return 29517;
  const int port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

/// Every float of a safetensors file, keyed by tensor name.
std::map<std::string, std::vector<double>> all_tensors(const std::string& path) {
  std::map<std::string, std::vector<double>> m;
  const auto f = statecut::io::SafetensorsFile::open(path);
  for (const auto& n : f.names()) m[n] = statecut::io::to_double(f.tensor(n));
  return m;
}

}  // namespace

TEST(Cli_Finetune, shortRunWritesACheckpointThatEvalReads) {
  if (!fs::exists(kFixtures / "fla_delta_net_pruned50")) GTEST_SKIP() << "no fixtures";
  TempDir d("ft");
  const std::string out = d / "out";
  const CliRun r = run_statecut("finetune" + quick_args(d, 2) + " --json --eval-text " + train_text(d) +
                                " --eval-tokens 256 --out " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_TRUE(j["completed"].get<bool>());
  EXPECT_EQ(j["steps"], 2);
  EXPECT_EQ(j["tokens"], 2 * 2 * 32);
  EXPECT_TRUE(j["eval"]["bits_per_byte"].is_object());
  for (const char* f : {"config.json", "model.safetensors", "statecut.json", "loss.csv", "loss.svg"})
    EXPECT_TRUE(fs::exists(fs::path(out) / f)) << f;
  EXPECT_EQ(lines(slurp(fs::path(out) / "loss.csv")).size(), 3u);  // header + 2 steps
  const json rec = json::parse(slurp(fs::path(out) / "statecut.json"));
  // paths absolute, as prune's record holds them (the teacher and texts were kept as typed)
  EXPECT_EQ(rec["finetune"]["teacher"], fs::absolute(fixture("fla_delta_net")).lexically_normal().string());
  for (const auto& t : rec["finetune"]["text"]) EXPECT_TRUE(fs::path(t.get<std::string>()).is_absolute()) << t;
  EXPECT_TRUE(fs::path(rec["finetune"]["source"].get<std::string>()).is_absolute()) << rec["finetune"].dump();
  const CliRun e = run_statecut("eval --checkpoint " + out + " --text " + train_text(d) + " --max-tokens 256 --json --quiet");
  EXPECT_EQ(e.code, 0) << e.err;
}

TEST(Cli_Finetune, stopAfterThenResumeCompletes) {
  if (!fs::exists(kFixtures / "fla_delta_net_pruned50")) GTEST_SKIP() << "no fixtures";
  TempDir d("ft-resume");
  const std::string out = d / "out";
  const CliRun a = run_statecut("finetune" + quick_args(d, 3) + " --save-every 1 --stop-after 1 --out " + out);
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_NE(a.out.find("--resume"), std::string::npos) << a.out;
  EXPECT_FALSE(fs::exists(out));
  const CliRun b = run_statecut("finetune" + quick_args(d, 3) + " --resume --out " + out);
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_TRUE(fs::exists(fs::path(out) / "model.safetensors"));
  EXPECT_EQ(lines(slurp(fs::path(out) / "loss.csv")).size(), 4u);
}

// A resume identifies the student by what it is: the same folder reached from another working directory resumes
// (it was refused: the recipe held the path as typed), another model under the same relative name is refused (it
// was resumed onto: a drrqr run's LoRA state continued on an l1 prune).
TEST(Cli_Finetune, resumeKnowsTheStudentByWhatItIsNotByThePathAsTyped) {
  if (!fs::exists(kFixtures / "fla_delta_net_pruned50")) GTEST_SKIP() << "no fixtures";
  TempDir d("ft-resume-identity");
  const fs::path a = d.path / "a", b = d.path / "b";
  fs::create_directories(a);
  fs::create_directories(b);
  fs::copy(kFixtures / "fla_delta_net_pruned50", a / "s", fs::copy_options::recursive);
  fs::copy(kFixtures / "fla_delta_net_pruned50", b / "s", fs::copy_options::recursive);
  std::ofstream(b / "s" / "statecut.json") << R"({"finetune": {"steps": 9}})";  // another model's record
  const std::string out = d / "out";
  const std::string rest = " --teacher " + fixture("fla_delta_net") + " --text " + train_text(d) +
                           " --steps 3 --seq-len 32 --batch 2 --lora-rank 4 --lora-alpha 8 --quiet --out " + out;
  const auto in = [](const fs::path& cwd) { return "cd " + cwd.string() + " && " + std::string(STATECUT_CLI); };
  const CliRun first = run_program(in(a), "finetune --checkpoint s --save-every 1 --stop-after 1" + rest);
  ASSERT_EQ(first.code, 0) << first.err;
  const CliRun other = run_program(in(b), "finetune --checkpoint s --resume" + rest);
  EXPECT_EQ(other.code, 1) << other.err;
  EXPECT_NE(other.err.find("the saved run used checkpoint = "), std::string::npos) << other.err;
  const CliRun same = run_program(in(d.path), "finetune --checkpoint ./a/s/ --resume" + rest);
  EXPECT_EQ(same.code, 0) << same.err;
  EXPECT_TRUE(fs::exists(fs::path(out) / "model.safetensors"));
}

TEST(Cli_Finetune, badInputIsOneLineExitOneNothingWritten) {
  if (!fs::exists(kFixtures / "fla_delta_net_pruned50")) GTEST_SKIP() << "no fixtures";
  TempDir d("ft-bad");
  const std::string out = d / "out";
  const std::string text = train_text(d);
  const std::string student = " --checkpoint " + fixture("fla_delta_net_pruned50");
  const std::string teacher = " --teacher " + fixture("fla_delta_net");
  const std::string tiny = d / "tiny.txt";
  std::ofstream(tiny) << "too short";
  const std::string other_vocab = d / "vocab";  // a consistent teacher with 200 token ids instead of 256
  fs::create_directories(other_vocab);
  {
    json c = json::parse(slurp(kFixtures / "fla_delta_net" / "config.json"));
    c["vocab_size"] = 200;
    std::ofstream(fs::path(other_vocab) / "config.json") << c.dump();
    const auto in = statecut::io::SafetensorsFile::open((kFixtures / "fla_delta_net" / "model.safetensors").string());
    statecut::io::SafetensorsWriter w;
    for (const auto& n : in.names()) {
      auto t = in.tensor(n);
      if (!t.shape.empty() && t.shape[0] == 256 && (n.find("embed") != std::string::npos || n.find("lm_head") != std::string::npos)) {
        t.nbytes = t.nbytes / 256 * 200;
        t.shape[0] = 200;
      }
      w.add(t);
    }
    w.write((fs::path(other_vocab) / "model.safetensors").string());
  }
  struct Case {
    std::string args, needle;
    int code = 1;  // 2: a usage error (an option left out or out of its range)
  };
  const std::vector<Case> cases = {
      {student + teacher + " --text " + d / "missing.txt", "missing.txt"},
      {" --checkpoint " + d / "nowhere" + teacher + " --text " + text, "nowhere"},
      {student + " --text " + text, "--teacher", 2},
      {student + teacher + " --text " + text + " --steps 0", "--steps", 2},
      {student + teacher + " --text " + text + " --lr -1", "--lr", 2},
      {student + teacher + " --text " + text + " --min-lr-ratio 2", "--min-lr-ratio", 2},
      {student + teacher + " --text " + tiny + " --seq-len 64", "fewer than --seq-len"},
      {student + " --teacher " + other_vocab + " --text " + text, "vocab"},
      {student + teacher + " --text " + text + " --resume", "no saved state"},
      {student + teacher + " --text " + text + " --device tpu", "--device", 2},
      // a device LibTorch knows but the trainer does not run on: refused before any weight is read (seed 341: the
      // trainer's own check inverted survived, LibTorch then failed on the meta device's missing kernels)
      {student + teacher + " --text " + text + " --device meta", "--device must be cpu or cuda, got 'meta'", 2},
      // diverged (NaN weights that every command would refuse): an error with nothing written, not a checkpoint
      {student + teacher + " --text " + text + " --steps 3 --lr 1e30", "training diverged"},
      // a micro-batch whose logits alone exceed the memory: refused before it is built (the OOM killer ended it)
      {student + teacher + " --text " + text + " --batch 1000000000", "lower --batch"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.args);
    std::string args = "finetune --quiet" + c.args;
    if (c.args.find("--steps") == std::string::npos) args += " --steps 1";
    if (c.args.find("--seq-len") == std::string::npos) args += " --seq-len 16";
    expect_finetune_failure(run_statecut(args + " --out " + out), c.needle, out, c.code);
  }
  fs::create_directories(out);  // an existing output folder is refused, and left as it was
  const CliRun r = run_statecut("finetune --quiet" + student + teacher + " --text " + text + " --out " + out);
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(lines(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find("already exists"), std::string::npos) << r.err;
}

TEST(Cli_Finetune, unknownFlagIsAUsageError) {
  const CliRun r = run_statecut("finetune --checkpoint x --text y --out z --lora-rnak 4");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(lines(r.err).size(), 1u) << r.err;
}

/// Two processes over Gloo (torchrun's environment) with --batch 2 end where one process with --batch 4 ends: the same
/// windows (rank r takes rows [2r, 2r+2) of the global draw), the mean gradient all-reduced. Tolerance: the two runs
/// sum the same fp32 terms in a different order (per-rank means, then Gloo's sum), ~1e-7 relative per gradient; AdamW
/// passes that through about unchanged over 3 steps, so the weight CHANGES agree to 1e-3 relative (a wrong reduction,
/// a sum instead of a mean, or ranks reading the same windows give O(1)).
TEST(Cli_Finetune, twoGlooProcessesEqualOneProcessWithTheDoubledBatch) {
  if (!fs::exists(kFixtures / "fla_delta_net_pruned50")) GTEST_SKIP() << "no fixtures";
  TempDir d("ft-dp");
  const std::string args = " --checkpoint " + fixture("fla_delta_net_pruned50") + " --teacher " +
                           fixture("fla_delta_net") + " --text " + train_text(d) +
                           " --steps 3 --seq-len 32 --lora-rank 4 --lora-alpha 8 --lr 1e-3 --quiet";
  const std::string env = "MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(free_port()) + " WORLD_SIZE=2 ";
  const std::string dp = d / "dp", one = d / "one";
  const std::string both = "sh -c '" + env + "RANK=1 " + STATECUT_CLI + " finetune" + args + " --batch 2 --out " + dp +
                           " > " + (d / "rank1.log") + " 2>&1 & " + env + "RANK=0 " + STATECUT_CLI + " finetune" +
                           args + " --batch 2 --out " + dp + "; r=$?; wait $!; s=$?; exit $((r + s))'";
  const CliRun r = run_program("", both);
  if (r.code != 0 && r.err.find("no c10d backend") != std::string::npos) GTEST_SKIP() << "built without Gloo: " << r.err;
  ASSERT_EQ(r.code, 0) << r.err << slurp(d / "rank1.log");
  const CliRun s = run_statecut("finetune" + args + " --batch 4 --out " + one);
  ASSERT_EQ(s.code, 0) << s.err;
  const auto base = all_tensors(fixture("fla_delta_net_pruned50") + "/model.safetensors");
  const auto a = all_tensors(dp + "/model.safetensors"), b = all_tensors(one + "/model.safetensors");
  double diff = 0, norm = 0;
  for (const auto& [n, w0] : base)
    for (size_t i = 0; i < w0.size(); ++i) {
      const double da = a.at(n)[i] - w0[i], db = b.at(n)[i] - w0[i];
      diff += (da - db) * (da - db), norm += db * db;
    }
  ASSERT_GT(norm, 0) << "training changed nothing";
  std::printf("2 Gloo ranks vs 1 process: relative difference of the weight changes %.3g\n", std::sqrt(diff / norm));
  EXPECT_LT(std::sqrt(diff / norm), 1e-3);
  const json rec = json::parse(slurp(fs::path(dp) / "statecut.json"));
  EXPECT_EQ(rec["finetune"]["recipe"]["world_size"], 2);
  EXPECT_EQ(rec["finetune"]["tokens"], 3 * 4 * 32);
}

// --config that is a folder or is missing is said as every input file is ("is a directory, not a file"; a folder was
// called "no such config file").
TEST(BadInput_Train, aConfigThatIsAFolderOrMissingIsNamedAsSuch) {
  TempDir d("train-config");
  for (const auto& [cfg, problem] : {std::pair{d.path.string(), std::string("is a directory, not a file")},
                                     {(d / "none.json"), std::string("no such file")}}) {
    const CliRun r = run_statecut("train --config " + cfg + " --text " + train_text(d) + " --steps 1 --quiet --out " +
                                  (d / "out"));
    EXPECT_EQ(r.code, 1) << r.err;
    ASSERT_EQ(lines(r.err).size(), 1u) << r.err;
    EXPECT_NE(r.err.find(cfg + ": " + problem), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(d / "out"));
  }
}

// A config whose model cannot be allocated (hidden_size 10^9 under an 8 GB address-space limit) is one line naming
// the config and the cause; it said "statecut train: error: std::bad_alloc" (audit D13).
TEST(BadInput_Train, aModelThatCannotBeAllocatedIsOneLineNamingTheConfig) {
  if (!fs::exists(kFixtures / "fla_delta_net")) GTEST_SKIP() << "no fixtures";
  TempDir d("train-huge");
  json c = json::parse(slurp(kFixtures / "fla_delta_net" / "config.json"));
  c["hidden_size"] = 1000000000;
  const std::string cfg = d / "huge.json";
  std::ofstream(cfg) << c.dump();
  const CliRun r = run_program("ulimit -v 8000000; " + std::string(STATECUT_CLI),
                               "train --config " + cfg + " --text " + train_text(d) + " --steps 1 --seq-len 16 --quiet --out " +
                                   (d / "out"));
  EXPECT_EQ(r.code, 1) << r.err;
  ASSERT_EQ(lines(r.err).size(), 1u) << r.err;
  EXPECT_EQ(lines(r.err)[0].rfind("statecut train: error: " + cfg + ": ", 0), 0u) << r.err;
  EXPECT_FALSE(fs::exists(d / "out"));
}

// `statecut prune` end to end on the shipped model and the shared fixtures: fla's pruned checkpoints reproduced
// byte for byte and their logits, a pruned model equal to one sliced by hand here, --keep dk = identity,
// reproducible bytes, every method loads back with the pruned shapes, and bad input leaves nothing behind.
#include <cstring>

#include "tests/cli/prune_cli_util.h"

using namespace pipeline_cli;
using nlohmann::json;

namespace {

std::string calib_file(const TempDir& d) {
  const std::string p = d / "calib.txt";
  head_bytes(kCorpora / "pydocs_train.txt", p, 20000);
  return p;
}

std::string quick(const std::string& calib) {  // short calibration: 2 × 128 tokens
  return " --quiet --calib " + calib + " --calib-seqs 2 --calib-len 128";
}

/// logits of `ckpt` on `tokens` (a token file) via `statecut logits`.
std::vector<double> logits(const std::string& ckpt, const std::string& tokens, const TempDir& d, const std::string& tag,
                           std::vector<int64_t>* shape = nullptr) {
  const std::string out = d / ("logits-" + tag + ".safetensors");
  const CliRun r = run_statecut("logits --checkpoint " + ckpt + " --tokens " + tokens + " --out " + out);
  EXPECT_EQ(r.code, 0) << r.err;
  if (r.code != 0) return {};
  return read_tensor(out, "logits", shape);
}

std::string text_tokens(const TempDir& d, int64_t T) {  // held-out bytes as a [1, T] token file
  const std::string s = slurp(kCorpora / "pydocs_valid.txt").substr(5000, T);
  std::vector<int64_t> ids(s.begin(), s.end());
  for (auto& x : ids) x &= 0xff;
  const std::string p = d / "tokens.safetensors";
  write_tokens(p, ids, 1, T);
  return p;
}

/// One line naming `needle`, no output folder or temporary: exit 1 "error:", or 2 "usage:" (an option's own range).
void expect_clean_failure(const CliRun& r, const std::string& needle, const fs::path& out, int code = 1) {
  EXPECT_EQ(r.code, code) << r.err;
  const auto l = lines(r.err);
  ASSERT_EQ(l.size(), 1u) << "want one line, got:\n" << r.err;
  EXPECT_EQ(l[0].rfind(code == 2 ? "statecut prune: usage: " : "statecut prune: error: ", 0), 0u) << l[0];
  EXPECT_NE(l[0].find(needle), std::string::npos) << "'" << needle << "' not in: " << l[0];
  EXPECT_FALSE(fs::exists(out)) << "failed run left " << out;
  if (fs::exists(out.parent_path()))
    EXPECT_TRUE(entries_containing(out.parent_path(), ".tmp-").empty()) << "temporary left behind";
}

/// `statecut prune --checkpoint <shipped model> <args> --out <fresh folder>/out` fails cleanly with `needle`.
void expect_prune_fails(const std::string& args, const std::string& needle, int code = 1) {
  TempDir d("bad");
  expect_clean_failure(run_statecut("prune --checkpoint " + kModel.string() + " " + args + " --out " + (d / "out")), needle,
                       d.path / "out", code);
}

}  // namespace

TEST(Cli_Prune, fixtureKeepFilesGiveFlasPrunedCheckpointsAndLogits) {
  if (!fs::exists(kFixtures / "fla_delta_net_pruned50")) GTEST_SKIP() << "no fixtures (../shared/fixtures or tests/data/fixtures)";
  for (const std::string fam : {"fla_delta_net", "fla_gated_deltanet"}) {
    TempDir d(fam);
    const fs::path want = kFixtures / (fam + "_pruned50");
    const CliRun r = run_statecut("prune --quiet --checkpoint " + (kFixtures / fam).string() + " --keep-from " +
                           (want / "keep.json").string() + " --out " + (d / "out"));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(slurp(d.path / "out" / "model.safetensors") == slurp(want / "model.safetensors")) << fam;
    EXPECT_EQ(slurp(d.path / "out" / "config.json"), slurp(want / "config.json")) << fam;
    // fla's logits of its pruned model (run0: 33 tokens, fla's fp32 recurrent kernel)
    std::vector<int64_t> shape;
    const auto ids = read_tensor((want / "golden.safetensors").string(), "run0.input_ids", &shape);
    write_tokens(d / "ids.safetensors", std::vector<int64_t>(ids.begin(), ids.end()), shape[0], shape[1]);
    const auto ours = logits(d / "out", d / "ids.safetensors", d, fam);
    const auto theirs = read_tensor((want / "golden.safetensors").string(), "run0.logits");
    ASSERT_EQ(ours.size(), theirs.size());
    // fp32 both sides, different summation order over 2 layers: a few eps_f32 per op.
    EXPECT_LT(rel_err(ours, theirs), 1e-5) << fam;
  }
}

TEST(Cli_Prune, drrqrCheckpointEqualsTheModelSlicedByHand) {
  TempDir d("hand");
  const std::string calib = calib_file(d);
  const CliRun r = run_statecut("prune --checkpoint " + kModel.string() + " --method drrqr --ratio 0.5 --out " + (d / "out") +
                         quick(calib) + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json rec = json::parse(slurp(d.path / "out" / "statecut.json"));
  EXPECT_EQ(rec["new_head_k_dim"], 32);
  EXPECT_EQ(json::parse(r.out)["method"], "drrqr");
  // Slice by hand: rows h·64 + c (c in keep[h], in order) of q/k proj and conv, nothing else; expand_k 0.5.
  const auto src = statecut::io::SafetensorsFile::open((kModel / "model.safetensors").string());
  statecut::io::SafetensorsWriter w;
  std::vector<std::string> bufs;
  for (const auto& name : src.names()) {
    const auto& t = src.tensor(name);
    const auto dot = name.find(".attn.");
    const bool qk = dot != std::string::npos &&
                    (name.find("q_proj") != std::string::npos || name.find("k_proj") != std::string::npos ||
                     name.find("q_conv1d") != std::string::npos || name.find("k_conv1d") != std::string::npos);
    if (!qk) {
      w.add(t);
      continue;
    }
    const int layer = std::stoi(name.substr(std::string("model.layers.").size()));
    const json& keep = rec["selection"]["layers"][layer]["keep"];
    const size_t row = t.nbytes / t.shape[0];
    std::string b;
    for (int h = 0; h < 4; ++h)
      for (const auto& c : keep[h]) b.append(reinterpret_cast<const char*>(t.data) + (h * 64 + c.get<int>()) * row, row);
    bufs.push_back(b);
    auto shape = t.shape;
    shape[0] = 128;
    w.add(name, t.dtype, shape, bufs.back().data(), bufs.back().size());
  }
  w.set_metadata(src.metadata());
  fs::create_directories(d.path / "hand");
  w.write(d / "hand/model.safetensors");
  json cfg = json::parse(slurp(kModel / "config.json"));
  cfg["expand_k"] = 0.5;
  std::ofstream(d / "hand/config.json") << cfg.dump(2) << "\n";
  EXPECT_TRUE(slurp(d.path / "out" / "model.safetensors") == slurp(d.path / "hand" / "model.safetensors"));
  const std::string tokens = text_tokens(d, 300);
  std::vector<int64_t> shape;
  const auto a = logits(d / "out", tokens, d, "out", &shape), b = logits(d / "hand", tokens, d, "hand");
  EXPECT_EQ(shape, (std::vector<int64_t>{1, 300, 256}));
  EXPECT_EQ(a, b);
  const auto base = logits(kModel.string(), tokens, d, "base");
  EXPECT_GT(rel_err(a, base), 1e-3) << "pruning half the key channels must change the logits";
}

TEST(Cli_Prune, keepingAllChannelsIsTheIdentity) {
  TempDir d("id");
  const CliRun r = run_statecut("prune --quiet --checkpoint " + kModel.string() + " --method l1 --keep 64 --out " + (d / "out"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(slurp(d.path / "out" / "model.safetensors") == slurp(kModel / "model.safetensors"));
  EXPECT_EQ(slurp(d.path / "out" / "config.json"), slurp(kModel / "config.json"));
}

TEST(Cli_Prune, sameSeedGivesTheSameBytes) {
  TempDir d("seed");
  const std::string calib = calib_file(d);
  for (const std::string m : {"rand", "drrqr"}) {
    std::string prev;
    for (const std::string tag : {"a", "b"}) {
      const CliRun r = run_statecut("prune --checkpoint " + kModel.string() + " --method " + m + " --ratio 0.5 --seed 7 --out " +
                             (d / (m + tag)) + quick(calib));
      ASSERT_EQ(r.code, 0) << r.err;
      const std::string bytes = slurp(d.path / (m + tag) / "model.safetensors") + slurp(d.path / (m + tag) / "statecut.json");
      if (!prev.empty()) EXPECT_TRUE(bytes == prev) << m << ": two runs with seed 7 differ";
      prev = bytes;
    }
  }
  const CliRun r = run_statecut("prune --quiet --checkpoint " + kModel.string() + " --method rand --ratio 0.5 --seed 8 --out " + (d / "rand8"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(json::parse(slurp(d.path / "rand8" / "statecut.json"))["selection"],
            json::parse(slurp(d.path / "randa" / "statecut.json"))["selection"]);
}

TEST(Cli_Prune, everyMethodLoadsBackWithThePrunedShapes) {
  TempDir d("all");
  const std::string calib = calib_file(d), tokens = text_tokens(d, 65);
  for (const std::string m : {"rand", "l1", "swanda", "grad", "drrqr", "pca"}) {
    const CliRun r = run_statecut("prune --checkpoint " + kModel.string() + " --method " + m + " --ratio 0.75 --out " + (d / m) + quick(calib));
    ASSERT_EQ(r.code, 0) << m << ": " << r.err;
    EXPECT_EQ(json::parse(slurp(d.path / m / "config.json"))["expand_k"], 0.25) << m;
    const auto w = statecut::io::SafetensorsFile::open(d / (m + "/model.safetensors"));
    EXPECT_EQ(w.tensor("model.layers.3.attn.k_proj.weight").shape, (std::vector<int64_t>{64, 256})) << m;
    EXPECT_EQ(w.tensor("model.layers.3.attn.q_conv1d.weight").shape, (std::vector<int64_t>{64, 1, 4})) << m;
    EXPECT_EQ(w.tensor("model.layers.3.attn.q_proj.weight").dtype, statecut::io::DType::BF16) << m << ": dtype kept";
    std::vector<int64_t> shape;
    const auto y = logits(d / m, tokens, d, m, &shape);
    EXPECT_EQ(shape, (std::vector<int64_t>{1, 65, 256})) << m;
    for (double v : y) ASSERT_TRUE(std::isfinite(v)) << m;
  }
}

TEST(BadInput_Prune, ratioOutsideTheOpenUnitInterval) {
  for (const std::string r : {"0", "1", "1.5", "-0.25"})
    expect_prune_fails("--method l1 --ratio " + r, "(0, 1)", 2);
}

TEST(BadInput_Prune, keepLargerThanTheHeadDim) { expect_prune_fails("--method l1 --keep 65", "dk = 64"); }

TEST(BadInput_Prune, emptyOrTooShortCalibrationText) {
  TempDir d("calib");
  std::ofstream(d / "empty.txt").close();
  head_bytes(kCorpora / "pydocs_train.txt", d / "short.txt", 100);
  expect_prune_fails("--method drrqr --ratio 0.5 --calib " + (d / "empty.txt"), "empty.txt: empty");
  expect_prune_fails("--method grad --ratio 0.5 --calib " + (d / "short.txt") + " --calib-len 256", "short.txt: too short");
  expect_prune_fails("--method pca --ratio 0.5", "needs calibration text", 2);
}

TEST(BadInput_Prune, unknownMethod) { expect_prune_fails("--method magic --ratio 0.5", "unknown --method 'magic'", 2); }

TEST(BadInput_Prune, unwritableOrExistingOutput) {
  TempDir d("out");
  const CliRun r = run_statecut("prune --checkpoint " + kModel.string() + " --method l1 --ratio 0.5 --out /proc/statecut-out");
  EXPECT_EQ(r.code, 1);
  ASSERT_EQ(lines(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find("/proc/statecut-out: cannot create output directory"), std::string::npos) << r.err;
  expect_clean_failure(run_statecut("prune --checkpoint " + kModel.string() + " --method l1 --ratio 0.5 --out " +
                                (d / "no/such/dir/out")),
                       "does not exist", d.path / "no" / "such" / "dir" / "out");
  fs::create_directories(d.path / "exists");
  std::ofstream(d / "exists/keep.me") << "x";
  const CliRun e = run_statecut("prune --checkpoint " + kModel.string() + " --method l1 --ratio 0.5 --out " + (d / "exists"));
  EXPECT_EQ(e.code, 1);
  EXPECT_NE(e.err.find("already exists"), std::string::npos) << e.err;
  EXPECT_EQ(slurp(d.path / "exists" / "keep.me"), "x") << "existing output untouched";
}

TEST(BadInput_Prune, nextRunRemovesTheTemporaryOfAKilledRun) {
  TempDir d("stale");
  // A temporary as a SIGKILLed prune leaves it, owned by a process that has exited (a shell that printed its pid).
  const CliRun sh = statecut::test::run_program("sh", "-c 'echo $$'");
  const std::string dead_pid = sh.out.substr(0, sh.out.find('\n'));
  const fs::path stale = d.path / (".out.tmp-" + dead_pid + "-0");
  fs::create_directories(stale);
  std::ofstream(stale / "model.safetensors") << "partial";
  const fs::path alive = d.path / (".other.tmp-" + std::to_string(::getpid()) + "-0");  // this test is alive
  fs::create_directories(alive);
  // Folders that only look like one, owned by the same dead pid: a user's, never removed.
  const std::vector<std::string> lookalikes = {"keep.tmp-" + dead_pid + "-0",  ".tmp-" + dead_pid + "-0",
                                               ".keep.tmp-" + dead_pid + "-",  ".keep.tmp--0",
                                               ".keep.tmp-" + dead_pid + "-0x", ".keep.tmp-" + dead_pid};
  for (const std::string& l : lookalikes) fs::create_directories(d.path / l);
  const CliRun r = run_statecut("prune --quiet --checkpoint " + kModel.string() + " --method l1 --ratio 0.5 --out " +
                                (d / "out2"));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(fs::exists(stale)) << "the dead process's temporary is still there";
  EXPECT_TRUE(fs::exists(alive)) << "a live process's temporary was removed";
  for (const std::string& l : lookalikes) EXPECT_TRUE(fs::exists(d.path / l)) << l << " removed";
  EXPECT_NE(r.err.find("removed " + stale.string()), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(d.path / "out2" / "config.json"));
}

TEST(BadInput_Prune, interruptedRunLeavesNoOutputFolder) {
  TempDir d("kill");
  for (const std::string sig : {"TERM", "KILL"}) {
    // Full-size calibration (16 × 2048) takes seconds: the signal arrives during it.
    const std::string cmd = "timeout -s " + sig + " 1 " + std::string(STATECUT_CLI) + " prune --quiet --checkpoint " +
                            kModel.string() + " --method grad --ratio 0.5 --calib " +
                            (kCorpora / "pydocs_train.txt").string() + " --out " + (d / "out") + " 2>/dev/null";
    const int st = std::system(cmd.c_str());
    EXPECT_NE(WEXITSTATUS(st), 0) << sig << ": finished within a second?";
    EXPECT_FALSE(fs::exists(d.path / "out")) << sig;
    if (sig == "TERM") EXPECT_TRUE(entries_containing(d.path, ".tmp-").empty()) << "SIGTERM removes the temporary";
  }
}

// A keep file must fit the model, and its errors name it (the shipped model: 4 layers of 4 heads, dk 64): a layer
// the model does not have (it was copied into statecut.json, which verify then failed), a "dk" other than the model's,
// a layer left out, a channel repeated, a "new_dk" its lists contradict.
TEST(BadInput_Prune, keepFileThatDoesNotFitTheModelNamesTheFile) {
  TempDir d("keepfit");
  const auto keep_file = [&](const std::string& name, int dk, const std::vector<int>& layers, bool repeat,
                             int new_dk = 2) {
    nlohmann::json keep = nlohmann::json::object();
    for (int l : layers)
      for (int h = 0; h < 4; ++h) keep[std::to_string(l) + "." + std::to_string(h)] = std::vector<int>{repeat ? 1 : 0, 1};
    const std::string p = d / name;
    std::ofstream(p) << nlohmann::json{{"dk", dk}, {"new_dk", new_dk}, {"keep", keep}}.dump();
    return p;
  };
  const std::string wide = keep_file("wide.json", 64, {0, 1, 2, 3}, false, 32);
  expect_prune_fails("--keep-from " + wide, wide + ": \"new_dk\" is 32, but its keep sets keep 2 channels per head");
  const std::string extra = keep_file("extra.json", 64, {0, 1, 2, 3, 7}, false);
  expect_prune_fails("--keep-from " + extra, extra + ": layer 7 is not a linear-attention layer of " + kModel.string());
  const std::string dk = keep_file("dk.json", 128, {0, 1, 2, 3}, false);
  expect_prune_fails("--keep-from " + dk, dk + ": \"dk\" is 128, but " + kModel.string() + " has dk 64");
  const std::string missing = keep_file("missing.json", 64, {0, 1, 3}, false);
  expect_prune_fails("--keep-from " + missing, missing + ": no keep set for layer 2");
  const std::string rep = keep_file("repeat.json", 64, {0, 1, 2, 3}, true);
  expect_prune_fails("--keep-from " + rep, rep + ": selection: layer 0 head 0: channel 1 repeated");
  const std::string ok = keep_file("ok.json", 64, {0, 1, 2, 3}, false);
  const CliRun r = run_statecut("prune --quiet --checkpoint " + kModel.string() + " --keep-from " + ok + " --out " +
                                (d / "out"));
  EXPECT_EQ(r.code, 0) << r.err;
}

// The files a tokenizer, a chat template, generation or a processor read travel with the pruned weights unchanged,
// and so does the licence (a pruned Qwen3.5 lost its chat_template.jinja, vocab.json and merges.txt), and the remote
// code config.json's auto_map names (trust_remote_code found no modeling_*.py: audit 24 D2); the model card describes
// the source model and stays behind, as do a native params.json (stale once pruned) and scripts of other names.
TEST(Cli_Prune, companionFilesTravelWithThePrunedWeights) {
  TempDir d("companions");
  const fs::path src = d.path / "src";
  fs::create_directories(src);
  for (const auto& e : fs::directory_iterator(kModel)) fs::copy(e.path(), src / e.path().filename());
  const std::vector<std::string> carried = {"chat_template.jinja", "vocab.json", "merges.txt", "added_tokens.json",
                                            "preprocessor_config.json", "generation_config.json", "LICENSE",
                                            "configuration_delta_net.py", "modeling_delta_net.py", "qwen.tiktoken",
                                            "tekken.json"};
  for (const auto& f : carried) std::ofstream(src / f) << "{\"file\": \"" << f << "\"}\n";
  const std::vector<std::string> left = {"README.md", "params.json", "convert.py"};
  for (const auto& f : left) std::ofstream(src / f) << "# not carried\n";
  const CliRun r = run_statecut("prune --quiet --checkpoint " + src.string() + " --method l1 --ratio 0.5 --out " +
                                (d / "out"));
  ASSERT_EQ(r.code, 0) << r.err;
  for (const auto& f : carried) {
    ASSERT_TRUE(fs::exists(d.path / "out" / f)) << f << " left behind";
    EXPECT_EQ(slurp(d.path / "out" / f), slurp(src / f)) << f;
  }
  for (const auto& f : left) EXPECT_FALSE(fs::exists(d.path / "out" / f)) << f;
}

// A sharded checkpoint (two shards and their index) prunes to the same tensors as its single-file form, shard by shard,
// and the index's metadata counts the pruned bytes and parameters (total_parameters stayed the source's: audit 24 D3).
TEST(Cli_Prune, aShardedCheckpointPrunesAsItsSingleFileFormAndItsIndexCountsThePrunedTensors) {
  using statecut::io::SafetensorsFile;
  using statecut::io::SafetensorsWriter;
  TempDir d("shards");
  const fs::path src = d.path / "src";
  fs::create_directories(src);
  fs::copy_file(kModel / "config.json", src / "config.json");
  const auto whole = SafetensorsFile::open((kModel / "model.safetensors").string());
  SafetensorsWriter first, second;
  json index = {{"metadata", {{"total_size", 1}, {"total_parameters", 1}}}, {"weight_map", json::object()}};
  for (const auto& n : whole.names()) {
    const bool in_first = n.find("layers.0.") != std::string::npos || n.find("embeddings") != std::string::npos;
    (in_first ? first : second).add(whole.tensor(n));
    index["weight_map"][n] = in_first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  first.write((src / "model-00001-of-00002.safetensors").string());
  second.write((src / "model-00002-of-00002.safetensors").string());
  std::ofstream(src / "model.safetensors.index.json") << index.dump();
  for (const auto& [from, out] : {std::pair{src, d.path / "sharded"}, std::pair{kModel, d.path / "single"}}) {
    const CliRun r = run_statecut("prune --quiet --checkpoint " + from.string() + " --method l1 --ratio 0.5 --out " +
                                  out.string());
    ASSERT_EQ(r.code, 0) << r.err;
  }
  const json out_index = json::parse(slurp(d.path / "sharded" / "model.safetensors.index.json"));
  const auto single = SafetensorsFile::open((d.path / "single" / "model.safetensors").string());
  int64_t bytes = 0, parameters = 0;
  for (const auto& n : single.names()) {
    const std::string shard = out_index["weight_map"].at(n).get<std::string>();
    EXPECT_EQ(shard, index["weight_map"][n].get<std::string>()) << n;
    const auto f = SafetensorsFile::open((d.path / "sharded" / shard).string());
    const auto& a = f.tensor(n);
    const auto& b = single.tensor(n);
    ASSERT_EQ(a.shape, b.shape) << n;
    EXPECT_EQ(std::memcmp(a.data, b.data, a.nbytes), 0) << n;
    bytes += static_cast<int64_t>(a.nbytes);
    parameters += a.numel();
  }
  EXPECT_EQ(out_index["metadata"]["total_size"], bytes);
  EXPECT_EQ(out_index["metadata"]["total_parameters"], parameters);
  int64_t source_parameters = 0;
  for (const auto& n : whole.names()) source_parameters += whole.tensor(n).numel();
  EXPECT_LT(parameters, source_parameters) << "q/k rows and conv channels removed";
}

// Sizes that give no valid key head dim are named by the file at fault, never as a budget: prune wrapped dk to 32 bits
// and said "budget: dk must be >= 1, got -2147483616" for hidden_size 2^32 + 64 (the weights' shapes then disagree
// with the config, named as logits names it), and expand_k 1e-9 leaves no key dim at all (config.json).
TEST(BadInput_Prune, sizesWithoutAValidKeyHeadDimNameTheFileNotTheBudget) {
  TempDir d("bigdk");
  struct Case {
    std::string key;
    nlohmann::json value;
    std::string file, needle;
  };
  for (const Case& k : {Case{"hidden_size", 4294967360LL, "model.safetensors", "but the config implies"},
                        Case{"expand_k", 1e-9, "config.json", "key_dim 0"}}) {
    SCOPED_TRACE(k.key);
    const fs::path src = d.path / ("src_" + k.key);
    fs::create_directories(src);
    for (const char* f : {"config.json", "model.safetensors"}) fs::copy(kModel / f, src / f);
    nlohmann::json c = nlohmann::json::parse(slurp(src / "config.json"));
    c[k.key] = k.value;
    std::ofstream(src / "config.json") << c.dump();
    const CliRun r = run_statecut("prune --quiet --checkpoint " + src.string() + " --method l1 --ratio 0.5 --out " +
                                  (d / "out"));
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_EQ(lines(r.err).size(), 1u) << r.err;
    EXPECT_NE(r.err.find((src / k.file).string() + ": "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(k.needle), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("budget"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(d.path / "out"));
  }
}

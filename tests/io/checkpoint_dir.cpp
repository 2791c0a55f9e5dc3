// Checkpoint directories: single file and sharded (index.json) give one lookup by name; config.json and
// token files load; every inconsistency is a one-line io::Error naming the file.
#include "optimized/io/checkpoint.h"
#include "tests/io/io_test_util.h"

namespace statecut::io {
namespace {

using test::TempDir;

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

void write_tensor_file(const std::string& path, const std::vector<std::string>& names) {
  SafetensorsWriter w;
  for (std::size_t i = 0; i < names.size(); ++i) {
    const float v[3] = {float(i), float(i) + 0.5f, -float(i)};
    w.add(names[i], DType::F32, {3}, v, sizeof v);
  }
  w.write(path);
}

/// Expects io::Error whose message is one line and contains `needle`.
template <typename F>
void expect_dir_error(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected '" << needle << "'";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    EXPECT_NE(m.find(needle), std::string::npos) << "message: " << m << "\nexpected: " << needle;
  }
}

/// Two shards: w1 = {a, b}, w2 = {c}, and an index listing them.
struct ShardedDir {
  TempDir dir{"sharded"};
  ShardedDir(const std::string& weight_map = R"({"a":"w1.safetensors","b":"w1.safetensors","c":"w2.safetensors"})") {
    write_text(dir / "config.json", R"({"model_type":"delta_net","hidden_size":64})");
    write_tensor_file(dir / "w1.safetensors", {"a", "b"});
    write_tensor_file(dir / "w2.safetensors", {"c"});
    write_text(dir / "model.safetensors.index.json", R"({"metadata":{"total_size":36},"weight_map":)" + weight_map + "}");
  }
};

TEST(Unit_Checkpoint, shardedDirectoryGivesOneLookup) {
  ShardedDir s;
  const auto ck = Checkpoint::open(s.dir.path.string());
  EXPECT_EQ(ck.names(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(ck.config().at("hidden_size"), 64);
  EXPECT_EQ(to_float(ck.tensor("c")), (std::vector<float>{0, 0.5f, 0}));
  EXPECT_EQ(to_float(ck.tensor("b")), (std::vector<float>{1, 1.5f, -1}));
  EXPECT_NE(ck.file_of("c").find("w2.safetensors"), std::string::npos);
  expect_dir_error([&] { ck.tensor("d"); }, "missing tensor 'd'");
}

TEST(Unit_Checkpoint, singleFileFixtureOpens) {
  const std::string shared = test::shared_dir();
  if (shared.empty()) GTEST_SKIP() << "../shared/fixtures not present";
  const auto ck = Checkpoint::open(shared + "/fixtures/fla_delta_net");
  EXPECT_EQ(ck.config().at("model_type"), "delta_net");
  EXPECT_TRUE(ck.has("model.embeddings.weight"));
  EXPECT_EQ(ck.tensor("model.embeddings.weight").shape, (std::vector<int64_t>{256, 64}));
}

TEST(BadInput_Checkpoint, indexAndShardsMustAgree) {
  {
    ShardedDir s(R"({"a":"w1.safetensors","c":"w2.safetensors"})");
    expect_dir_error([&] { Checkpoint::open(s.dir.path.string()); }, "w1.safetensors: b: not listed in");
  }
  {
    // A shard the index does not name is not part of the checkpoint.
    ShardedDir s(R"({"a":"w1.safetensors","b":"w1.safetensors"})");
    EXPECT_FALSE(Checkpoint::open(s.dir.path.string()).has("c"));
  }
  {
    ShardedDir s(R"({"a":"w1.safetensors","b":"w2.safetensors","c":"w2.safetensors"})");
    expect_dir_error([&] { Checkpoint::open(s.dir.path.string()); }, "b: listed in shard 'w2.safetensors' but found in");
  }
  {
    ShardedDir s(R"({"a":"w1.safetensors","b":"w1.safetensors","c":"w2.safetensors","z":"w2.safetensors"})");
    expect_dir_error([&] { Checkpoint::open(s.dir.path.string()); }, "z: listed in shard 'w2.safetensors' which does not hold it");
  }
  {
    ShardedDir s(R"({"a":"w1.safetensors","b":"w1.safetensors","c":"w3.safetensors"})");
    expect_dir_error([&] { Checkpoint::open(s.dir.path.string()); }, "w3.safetensors: cannot open");
  }
  {
    ShardedDir s(R"({"a":"w1.safetensors","b":"w1.safetensors","c":"../w2.safetensors"})");
    expect_dir_error([&] { Checkpoint::open(s.dir.path.string()); }, "is not a file name in the checkpoint directory");
  }
  {
    ShardedDir s;
    write_tensor_file(s.dir / "w2.safetensors", {"c", "a"});  // a in both shards
    expect_dir_error([&] { Checkpoint::open(s.dir.path.string()); }, "a: tensor also present in");
  }
  {
    ShardedDir s;
    write_text(s.dir / "model.safetensors.index.json", R"({"weight_map":[]})");
    expect_dir_error([&] { Checkpoint::open(s.dir.path.string()); }, "no \"weight_map\" object");
  }
}

TEST(BadInput_Checkpoint, configMissingMalformedOrNotAnObject) {
  ShardedDir s;
  const std::string d = s.dir.path.string();
  write_text(s.dir / "config.json", R"({"model_type": "delta_net",})");
  expect_dir_error([&] { Checkpoint::open(d); }, "config.json: malformed JSON (");
  write_text(s.dir / "config.json", "[1,2]");
  expect_dir_error([&] { Checkpoint::open(d); }, "config.json: expected a JSON object");
  std::filesystem::remove(s.dir / "config.json");
  expect_dir_error([&] { Checkpoint::open(d); }, "config.json: missing");
  write_text(s.dir / "config.json", "{}");
  std::filesystem::remove(s.dir / "model.safetensors.index.json");
  expect_dir_error([&] { Checkpoint::open(d); }, "no model.safetensors or model.safetensors.index.json");
  expect_dir_error([&] { Checkpoint::open(s.dir / "nope"); }, "no such checkpoint folder; statecut reads local folders only");
  expect_dir_error([&] { Checkpoint::open(s.dir / "config.json"); }, "not a folder");
}

// Python's json.dumps writes inf and nan as the bare words Infinity, -Infinity and NaN (transformers 4.x's Mamba-2
// configs: "time_step_limit": [0.0, Infinity]): read as the strings of those names, never inside a string, and a
// file broken otherwise is still malformed.
TEST(Unit_Checkpoint, pythonsNonFiniteWordsReadAsTheirNames) {
  TempDir dir("io_json_nonfinite");
  write_text(dir / "config.json", R"({"lim": [0.0, Infinity], "low": -Infinity, "x": NaN, "s": "NaN and Infinity"})");
  const auto j = read_json_file(dir / "config.json");
  EXPECT_EQ(j.at("lim").at(1), "Infinity");
  EXPECT_EQ(j.at("low"), "-Infinity");
  EXPECT_EQ(j.at("x"), "NaN");
  EXPECT_EQ(j.at("s"), "NaN and Infinity");
  write_text(dir / "config.json", R"({"lim": [0.0, Infinity],})");
  expect_dir_error([&] { read_json_file(dir / "config.json"); }, "config.json: malformed JSON (");
}

// The files prune carries beside the pruned weights (is_companion_file), one name per rule: what a tokenizer, a chat
// template, generation or a processor reads, the licence, and the remote code transformers' auto classes import —
// and not the model card, a native params.json, other scripts or the weights themselves. (tests/cli/prune_cli.cpp
// copies a folder end to end; a mutation sample of optimized/io left three of the remote-code prefixes unheld.)
TEST(Unit_Checkpoint, companionFilesAreWhatTokenizersProcessorsAndRemoteCodeRead) {
  for (const char* name : {"tokenizer.json", "tokenizer_config.json", "tokenizer.model", "special_tokens_map.json",
                           "added_tokens.json", "vocab.json", "vocab.txt", "merges.txt", "qwen.tiktoken", "tekken.json",
                           "chat_template.jinja", "chat_template.json", "generation_config.json",
                           "preprocessor_config.json", "processor_config.json", "LICENSE", "LICENSE.txt",
                           "configuration_x.py", "modeling_x.py", "tokenization_x.py", "processing_x.py",
                           "image_processing_x.py", "video_processing_x.py", "feature_extraction_x.py"})
    EXPECT_TRUE(is_companion_file(name)) << name;
  for (const char* name : {"README.md", "params.json", "convert.py", "config.json", "model.safetensors",
                           "model.safetensors.index.json", "modeling_x.pyc", "image_processing.py", "processing.py",
                           "run_modeling.py", "merges.txt.bak", "my_tokenizer.json"})
    EXPECT_FALSE(is_companion_file(name)) << name;
}

TEST(Unit_Tokens, safetensorsAndBinTokenFilesLoad) {
  TempDir dir("tokens");
  const int64_t ids[2][5] = {{0, 1, 255, 31999, 7}, {5, 4, 3, 2, 1}};
  SafetensorsWriter w;
  w.add("input_ids", DType::I64, {2, 5}, ids, sizeof ids);
  w.write(dir / "t.safetensors");
  const Tokens t = read_tokens(dir / "t.safetensors");
  EXPECT_EQ(t.batch, 2);
  EXPECT_EQ(t.length, 5);
  EXPECT_EQ(t.ids, (std::vector<int64_t>{0, 1, 255, 31999, 7, 5, 4, 3, 2, 1}));

  const uint16_t u16[3] = {65535, 0, 42};
  test::write_bytes(dir / "t.bin", std::vector<unsigned char>((const unsigned char*)u16, (const unsigned char*)u16 + 6));
  EXPECT_EQ(read_tokens(dir / "t.bin").ids, (std::vector<int64_t>{65535, 0, 42}));
  const uint32_t u32[2] = {70000, 3};
  test::write_bytes(dir / "t.u32.bin", std::vector<unsigned char>((const unsigned char*)u32, (const unsigned char*)u32 + 8));
  EXPECT_EQ(read_tokens(dir / "t.u32.bin").ids, (std::vector<int64_t>{70000, 3}));
  expect_dir_error([&] { read_tokens(dir / "t.bin", 0, 4); }, "size 6 is not a multiple of the token width 4");
  // Width from the vocabulary when the name does not say: uint32 above 65536 ids.
  EXPECT_EQ(read_tokens(dir / "t.u32.bin", 0).ids, (std::vector<int64_t>{70000, 3}));
  test::write_bytes(dir / "v.bin", std::vector<unsigned char>((const unsigned char*)u32, (const unsigned char*)u32 + 8));
  EXPECT_EQ(read_tokens(dir / "v.bin", 151936).ids, (std::vector<int64_t>{70000, 3}));
  EXPECT_EQ(read_tokens(dir / "v.bin", 65536).ids, (std::vector<int64_t>{4464, 1, 3, 0})) << "uint16 up to 65536 ids";
  expect_dir_error([&] { read_tokens(dir / "t.safetensors", 31999); }, "token 3 = 31999 outside the vocabulary [0, 31999)");
}

TEST(BadInput_Tokens, wrongDtypeShapeSizeOrEmpty) {
  TempDir dir("badtokens");
  const float f[2] = {1, 2};
  SafetensorsWriter w;
  w.add("input_ids", DType::F32, {2}, f, sizeof f);
  w.write(dir / "f.safetensors");
  expect_dir_error([&] { read_tokens(dir / "f.safetensors"); }, "input_ids: dtype F32 is not an integer type");
  const int32_t neg[2] = {3, -1};
  SafetensorsWriter w2;
  w2.add("input_ids", DType::I32, {1, 2}, neg, sizeof neg);
  w2.write(dir / "n.safetensors");
  expect_dir_error([&] { read_tokens(dir / "n.safetensors"); }, "input_ids: token 1 is out of range");
  SafetensorsWriter w3;  // a file's only tensor is read as the ids, whatever its name
  w3.add("ids", DType::I32, {1, 2}, neg, sizeof neg);
  w3.write(dir / "one.safetensors");
  expect_dir_error([&] { read_tokens(dir / "one.safetensors"); }, "ids: token 1 is out of range");
  SafetensorsWriter w4;
  w4.add("ids", DType::I32, {1, 2}, neg, sizeof neg);
  w4.add("mask", DType::I32, {1, 2}, neg, sizeof neg);
  w4.write(dir / "m.safetensors");
  expect_dir_error([&] { read_tokens(dir / "m.safetensors"); }, "missing tensor 'input_ids'");
  test::write_bytes(dir / "odd.bin", {1, 2, 3});
  expect_dir_error([&] { read_tokens(dir / "odd.bin"); }, "size 3 is not a multiple of the token width 2");
  test::write_bytes(dir / "empty.bin", {});
  expect_dir_error([&] { read_tokens(dir / "empty.bin"); }, "no tokens");
  test::write_bytes(dir / "x.txt", {1, 2});
  expect_dir_error([&] { read_tokens(dir / "x.txt"); }, "unknown token file type");
  // What is wrong with the path comes first, whatever its suffix: a folder named x.bin was read as a stream and failed
  // in libstdc++'s words, without the path.
  std::filesystem::create_directories(dir / "folder.bin");
  expect_dir_error([&] { read_tokens(dir / "folder.bin"); }, dir / "folder.bin" + ": is a directory, not a file");
  expect_dir_error([&] { read_tokens(dir / "none.txt"); }, "none.txt: no such file");
}

}  // namespace
}  // namespace statecut::io

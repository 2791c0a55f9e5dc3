// Round trip: what SafetensorsWriter writes, SafetensorsFile reads back bit for bit, and a file read
// and written again is byte-identical (our own output, a committed small file, a real fla fixture).
#include <cstring>

#include "optimized/io/safetensors.h"
#include "tests/io/io_test_util.h"

namespace statecut::io {
namespace {

using test::read_bytes;
using test::TempDir;

struct Sample {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<unsigned char> bytes;
};

/// One tensor of every dtype, odd sizes (1, 63, 65, 127), a scalar and an empty tensor, random bytes.
std::vector<Sample> every_dtype_samples(uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::vector<std::pair<DType, std::vector<int64_t>>> specs = {
      {DType::BOOL, {63}},    {DType::U8, {65}},       {DType::I8, {1}},           {DType::U16, {3, 5}},
      {DType::I16, {127}},    {DType::U32, {2, 2, 2}}, {DType::I32, {7}},          {DType::U64, {3}},
      {DType::I64, {}},       {DType::F16, {63, 2}},   {DType::BF16, {65}},        {DType::F32, {89, 3}},
      {DType::F64, {5, 0}},   {DType::F8_E4M3, {127}}, {DType::F8_E5M2, {1, 1, 1}},
  };
  std::vector<Sample> out;
  for (const auto& [d, shape] : specs) {
    Sample s{std::string("t.") + dtype_name(d), d, shape, {}};
    int64_t n = 1;
    for (int64_t x : shape) n *= x;
    s.bytes.resize(static_cast<std::size_t>(n) * dtype_size(d));
    for (auto& b : s.bytes) b = static_cast<unsigned char>(d == DType::BOOL ? rng() % 2 : rng());
    out.push_back(std::move(s));
  }
  return out;
}

TEST(Unit_SafetensorsRoundTrip, everyDtypeReadsBackBitExact) {
  TempDir dir("rt");
  const auto samples = every_dtype_samples(test::master_seed());
  SafetensorsWriter w;
  for (const auto& s : samples) w.add(s.name, s.dtype, s.shape, s.bytes.data(), s.bytes.size());
  w.set_metadata({{"format", "pt"}, {"note", "quote \" and newline \n survive"}});
  w.write(dir / "a.safetensors");

  const auto f = SafetensorsFile::open(dir / "a.safetensors");
  EXPECT_EQ(f.names().size(), samples.size());
  EXPECT_EQ(f.metadata().at("note"), "quote \" and newline \n survive");
  for (const auto& s : samples) {
    SCOPED_TRACE(s.name);
    const TensorView& t = f.tensor(s.name);
    EXPECT_EQ(t.dtype, s.dtype);
    EXPECT_EQ(t.shape, s.shape);
    ASSERT_EQ(t.nbytes, s.bytes.size());
    EXPECT_EQ(0, t.nbytes ? std::memcmp(t.data, s.bytes.data(), t.nbytes) : 0);
    // Zero-copy: views point into the mapping, each aligned to its element size (buffer starts 8-aligned).
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % dtype_size(t.dtype), 0u);
  }
}

TEST(Unit_SafetensorsRoundTrip, headerIsPaddedAndOrderedLikeTheOfficialWriter) {
  SafetensorsWriter w;
  const float f32[2] = {1, 2};
  const uint16_t bf[1] = {0x3F80};
  const double f64[1] = {3};
  w.add("b", DType::F32, {2}, f32, sizeof f32);
  w.add("a", DType::BF16, {1}, bf, sizeof bf);
  w.add("c", DType::F64, {1}, f64, sizeof f64);
  w.set_metadata({{"format", "pt"}});
  const std::string h = w.header_json();
  EXPECT_EQ(h.size() % 8, 0u);
  // F64 (8 bytes) first, then F32, then BF16; trailing spaces pad to 8.
  EXPECT_EQ(h.substr(0, h.find_last_not_of(' ') + 1),
            R"({"__metadata__":{"format":"pt"},"c":{"dtype":"F64","shape":[1],"data_offsets":[0,8]},)"
            R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},)"
            R"("a":{"dtype":"BF16","shape":[1],"data_offsets":[16,18]}})");
}

TEST(Unit_SafetensorsRoundTrip, sameSizeDtypesFollowTheOfficialEnumRank) {
  // Official rank (descending): U64 > I64 > F64 > F32 > U32 > I32 > BF16 > F16 > U16 > I16 > F8_E4M3 > F8_E5M2 > I8 > U8 > BOOL.
  SafetensorsWriter w;
  const uint64_t x8 = 0;
  const uint32_t x4 = 0;
  const uint16_t x2 = 0;
  const uint8_t x1 = 0;
  w.add("a", DType::I32, {}, &x4, 4);
  w.add("b", DType::F32, {}, &x4, 4);
  w.add("c", DType::U32, {}, &x4, 4);
  w.add("d", DType::F64, {}, &x8, 8);
  w.add("e", DType::U64, {}, &x8, 8);
  w.add("f", DType::BOOL, {}, &x1, 1);
  w.add("g", DType::U8, {}, &x1, 1);
  w.add("h", DType::F16, {}, &x2, 2);
  w.add("i", DType::BF16, {}, &x2, 2);
  w.add("j", DType::F8_E5M2, {}, &x1, 1);
  w.add("k", DType::F8_E4M3, {}, &x1, 1);
  const auto bytes = w.to_bytes();
  const auto f = SafetensorsFile::from_buffer(bytes);
  EXPECT_EQ(f.names(), (std::vector<std::string>{"e", "d", "b", "c", "a", "i", "h", "k", "j", "g", "f"}));
}

/// Reads `path`, writes every tensor and the metadata again, and expects the very same bytes.
void expect_rewrite_identical(const std::string& path) {
  SCOPED_TRACE(path);
  TempDir dir("rewrite");
  const auto f = SafetensorsFile::open(path);
  SafetensorsWriter w;
  for (const auto& n : f.names()) w.add(f.tensor(n));
  w.set_metadata(f.metadata());
  w.write(dir / "again.safetensors");
  const auto a = read_bytes(path), b = read_bytes(dir / "again.safetensors");
  ASSERT_EQ(a.size(), b.size());
  EXPECT_TRUE(a == b);
}

TEST(Unit_SafetensorsRoundTrip, ourOwnOutputRewritesByteIdentical) {
  TempDir dir("own");
  SafetensorsWriter w;
  for (const auto& s : every_dtype_samples(test::master_seed() + 1))
    w.add(s.name, s.dtype, s.shape, s.bytes.data(), s.bytes.size());
  w.set_metadata({{"format", "pt"}});
  w.write(dir / "own.safetensors");
  expect_rewrite_identical(dir / "own.safetensors");
  const auto mem = w.to_bytes();
  const auto disk = read_bytes(dir / "own.safetensors");
  ASSERT_EQ(mem.size(), disk.size());
  EXPECT_EQ(0, std::memcmp(mem.data(), disk.data(), mem.size()));
}

TEST(Unit_SafetensorsRoundTrip, committedSmallFileRewritesByteIdentical) {
  expect_rewrite_identical(std::string(STATECUT_SOURCE_DIR) + "/tests/data/io/small.safetensors");
}

TEST(Unit_SafetensorsRoundTrip, everySharedFileWrittenByPythonRewritesByteIdentical) {
  // Files written by safetensors' own writer (torch/numpy save_file): fixtures, goldens (mixed dtypes), the model.
  const std::string shared = test::shared_dir();
  if (shared.empty()) GTEST_SKIP() << "../shared/fixtures not present";
  int n = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(shared)) {
    if (e.path().extension() != ".safetensors") continue;
    expect_rewrite_identical(e.path().string());
    ++n;
  }
  EXPECT_GE(n, 2);
}

TEST(Unit_SafetensorsRoundTrip, writeReplacesAtomicallyAndLeavesNoTemporary) {
  TempDir dir("atomic");
  const float x[1] = {1};
  SafetensorsWriter w;
  w.add("x", DType::F32, {1}, x, sizeof x);
  w.write(dir / "m.safetensors");
  w.write(dir / "m.safetensors");  // overwrite in place
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path)) (void)e, ++files;
  EXPECT_EQ(files, 1);
  // Writing into a directory that does not exist fails with io::Error and leaves nothing behind.
  EXPECT_THROW(w.write(dir / "missing/m.safetensors"), Error);
}

TEST(Unit_SafetensorsRoundTrip, writerRejectsDuplicateNamesAndWrongSizes) {
  const float x[2] = {1, 2};
  SafetensorsWriter w;
  EXPECT_THROW(w.add("x", DType::F32, {3}, x, sizeof x), Error);
  EXPECT_THROW(w.add("__metadata__", DType::F32, {2}, x, sizeof x), Error);
  w.add("x", DType::F32, {2}, x, sizeof x);
  w.add("x", DType::F16, {4}, x, sizeof x);
  TempDir dir("dup");
  EXPECT_THROW(w.write(dir / "d.safetensors"), Error);
  EXPECT_FALSE(std::filesystem::exists(dir / "d.safetensors"));
}

/// release() gives a mapped tensor's pages back without invalidating anything: the view reads the same bytes after
/// it (refetched from the file), a tensor smaller than a page and a file parsed from memory are left alone, and the
/// file still rewrites byte for byte. A borrowed entry's callback runs once, after its bytes are written, and not at
/// all when the write cannot start. (The resident-memory effect is measured in bench/README.md, issue 19.7.)
TEST(Unit_SafetensorsRoundTrip, releasedPagesReadBackAndBorrowedCallbacksRunOncePerWrite) {
  TempDir dir("release");
  std::mt19937_64 rng(20261202);
  std::vector<float> big(4099 * 3), small(5);  // several pages (not page-aligned in the file), and less than one
  for (auto& x : big) x = static_cast<float>(rng() % 1000) / 7.0f;
  for (auto& x : small) x = static_cast<float>(rng() % 1000);
  SafetensorsWriter w;
  int called = 0;
  w.add_borrowed("big", DType::F32, {3, 4099}, big.data(), big.size() * sizeof(float), [&] { ++called; });
  w.add_borrowed("small", DType::F32, {5}, small.data(), small.size() * sizeof(float), [&] { ++called; });
  w.add("copied", DType::F32, {5}, small.data(), small.size() * sizeof(float));
  EXPECT_THROW(w.write(dir / "missing/m.safetensors"), Error);
  EXPECT_EQ(called, 0) << "a write that cannot start runs no callback";
  w.write(dir / "m.safetensors");
  EXPECT_EQ(called, 2);

  const auto f = SafetensorsFile::open(dir / "m.safetensors");
  const auto before = read_bytes(dir / "m.safetensors");
  for (const auto& n : f.names()) f.release(f.tensor(n));
  const TensorView& b = f.tensor("big");
  ASSERT_EQ(b.nbytes, big.size() * sizeof(float));
  EXPECT_EQ(std::memcmp(b.data, big.data(), b.nbytes), 0) << "the released view reads other bytes";
  EXPECT_EQ(std::memcmp(f.tensor("small").data, small.data(), small.size() * sizeof(float)), 0);
  SafetensorsWriter again;
  for (const auto& n : f.names()) again.add(f.tensor(n));
  again.set_metadata(f.metadata());
  const auto rewritten = again.to_bytes();
  ASSERT_EQ(rewritten.size(), before.size());
  EXPECT_EQ(std::memcmp(rewritten.data(), before.data(), before.size()), 0) << "the rewrite is not byte-identical";

  const auto mem = SafetensorsFile::from_bytes(before.data(), before.size(), "<memory>");
  mem.release(mem.tensor("big"));  // no mapping: nothing to give back
  EXPECT_EQ(std::memcmp(mem.tensor("big").data, big.data(), b.nbytes), 0);
}

}  // namespace
}  // namespace statecut::io

// Bad input: every malformed safetensors file gives io::Error with one line "<file>: [<tensor>: ]<problem>",
// never a crash and never another exception type. The malformed files are generated here from a good
// one (truncations at every byte, corrupted header bytes, lying offsets and shapes); tests/data/bad/
// keeps a few of them on disk (also the fuzzer's seeds).
#include <cstring>

#include "optimized/io/safetensors.h"
#include "tests/io/io_test_util.h"

namespace statecut::io {
namespace {

using Bytes = std::vector<unsigned char>;

/// A file from a header string (padded to 8 with spaces) and a data buffer.
Bytes make_file(std::string header, const Bytes& data) {
  header.append((8 - header.size() % 8) % 8, ' ');
  Bytes out(8);
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  out.insert(out.end(), header.begin(), header.end());
  if (!data.empty()) out.insert(out.end(), data.begin(), data.end());
  return out;
}

/// The good file: F32 [2,3] (24 bytes), BF16 [4] (8 bytes), U8 [3] (3 bytes), metadata.
Bytes good_file() {
  SafetensorsWriter w;
  const float a[6] = {1, 2, 3, 4, 5, 6};
  const uint16_t b[4] = {0x3F80, 0x4000, 0x4040, 0x4080};
  const uint8_t c[3] = {7, 8, 9};
  w.add("layer.a", DType::F32, {2, 3}, a, sizeof a);
  w.add("layer.b", DType::BF16, {4}, b, sizeof b);
  w.add("layer.c", DType::U8, {3}, c, sizeof c);
  w.set_metadata({{"format", "pt"}});
  test::TempDir dir("good");
  w.write(dir / "good.safetensors");
  return test::read_bytes(dir / "good.safetensors");
}

SafetensorsFile parse(const Bytes& b) { return SafetensorsFile::from_bytes(b.data(), b.size(), "bad.safetensors"); }

/// Parses `b` and expects io::Error whose one-line message starts with the file and contains `needle`.
void expect_error(const Bytes& b, const std::string& needle) {
  try {
    parse(b);
    ADD_FAILURE() << "accepted; expected an error containing '" << needle << "'";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("bad.safetensors: ", 0), 0u) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    EXPECT_NE(m.find(needle), std::string::npos) << "message: " << m << "\nexpected to contain: " << needle;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
  }
}

void expect_header_error(const std::string& header, const std::string& needle, const Bytes& data = Bytes(35)) {
  SCOPED_TRACE(header);
  expect_error(make_file(header, data), needle);
}

const std::string kA = R"("a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]})";
const std::string kB = R"("b":{"dtype":"BF16","shape":[4],"data_offsets":[24,32]})";
const std::string kC = R"("c":{"dtype":"U8","shape":[3],"data_offsets":[32,35]})";

TEST(BadInput_Safetensors, handMadeGoodFileParses) {
  // Guards the cases below: they differ from this accepted file in one thing only.
  const auto f = parse(make_file("{" + kA + "," + kB + "," + kC + "}", Bytes(35)));
  EXPECT_EQ(f.names(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_NO_THROW(parse(make_file("{" + kC + "," + kA + "," + kB + "}", Bytes(35))));  // any key order
}

TEST(BadInput_Safetensors, truncationAtEveryByteIsAnError) {
  const Bytes good = good_file();
  ASSERT_NO_THROW(parse(good));
  for (std::size_t len = 0; len < good.size(); ++len) {
    SCOPED_TRACE(len);
    try {
      parse(Bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(len)));
      ADD_FAILURE() << "truncated file of " << len << " bytes accepted";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
    }
  }
  expect_error(Bytes(good.begin(), good.begin() + 5), "shorter than the 8-byte header length");
  expect_error(Bytes(good.begin(), good.begin() + 20), "runs past the end of the file");
  expect_error(Bytes(good.begin(), good.end() - 1), "run past the data buffer");
}

TEST(BadInput_Safetensors, headerLengthPastEofOrAbsurd) {
  Bytes b = good_file();
  const uint64_t lies[] = {b.size(), uint64_t{200} << 20, ~uint64_t{0}};
  for (uint64_t n : lies) {
    std::memcpy(b.data(), &n, 8);
    expect_error(b, n > (uint64_t{100} << 20) ? "exceeds the 100 MiB limit" : "runs past the end of the file");
  }
  uint64_t zero = 0;
  std::memcpy(b.data(), &zero, 8);
  expect_error(b, "header does not start with '{'");
}

TEST(BadInput_Safetensors, malformedJson) {
  expect_header_error("{" + kA + "," + kB + "," + kC, "malformed JSON header");
  expect_header_error("{" + kA + "," + kB + "," + kC + "}}", "malformed JSON header");
  expect_header_error("{" + kA + "," + kB + "," + kC + ",}", "malformed JSON header");
  expect_header_error("{'a':1}", "malformed JSON header");
  expect_header_error(" {}", "header does not start with '{'");
  expect_header_error(std::string("{\"\xff\":1}"), "malformed JSON header");  // invalid UTF-8
  expect_header_error("{\"x\":[[[[[[1]]]]]]}", "nested deeper");
}

TEST(BadInput_Safetensors, entriesMustBeTensorObjects) {
  expect_header_error("{\"a\":[1,2]}", "a: entry is not an object");
  expect_header_error("{\"a\":7}", "a: entry is not an object");
  expect_header_error(R"({"a":{"dtype":"F32","shape":[2,3]}})", "a: missing data_offsets");
  expect_header_error(R"({"a":{"shape":[2,3],"data_offsets":[0,24]}})", "a: missing dtype");
  expect_header_error(R"({"a":{"dtype":"F32","data_offsets":[0,24]}})", "a: missing shape");
  expect_header_error(R"({"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24],"x":1}})", "a: unknown key 'x'");
  expect_header_error(R"({"__metadata__":{"format":1}})", "__metadata__: value of 'format' is not a string");
  expect_header_error(R"({"__metadata__":[1]})", "__metadata__: is not an object");
}

TEST(BadInput_Safetensors, unknownDtype) {
  expect_header_error(R"({"a":{"dtype":"F24","shape":[2,3],"data_offsets":[0,24]}})", "a: unknown dtype 'F24'");
  expect_header_error(R"({"a":{"dtype":"f32","shape":[2,3],"data_offsets":[0,24]}})", "a: unknown dtype 'f32'");
  expect_header_error(R"({"a":{"dtype":32,"shape":[2,3],"data_offsets":[0,24]}})", "a: dtype is not a string");
}

TEST(BadInput_Safetensors, negativeFractionalOrOverflowingShapes) {
  const Bytes d(24);
  expect_header_error(R"({"a":{"dtype":"F32","shape":[-2,-3],"data_offsets":[0,24]}})", "not a non-negative integer", d);
  expect_header_error(R"({"a":{"dtype":"F32","shape":[2.0,3],"data_offsets":[0,24]}})", "not a non-negative integer", d);
  expect_header_error(R"({"a":{"dtype":"F32","shape":["2",3],"data_offsets":[0,24]}})", "not a non-negative integer", d);
  expect_header_error(R"({"a":{"dtype":"F32","shape":6,"data_offsets":[0,24]}})", "shape is not an array", d);
  expect_header_error(R"({"a":{"dtype":"F32","shape":[18446744073709551615],"data_offsets":[0,24]}})",
                      "not a non-negative integer", d);
  expect_header_error(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,24]}})", "overflows", d);
  // numel fits but numel × 8 bytes wraps around to 0 in 64 bits
  expect_header_error(R"({"a":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,0]}})",
                      "does not match the byte span", Bytes());
}

TEST(BadInput_Safetensors, shapeTimesDtypeMustEqualByteSpan) {
  expect_header_error("{" + kA + R"(,"b":{"dtype":"F32","shape":[4],"data_offsets":[24,32]},)" + kC + "}",
                      "b: shape [4] x F32 (4 bytes) does not match the byte span 8");
  expect_header_error(R"({"a":{"dtype":"F32","shape":[2,4],"data_offsets":[0,24]},)" + kB + "," + kC + "}",
                      "a: shape [2,4] x F32");
}

TEST(BadInput_Safetensors, offsetsOutOfRangeOverlappingOrWithGaps) {
  // out of range
  expect_header_error("{" + kA + "," + kB + R"(,"c":{"dtype":"U8","shape":[3],"data_offsets":[33,36]}})",
                      "c: data_offsets [33,36] run past the data buffer (35 bytes)");
  expect_header_error("{" + kA + "," + kB + R"(,"c":{"dtype":"U8","shape":[3],"data_offsets":[35,32]}})",
                      "c: data_offsets [35,32] end before they begin");
  expect_header_error("{" + kA + "," + kB + R"(,"c":{"dtype":"U8","shape":[3],"data_offsets":[-1,2]}})",
                      "c: data_offsets [-1,2] are not non-negative integers");
  expect_header_error("{" + kA + "," + kB + R"(,"c":{"dtype":"U8","shape":[3],"data_offsets":[32]}})",
                      "c: data_offsets is not a pair");
  // overlap: b starts inside a
  expect_header_error("{" + kA + R"(,"b":{"dtype":"BF16","shape":[4],"data_offsets":[20,28]},)" +
                          R"("c":{"dtype":"U8","shape":[7],"data_offsets":[28,35]}})",
                      "b: data_offsets [20,28] overlap tensor 'a'");
  // two tensors on the same bytes
  expect_header_error(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                      "overlap tensor 'a'", Bytes(8));
  // gap between tensors, at the start, and unindexed bytes at the end
  expect_header_error("{" + kA + R"(,"c":{"dtype":"U8","shape":[3],"data_offsets":[32,35]}})",
                      "c: data_offsets [32,35] leave a gap of 8 unindexed bytes");
  expect_header_error(R"({"b":{"dtype":"BF16","shape":[4],"data_offsets":[24,32]},)" + kC + "}",
                      "b: data_offsets [24,32] leave a gap of 24");
  expect_header_error("{" + kA + "," + kB + "}", "3 bytes at the end of the data buffer are not indexed");
}

TEST(BadInput_Safetensors, duplicateNamesAreDetectedNotSilentlyMerged) {
  // nlohmann's DOM parser would keep the last "a"; the header must be rejected instead.
  expect_header_error("{" + kA + "," + kB + "," + kC + "," + kA + "}", "duplicate tensor name 'a'");
  expect_header_error(R"({"a":{"dtype":"F32","dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)" + kB + "," + kC + "}",
                      "duplicate key 'dtype' in entry 'a'");
  expect_header_error(R"({"__metadata__":{},"__metadata__":{}})", "duplicate tensor name '__metadata__'", Bytes());
}

TEST(BadInput_Safetensors, namesWithControlBytesStayOnOneLine) {
  expect_header_error(R"({"a\nb":{"dtype":"F99","shape":[],"data_offsets":[0,0]}})", "a\\x0ab: unknown dtype", Bytes());
}

TEST(BadInput_Safetensors, missingTensorNamesFileAndTensor) {
  const auto f = parse(good_file());
  try {
    f.tensor("layer.z");
    ADD_FAILURE() << "missing tensor found";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "bad.safetensors: missing tensor 'layer.z'");
  }
}

TEST(BadInput_Safetensors, corruptedHeaderBytesNeverCrashOrThrowOtherTypes) {
  // Every header byte replaced by each of a few structural characters: the result is io::Error, or a
  // valid file only when the byte lies inside a string literal (a renamed tensor, other metadata).
  const Bytes good = good_file();
  uint64_t n;
  std::memcpy(&n, good.data(), 8);
  std::vector<bool> in_string(good.size(), false);
  bool inside = false;  // our writer emits no escapes in these names, so quotes delimit strings
  for (std::size_t i = 8; i < 8 + n; ++i) {
    if (good[i] == '"') inside = !inside;
    else in_string[i] = inside;
  }
  const unsigned char subs[] = {'"', '{', '}', '[', ']', ',', ':', '0', '9', '-', ' ', 0, 0xff, 'e'};
  int rejected = 0, accepted = 0;
  for (std::size_t i = 8; i < 8 + n; ++i) {
    for (unsigned char s : subs) {
      if (good[i] == s) continue;
      Bytes b = good;
      b[i] = s;
      try {
        parse(b);
        ++accepted;
        EXPECT_TRUE(in_string[i]) << "byte " << i << " ('" << good[i] << "') -> " << int(s) << " accepted";
      } catch (const Error&) {
        ++rejected;
      } catch (const std::exception& e) {
        ADD_FAILURE() << "byte " << i << " -> " << int(s) << ": wrong exception type: " << e.what();
      }
    }
  }
  std::cerr << "corrupted headers: " << rejected << " rejected, " << accepted << " accepted (inside strings)\n";
  EXPECT_GT(rejected, accepted);
}

TEST(BadInput_Safetensors, onDiskCorpusFilesAllFailWithTheirName) {
  const std::filesystem::path dir = std::filesystem::path(STATECUT_SOURCE_DIR) / "tests/data/bad";
  int seen = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string p = e.path().string();
    SCOPED_TRACE(p);
    ++seen;
    try {
      SafetensorsFile::open(p);
      ADD_FAILURE() << "accepted";
    } catch (const Error& err) {
      EXPECT_EQ(std::string(err.what()).rfind(p + ": ", 0), 0u) << err.what();
    }
  }
  EXPECT_GE(seen, 8);
  EXPECT_THROW(SafetensorsFile::open((dir / "does_not_exist.safetensors").string()), Error);
  EXPECT_THROW(SafetensorsFile::open(dir.string()), Error);  // a directory
}

}  // namespace
}  // namespace statecut::io

// read_keep_file (optimized/prune/surgery.h, `statecut prune --keep-from`) on malformed keep files: every problem
// is one std::runtime_error line naming the file, never a std::stoi or nlohmann exception, never a silent parse of
// "1x" as 1.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "optimized/prune/surgery.h"
#include "tests/torch/pipeline_util.h"

namespace {
using statecut::read_keep_file;

/// The message read_keep_file throws for a file holding `text` (or "(accepted)").
std::string refusal(const std::string& text) {
  pipeline_test::TempDir d("keep_file");
  const std::string p = d / "keep.json";
  std::ofstream(p) << text;
  try {
    read_keep_file(p);
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind(p + ": ", 0), 0u) << "does not start with the file: " << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << "more than one line: " << m;
    return m;
  }
  return "(accepted)";
}

TEST(BadInput_KeepFile, keyThatIsNotLayerDotHeadNamesTheFile) {
  for (const char* key : {"1x.0", "0.1y", "-1.0", "a.b", "0.", ".0"}) {
    const std::string m = refusal(std::string(R"({"keep": {")") + key + R"(": [0, 1]}})");
    EXPECT_NE(m.find(std::string("keep key '") + key + "'"), std::string::npos) << key << ": " << m;
  }
  EXPECT_EQ(refusal(R"({"keep": {"0.0": [0, 1], "0.1": [1, 2]}})"), "(accepted)");  // the positive control
}

// An index has at most nine digits (it must fit an int): nine are read, ten refused as not '<layer>.<head>' (seed 305:
// the bound moved to eight digits survived).
TEST(BadInput_KeepFile, nineDigitIndicesAreTheLongestAccepted) {
  EXPECT_EQ(refusal(R"({"keep": {"123456789.0": [0, 1]}})"), "(accepted)");
  EXPECT_EQ(refusal(R"({"keep": {"0.000000000": [0, 1]}})"), "(accepted)");
  for (const char* key : {"1234567890.0", "0.0000000000"}) {
    const std::string m = refusal(std::string(R"({"keep": {")") + key + R"(": [0, 1]}})");
    EXPECT_NE(m.find(std::string("keep key '") + key + "' is not '<layer>.<head>'"), std::string::npos) << m;
  }
  pipeline_test::TempDir d("keep_file_nine");
  const std::string p = d / "keep.json";
  std::ofstream(p) << R"({"keep": {"123456789.0": [3]}})";
  const auto sel = read_keep_file(p);
  ASSERT_EQ(sel.size(), 1u);
  EXPECT_EQ(sel[0].layer, 123456789);
}

TEST(BadInput_KeepFile, valueOfTheWrongTypeNamesTheFile) {
  EXPECT_NE(refusal(R"({"keep": {"0.0": "0, 1"}})"), "(accepted)");
  EXPECT_NE(refusal(R"({"selection": {"layers": [{"layer": "zero", "keep": [[0, 1]]}]}})"), "(accepted)");
  EXPECT_NE(refusal(R"({"selection": {"layers": [{"layer": 0, "keep": [[0.5, 1]]}]}})"), "(accepted)");
}

// A statecut.json's layer is an int's worth, never wrapped: 2^32 read as int was layer 0 and 2^64 - 1 layer -1; the
// largest int is read as itself (a layer the model lacks is the pruner's to refuse).
TEST(BadInput_KeepFile, aSelectionLayerBeyondAnIntIsRefusedNotWrapped) {
  for (const char* layer : {"4294967296", "18446744073709551615", "2147483648", "-1"}) {
    const std::string m = refusal(std::string(R"({"selection": {"layers": [{"layer": )") + layer + R"(, "keep": [[0, 1]]}]}})");
    EXPECT_NE(m.find(std::string("expected a layer index (an integer in [0, 2^31)), got ") + layer), std::string::npos) << m;
  }
  pipeline_test::TempDir d("keep_file_intmax");
  const std::string p = d / "keep.json";
  std::ofstream(p) << R"({"selection": {"layers": [{"layer": 2147483647, "keep": [[3]]}]}})";
  const auto sel = read_keep_file(p);
  ASSERT_EQ(sel.size(), 1u);
  EXPECT_EQ(sel[0].layer, 2147483647);
}

// A layer listed twice in a statecut.json is refused: the second keep set silently replaced the first, and prune
// wrote "in 3 layers" for a 2-layer model.
TEST(BadInput_KeepFile, aLayerListedTwiceIsRefused) {
  const std::string m = refusal(
      R"({"selection": {"layers": [{"layer": 1, "keep": [[0, 1]]}, {"layer": 0, "keep": [[0, 1]]}, {"layer": 1, "keep": [[2, 3]]}]}})");
  EXPECT_NE(m.find("layer 1 is listed twice"), std::string::npos) << m;
  EXPECT_EQ(refusal(R"({"selection": {"layers": [{"layer": 1, "keep": [[0, 1]]}, {"layer": 0, "keep": [[2, 3]]}]}})"),
            "(accepted)");
}

// A file that is neither format is refused as such, whatever else it holds: a "keep" that is a list (not the
// "<layer>.<head>" object) and a "selection" without layers (ci/mutate.sh seed 301: the format test's `&&` weakened to
// `||` survived).
TEST(BadInput_KeepFile, neitherFormatIsNamedAsSuch) {
  for (const char* text : {R"({"keep": [[0, 1]]})", R"({"keep": 3})", R"({"selection": {"method": "l1"}})", "{}"}) {
    const std::string m = refusal(text);
    EXPECT_NE(m.find("neither a keep.json ('keep') nor a statecut.json ('selection')"), std::string::npos)
        << text << ": " << m;
  }
}

}  // namespace

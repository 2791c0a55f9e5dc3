// Faithful DRRQR against the published algorithm's own answer: tests/data/rrqr_golden/*.json hold small
// matrices (m <= 5000 rows, so the published code subsamples nothing) and the columns rrqr.py's loop keeps
// (QRCP, then at most 20 swaps of the first row-major argmax while max rho > 1.5, singular stop 1e-9),
// computed by tools/faithful_drrqr_golden.py: plain-Python Householder QR, independent of reference/.
// The generator refuses a case in which any decision (QRCP pivot, argmax pair, rho against f) is within a
// relative 1e-6, so the answer is the same in any correct double-precision evaluation.
#include "reference/rrqr.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {
using namespace statecut::ref;
namespace fs = std::filesystem;

struct GoldenCase {
  std::string name, what;
  Mat m;
  Index k = 0;
  double f = 0.0;
  std::vector<Index> keep;  // sorted
  Index swaps = 0;
  std::string stop;
};

fs::path golden_dir() { return fs::path(STATECUT_SOURCE_DIR) / "tests" / "data" / "rrqr_golden"; }

std::vector<GoldenCase> load_cases() {
  std::vector<GoldenCase> out;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(golden_dir()))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& p : files) {
    std::ifstream in(p);
    const nlohmann::json j = nlohmann::json::parse(in);
    GoldenCase c;
    c.name = j.at("name");
    c.what = j.at("what");
    c.k = j.at("k");
    c.f = j.at("f");
    c.swaps = j.at("swaps");
    c.stop = j.at("stop");
    c.keep = j.at("keep").get<std::vector<Index>>();
    const Index m = j.at("m"), n = j.at("n");
    c.m.resize(m, n);
    for (Index r = 0; r < m; ++r)
      for (Index col = 0; col < n; ++col) c.m(r, col) = j.at("matrix").at(r).at(col).get<double>();
    out.push_back(std::move(c));
  }
  return out;
}

RrqrOptions published() {
  RrqrOptions o;  // rrqr.py: f = 1.5, at most 20 swaps, singular stop 1e-9, 5,000-row subsample
  o.mode = DrrqrMode::Faithful;
  return o;
}

TEST(Golden_FaithfulDrrqr, goldenSetCoversQrcpFailureSwapsFromDeepInTheDiscardedBlockAndTheSingularStop) {
  // The set must keep exercising what it is for: a swap that changes QRCP's choice, and the singular stop.
  const std::vector<GoldenCase> cases = load_cases();
  ASSERT_GE(cases.size(), 4u) << "no golden files under " << golden_dir();
  bool swapped = false, singular = false;
  for (const auto& c : cases) {
    ASSERT_LE(c.m.rows(), 5000) << c.name << ": the published code would subsample; the golden has no subsample";
    swapped = swapped || c.swaps > 0;
    singular = singular || c.stop == "singular";
  }
  EXPECT_TRUE(swapped);
  EXPECT_TRUE(singular);
}

TEST(Golden_FaithfulDrrqr, keptColumnsMatchThePublishedLoop) {
  for (const auto& c : load_cases()) {
    SCOPED_TRACE(c.name + ": " + c.what);
    RrqrOptions o = published();
    ASSERT_EQ(o.f, c.f);
    const RrqrResult r = strong_rrqr(c.m, c.k, o);
    std::vector<Index> keep(r.perm.begin(), r.perm.begin() + c.k);
    std::sort(keep.begin(), keep.end());
    EXPECT_EQ(keep, c.keep);
    EXPECT_EQ(r.swaps, c.swaps) << "stop reason in the golden: " << c.stop;
  }
}

TEST(Golden_FaithfulDrrqr, selectionDoesNotDependOnTheChannelOrder) {
  // Reversing the channels (a relabelling) must keep the same channels, relabelled: the golden's
  // decisions all win by 1e-6, so no tie-break decides them. The dead-channel case is the exception
  // by design (the singular stop keeps whichever zero channel QRCP met first), so it is skipped.
  for (const auto& c : load_cases()) {
    if (c.stop == "singular") continue;
    SCOPED_TRACE(c.name);
    const Index n = c.m.cols();
    const Mat rev = c.m.rowwise().reverse();
    std::vector<Index> keep = drrqr_pivots(rev, c.k, published());
    for (Index& j : keep) j = n - 1 - j;
    std::sort(keep.begin(), keep.end());
    EXPECT_EQ(keep, c.keep);
  }
}

}  // namespace

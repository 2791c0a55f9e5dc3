// Bad safetensors input through the real binary, without LibTorch: `statecut select --matrix FILE` on every
// file of the committed corpus tests/data/bad/ exits 1 (not a signal) with exactly one stderr line
// "statecut select: error: <file>: ..." and nothing on stdout; the same command on a good file succeeds.
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "optimized/io/safetensors.h"
#include "tests/cli/badinput_io_util.h"
#include "tests/io/io_test_util.h"

namespace statecut::io {
namespace {

namespace fs = std::filesystem;

using test::CliRun;
using test::slurp;
using test::expect_one_line_error;
using test::run_statecut;

TEST(BadInput_CliSelectIo, goodMatrixFileIsAccepted) {
  // Guards the test below: the command line itself is valid.
  test::TempDir dir("cli_select_good");
  std::vector<float> m(10 * 4);
  for (std::size_t i = 0; i < m.size(); ++i) m[i] = static_cast<float>((i * 7) % 11) - static_cast<float>(i % 4);
  SafetensorsWriter w;
  w.add("m", DType::F32, {10, 4}, m.data(), m.size() * sizeof(float));
  w.write(dir / "m.safetensors");
  const CliRun r = run_statecut("select --matrix " + (dir / "m.safetensors") + " --method drrqr --keep 2");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"keep\""), std::string::npos) << r.out;
}

TEST(BadInput_CliSelectIo, everyCorpusFileFailsWithOneLineNamingIt) {
  const fs::path dir = fs::path(STATECUT_SOURCE_DIR) / "tests/data/bad";
  int seen = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string p = e.path().string();
    SCOPED_TRACE(p);
    ++seen;
    expect_one_line_error(run_statecut("select --matrix " + p + " --method drrqr --keep 1"),
                          "statecut select: error: " + p + ": ");
  }
  EXPECT_GE(seen, 8);
}

}  // namespace
}  // namespace statecut::io

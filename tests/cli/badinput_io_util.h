// The bad-input contract of the CLI (tests/cli/badinput_io_*.cpp) on a run of tests/cli/cli_run.h.
#pragma once
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/cli/cli_run.h"
#include "tests/io/io_test_util.h"

namespace statecut::io::test {

using statecut::test::CliRun;
using statecut::test::run_statecut;
using statecut::test::slurp;

/// The bad-input contract (DESIGN.md §6) on one finished run: no crash, exit 1, nothing on stdout, exactly one line on
/// stderr starting with `prefix`. Returns that line (without its newline) for further checks.
inline std::string expect_one_line_error(const CliRun& r, const std::string& prefix) {
  EXPECT_FALSE(r.signaled) << "crashed: " << r.err;
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_TRUE(r.out.empty()) << "stdout: " << r.out;
  std::string line = r.err;
  if (!line.empty() && line.back() == '\n') line.pop_back();
  EXPECT_EQ(line.find('\n'), std::string::npos) << "more than one line:\n" << r.err;
  EXPECT_EQ(line.rfind(prefix, 0), 0u) << line;
  return line;
}

}  // namespace statecut::io::test

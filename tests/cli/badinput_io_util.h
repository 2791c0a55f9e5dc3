// The statecut binary run through the shell for the bad-input CLI tests (tests/cli/badinput_io_*.cpp): exit code,
// whether a signal ended it, stdout and stderr.
#pragma once
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/io/io_test_util.h"

namespace statecut::io::test {

struct CliRun {
  int code = -1;
  bool signaled = false;
  std::string out, err;
};

inline std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

/// `statecut <args>` with stdout and stderr captured in a temporary directory.
inline CliRun statecut(const std::string& args) {
  TempDir io("cli_io");
  const std::string cmd = std::string(STATECUT_CLI) + " " + args + " > " + (io / "out") + " 2> " + (io / "err");
  const int st = std::system(cmd.c_str());
  CliRun r;
  r.signaled = WIFSIGNALED(st) || (WIFEXITED(st) && WEXITSTATUS(st) > 128);  // the shell reports 128+signal
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.out = slurp(io / "out");
  r.err = slurp(io / "err");
  return r;
}

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

// The statecut binary run through the shell for the bad-input CLI tests (tests/cli/badinput_io_*.cpp): exit code,
// whether a signal ended it, stdout and stderr.
#pragma once
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

}  // namespace statecut::io::test

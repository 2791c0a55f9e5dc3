/// The statecut binary (or another program) run through the shell by the CLI tests: exit code, whether a signal ended
/// it, stdout and stderr. Test targets define STATECUT_CLI (the built binary's path) to use run_statecut.
#pragma once
#include <sys/wait.h>

#include <cstdlib>
#include <string>

#include "tests/test_files.h"

namespace statecut::test {

struct CliRun {
  int code = -1;          ///< exit status, or 128 + signal number when a signal ended it
  bool signaled = false;  ///< a signal ended it (directly, or the shell reported 128 + signal)
  std::string out, err;
};

/// `<program> <args>` (args already shell-quoted where needed), stdout and stderr captured in a temporary folder.
inline CliRun run_program(const std::string& program, const std::string& args) {
  TempDir io("io");
  const std::string cmd = program + " " + args + " > " + (io / "out") + " 2> " + (io / "err");
  const int st = std::system(cmd.c_str());
  CliRun r;
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.signaled = WIFSIGNALED(st) || r.code > 128;
  r.out = slurp(io / "out");
  r.err = slurp(io / "err");
  return r;
}

#ifdef STATECUT_CLI
/// `statecut <args>`.
inline CliRun run_statecut(const std::string& args) { return run_program(STATECUT_CLI, args); }
#endif

}  // namespace statecut::test

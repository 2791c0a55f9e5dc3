// Helpers shared by the pipeline's tests (tests/torch/{surgery,calib,pipeline}*, tests/cli/{prune,rank,eval}*):
// whole-file reads, self-removing temporary folders, the fixture folder and the master seed.
#pragma once
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/test_env.h"
#include "tests/test_files.h"

namespace pipeline_test {
namespace fs = std::filesystem;

/// ../shared/fixtures when present, else the copies shipped in tests/data/fixtures (a clone alone: the fla fixtures
/// there carry trimmed goldens, model and config bytes unchanged). STATECUT_FIXTURE_ROOT=<dir> overrides both.
inline fs::path fixture_root() {
  for (const auto& root : statecut::test::fixture_roots())
    if (fs::exists(root / "fla_delta_net" / "config.json")) return root;
  return statecut::test::fixture_roots().back();
}

/// The pipeline tests' master seed (tests/test_env.h): STATECUT_SEED, else 20260211.
inline uint64_t master_seed() { return statecut::test::env_seed(20260211ull); }

using statecut::test::slurp;
using statecut::test::TempDir;

}  // namespace pipeline_test

// Helpers of the pipeline's CLI tests (prune/rank/eval): run the statecut binary, temp folders, token files.
#pragma once
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "optimized/io/safetensors.h"
#include "tests/rel_err.h"
#include "tests/cli/cli_run.h"
#include "tests/torch/pipeline_util.h"

namespace pipeline_cli {
namespace fs = std::filesystem;

inline const fs::path kRoot = fs::path(STATECUT_SOURCE_DIR);
inline const fs::path kModel = kRoot / "assets" / "byte_delta_net_4L";
inline const fs::path kCorpora = kRoot / "assets" / "corpora";
inline const fs::path kFixtures = pipeline_test::fixture_root();

using pipeline_test::slurp;
using pipeline_test::TempDir;

using statecut::test::CliRun;
using statecut::test::run_program;
using statecut::test::run_statecut;

/// Non-empty lines of a text.
inline std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> v;
  std::istringstream is(s);
  for (std::string l; std::getline(is, l);)
    if (!l.empty()) v.push_back(l);
  return v;
}

/// Writes `input_ids` [B, T] int64.
inline void write_tokens(const std::string& path, const std::vector<int64_t>& ids, int64_t B, int64_t T) {
  statecut::io::SafetensorsWriter w;
  w.add("input_ids", statecut::io::DType::I64, {B, T}, ids.data(), ids.size() * sizeof(int64_t));
  w.write(path);
}

/// A tensor of a safetensors file as doubles, with its shape.
inline std::vector<double> read_tensor(const std::string& path, const std::string& name, std::vector<int64_t>* shape = nullptr) {
  const auto f = statecut::io::SafetensorsFile::open(path);
  const auto& t = f.tensor(name);
  if (shape) *shape = t.shape;
  return statecut::io::to_double(t);
}

using statecut::test::rel_err;

/// The first `n` bytes of `src` as a new text file.
inline void head_bytes(const fs::path& src, const std::string& dst, size_t n) {
  std::ofstream(dst, std::ios::binary) << slurp(src).substr(0, n);
}

/// Every entry of `dir` whose name contains `needle` (left-over temporaries).
inline std::vector<std::string> entries_containing(const fs::path& dir, const std::string& needle) {
  std::vector<std::string> v;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(needle) != std::string::npos) v.push_back(e.path().filename().string());
  return v;
}

}  // namespace pipeline_cli

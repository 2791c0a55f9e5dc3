// Helpers shared by the tests/io files: seeded RNG, temp dirs, whole-file reads.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

#include "tests/test_env.h"
#include "tests/test_files.h"

namespace statecut::io::test {

/// Master seed: STATECUT_SEED if set, else a fixed default; printed so a failure can be replayed.
inline uint64_t master_seed() { return statecut::test::env_seed(20260204ULL); }

using statecut::test::TempDir;

inline std::vector<unsigned char> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

inline void write_bytes(const std::string& path, const std::vector<unsigned char>& b) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

/// The shared fixtures (../shared next to the checkout), or "" when this clone stands alone.
inline std::string shared_dir() {
  const std::filesystem::path p = std::filesystem::path(STATECUT_SOURCE_DIR).parent_path() / "shared";
  return std::filesystem::exists(p / "fixtures") ? p.string() : std::string();
}

}  // namespace statecut::io::test

/// Files in tests: whole-file reads and self-removing temporary folders, one definition for every test binary.
#pragma once
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>

#include "optimized/io/remove_tree.h"

namespace statecut::test {

/// The whole file as bytes ("" when it cannot be read).
inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/// A fresh empty folder under the temp dir (tag, process id and a counter in its name), removed with everything in it
/// at the end of the scope. `dir / "name"` is the path of an entry as a string.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& tag) {
    static std::atomic<int> n{0};
    path = std::filesystem::temp_directory_path() /
           ("statecut-test-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
    remove_tree(path.string());
    std::filesystem::create_directories(path);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() { remove_tree(path.string()); }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

}  // namespace statecut::test

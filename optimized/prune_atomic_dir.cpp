#include "optimized/prune_atomic_dir.h"

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <stdexcept>
#include <system_error>

namespace statecut {
namespace fs = std::filesystem;

AtomicDir::AtomicDir(const std::string& target) : target_(target) {
  if (target.empty()) throw std::runtime_error("output directory: empty path");
  fs::path t = fs::path(target);
  if (!t.has_filename()) t = t.parent_path();  // "out/" → "out"
  target_ = t.string();
  std::error_code ec;
  if (fs::exists(t, ec)) throw std::runtime_error(target_ + ": output already exists (remove it or choose another --out)");
  const fs::path parent = t.has_parent_path() ? t.parent_path() : fs::path(".");
  if (!fs::is_directory(parent, ec)) throw std::runtime_error(target_ + ": parent directory " + parent.string() + " does not exist");
  static std::atomic<int> counter{0};
  const fs::path tmp = parent / ("." + t.filename().string() + ".tmp-" + std::to_string(::getpid()) + "-" +
                                 std::to_string(counter++));
  if (!fs::create_directory(tmp, ec) || ec)
    throw std::runtime_error(target_ + ": cannot create output directory: " +
                             (ec ? ec.message() : std::string("temporary already exists")));
  tmp_ = tmp.string();
}

AtomicDir::~AtomicDir() {
  if (committed_) return;
  std::error_code ec;
  fs::remove_all(tmp_, ec);
}

void AtomicDir::commit() {
  std::error_code ec;
  fs::rename(tmp_, target_, ec);
  if (ec) throw std::runtime_error(target_ + ": cannot move the finished output into place: " + ec.message());
  committed_ = true;
}

}  // namespace statecut

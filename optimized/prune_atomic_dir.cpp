#include "optimized/prune_atomic_dir.h"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <system_error>

namespace statecut {
namespace fs = std::filesystem;

namespace {
// The temporary being written, removed if SIGINT/SIGTERM arrives (SIGKILL leaves only the hidden temporary,
// never the target). One at a time is enough for the CLI.
char g_pending[4096] = {0};

void on_signal(int sig) {
  if (g_pending[0] != 0) {
    std::error_code ec;
    fs::remove_all(g_pending, ec);  // not async-signal-safe in theory; the process is about to die anyway
  }
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void set_pending(const std::string& p) {
  if (p.size() < sizeof g_pending) {
    std::strcpy(g_pending, p.c_str());
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
  }
}

void clear_pending() { g_pending[0] = 0; }
}  // namespace

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
  set_pending(tmp_);
}

AtomicDir::~AtomicDir() {
  clear_pending();
  if (committed_) return;
  std::error_code ec;
  fs::remove_all(tmp_, ec);
}

void AtomicDir::commit() {
  std::error_code ec;
  fs::rename(tmp_, target_, ec);
  if (ec) throw std::runtime_error(target_ + ": cannot move the finished output into place: " + ec.message());
  committed_ = true;
  clear_pending();
}

}  // namespace statecut

#include "optimized/io/atomic_dir.h"

#include "optimized/io/remove_tree.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <system_error>
#include <utility>
#include <vector>

namespace statecut {
namespace fs = std::filesystem;

namespace {
// The temporary being written, removed if SIGINT/SIGTERM arrives (SIGKILL leaves only the hidden temporary,
// never the target). One at a time is enough for the CLI.
char g_pending[4096] = {0};

void on_signal(int sig) {
  if (g_pending[0] != 0) remove_tree_signal_safe(g_pending);  // no allocation: the signal may have come inside malloc
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

/// (temporary, target) of every AtomicDir this process made; a handful at most, kept for name_outputs.
std::mutex g_outputs_mutex;
std::vector<std::pair<std::string, std::string>> g_outputs;

/// The pid of a temporary sibling's name ".<name>.tmp-<pid>-<n>", or 0 when the name is not one.
pid_t temporary_owner(const std::string& name) {
  const std::size_t at = name.rfind(".tmp-");
  if (name.empty() || name[0] != '.' || at == std::string::npos || at == 0) return 0;
  const std::string rest = name.substr(at + 5);  // "<pid>-<n>"
  const std::size_t dash = rest.find('-');
  if (dash == std::string::npos || dash == 0 || dash + 1 == rest.size()) return 0;
  for (std::size_t i = 0; i < rest.size(); ++i)
    if (i != dash && !std::isdigit(static_cast<unsigned char>(rest[i]))) return 0;
  if (dash > 9) return 0;
  return static_cast<pid_t>(std::stol(rest.substr(0, dash)));
}
}  // namespace

std::vector<std::string> remove_stale_temporaries(const std::string& parent) {
  std::vector<std::string> removed;
  std::error_code ec;
  for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
    const pid_t pid = temporary_owner(it->path().filename().string());
    if (pid <= 0 || pid == ::getpid()) continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to ask about): leave it
    if (remove_tree(it->path().string())) {
      removed.push_back(it->path().string());
      std::fprintf(stderr, "statecut: removed %s, the temporary output of process %d, which is gone\n",
                   it->path().string().c_str(), static_cast<int>(pid));
    }
  }
  return removed;
}

AtomicDir::AtomicDir(const std::string& target, const std::string& option) : target_(target) {
  if (target.empty()) throw std::runtime_error("output directory: empty path");
  fs::path t = fs::path(target);
  if (!t.has_filename()) t = t.parent_path();  // "out/" → "out"
  target_ = t.string();
  require_new_output_file(target_, option);
  std::error_code ec;
  const fs::path parent = t.has_parent_path() ? t.parent_path() : fs::path(".");
  remove_stale_temporaries(parent.string());  // left by a run killed with SIGKILL
  static std::atomic<int> counter{0};
  const fs::path tmp = parent / ("." + t.filename().string() + ".tmp-" + std::to_string(::getpid()) + "-" +
                                 std::to_string(counter++));
  if (!fs::create_directory(tmp, ec) || ec)
    throw std::runtime_error(target_ + ": cannot create output directory: " +
                             (ec ? ec.message() : std::string("temporary already exists")));
  tmp_ = tmp.string();
  {
    std::lock_guard<std::mutex> lock(g_outputs_mutex);
    g_outputs.emplace_back(tmp_, target_);
  }
  set_pending(tmp_);
}

AtomicDir::~AtomicDir() {
  clear_pending();
  if (committed_) return;
  remove_tree(tmp_);
}

void AtomicDir::commit() {
  std::error_code ec;
  fs::rename(tmp_, target_, ec);
  if (ec) throw std::runtime_error(target_ + ": cannot move the finished output into place: " + ec.message());
  committed_ = true;
  clear_pending();
}

std::string name_outputs(std::string message) {
  std::lock_guard<std::mutex> lock(g_outputs_mutex);
  for (const auto& [tmp, target] : g_outputs)
    for (size_t at = message.find(tmp); at != std::string::npos; at = message.find(tmp, at + target.size()))
      message.replace(at, tmp.size(), target);
  return message;
}

void require_new_output_file(const std::string& path, const std::string& option) {
  std::error_code ec;
  if (fs::exists(fs::symlink_status(path, ec)))
    throw std::runtime_error(path + ": " + option + " already exists (remove it or choose another " + option + ")");
  const fs::path parent = fs::absolute(path, ec).parent_path();
  if (!fs::is_directory(parent, ec))
    throw std::runtime_error(path + ": " + option + ": parent directory " + parent.string() + " does not exist");
}

void write_text_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  std::error_code ec;
  {
    std::ofstream o(tmp, std::ios::binary);
    o << text;
    o.flush();
    if (!o) {
      fs::remove(tmp, ec);
      throw std::runtime_error(path + ": cannot write");
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    const std::string why = ec.message();
    fs::remove(tmp, ec);
    throw std::runtime_error(path + ": cannot rename into place: " + why);
  }
}

}  // namespace statecut

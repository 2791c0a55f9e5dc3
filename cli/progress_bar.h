/// A progress bar on stderr for the long steps of prune/eval/rank: redrawn in place on a terminal,
/// one line at the end otherwise (so logs and tests see a single line, not hundreds).
#pragma once
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <string>

namespace statecut {

class ProgressBar {
 public:
  explicit ProgressBar(std::string label, bool enabled = true)
      : label_(std::move(label)), enabled_(enabled), tty_(::isatty(2) != 0), t0_(std::chrono::steady_clock::now()) {}
  void operator()(int64_t done, int64_t total) {
    if (!enabled_ || total <= 0) return;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    if (tty_) {
      const int width = 30;
      const int filled = static_cast<int>(width * done / total);
      std::fprintf(stderr, "\r%-12s [%s%s] %lld/%lld %.1fs", label_.c_str(), std::string(filled, '#').c_str(),
                   std::string(width - filled, '.').c_str(), static_cast<long long>(done),
                   static_cast<long long>(total), secs);
      if (done >= total) std::fputc('\n', stderr);
    } else if (done >= total) {
      std::fprintf(stderr, "%s: %lld/%lld done in %.1fs\n", label_.c_str(), static_cast<long long>(done),
                   static_cast<long long>(total), secs);
    }
    std::fflush(stderr);
  }
  std::function<void(int64_t, int64_t)> callback() {
    return [this](int64_t d, int64_t t) { (*this)(d, t); };
  }

 private:
  std::string label_;
  bool enabled_, tty_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace statecut

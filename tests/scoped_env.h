// An environment variable set (or unset) for one scope, then restored as it was: for tests of code that reads the
// environment (torchrun's variables, OMP_NUM_THREADS).
#pragma once
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

namespace statecut::test {

class ScopedEnv {
 public:
  /// Sets `name` to `value` (nullopt: unsets it) until the end of the scope.
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) ::setenv(name, value->c_str(), 1);
    else ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace statecut::test

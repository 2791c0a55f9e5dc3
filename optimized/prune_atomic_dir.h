/// An output directory that appears all at once or not at all (DESIGN.md §2, §6).
///
/// The constructor creates a fresh temporary sibling `.<name>.tmp-<pid>-<n>` next to `target` (so the final
/// rename stays on one file system); commit() renames it to `target`. If commit() is never reached (an
/// exception, an error return), the destructor removes the temporary: a failing run leaves nothing.
/// SIGINT/SIGTERM while a temporary exists remove it too. `target` must not exist yet; its parent must exist and be writable. Errors are one line naming `target`.
#pragma once
#include <string>

namespace statecut {

class AtomicDir {
 public:
  explicit AtomicDir(const std::string& target);
  AtomicDir(const AtomicDir&) = delete;
  AtomicDir& operator=(const AtomicDir&) = delete;
  ~AtomicDir();
  /// Where to write the contents before commit().
  const std::string& path() const { return tmp_; }
  const std::string& target() const { return target_; }
  void commit();

 private:
  std::string target_, tmp_;
  bool committed_ = false;
};

}  // namespace statecut

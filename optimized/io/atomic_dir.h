/// An output directory that appears all at once or not at all (DESIGN.md §2, §6).
///
/// The constructor creates a fresh temporary sibling `.<name>.tmp-<pid>-<n>` next to `target` (so the final
/// rename stays on one file system); commit() renames it to `target`. If commit() is never reached (an
/// exception, an error return), the destructor removes the temporary: a failing run leaves nothing.
/// SIGINT/SIGTERM while a temporary exists remove it too. `target` must not exist yet; its parent must exist and be writable. Errors are one line naming `target`.
/// SIGKILL leaves the hidden temporary behind: the next AtomicDir in the same parent removes every
/// `.<name>.tmp-<pid>-<n>` whose process is gone, and says so on stderr (remove_stale_temporaries).
#pragma once
#include <string>
#include <vector>

namespace statecut {

/// A single file: `text` written to "<path>.tmp" and renamed over `path` (an existing file is replaced whole, never
/// left half written); on failure the temporary is removed and a one-line std::runtime_error names `path`.
void write_text_atomically(const std::string& path, const std::string& text);

/// An output file or folder the user names (--out, --svg): refused when something exists at `path` already —
/// statecut never overwrites a user's file (a checkpoint's own model.safetensors or config.json among them) — or when
/// its parent folder is missing. Checked before any work; a one-line std::runtime_error names `path` and `option`:
/// "PATH: OPTION already exists (remove it or choose another OPTION)", "PATH: OPTION: parent directory P does not
/// exist". Every output check of the CLI says it this way (AtomicDir's constructor calls it).
void require_new_output_file(const std::string& path, const std::string& option);

/// Removes the temporaries of dead processes in `parent`; returns their paths (each also reported on stderr).
std::vector<std::string> remove_stale_temporaries(const std::string& parent);

/// `message` with the path of every output temporary this process made replaced by its target's: an error raised
/// while writing into one ("<dir>/.out.tmp-<pid>-0/model.safetensors: write failed: No space left on device") names
/// the folder the user asked for, not the hidden temporary, which is gone by the time the message is printed. The
/// CLI passes every error line through it.
std::string name_outputs(std::string message);

class AtomicDir {
 public:
  /// `option`: the option that named `target`, for require_new_output_file's message.
  explicit AtomicDir(const std::string& target, const std::string& option = "--out");
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

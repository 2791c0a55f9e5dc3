/// Removing a folder and everything in it, without std::filesystem::remove_all.
///
/// Why not remove_all: the CUDA LibTorch of pip (torch 2.11+cu130, the H200 machine of bench/README.md) exports its
/// own std::filesystem::remove_all from libtorch.so, and an executable linked to it binds that copy before
/// libstdc++'s; it crashes on a null call (seen under cuda-gdb in the tests' TempDir and in the trainer's clean-up of
/// its step states: `statecut finetune` and every in-process finetune test died of SIGSEGV there unless libstdc++ was
/// preloaded). remove_tree walks the tree with POSIX nftw and unlink/rmdir, so no library's std::filesystem runs.
#pragma once
#include <string>
#include <system_error>

namespace statecut {

/// Removes `path` and, when it is a folder, everything under it, children first; symbolic links are removed, never
/// followed (a link to a folder outside leaves that folder alone). A `path` that does not exist is not an error
/// (as remove_all). On failure `ec` holds the first error (errno) and the walk stops; otherwise `ec` is cleared.
void remove_tree(const std::string& path, std::error_code& ec) noexcept;

/// The same removal from a signal handler: only async-signal-safe system calls (open, openat, getdents64, fstatat,
/// unlinkat, rmdir, close), no allocation and no lock — a handler that ran remove_tree (nftw allocates) while the
/// interrupted code held malloc's lock waited on it for ever (SIGTERM to a running prune). Best effort: errors are
/// not reported, the depth is limited to 32 folders.
void remove_tree_signal_safe(const char* path) noexcept;

/// remove_tree(path, ec) where the caller only cleans up: true when `path` is gone (or never was).
inline bool remove_tree(const std::string& path) noexcept {
  std::error_code ec;
  remove_tree(path, ec);
  return !ec;
}

}  // namespace statecut

#include "optimized/io/remove_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>

namespace statecut {
namespace {

// FTW_DEPTH: an entry is visited after its children (a folder is empty when rmdir'd); FTW_PHYS: links are not followed.
int remove_entry(const char* p, const struct stat* /*st*/, int /*type*/, struct FTW* /*at*/) {
  return std::remove(p) == 0 ? 0 : (errno != 0 ? errno : EIO);  // remove(): unlink for files and links, rmdir for folders
}

/// getdents64's record (linux/dirent.h; glibc's readdir may allocate, so the system call is used directly).
struct Dirent64 {
  uint64_t ino;
  int64_t off;
  unsigned short reclen;
  unsigned char type;
  char name[1];
};

/// Removes everything in the open folder `fd`, children first. Entries removed while the folder is being read can
/// make getdents skip others, so the listing restarts until a pass finds nothing left.
void clear_folder_signal_safe(int fd, int depth) noexcept {
  if (depth > 32) return;
  for (int pass = 0; pass < 64; ++pass) {
    if (::lseek(fd, 0, SEEK_SET) != 0) return;
    bool found = false;
    alignas(8) char buf[2048];
    for (long n; (n = ::syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0;) {
      for (long off = 0; off < n;) {
        const auto* d = reinterpret_cast<const Dirent64*>(buf + off);
        off += d->reclen;
        const char* name = d->name;
        if (name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0))) continue;
        found = true;
        bool folder = d->type == DT_DIR;
        if (d->type == DT_UNKNOWN) {
          struct stat st;
          folder = ::fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
        }
        if (folder) {
          const int sub = ::openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
          if (sub >= 0) {
            clear_folder_signal_safe(sub, depth + 1);
            ::close(sub);
          }
        }
        ::unlinkat(fd, name, folder ? AT_REMOVEDIR : 0);
      }
    }
    if (!found) return;
  }
}

}  // namespace

void remove_tree_signal_safe(const char* path) noexcept {
  const int fd = ::open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {  // a file, a link, or nothing
    ::unlink(path);
    return;
  }
  clear_folder_signal_safe(fd, 0);
  ::close(fd);
  ::rmdir(path);
}

void remove_tree(const std::string& path, std::error_code& ec) noexcept {
  ec.clear();
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) ec.assign(errno, std::generic_category());
    return;
  }
  errno = 0;
  const int r = ::nftw(path.c_str(), remove_entry, 32, FTW_DEPTH | FTW_PHYS);
  if (r > 0) ec.assign(r, std::generic_category());                                  // a callback's errno
  else if (r < 0) ec.assign(errno != 0 ? errno : EIO, std::generic_category());  // nftw's own failure
}

}  // namespace statecut

#include "optimized/io/remove_tree.h"

#include <ftw.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>

namespace statecut {
namespace {

// FTW_DEPTH: an entry is visited after its children (a folder is empty when rmdir'd); FTW_PHYS: links are not followed.
int remove_entry(const char* p, const struct stat* /*st*/, int /*type*/, struct FTW* /*at*/) {
  return std::remove(p) == 0 ? 0 : (errno != 0 ? errno : EIO);  // remove(): unlink for files and links, rmdir for folders
}

}  // namespace

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

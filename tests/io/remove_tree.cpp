// remove_tree (optimized/io/remove_tree.h): a folder goes with everything under it, children first; links are
// removed, never followed; a missing path is no error; a failure is reported, not thrown.
#include "optimized/io/remove_tree.h"

#include <filesystem>
#include <fstream>

#include "tests/io/io_test_util.h"

namespace statecut {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

void touch(const fs::path& p, const std::string& text = "x") { std::ofstream(p) << text; }

TEST(Unit_RemoveTree, removesANestedFolderWithEverythingInIt) {
  TempDir t("remove-tree");
  const fs::path root = t.path / "out";
  fs::create_directories(root / "a" / "b" / "c");
  touch(root / "top.json");
  touch(root / "a" / "model.safetensors", std::string(1 << 16, 'w'));
  touch(root / "a" / "b" / "c" / "deep");
  fs::create_directories(root / "empty");
  std::error_code ec;
  remove_tree(root.string(), ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_FALSE(fs::exists(fs::symlink_status(root)));
  EXPECT_TRUE(fs::exists(t.path)) << "the parent stays";
}

TEST(Unit_RemoveTree, removesAFileAndLeavesItsSiblings) {
  TempDir t("remove-tree-file");
  touch(t.path / "gone");
  touch(t.path / "kept");
  std::error_code ec;
  remove_tree((t.path / "gone").string(), ec);
  EXPECT_FALSE(ec);
  EXPECT_FALSE(fs::exists(t.path / "gone"));
  EXPECT_TRUE(fs::exists(t.path / "kept"));
}

TEST(Unit_RemoveTree, removesLinksWithoutFollowingThem) {
  TempDir t("remove-tree-links");
  const fs::path outside = t.path / "outside", root = t.path / "out";
  fs::create_directories(outside);
  touch(outside / "precious");
  fs::create_directories(root);
  fs::create_directory_symlink(outside, root / "to_folder");
  fs::create_symlink(outside / "precious", root / "to_file");
  fs::create_symlink(t.path / "nowhere", root / "dangling");
  std::error_code ec;
  remove_tree(root.string(), ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_FALSE(fs::exists(fs::symlink_status(root)));
  EXPECT_TRUE(fs::exists(outside / "precious")) << "a link's target is not removed";
  // The path itself a link to a folder: the link goes, the folder stays.
  fs::create_directory_symlink(outside, t.path / "link");
  remove_tree((t.path / "link").string(), ec);
  EXPECT_FALSE(ec);
  EXPECT_FALSE(fs::exists(fs::symlink_status(t.path / "link")));
  EXPECT_TRUE(fs::exists(outside / "precious"));
}

TEST(Unit_RemoveTree, aMissingPathIsNoErrorAndClearsTheCode) {
  TempDir t("remove-tree-missing");
  std::error_code ec = std::make_error_code(std::errc::io_error);
  remove_tree((t.path / "never-made").string(), ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_TRUE(remove_tree((t.path / "never-made").string())) << "the clean-up form: gone, so true";
}

TEST(Unit_RemoveTree, anEntryThatCannotBeRemovedIsReportedNotThrown) {
  // procfs refuses unlink to everyone, root included (CI runs as root, for whom a read-only folder is no obstacle).
  const std::string p = "/proc/version";
  if (!fs::exists(p)) GTEST_SKIP() << "no procfs here";
  std::error_code ec;
  remove_tree(p, ec);
  EXPECT_TRUE(ec == std::errc::operation_not_permitted || ec == std::errc::permission_denied) << ec.message();
  EXPECT_FALSE(remove_tree(p)) << "the clean-up form: still there, so false";
  EXPECT_TRUE(fs::exists(p));
}

// The signal handler's form (no allocation): the same nested tree, a folder of 300 entries (several getdents
// buffers, entries removed while being listed), a link to a folder outside (removed, the target kept), a file path,
// and a missing one.
TEST(Unit_RemoveTree, theSignalSafeFormRemovesTheSameTrees) {
  TempDir t("remove-tree-signal");
  const fs::path root = t.path / "out", outside = t.path / "outside";
  fs::create_directories(root / "a" / "b" / "c");
  fs::create_directories(outside);
  touch(outside / "keep");
  touch(root / "a" / "b" / "c" / "deep");
  for (int i = 0; i < 300; ++i) touch(root / "a" / ("shard-" + std::to_string(i) + "-of-300.safetensors"));
  fs::create_directory_symlink(outside, root / "link");
  remove_tree_signal_safe(root.c_str());
  EXPECT_FALSE(fs::exists(fs::symlink_status(root)));
  EXPECT_TRUE(fs::exists(outside / "keep")) << "a link was followed";
  touch(t.path / "file");
  remove_tree_signal_safe((t.path / "file").c_str());
  EXPECT_FALSE(fs::exists(t.path / "file"));
  remove_tree_signal_safe((t.path / "never").c_str());
  EXPECT_TRUE(fs::exists(t.path));
}

}  // namespace
}  // namespace statecut

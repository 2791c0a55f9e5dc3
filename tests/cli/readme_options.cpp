// README "The command line" is complete: every option that `statecut CMD --help` lists for every command appears in
// README.md (as `--name` followed by a non-name character), so a user reading the README alone sees every option.
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>
#include <vector>

#include "tests/cli/cli_run.h"
#include "tests/test_files.h"

namespace {
using statecut::test::CliRun;
using statecut::test::run_statecut;

/// The commands `statecut help` lists under "Subcommands:".
std::vector<std::string> commands() {
  const CliRun r = run_statecut("help");
  EXPECT_EQ(r.code, 0) << r.err;
  std::vector<std::string> out;
  const auto at = r.out.find("Subcommands:");
  if (at == std::string::npos) {
    ADD_FAILURE() << "no Subcommands: in: " << r.out;
    return out;
  }
  const std::regex line(R"(\n\s+([a-z]+)\s)");
  for (auto it = std::sregex_iterator(r.out.begin() + static_cast<std::ptrdiff_t>(at), r.out.end(), line);
       it != std::sregex_iterator(); ++it)
    out.push_back((*it)[1]);
  return out;
}

bool mentioned(const std::string& readme, const std::string& opt) {
  for (size_t p = readme.find(opt); p != std::string::npos; p = readme.find(opt, p + 1)) {
    const char next = p + opt.size() < readme.size() ? readme[p + opt.size()] : ' ';
    if (!(std::isalnum(static_cast<unsigned char>(next)) || next == '-')) return true;
  }
  return false;
}

TEST(Readme_Options, everyOptionOfEveryCommandIsInTheReadme) {
  const std::string readme = statecut::test::slurp(std::string(STATECUT_SOURCE_DIR) + "/README.md");
  ASSERT_FALSE(readme.empty());
  const auto cmds = commands();
  EXPECT_GE(cmds.size(), 10u);
  for (const auto& c : cmds) {
    const CliRun r = run_statecut(c + " --help");
    ASSERT_EQ(r.code, 0) << c << ": " << r.err;
    std::set<std::string> missing;
    const std::regex opt(R"((--[a-z][a-z0-9-]*))");
    for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), opt); it != std::sregex_iterator(); ++it) {
      const std::string o = (*it)[1];
      if (o != "--help" && !mentioned(readme, o)) missing.insert(o);
    }
    std::string list;
    for (const auto& m : missing) list += " " + m;
    EXPECT_TRUE(missing.empty()) << "statecut " << c << ": options not in README.md:" << list;
  }
}

}  // namespace

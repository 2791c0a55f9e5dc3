/// What every test binary reads from its environment, in one place.
///
///   Seeds.     env_seed(fallback): STATECUT_SEED=N (decimal) replaces the default seed of every test file; each file
///              keeps its own default (the cases CI runs are the ones its thresholds were set on). The seed is printed
///              on stdout whenever it differs from the last one printed, so a failure replays with the printed value.
///              seed_value(fallback) is the same number without printing (for callers that print their own label).
///              (properties/master_seed.h installs the same STATECUT_SEED into RapidCheck's RC_PARAMS.)
///   Fixtures.  fixture_dir(name): the first of <STATECUT_FIXTURE_ROOT>/<name>, ../shared/fixtures/<name> (developers,
///              the outside oracle in full) and tests/data/fixtures/<name> (the trimmed copies a clone alone ships)
///              that holds config.json and golden.safetensors; "" when none does (the test skips and says so).
///              fixture_roots() lists the same folders in the same order, for tests that walk every fixture.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace statecut::test {

inline std::uint64_t seed_value(std::uint64_t fallback) {
  const char* s = std::getenv("STATECUT_SEED");
  return (s && *s) ? std::strtoull(s, nullptr, 10) : fallback;
}

inline std::uint64_t env_seed(std::uint64_t fallback) {
  const std::uint64_t seed = seed_value(fallback);
  static bool printed = false;
  static std::uint64_t last = 0;
  if (!printed || seed != last) {
    std::printf("STATECUT_SEED=%llu\n", static_cast<unsigned long long>(seed));
    std::fflush(stdout);
    printed = true;
    last = seed;
  }
  return seed;
}

inline std::vector<std::filesystem::path> fixture_roots() {
  namespace fs = std::filesystem;
  std::vector<fs::path> roots;
  if (const char* env = std::getenv("STATECUT_FIXTURE_ROOT"); env && *env) roots.emplace_back(env);
  roots.push_back(fs::path(STATECUT_SOURCE_DIR) / ".." / "shared" / "fixtures");
  roots.push_back(fs::path(STATECUT_SOURCE_DIR) / "tests" / "data" / "fixtures");
  return roots;
}

inline std::string fixture_dir(const std::string& name) {
  for (const auto& root : fixture_roots()) {
    const auto p = root / name;
    if (std::filesystem::exists(p / "config.json") && std::filesystem::exists(p / "golden.safetensors"))
      return p.string();
  }
  return "";
}

}  // namespace statecut::test

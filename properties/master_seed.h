/// The master seed of every property binary (include it from each properties/*.cpp, directly or via generators.h).
///
/// RapidCheck seeds itself from std::random_device unless RC_PARAMS names a seed, so a property that does not
/// install one draws different cases on every run. This header installs one at static initialisation, before
/// RapidCheck reads its configuration (lazily, at the first property): RC_PARAMS="seed=N" wins; else
/// STATECUT_SEED=N; else the fixed default kDefaultSeed, so CI runs the same cases every time. It is printed once
/// on stderr, so a failure replays with the printed RC_PARAMS.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace statecut::prop {

constexpr std::uint64_t kDefaultSeed = 2602048520ULL;  // arXiv 2602.04852

namespace detail {
inline bool install_master_seed() {
  const char* rc = std::getenv("RC_PARAMS");
  std::string params = rc ? rc : "";
  if (params.find("seed=") == std::string::npos) {
    const char* env = std::getenv("STATECUT_SEED");
    const std::string seed = (env && *env) ? env : std::to_string(kDefaultSeed);
    params = params.empty() ? "seed=" + seed : params + " seed=" + seed;
    setenv("RC_PARAMS", params.c_str(), 1);
  }
  std::fprintf(stderr, "statecut properties: RC_PARAMS=\"%s\" (override with STATECUT_SEED=N or RC_PARAMS)\n",
               params.c_str());
  return true;
}
inline const bool kMasterSeedInstalled = install_master_seed();
}  // namespace detail

}  // namespace statecut::prop

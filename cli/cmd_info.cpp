// `statecut info`: what this build contains (reference, LibTorch, CUDA kernels).
#include "cli/command_registry.h"

#include <cstdio>

namespace {
statecut::cli::Command info_cmd("info", [](CLI::App& app) {
  app.description("print what this build of statecut contains (one JSON object)");
  app.add_flag("--json", "accepted for symmetry: the output is JSON already");
  return []() {
#ifdef STATECUT_WITH_TORCH
    const bool torch = true;
#else
    const bool torch = false;
#endif
    std::printf("{\"version\": \"%s\", \"reference\": true, \"torch\": %s}\n", STATECUT_VERSION,
                torch ? "true" : "false");
    return 0;
  };
});
}  // namespace

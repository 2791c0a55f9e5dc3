// `statecut info`: what this build contains (reference, LibTorch, CUDA kernels).
#include "cli/command_registry.h"

#include <cstdio>

namespace {
statecut::cli::Command info_cmd("info", [](CLI::App& app) {
  app.description("print what this build of statecut contains");
  return []() {
#ifdef STATECUT_WITH_TORCH
    const bool torch = true;
#else
    const bool torch = false;
#endif
    std::printf("{\"version\": \"0.1.0\", \"reference\": true, \"torch\": %s}\n", torch ? "true" : "false");
    return 0;
  };
});
}  // namespace

// `statecut info`: what this build can do, as one JSON object (indented, so a person can read it too):
//   version, reference (always), torch; with LibTorch also torch_version, cuda {kernels_built, available, devices:
//   the count LibTorch sees},
//   families (config.json model_types), tokenizers (formats readable) and the SentencePiece helper's path.
#include <nlohmann/json.hpp>

#include <cstdio>

#include "cli/command_registry.h"
#include "optimized/io/checkpoint.h"

#ifdef STATECUT_WITH_TORCH
namespace statecut::cli {
nlohmann::json torch_build_info();  // cmd_torch_info.cpp
}
#endif

namespace {
statecut::cli::Command info_cmd("info", [](CLI::App& app) {
  app.description("print what this build of statecut can do: LibTorch, CUDA kernels and devices, model families, "
                  "tokenizer formats (one JSON object)");
  app.add_flag("--json", "accepted for symmetry: the output is JSON already");
  return []() {
    nlohmann::json j = {{"version", STATECUT_VERSION}, {"reference", true}, {"torch", false}};
#ifdef STATECUT_WITH_TORCH
    j["torch"] = true;
    j.update(statecut::cli::torch_build_info());
#endif
    std::printf("%s\n", statecut::io::json_text(j, 2).c_str());
    return 0;
  };
});
}  // namespace

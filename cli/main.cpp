// statecut: shrink the recurrent state of linear-attention models, and prove every step right.
#include "cli/command_registry.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <map>

int main(int argc, char** argv) {
  using namespace statecut::cli;
  CLI::App app{"statecut: prune key/query channels of linear-attention models, verified against a double reference"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "statecut 0.1.0");
  auto& reg = command_registry();
  std::sort(reg.begin(), reg.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  std::map<CLI::App*, std::function<int()>> actions;
  for (auto& spec : reg) {
    CLI::App* sub = app.add_subcommand(spec.name);
    actions[sub] = spec.setup(*sub);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (auto& [sub, action] : actions) {
    if (!sub->parsed()) continue;
    try {
      return action();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "statecut %s: error: %s\n", sub->get_name().c_str(), e.what());
      return 1;
    }
  }
  return 1;
}

// Self-registering subcommands: each cli/cmd_*.cpp adds itself with one static Command object,
// so adding a command never edits main.cpp.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace statecut::cli {

/// A subcommand: `setup` adds its options to the app and returns the action to run when chosen.
struct CommandSpec {
  std::string name;
  std::function<std::function<int()>(CLI::App&)> setup;
};

inline std::vector<CommandSpec>& command_registry() {
  static std::vector<CommandSpec> registry;
  return registry;
}

struct Command {
  Command(std::string name, std::function<std::function<int()>(CLI::App&)> setup) {
    command_registry().push_back({std::move(name), std::move(setup)});
  }
};

}  // namespace statecut::cli

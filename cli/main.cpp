// statecut: shrink the recurrent state of linear-attention models, and prove every step right.
//
// One convention for every subcommand (README "The command line"):
//   exit 0 ok, 1 failure (bad input included: one line "statecut <cmd>: error: <file>: <problem>"), 2 usage
//   (unknown command or flag, missing required option, a value that does not parse or lies outside its range,
//   options that exclude each other: one line "statecut <cmd>: usage: ...", with a suggestion where one helps);
//   every subcommand accepts --json (one object on stdout).
#include <algorithm>
#include <cstdio>
#include <exception>
#include <map>
#include <new>
#include <string>
#include <vector>

#include "cli/command_registry.h"
#include "cli/usage.h"
#include "optimized/io/atomic_dir.h"

#ifdef STATECUT_WITH_TORCH
#include <c10/util/Exception.h>
#endif

int main(int argc, char** argv) {
  using namespace statecut::cli;
  CLI::App app{"statecut: prune key/query channels of linear-attention models, verified against a double reference", "statecut"};
  app.set_version_flag("--version", "statecut " STATECUT_VERSION);
  app.footer("Exit codes: 0 ok, 1 failure (bad input included), 2 usage error.\n"
             "'statecut <command> --help' lists a command's options.");
  auto& reg = command_registry();
  std::sort(reg.begin(), reg.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  std::map<CLI::App*, std::function<int()>> actions;
  std::vector<std::string> names;
  for (auto& spec : reg) {
    CLI::App* sub = app.add_subcommand(spec.name);
    actions[sub] = spec.setup(*sub);
    names.push_back(spec.name);
  }
  // The subcommand comes first; anything else there is an unknown command (CLI11 would call it an extra argument).
  if (argc < 2) {
    std::fprintf(stderr, "%s", app.help().c_str());
    return kExitUsage;
  }
  const std::string first = argv[1];
  // `statecut help [COMMAND]`: the same text as --help, on stdout, exit 0.
  if (first == "help") {
    if (argc > 2) {
      const std::string want = argv[2];
      if (std::find(names.begin(), names.end(), want) == names.end()) {
        std::fprintf(stderr, "statecut: unknown command '%s'%s (commands: %s)\n", want.c_str(),
                     did_you_mean(want, names).c_str(), join(names, ", ").c_str());
        return kExitUsage;
      }
      std::printf("%s", app.get_subcommand(want)->help().c_str());
      return kExitOk;
    }
    std::printf("%s", app.help().c_str());
    return kExitOk;
  }
  if (!first.empty() && first[0] != '-' && std::find(names.begin(), names.end(), first) == names.end()) {
    std::fprintf(stderr, "statecut: unknown command '%s'%s (commands: %s)\n", first.c_str(),
                 did_you_mean(first, names).c_str(), join(names, ", ").c_str());
    return kExitUsage;
  }
  app.require_subcommand(1);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    const CLI::App* sub = nullptr;
    for (const auto& [s, _] : actions)
      if (s->parsed()) sub = s;
    std::fprintf(stderr, "%s\n", usage_message(app, sub, e, argc, argv).c_str());
    return kExitUsage;
  }
  // The file a command was reading, for the messages of errors that name none (LibTorch's, an allocation failure).
  const auto subject_of = [](const CLI::App* sub) {
    for (const char* name : {"--checkpoint", "--config", "--matrix"}) {
      const CLI::Option* o = sub->get_option_no_throw(name);
      if (o && o->count() > 0) return o->as<std::string>() + ": ";
    }
    return std::string();
  };
  for (auto& [sub, action] : actions) {
    if (!sub->parsed()) continue;
    try {
      return action();
    } catch (const statecut::OptionError& e) {  // an option out of its range, or options that exclude each other
      const std::string who = "statecut " + sub->get_name();
      std::fprintf(stderr, "%s: usage: %s; see '%s --help'\n", who.c_str(), first_line(e.what()).c_str(), who.c_str());
      return kExitUsage;
    } catch (const std::bad_alloc&) {  // "std::bad_alloc" alone named neither the input nor the cause
      std::fprintf(stderr, "statecut %s: error: %sout of memory: the model, batch or sequence length does not fit\n",
                   sub->get_name().c_str(), subject_of(sub).c_str());
      return kExitFailure;
#ifdef STATECUT_WITH_TORCH
    } catch (const c10::Error& e) {
      // The one place LibTorch's errors are worded: the first line (the rest is a C++ backtrace), after the file the
      // command was reading (LibTorch's own messages name no file).
      std::fprintf(stderr, "statecut %s: error: %s%s\n", sub->get_name().c_str(), subject_of(sub).c_str(),
                   first_line(statecut::name_outputs(e.what_without_backtrace())).c_str());
      return kExitFailure;
#endif
    } catch (const std::exception& e) {
      std::fprintf(stderr, "statecut %s: error: %s\n", sub->get_name().c_str(),
                   first_line(statecut::name_outputs(e.what())).c_str());
      return kExitFailure;
    }
  }
  return kExitUsage;
}

// Usage errors of the statecut executable: exit codes, one-line messages, "did you mean" suggestions.
#pragma once
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

#include "optimized/io/checkpoint.h"
#include "optimized/io/option_error.h"

namespace statecut::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  ///< a failure, bad input included
inline constexpr int kExitUsage = 2;    ///< unknown command/option, missing required option, unparsable value

inline std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

inline std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

/// Levenshtein distance (insertions, deletions, substitutions), for suggestions only.
inline std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

/// " (did you mean X?)" for the closest candidate within a third of the word's length (at least 2 edits), else "".
inline std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_d = std::max<std::size_t>(2, word.size() / 3) + 1;
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(word, c);
    if (d < best_d) best_d = d, best = c;
  }
  return best.empty() ? "" : " (did you mean " + best + "?)";
}

/// A CLI11 check for an integer option: at least `lo`, with a message that says so ("--stride: must be an integer
/// >= 0, got -1"; CLI11's NonNegativeNumber printed its bound as a 309-digit double).
inline CLI::Validator at_least(long long lo) {
  return CLI::Validator(
      [lo](std::string& v) -> std::string {
        try {
          std::size_t used = 0;
          const long long x = std::stoll(v, &used);
          if (used == v.size() && x >= lo) return "";
        } catch (const std::exception&) {
        }
        return "must be an integer >= " + std::to_string(lo) + ", got " + v;
      },
      "INT>=" + std::to_string(lo));
}

/// A CLI11 check for a seed (uint64): decimal digits only and at most 2^64 - 1, so that "-1" is not read as 2^64 - 1
/// and a longer number is not saturated without a word.
inline CLI::Validator seed_value() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        const bool digits = !v.empty() && v.find_first_not_of("0123456789") == std::string::npos;
        if (digits) {
          try {
            std::size_t used = 0;
            (void)std::stoull(v, &used);
            if (used == v.size()) return "";
          } catch (const std::exception&) {
          }
        }
        return "must be an integer in [0, 2^64 - 1], got " + v;
      },
      "UINT64");
}

/// A CLI11 check for --device: cpu, cuda or cuda:N.
inline CLI::Validator device_name() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        if (v == "cpu" || v == "cuda") return "";
        if (v.rfind("cuda:", 0) == 0 && v.size() > 5 && v.find_first_not_of("0123456789", 5) == std::string::npos)
          return "";
        return "must be cpu, cuda or cuda:N, got " + v;
      },
      "DEVICE");
}

/// Options given on the command line that this run will not use: one warning line on stderr, "statecut <cmd>: warning:
/// --a, --b are ignored <why>" (README: an option that would change nothing is named, not accepted silently).
/// Nothing when none of `names` was given; the run goes on (a sweep passes one command line to every setting).
inline void warn_ignored(const CLI::App& app, std::initializer_list<const char*> names, const std::string& why) {
  std::vector<std::string> given;
  for (const char* n : names)
    if (const CLI::Option* o = app.get_option_no_throw(n); o && o->count() > 0) given.push_back(n);
  if (!given.empty())
    std::fprintf(stderr, "statecut %s: warning: %s %s ignored %s\n", app.get_name().c_str(), join(given, ", ").c_str(),
                 given.size() == 1 ? "is" : "are", why.c_str());
}

/// An --out token or logits file: a .safetensors name (under another one, x.bin, every command that reads token files
/// would read it as raw ids). Throws the usage error "--out <path>: must be a .safetensors file".
inline void require_safetensors_out(const std::string& path) {
  if (!io::has_suffix(path, ".safetensors")) throw OptionError("--out " + path + ": must be a .safetensors file");
}

/// "--name" for every long option and "-x" for every short one of `app`.
inline std::vector<std::string> option_names(const CLI::App& app) {
  std::vector<std::string> out;
  for (const CLI::Option* o : app.get_options()) {
    for (const auto& n : o->get_lnames()) out.push_back("--" + n);
    for (const auto& n : o->get_snames()) out.push_back("-" + n);
  }
  return out;
}

/// The one-line message of a usage error. An unknown option is named first (whatever CLI11 complained about:
/// a required option missing because its name was misspelt is the misspelling's fault), with a suggestion.
inline std::string usage_message(const CLI::App& app, const CLI::App* sub, const CLI::ParseError& e, int argc,
                                 char** argv) {
  const std::string who = sub ? "statecut " + sub->get_name() : std::string("statecut");
  if (sub) {
    const auto known = option_names(*sub);
    for (int i = 2; i < argc; ++i) {
      std::string a = argv[i];
      if (a.size() < 2 || a[0] != '-' || (a[1] != '-' && !std::isalpha(static_cast<unsigned char>(a[1])))) continue;
      a = a.substr(0, a.find('='));
      if (std::find(known.begin(), known.end(), a) == known.end())
        return who + ": usage: unknown option '" + a + "'" + did_you_mean(a, known) + "; see '" + who + " --help'";
    }
  }
  std::string what = first_line(e.what());
  if (dynamic_cast<const CLI::RequiredError*>(&e) && sub == nullptr)
    what = "a command is required (commands: " + [&] {
      std::vector<std::string> n;
      for (const CLI::App* s : app.get_subcommands([](const CLI::App*) { return true; })) n.push_back(s->get_name());
      return join(n, ", ");
    }() + ")";
  return who + ": usage: " + what + "; see '" + who + " --help'";
}

}  // namespace statecut::cli

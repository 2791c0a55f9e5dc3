// `--tokenizer auto|bytes`, the same option on every command that reads text (prune, eval, rank).
#pragma once
#include <CLI/CLI.hpp>

#include <string>

#include "optimized/text/tokenizer.h"

namespace statecut::cli {

inline void add_tokenizer_option(CLI::App& app, TokenizerChoice& choice) {
  app.add_option_function<std::string>(
         "--tokenizer",
         [&choice](const std::string& v) { choice = v == "bytes" ? TokenizerChoice::Bytes : TokenizerChoice::Auto; },
         "auto (the checkpoint's tokenizer.model / tokenizer.json, byte-level only for vocab 256) | bytes (force "
         "byte ids)")
      ->check(CLI::IsMember({"auto", "bytes"}));
}

}  // namespace statecut::cli

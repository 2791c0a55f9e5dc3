// `statecut tokenize`: a text file → the checkpoint's token ids (optimized/text/tokenizer.h picks the tokenizer:
// tokenizer.model, tokenizer.json, or bytes for a byte-level vocabulary), optionally written as a token file
// (input_ids [1, N], I32) that prune/eval/rank/logits read directly, so a big corpus is tokenised once.
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "cli/command_registry.h"
#include "cli/tokenizer_option.h"
#include "cli/usage.h"
#include "optimized/io/atomic_dir.h"
#include "optimized/io/checkpoint.h"
#include "optimized/io/input_file.h"
#include "optimized/io/safetensors.h"
#include "optimized/text/tokenizer.h"

namespace {

struct TokenizeArgs {
  std::string checkpoint, text, out;
  statecut::TokenizerChoice tokenizer = statecut::TokenizerChoice::Auto;
  bool json = false;
};


statecut::cli::Command tokenize_cmd("tokenize", [](CLI::App& app) {
  auto a = std::make_shared<TokenizeArgs>();
  app.description("tokenise a text file with a checkpoint's tokenizer (and write the ids as a token file)");
  app.add_option("--checkpoint", a->checkpoint, "model folder (tokenizer.model, tokenizer.json or a byte vocabulary)")
      ->required();
  app.add_option("--text", a->text, "UTF-8 text file")->required();
  app.add_option("--out", a->out, "write input_ids [1, N] (I32) to this .safetensors file");
  statecut::cli::add_tokenizer_option(app, a->tokenizer);
  app.add_flag("--json", a->json, "print {tokens, bytes, tokenizer, seconds} on stdout");
  return [a]() {
    if (!a->out.empty()) statecut::cli::require_safetensors_out(a->out);
    if (!a->out.empty()) statecut::require_new_output_file(a->out, "--out");
    // Every other command reads x.safetensors / x.bin as token ids: tokenising its bytes as text would be noise.
    if (statecut::io::is_token_file_name(a->text))
      throw std::runtime_error(a->text + ": a token file (.safetensors, .bin) holds ids already, tokenize reads text "
                               "(eval, prune, rank, logits and verify read token files as they are)");
    const auto tok = statecut::Tokenizer::for_checkpoint(a->checkpoint, a->tokenizer);
    const std::string text = statecut::io::read_input_file(a->text);
    statecut::require_valid_utf8(tok, text, a->text);
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<int64_t> ids = tok.encode(text);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // A token file of no tokens is one every reader refuses ("empty: no tokens"): refused here, as they say it.
    if (ids.empty()) throw std::runtime_error(a->text + ": empty: no tokens");
    // A token file the checkpoint's own model cannot read is refused here, not by eval / generate later.
    if (std::filesystem::exists(std::filesystem::path(a->checkpoint) / "config.json")) {
      const int64_t vocab = statecut::io::config_vocab_size(statecut::io::read_config(a->checkpoint));
      for (size_t i = 0; vocab > 0 && i < ids.size(); ++i)
        if (ids[i] >= vocab)
          throw std::runtime_error(a->text + ": token " + std::to_string(i) + " = " + std::to_string(ids[i]) +
                                   " is outside the model's vocabulary [0, " + std::to_string(vocab) + ") in " +
                                   a->checkpoint + "/config.json: " + tok.describe() + " does not fit this model");
    }
    if (!a->out.empty()) {
      std::vector<int32_t> i32(ids.begin(), ids.end());
      statecut::io::SafetensorsWriter w;
      w.add("input_ids", statecut::io::DType::I32, {1, static_cast<int64_t>(i32.size())}, i32.data(),
            i32.size() * sizeof(int32_t));
      w.write(a->out);
    }
    const double mb_s = secs > 0 ? static_cast<double>(text.size()) / secs / 1e6 : 0.0;
    if (a->json) {
      std::printf("%s\n", statecut::io::json_text(nlohmann::json{{"file", a->text},
                                         {"tokenizer", tok.describe()},
                                         {"bytes", text.size()},
                                         {"tokens", ids.size()},
                                         {"seconds", secs},
                                         {"out", a->out.empty() ? nlohmann::json(nullptr) : nlohmann::json(a->out)}})
                                  .c_str());
    } else {
      std::printf("%s: %zu bytes -> %zu tokens (%.3f bytes/token) with %s in %.2f s (%.1f MB/s)\n", a->text.c_str(),
                  text.size(), ids.size(), ids.empty() ? 0.0 : static_cast<double>(text.size()) / ids.size(),
                  tok.describe().c_str(), secs, mb_s);
      if (!a->out.empty()) std::printf("wrote %s\n", a->out.c_str());
    }
    return 0;
  };
});

}  // namespace

// `statecut eval`: bits per byte and token perplexity over windows (DESIGN.md §2). Library: optimized/analysis/evaluation.h.
#include <nlohmann/json.hpp>

#include <cstdio>

#include "cli/command_registry.h"
#include "cli/tokenizer_option.h"
#include "optimized/analysis/evaluation.h"
#include "cli/progress_bar.h"

namespace {

struct Args {
  std::string checkpoint, device = "cpu";
  std::vector<std::string> text;
  statecut::EvalOptions opt;
  bool json = false, quiet = false;
  statecut::TokenizerChoice tokenizer = statecut::TokenizerChoice::Auto;
};

statecut::cli::Command eval_cmd("eval", [](CLI::App& app) {
  auto a = std::make_shared<Args>();
  app.description("bits per byte and token perplexity of a checkpoint on text or token files");
  app.add_option("--checkpoint", a->checkpoint, "model folder")->required();
  app.add_option("--text", a->text, "UTF-8 text or token files (.safetensors / .bin)")->required();
  app.add_option("--window", a->opt.window, "tokens per window")->capture_default_str();
  app.add_option("--stride", a->opt.stride, "window start every S tokens (default: the window, disjoint)");
  app.add_option("--batch", a->opt.batch, "windows per forward (0 = automatic)");
  app.add_option("--max-tokens", a->opt.max_tokens, "score only the first N tokens of each file (0 = all)");
  app.add_option("--device", a->device, "cpu | cuda")->capture_default_str();
  statecut::cli::add_tokenizer_option(app, a->tokenizer);
  app.add_flag("--json", a->json, "print {\"results\": [...]} on stdout");
  app.add_flag("--quiet", a->quiet, "no progress bar");
  return [a]() {
    try {
      torch::Device dev(a->device);
      if (dev.is_cuda() && !torch::cuda::is_available()) throw statecut::cli::UsageError("--device cuda: no CUDA device available");
      const auto tok = statecut::Tokenizer::for_checkpoint(a->checkpoint, a->tokenizer);
      auto model = statecut::load_causal_lm(a->checkpoint, torch::kFloat32, dev);
      std::vector<statecut::TokenStream> streams;  // read all first: a bad file fails before any compute
      for (const auto& f : a->text) streams.push_back(statecut::read_tokens(f, tok, model->vocab_size()));
      nlohmann::json results = nlohmann::json::array();
      if (!a->json) std::printf("%-40s %12s %12s %10s\n", "file", "bits/byte", "token ppl", "tokens");
      for (const auto& s : streams) {
        statecut::ProgressBar bar("eval", !a->quiet);
        const auto r = statecut::evaluate_stream(*model, s, tok, a->opt, bar.callback());
        results.push_back({{"file", r.file},
                           {"bits_per_byte", r.bits_per_byte},
                           {"token_perplexity", r.token_perplexity},
                           {"tokens", r.tokens},
                           {"bytes", r.bytes},
                           {"seconds", r.seconds}});
        if (!a->json)
          std::printf("%-40s %12.4f %12.4f %10lld\n", r.file.c_str(), r.bits_per_byte, r.token_perplexity,
                      static_cast<long long>(r.tokens));
      }
      if (a->json) std::printf("%s\n", nlohmann::json{{"checkpoint", a->checkpoint}, {"window", a->opt.window},
                                                      {"results", results}}.dump().c_str());
    } catch (const c10::Error& e) {
      const std::string msg = e.what_without_backtrace();
      throw statecut::cli::UsageError(a->checkpoint + ": " + msg.substr(0, msg.find('\n')));
    }
    return 0;
  };
});

}  // namespace

// `statecut generate`: continue a prompt with incremental decoding (optimized/generate/generate.h): one prefill of the
// prompt into the state cache, then one recurrent step per new token; greedy unless --temperature > 0.
// Prints the continuation's text on stdout as it is produced (optimized/generate/text_stream.h: byte-level ids as
// their bytes at once, tokenizer.json and SentencePiece text as soon as a character is complete), speed on stderr;
// --json prints one object instead, its "text" Tokenizer::decode of the new ids.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "cli/command_registry.h"
#include "cli/tokenizer_option.h"
#include "cli/usage.h"
#include "optimized/generate/generate.h"
#include "optimized/generate/text_stream.h"
#include "optimized/io/checkpoint.h"
#include "optimized/io/input_file.h"
#include "optimized/models/model.h"
#include "optimized/text/tokenizer.h"
#include "optimized/models/device_check.h"

namespace {

struct GenerateArgs {
  std::string checkpoint, prompt, prompt_file, device = "cpu", dtype = "f32", mode = "chunk";
  statecut::GenerateOptions gen;
  bool json = false, has_prompt = false, quiet = false;
  statecut::TokenizerChoice tokenizer = statecut::TokenizerChoice::Auto;
};


int run_generate(GenerateArgs& a, const CLI::App& app) {
  if (a.has_prompt == !a.prompt_file.empty()) {  // a missing (or doubled) required option: usage, exit 2
    std::fprintf(stderr, "statecut generate: usage: give exactly one of --prompt TEXT and --prompt-file FILE; see "
                         "'statecut generate --help'\n");
    return statecut::cli::kExitUsage;
  }
  statecut::check_sampling(a.gen.sampling);
  if (a.gen.max_new_tokens < 0) throw statecut::OptionError("--max-new-tokens must be >= 0");
  const std::string source = a.has_prompt ? std::string("--prompt") : a.prompt_file;
  if (a.has_prompt && a.prompt.empty()) throw statecut::OptionError("--prompt: the prompt is empty");
  const std::string text = a.has_prompt ? a.prompt : statecut::io::read_input_file(a.prompt_file);
  if (text.empty()) throw std::runtime_error(source + ": the prompt is empty");
  statecut::require_device_available(torch::Device(a.device));
  const torch::Device device = a.device == "cuda" ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
  if (a.gen.sampling.temperature == 0)  // once the options are known good: a refusal is a failed run's only line
    statecut::cli::warn_ignored(app, {"--top-k", "--top-p", "--seed"}, "at --temperature 0 (greedy: nothing is drawn)");
  const torch::Dtype dtype = a.dtype == "bf16" ? torch::kBFloat16 : a.dtype == "f64" ? torch::kFloat64 : torch::kFloat32;
  const auto tok = statecut::Tokenizer::for_checkpoint(a.checkpoint, a.tokenizer);
  statecut::require_valid_utf8(tok, text, source);
  auto model = statecut::load_causal_lm(a.checkpoint, dtype, device);
  const auto ids = tok.encode(text);
  if (ids.empty()) throw std::runtime_error(source + ": the prompt encodes to no tokens");
  for (int64_t id : ids)
    if (id < 0 || id >= model->vocab_size())
      throw std::runtime_error(a.checkpoint + ": the tokenizer gave id " + std::to_string(id) +
                               " outside the model's vocabulary [0, " + std::to_string(model->vocab_size()) + ")");
  auto prompt = torch::tensor(ids, torch::TensorOptions().dtype(torch::kInt64)).view({1, -1});
  a.gen.prefill_mode = a.mode == "recurrent" ? statecut::RecurrenceMode::Recurrent : statecut::RecurrenceMode::Chunk;
  statecut::TextStream stream(tok);
  auto print = [](const std::string& t) {
    if (t.empty()) return;
    std::fwrite(t.data(), 1, t.size(), stdout);
    std::fflush(stdout);
  };
  auto on_token = [&](int64_t, const std::vector<int64_t>& next) {
    if (!a.json) print(stream.push(next[0]));
  };
  statecut::GenerateResult r;
  try {
    r = statecut::generate(*model, prompt, a.gen, on_token);
  } catch (const std::runtime_error& e) {  // the model's own failures (non-finite logits): name the checkpoint
    throw std::runtime_error(a.checkpoint + ": " + e.what());
  }
  const auto& out = r.tokens[0];
  const double decode_tps = r.steps > 0 ? static_cast<double>(r.steps) / r.decode_seconds : 0.0;
  if (a.json) {
    nlohmann::json j{{"checkpoint", a.checkpoint},
                     {"tokenizer", tok.describe()},
                     {"prompt_tokens", r.prompt_tokens},
                     {"new_tokens", out.size()},
                     {"ids", out},
                     {"prefill_seconds", r.prefill_seconds},
                     {"decode_seconds", r.decode_seconds},
                     {"decode_tokens_per_s", decode_tps},
                     {"setup_seconds", r.setup_seconds},
                     {"state_bytes", r.state_bytes},
                     {"cuda_graph", r.cuda_graph},
                     {"temperature", a.gen.sampling.temperature},
                     {"top_k", a.gen.sampling.top_k},
                     {"top_p", a.gen.sampling.top_p},
                     {"seed", a.gen.seed}};
    j["text"] = tok.decode(out);
    std::printf("%s\n", statecut::io::json_text(j).c_str());
  } else {
    print(stream.finish());
    std::printf("\n");
    std::fflush(stdout);  // the text's last line before the summary on stderr, also when both go to one file
    if (!a.quiet)
      std::fprintf(stderr, "statecut generate: %zu tokens; prefill %lld tokens in %.3f s, decode %.1f tokens/s%s; state %lld bytes\n",
                 out.size(), static_cast<long long>(r.prompt_tokens), r.prefill_seconds, decode_tps,
                 r.cuda_graph ? " (CUDA graph)" : "", static_cast<long long>(r.state_bytes));
  }
  return 0;
}

statecut::cli::Command generate_cmd("generate", [](CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  app.description("continue a prompt by incremental decoding (greedy by default)");
  app.add_option("--checkpoint", a->checkpoint, "model folder")->required();
  app.add_option_function<std::string>("--prompt", [a](const std::string& v) { a->prompt = v, a->has_prompt = true; },
                                       "prompt text");
  app.add_option("--prompt-file", a->prompt_file, "file holding the prompt (UTF-8)");
  app.add_option("--max-new-tokens", a->gen.max_new_tokens, "tokens to generate")->capture_default_str();
  app.add_option("--temperature", a->gen.sampling.temperature, "0 = greedy")->capture_default_str();
  app.add_option("--top-k", a->gen.sampling.top_k, "sample among the K most likely (0 = all)")->capture_default_str();
  app.add_option("--top-p", a->gen.sampling.top_p, "nucleus mass (1 = all)")->capture_default_str();
  app.add_option("--seed", a->gen.seed, "sampling seed")->check(statecut::cli::seed_value())->capture_default_str();
  app.add_option("--device", a->device, "cpu | cuda")->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
  app.add_option("--dtype", a->dtype, "f32 | bf16 | f64")->check(CLI::IsMember({"f32", "bf16", "f64"}))->capture_default_str();
  app.add_option("--mode", a->mode, "prefill form: chunk | recurrent")
      ->check(CLI::IsMember({"chunk", "recurrent"}))
      ->capture_default_str();
  statecut::cli::add_tokenizer_option(app, a->tokenizer);
  app.add_flag("--json", a->json, "print one object {ids, text, speeds} on stdout");
  app.add_flag("--quiet", a->quiet, "no summary line (tokens, speeds) on stderr");
  app.add_flag_function("--no-graphs", [a](int64_t) { a->gen.cuda_graphs = false; },
                        "decode eagerly on CUDA (no CUDA graph)");
  return [a, &app]() { return run_generate(*a, app); };
});

}  // namespace

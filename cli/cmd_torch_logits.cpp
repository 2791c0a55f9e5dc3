// `statecut logits`: run a checkpoint on token ids or text and write its logits.
//   --checkpoint DIR, one of --tokens IN (io::read_tokens: .safetensors input_ids [B,T], any integer dtype, or .bin)
//   and --text FILE (UTF-8 text tokenised by the checkpoint's tokenizer, one sequence [1,T]; a token file given here is
//   read as one stream), --out OUT.safetensors (key logits [B,T,V] F32; must not exist); --max-tokens, --dtype
//   f32|bf16|f64, --device cpu|cuda, --mode recurrent|chunk. Success: one summary line on stderr (--quiet: none).
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "cli/command_registry.h"
#include "cli/tokenizer_option.h"
#include "cli/usage.h"
#include "optimized/io/atomic_dir.h"
#include "optimized/io/checkpoint.h"
#include "optimized/models/model.h"
#include "optimized/models/weight_source.h"
#include "optimized/text/token_stream.h"
#include "optimized/text/tokenizer.h"
#include "optimized/models/device_check.h"

namespace {

namespace fs = std::filesystem;

struct LogitsArgs {
  std::string checkpoint, tokens, text, out;
  std::string dtype = "f32", device = "cpu", mode = "chunk";
  int64_t max_tokens = 0;
  bool json = false, quiet = false;
  statecut::TokenizerChoice tokenizer = statecut::TokenizerChoice::Auto;
};

/// The logits statecut writes in one file at most (f32 [B,T,V]): beyond, the user is asked for --max-tokens.
constexpr double kMaxLogitsBytes = 4.0 * (1ull << 30);

/// --tokens through the one token reader (io::read_tokens): input_ids [B,T] (or [T], or the file's only tensor).
torch::Tensor read_input_ids(const std::string& path) {
  statecut::io::Tokens t = statecut::io::read_tokens(path);
  return torch::from_blob(t.ids.data(), {t.batch, t.length}, torch::kInt64).clone();
}

/// --text: the checkpoint's tokenizer (or --tokenizer bytes), one sequence [1, T].
torch::Tensor read_text_ids(const LogitsArgs& a, int64_t vocab) {
  const auto tok = statecut::Tokenizer::for_checkpoint(a.checkpoint, a.tokenizer);
  const statecut::TokenStream s = statecut::read_tokens(a.text, tok, vocab);
  if (s.ids.empty()) throw std::runtime_error(a.text + ": no tokens (empty text)");
  return torch::tensor(s.ids, torch::kInt64).unsqueeze(0);
}

int run_logits(const LogitsArgs& a) {
  const auto t0 = std::chrono::steady_clock::now();
  if (a.tokens.empty() == a.text.empty()) {
    std::fprintf(stderr, "statecut logits: usage: give exactly one of --tokens IDS.safetensors and --text FILE; see "
                         "'statecut logits --help'\n");
    return statecut::cli::kExitUsage;
  }
  statecut::cli::require_safetensors_out(a.out);
  statecut::require_new_output_file(a.out, "--out");  // as prune and rank refuse theirs
  const torch::Dtype dtype = a.dtype == "bf16" ? torch::kBFloat16 : a.dtype == "f64" ? torch::kFloat64 : torch::kFloat32;
  statecut::require_device_available(torch::Device(a.device));
  const torch::Device device = a.device == "cuda" ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
  torch::Tensor ids = a.text.empty() ? read_input_ids(a.tokens) : torch::Tensor();
  auto model = statecut::load_causal_lm(a.checkpoint, dtype, device);
  if (!a.text.empty()) ids = read_text_ids(a, model->vocab_size());
  const std::string& src = a.text.empty() ? a.tokens : a.text;
  if (a.max_tokens > 0 && ids.size(1) > a.max_tokens) ids = ids.narrow(1, 0, a.max_tokens).contiguous();
  const int64_t lo = ids.min().item<int64_t>(), hi = ids.max().item<int64_t>();
  if (lo < 0 || hi >= model->vocab_size())
    throw statecut::io::Error(src + ": input_ids: token id " + std::to_string(lo < 0 ? lo : hi) +
                              " outside the vocabulary [0, " + std::to_string(model->vocab_size()) + ")");
  const double bytes = 4.0 * static_cast<double>(ids.numel()) * static_cast<double>(model->vocab_size());
  if (bytes > kMaxLogitsBytes)
    throw std::runtime_error(src + ": " + std::to_string(ids.numel()) + " tokens x vocab " +
                             std::to_string(model->vocab_size()) + " would be " +
                             std::to_string(static_cast<int64_t>(bytes / (1 << 30))) +
                             " GiB of logits (at most 4 GiB): give --max-tokens");
  statecut::ForwardOptions opt;
  opt.mode = a.mode == "recurrent" ? statecut::RecurrenceMode::Recurrent : statecut::RecurrenceMode::Chunk;
  torch::NoGradGuard no_grad;
  auto logits = model->forward(ids, opt).logits.to(torch::kCPU, torch::kFloat32).contiguous();
  // As eval and generate refuse them: a file of NaNs written with exit 0 reads as a result (nothing is written). The
  // element map only when one is not finite (a bool per logit).
  if (!torch::isfinite(logits.max()).item<bool>() || !torch::isfinite(logits.min()).item<bool>()) {
    const torch::Tensor at = torch::isfinite(logits).logical_not().nonzero()[0];
    throw std::runtime_error(src + ": the logits of " + a.checkpoint +
                             " are not finite (NaN or Inf), first at sequence " + std::to_string(at[0].item<int64_t>()) +
                             " position " + std::to_string(at[1].item<int64_t>()) +
                             ": its forward overflows on this input; nothing written");
  }
  statecut::io::SafetensorsWriter w;
  w.add_borrowed("logits", statecut::io::DType::F32, logits.sizes().vec(), logits.data_ptr(),
                 static_cast<std::size_t>(logits.nbytes()));
  w.write(a.out);
  const auto shape = logits.sizes().vec();
  if (a.json)
    std::printf("{\"out\": \"%s\", \"tensor\": \"logits\", \"shape\": [%lld, %lld, %lld]}\n", a.out.c_str(),
                static_cast<long long>(shape[0]), static_cast<long long>(shape[1]), static_cast<long long>(shape[2]));
  if (!a.quiet)
    std::fprintf(stderr, "statecut logits: wrote %s: logits [%lld, %lld, %lld] f32 for %lld tokens of %s (%s %s, %s) in %.1fs\n",
                 a.out.c_str(), static_cast<long long>(shape[0]), static_cast<long long>(shape[1]),
                 static_cast<long long>(shape[2]), static_cast<long long>(ids.numel()), src.c_str(), a.dtype.c_str(),
                 a.device.c_str(), a.mode.c_str(),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return 0;
}

statecut::cli::Command logits_cmd("logits", [](CLI::App& app) {
  app.description("run a checkpoint on token ids or text and write its logits (safetensors, F32)");
  auto a = std::make_shared<LogitsArgs>();
  app.add_option("--checkpoint", a->checkpoint, "checkpoint directory (config.json + model.safetensors)")->required();
  auto* tokens = app.add_option("--tokens", a->tokens, "safetensors file with input_ids [B,T] (any integer dtype), or .bin");
  auto* text = app.add_option("--text", a->text,
                              "UTF-8 text, tokenised by the checkpoint's tokenizer into one sequence [1,T] (instead of "
                              "--tokens)");
  tokens->excludes(text);
  app.add_option("--out", a->out, "output safetensors file (key logits [B,T,V] F32); must not exist")->required();
  app.add_option("--max-tokens", a->max_tokens, "keep the first N positions of each sequence (0 = all)")
      ->check(statecut::cli::at_least(0))
      ->capture_default_str();
  statecut::cli::add_tokenizer_option(app, a->tokenizer);
  app.add_option("--dtype", a->dtype, "model dtype")->check(CLI::IsMember({"f32", "bf16", "f64"}));
  app.add_option("--device", a->device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--mode", a->mode, "recurrence form")->check(CLI::IsMember({"recurrent", "chunk"}));
  app.add_flag("--json", a->json, "print {\"out\", \"tensor\", \"shape\"} on stdout");
  app.add_flag("--quiet", a->quiet, "no summary line on stderr");
  app.footer("Exit codes: 0 ok, 1 failure (bad input included), 2 usage error.");
  return [a, &app]() {
    if (!a->tokens.empty() && app.get_option("--tokenizer")->count() > 0)
      std::fprintf(stderr, "statecut logits: warning: --tokenizer applies to --text; --tokens are ids already\n");
    return run_logits(*a);  // main trims LibTorch's messages to their first line
  };
});

}  // namespace

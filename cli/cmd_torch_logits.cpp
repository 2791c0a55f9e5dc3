// `statecut logits`: run a checkpoint on pre-tokenised input and write its logits.
//   --checkpoint DIR --tokens IN (io::read_tokens: .safetensors input_ids [B,T], any integer dtype, or .bin) --out
//   OUT.safetensors (key logits [B,T,V] F32); --dtype f32|bf16|f64, --device cpu|cuda, --mode recurrent|chunk.
#include <torch/torch.h>

#include <cstdio>
#include <string>

#include "cli/command_registry.h"
#include "optimized/models/model.h"
#include "optimized/io/checkpoint.h"
#include "optimized/models/weight_source.h"

namespace {

struct LogitsArgs {
  std::string checkpoint, tokens, out;
  std::string dtype = "f32", device = "cpu", mode = "chunk";
  bool json = false;
};

/// --tokens through the one token reader (io::read_tokens): input_ids [B,T] (or [T], or the file's only tensor).
torch::Tensor read_input_ids(const std::string& path) {
  statecut::io::Tokens t = statecut::io::read_tokens(path);
  return torch::from_blob(t.ids.data(), {t.batch, t.length}, torch::kInt64).clone();
}

int run(const LogitsArgs& a) {
  const torch::Dtype dtype = a.dtype == "bf16" ? torch::kBFloat16 : a.dtype == "f64" ? torch::kFloat64 : torch::kFloat32;
  if (a.device == "cuda" && !torch::cuda::is_available())
    throw statecut::cli::UsageError("--device cuda: no CUDA device available");
  const torch::Device device = a.device == "cuda" ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
  auto ids = read_input_ids(a.tokens);
  auto model = statecut::load_causal_lm(a.checkpoint, dtype, device);
  const int64_t lo = ids.min().item<int64_t>(), hi = ids.max().item<int64_t>();
  if (lo < 0 || hi >= model->vocab_size())
    throw statecut::io::Error(a.tokens + ": input_ids: token id " + std::to_string(lo < 0 ? lo : hi) +
                              " outside the vocabulary [0, " + std::to_string(model->vocab_size()) + ")");
  statecut::ForwardOptions opt;
  opt.mode = a.mode == "recurrent" ? statecut::RecurrenceMode::Recurrent : statecut::RecurrenceMode::Chunk;
  torch::NoGradGuard no_grad;
  auto logits = model->forward(ids, opt).logits.to(torch::kCPU, torch::kFloat32).contiguous();
  statecut::io::SafetensorsWriter w;
  w.add("logits", statecut::io::DType::F32, logits.sizes().vec(), logits.data_ptr(),
        static_cast<std::size_t>(logits.nbytes()));
  w.write(a.out);
  if (a.json) {
    const auto shape = logits.sizes().vec();
    std::printf("{\"out\": \"%s\", \"tensor\": \"logits\", \"shape\": [%lld, %lld, %lld]}\n", a.out.c_str(),
                static_cast<long long>(shape[0]), static_cast<long long>(shape[1]), static_cast<long long>(shape[2]));
  }
  return 0;
}

statecut::cli::Command logits_cmd("logits", [](CLI::App& app) {
  app.description("run a checkpoint on input_ids and write its logits (safetensors, F32)");
  auto a = std::make_shared<LogitsArgs>();
  app.add_option("--checkpoint", a->checkpoint, "checkpoint directory (config.json + model.safetensors)")->required();
  app.add_option("--tokens", a->tokens, "safetensors file with input_ids [B,T] (I64 or I32)")->required();
  app.add_option("--out", a->out, "output safetensors file (key logits [B,T,V] F32)")->required();
  app.add_option("--dtype", a->dtype, "model dtype")->check(CLI::IsMember({"f32", "bf16", "f64"}));
  app.add_option("--device", a->device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--mode", a->mode, "recurrence form")->check(CLI::IsMember({"recurrent", "chunk"}));
  app.add_flag("--json", a->json, "print {\"out\", \"tensor\", \"shape\"} on stdout");
  return [a]() { return run(*a); };  // main trims LibTorch's messages to their first line
});

}  // namespace

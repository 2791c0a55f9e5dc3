/// `statecut finetune` as a library call: recovery of a pruned checkpoint by LoRA + distillation from its unpruned
/// teacher (the paper's recipe, anchor-original §5 and §11.7), or `--full` training of every parameter.
///
/// One optimizer step = `accum` micro-batches of `batch` windows of `seq_len` tokens (per process; data-parallel runs
/// draw the global batch world·batch and take their own rows, so W processes see what one process with W·batch sees):
///   for each micro-batch: materialise the adapters, student forward (grad), teacher forward (no grad),
///                         loss = recovery_loss / accum, backward (gradients accumulate)
///   then: all-reduce (data parallel), LoRA chain rule (lora.h), clip to 1.0, AdamW at cosine_lr(step).
/// Windows are drawn from the concatenated token streams of `text` with std::mt19937_64 seeded by (seed, step, micro):
/// the data of step s does not depend on what ran before, so a resumed run sees the same windows.
/// Trainable (default): LoRA on the q/k/v row blocks + every parameter named *conv1d* / *norm* / *bias*; --full: all.
/// The optimizer updates fp32 masters (f64 with dtype kFloat64, for tests) whatever the stored dtype; the forward and
/// backward run in them (precision Full) or in bf16 (precision Bf16, below). The output keeps the input's dtype and
/// layout (every tensor the training changed is cast back from its master; all others are copied byte for byte).
///
/// Output folder (atomic): the checkpoint (config.json, model.safetensors or the same shards, tokenizer files),
/// statecut.json (the input's record, if any, plus a "finetune" record), loss.csv, loss.svg.
/// Resumable state (save_every > 0, or an interrupt): `<out>.state/` (state.safetensors: adapters, trained
/// parameters, AdamW moments; state.json: step, recipe, loss rows), replaced atomically at every save; `resume` continues
/// from it (the recipe must match) and on CPU ends bit-identical to an uninterrupted run. Removed after success.
#pragma once
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "optimized/text/tokenizer.h"

namespace statecut {

class DataParallel;

/// Arithmetic of the forward and backward passes (the optimizer's masters are always FinetuneOptions::dtype).
///   Full  the student and the teacher compute in `dtype`: the CPU default, bit-reproducible, resumable bit for bit.
///   Bf16  the recipe's mixed precision (torchtitan FSDP with mixed_precision_param bfloat16, anchor-original §5): a
///         bf16 copy of the student computes the forward and backward (the LibTorch operations, fp32 inside norms, the
///         recurrences and the loss as in inference), the teacher runs its no-grad forward in bf16 (on CUDA through the
///         kernels), and every trained tensor (adapters, trained parameters) keeps an fp32 master: after each
///         micro-batch its bf16 gradient is added to the master's fp32 gradient, AdamW updates the master, and the
///         master is rounded into the bf16 copy before the next forward. The CUDA default.
enum class TrainPrecision { Full, Bf16 };

struct FinetuneOptions {
  std::string checkpoint;  ///< the student (pruned) checkpoint
  /// `statecut train`: a config.json instead of a checkpoint; the student is a fresh model (init.h), every parameter
  /// is trained with cross-entropy alone, and the output is a new checkpoint (config.json as given, model.safetensors
  /// in the training dtype, tokenizer files found beside the config) with a "train" record in statecut.json.
  std::string config;
  std::string teacher;     ///< the unpruned checkpoint ("" with no_kd)
  std::vector<std::string> text;
  std::string out;
  int64_t steps = 100;
  int64_t seq_len = 2048;
  int64_t batch = 1;  ///< windows per micro-batch (per process)
  int64_t accum = 1;  ///< micro-batches per optimizer step
  double lr = 1e-4;
  int64_t warmup = 1;
  double min_lr_ratio = 0.1;
  double weight_decay = 0.1;
  double max_grad_norm = 1.0;
  int lora_rank = 32;
  double lora_alpha = 64;
  double kd_temp = 2.0;
  double kd_weight = 1.0;
  bool no_kd = false;
  bool full = false;
  uint64_t seed = 42;
  std::string device = "cpu";
  torch::Dtype dtype = torch::kFloat32;  ///< the masters' dtype (kFloat64 for gradient tests)
  TrainPrecision precision = TrainPrecision::Full;
  std::vector<std::string> eval_text;    ///< held-out files evaluated every eval_every steps and at the end
  int64_t eval_every = 0;
  int64_t eval_tokens = 8192;            ///< tokens scored per eval file (0 = all)
  int64_t save_every = 0;
  bool resume = false;
  int64_t stop_after = 0;  ///< stop (resumable) after this step, as an interrupt would (tests); 0 = never
  TokenizerChoice tokenizer = TokenizerChoice::Auto;
};

/// One optimizer step's figures (a row of loss.csv).
struct StepRecord {
  int64_t step = 0;  ///< 1-based
  double lr = 0, loss = 0, ce = 0, kd = 0, grad_norm = 0;
  int64_t tokens = 0;  ///< tokens seen so far (all processes)
  double seconds = 0;  ///< wall time so far (this run and the resumed ones)
  double eval_bpb = -1;  ///< mean bits/byte over eval_text at this step, -1 when not evaluated
};

struct FinetuneResult {
  nlohmann::json record;  ///< the "finetune" record of statecut.json
  std::vector<StepRecord> history;
  bool completed = false;  ///< false: stopped early (interrupt / stop_after), state saved, no output written
  std::string state_dir;
};

struct FinetuneCallbacks {
  std::function<void(const StepRecord&, int64_t total_steps)> on_step;
  std::function<void(const std::string&)> on_note;  ///< one-line messages (resumed from, saved state)
  const std::atomic<bool>* interrupt = nullptr;     ///< set asynchronously (SIGINT): save state and stop
};

/// Checks the options without loading anything (numbers, files exist, out absent); throws std::runtime_error.
void validate_finetune_options(const FinetuneOptions& opt);

/// `statecut finetune` (opt.config empty) or `statecut train` (opt.config set). Throws std::runtime_error with a one-line message, leaving no output directory. With a
/// DataParallel, every rank runs this with the same options and rank 0 writes.
FinetuneResult finetune(const FinetuneOptions& opt, const FinetuneCallbacks& cb = {}, DataParallel* dp = nullptr);

/// The state folder of an output folder: "<out>.state".
std::string finetune_state_dir(const std::string& out);

}  // namespace statecut

// What `statecut finetune` and `statecut train` share: the optimisation options, the data-parallel group from the
// torchrun environment, progress on stderr, and Ctrl-C (SIGINT/SIGTERM set a flag; the trainer saves a resumable state
// at the end of the step and stops), and the run itself with its human / --json report.
#pragma once
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>

#include "cli/command_registry.h"
#include "cli/usage.h"
#include "cli/tokenizer_option.h"
#include "optimized/io/checkpoint.h"
#include "optimized/train/data_parallel.h"
#include "optimized/train/trainer.h"

namespace statecut::cli {

inline std::atomic<bool>& train_interrupt() {
  static std::atomic<bool> flag{false};
  return flag;
}
extern "C" inline void on_train_interrupt(int) { train_interrupt().store(true); }

/// SIGINT/SIGTERM set train_interrupt() while it lives; the previous handlers come back after.
class InterruptScope {
 public:
  InterruptScope() : int_(std::signal(SIGINT, on_train_interrupt)), term_(std::signal(SIGTERM, on_train_interrupt)) {}
  ~InterruptScope() {
    std::signal(SIGINT, int_);
    std::signal(SIGTERM, term_);
  }
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;

 private:
  void (*int_)(int);
  void (*term_)(int);
};

/// Progress on stderr: redrawn in place on a terminal (bar, loss, CE, KD, lr, tokens/s), one line per 10% otherwise.
class TrainProgress {
 public:
  TrainProgress(std::string label, bool enabled) : label_(std::move(label)), enabled_(enabled), tty_(::isatty(2) != 0) {}
  void step(const StepRecord& r, int64_t total) {
    if (!enabled_) return;
    if (!started_) started_ = true, first_ = r;  // tokens/s from the first step this run saw
    const double secs = r.seconds - first_.seconds;
    const double tps = secs > 0 ? static_cast<double>(r.tokens - first_.tokens) / secs : 0;
    char line[256];
    std::snprintf(line, sizeof line, "loss %.4f ce %.4f kd %.4f lr %.2e %.0f tok/s %.0fs", r.loss, r.ce, r.kd, r.lr, tps,
                  r.seconds);
    if (tty_) {
      const int width = 24;
      const int filled = static_cast<int>(width * r.step / total);
      std::fprintf(stderr, "\r%s [%s%s] %lld/%lld %s", label_.c_str(), std::string(filled, '#').c_str(),
                   std::string(width - filled, '.').c_str(), static_cast<long long>(r.step),
                   static_cast<long long>(total), line);
      if (r.step >= total) std::fputc('\n', stderr);
    } else if (r.step >= total || (r.step * 10 / total) != ((r.step - 1) * 10 / total)) {
      std::fprintf(stderr, "%s: step %lld/%lld %s\n", label_.c_str(), static_cast<long long>(r.step),
                   static_cast<long long>(total), line);
    }
    std::fflush(stderr);
  }
  void note(const std::string& s) {
    if (enabled_) std::fprintf(stderr, "%s%s: %s\n", tty_ && started_ ? "\n" : "", label_.c_str(), s.c_str());
  }

 private:
  std::string label_;
  bool enabled_, tty_, started_ = false;
  StepRecord first_;
};

struct TrainArgs {
  FinetuneOptions opt;
  std::string precision = "auto";  ///< auto: bf16 on CUDA (the recipe's mixed precision), f32 on the CPU
  bool json = false, quiet = false;
  /// Names the given options this run will not use (usage.h warn_ignored); called once the options are known good,
  /// so a refusal is the only line of a run that fails.
  std::function<void()> warn_ignored;
};

/// The options of both commands except what picks the model (checkpoint/teacher/config) and the recipe switches.
inline void add_optimisation_options(CLI::App& app, TrainArgs& a) {
  auto& o = a.opt;
  app.add_option("--text", o.text, "training text or token files")->required();
  app.add_option("--out", o.out, "output folder (must not exist; written atomically)")->required();
  app.add_option("--steps", o.steps, "optimizer steps")->capture_default_str();
  app.add_option("--seq-len", o.seq_len, "tokens per window")->capture_default_str();
  app.add_option("--batch", o.batch, "windows per micro-batch (per process)")->capture_default_str();
  app.add_option("--accum", o.accum, "micro-batches per optimizer step")->capture_default_str();
  app.add_option("--lr", o.lr, "peak learning rate")->capture_default_str();
  app.add_option("--warmup", o.warmup, "warmup steps")->capture_default_str();
  app.add_option("--min-lr-ratio", o.min_lr_ratio, "cosine floor as a fraction of --lr")->capture_default_str();
  app.add_option("--weight-decay", o.weight_decay, "AdamW weight decay")->capture_default_str();
  app.add_option("--max-grad-norm", o.max_grad_norm, "gradient clipping norm")->capture_default_str();
  app.add_option("--eval-text", o.eval_text, "held-out files: bits/byte every --eval-every steps and at the end");
  app.add_option("--eval-every", o.eval_every, "steps between evaluations (0 = only at the end)")->capture_default_str();
  app.add_option("--eval-tokens", o.eval_tokens, "tokens scored per eval file (0 = all)")->capture_default_str();
  app.add_option("--save-every", o.save_every, "save a resumable state to <out>.state every N steps")
      ->capture_default_str();
  app.add_flag("--resume", o.resume, "continue from <out>.state");
  app.add_option("--stop-after", o.stop_after,
                 "stop after step N with a resumable state, as Ctrl-C does (continue with --resume; 0 = never)")
      ->capture_default_str();
  app.add_option("--seed", o.seed, "seed of the data windows and the initialisation")
      ->check(statecut::cli::seed_value())
      ->capture_default_str();
  app.add_option("--device", o.device, "cpu | cuda (with WORLD_SIZE > 1: cuda:LOCAL_RANK)")->capture_default_str();
  app.add_option("--precision", a.precision,
                 "arithmetic of the passes: bf16 = mixed (bf16 forward/backward, f32 masters; the recipe's), f32, "
                 "or auto = bf16 on cuda, f32 on cpu")
      ->check(CLI::IsMember({"auto", "f32", "bf16"}))
      ->capture_default_str();
  add_tokenizer_option(app, o.tokenizer);
  app.add_flag("--json", a.json, "print the record as one JSON object on stdout");
  app.add_flag("--quiet", a.quiet, "no progress on stderr");
}

/// Runs the trainer with the torchrun environment's process group (if any), progress and Ctrl-C; prints the result
/// ("<verb> <source> for N steps ..."; README's walkthrough test reads this line). Exit 0, or 130 after an interrupt.
inline int run_training(TrainArgs& a, const std::string& label, const std::string& verb) {
  auto& o = a.opt;
  std::unique_ptr<DataParallel> dp;
  try {
    const torch::Device want(o.device);
    dp = data_parallel_from_env(want.is_cuda() ? local_cuda_device() : want);
    if (dp && want.is_cuda()) o.device = local_cuda_device().str();
  } catch (const c10::Error& e) {
    const std::string msg = e.what_without_backtrace();
    throw statecut::OptionError("--device: " + msg.substr(0, msg.find('\n')));
  }
  const bool cuda = o.device.rfind("cuda", 0) == 0;
  o.precision = a.precision == "bf16" || (a.precision == "auto" && cuda) ? TrainPrecision::Bf16 : TrainPrecision::Full;
  if (a.warn_ignored) {
    validate_finetune_options(o);  // a refusal first, then the warnings (finetune() checks them again)
    a.warn_ignored();
  }
  TrainProgress bar(label, !a.quiet && (!dp || dp->rank() == 0));
  FinetuneCallbacks cb;
  cb.on_step = [&bar](const StepRecord& r, int64_t total) { bar.step(r, total); };
  cb.on_note = [&bar](const std::string& s) { bar.note(s); };
  cb.interrupt = &train_interrupt();
  FinetuneResult r;
  {
    InterruptScope scope;
    r = finetune(o, cb, dp.get());  // a LibTorch error is worded by main, after the checkpoint or config
  }
  if (dp && dp->rank() != 0) return 0;
  const int64_t step = r.history.empty() ? 0 : r.history.back().step;
  if (!r.completed) {
    if (a.json)
      std::printf("%s\n",
                  statecut::io::json_text(nlohmann::json{{"completed", false}, {"state", r.state_dir}, {"step", step}})
                      .c_str());
    else
      std::printf("stopped at step %lld; continue with --resume (state in %s)\n", static_cast<long long>(step),
                  r.state_dir.c_str());
    return train_interrupt().load() ? 130 : 0;
  }
  if (a.json) {
    nlohmann::json j = r.record;
    j["out"] = o.out;
    j["completed"] = true;
    std::printf("%s\n", statecut::io::json_text(j).c_str());
    return 0;
  }
  const auto& f = r.record["final"];
  std::printf("%s %s for %lld steps (%lld tokens) in %.1fs: loss %.4f (ce %.4f, kd %.4f); wrote %s\n", verb.c_str(),
              r.record["source"].get<std::string>().c_str(), static_cast<long long>(o.steps),
              static_cast<long long>(r.record["tokens"].get<int64_t>()), r.record["seconds"].get<double>(),
              f["loss"].get<double>(), f["ce"].get<double>(), f["kd"].get<double>(), o.out.c_str());
  if (r.record.contains("eval"))
    for (const auto& [file, bpb] : r.record["eval"]["bits_per_byte"].items())
      std::printf("eval %s: %.4f bits/byte\n", file.c_str(), bpb.get<double>());
  return 0;
}

}  // namespace statecut::cli

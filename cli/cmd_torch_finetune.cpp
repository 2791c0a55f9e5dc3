// `statecut finetune`: recover a pruned checkpoint with LoRA + distillation from its unpruned teacher (the paper's
// recipe, issue 13), or train every parameter (--full). Library: optimized/train/trainer.h.
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <string>

#include "cli/command_registry.h"
#include "cli/tokenizer_option.h"
#include "optimized/train/data_parallel.h"
#include "optimized/train/trainer.h"

namespace {

std::atomic<bool> g_interrupt{false};
extern "C" void on_interrupt(int) { g_interrupt.store(true); }

/// Progress on stderr: redrawn in place on a terminal (bar, loss, CE, KD, lr, tokens/s), one line per 10% otherwise.
class TrainProgress {
 public:
  explicit TrainProgress(bool enabled) : enabled_(enabled), tty_(::isatty(2) != 0) {}
  void step(const statecut::StepRecord& r, int64_t total) {
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
      std::fprintf(stderr, "\rfinetune [%s%s] %lld/%lld %s", std::string(filled, '#').c_str(),
                   std::string(width - filled, '.').c_str(), static_cast<long long>(r.step),
                   static_cast<long long>(total), line);
      if (r.step >= total) std::fputc('\n', stderr);
    } else if (r.step >= total || (r.step * 10 / total) != ((r.step - 1) * 10 / total)) {
      std::fprintf(stderr, "finetune: step %lld/%lld %s\n", static_cast<long long>(r.step), static_cast<long long>(total),
                   line);
    }
    std::fflush(stderr);
  }
  void note(const std::string& s) {
    if (enabled_) std::fprintf(stderr, "%sfinetune: %s\n", tty_ && started_ ? "\n" : "", s.c_str());
  }

 private:
  bool enabled_, tty_, started_ = false;
  statecut::StepRecord first_;
};

struct Args {
  statecut::FinetuneOptions opt;
  bool json = false, quiet = false;
};

statecut::cli::Command finetune_cmd("finetune", [](CLI::App& app) {
  auto a = std::make_shared<Args>();
  auto& o = a->opt;
  app.description("recover a pruned checkpoint: LoRA on q/k/v + conv/norm/bias, CE + KD from the unpruned teacher");
  app.add_option("--checkpoint", o.checkpoint, "the pruned checkpoint folder (the student)")->required();
  app.add_option("--teacher", o.teacher, "the unpruned checkpoint folder (distillation teacher)");
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
  app.add_option("--lora-rank", o.lora_rank, "LoRA rank r")->capture_default_str();
  app.add_option("--lora-alpha", o.lora_alpha, "LoRA alpha (scale alpha/r)")->capture_default_str();
  app.add_option("--kd-temp", o.kd_temp, "distillation temperature T")->capture_default_str();
  app.add_option("--kd-weight", o.kd_weight, "weight of T^2 KL(teacher || student)")->capture_default_str();
  app.add_flag("--no-kd", o.no_kd, "cross-entropy only (no teacher)");
  app.add_flag("--full", o.full, "train every parameter (no LoRA)");
  app.add_option("--eval-text", o.eval_text, "held-out files: bits/byte every --eval-every steps and at the end");
  app.add_option("--eval-every", o.eval_every, "steps between evaluations (0 = only at the end)")->capture_default_str();
  app.add_option("--eval-tokens", o.eval_tokens, "tokens scored per eval file (0 = all)")->capture_default_str();
  app.add_option("--save-every", o.save_every, "save a resumable state to <out>.state every N steps")->capture_default_str();
  app.add_flag("--resume", o.resume, "continue from <out>.state");
  app.add_option("--stop-after", o.stop_after, "stop after step N with a resumable state, as Ctrl-C does")
      ->group("");  // for tests and scripted pauses
  app.add_option("--seed", o.seed, "seed of the data windows and the LoRA init")->capture_default_str();
  app.add_option("--device", o.device, "cpu | cuda (with WORLD_SIZE > 1: cuda:LOCAL_RANK)")->capture_default_str();
  statecut::cli::add_tokenizer_option(app, o.tokenizer);
  app.add_flag("--json", a->json, "print the finetune record as one JSON object on stdout");
  app.add_flag("--quiet", a->quiet, "no progress on stderr");
  return [a]() {
    auto& o = a->opt;
    if (o.no_kd && !o.teacher.empty()) o.teacher.clear();  // --no-kd ignores a teacher
    std::unique_ptr<statecut::DataParallel> dp;
    try {
      const torch::Device want(o.device);
      dp = statecut::data_parallel_from_env(want.is_cuda() ? statecut::local_cuda_device() : want);
      if (dp && want.is_cuda()) o.device = statecut::local_cuda_device().str();
    } catch (const c10::Error& e) {
      const std::string msg = e.what_without_backtrace();
      throw statecut::cli::UsageError("--device: " + msg.substr(0, msg.find('\n')));
    }
    const bool talk = !a->quiet && (!dp || dp->rank() == 0);
    TrainProgress bar(talk);
    statecut::FinetuneCallbacks cb;
    cb.on_step = [&bar](const statecut::StepRecord& r, int64_t total) { bar.step(r, total); };
    cb.on_note = [&bar](const std::string& s) { bar.note(s); };
    cb.interrupt = &g_interrupt;
    auto prev_int = std::signal(SIGINT, on_interrupt);
    auto prev_term = std::signal(SIGTERM, on_interrupt);
    statecut::FinetuneResult r;
    try {
      r = statecut::finetune(o, cb, dp.get());
    } catch (const c10::Error& e) {
      std::signal(SIGINT, prev_int), std::signal(SIGTERM, prev_term);
      const std::string msg = e.what_without_backtrace();
      throw statecut::cli::UsageError(o.checkpoint + ": " + msg.substr(0, msg.find('\n')));
    } catch (...) {
      std::signal(SIGINT, prev_int), std::signal(SIGTERM, prev_term);
      throw;
    }
    std::signal(SIGINT, prev_int), std::signal(SIGTERM, prev_term);
    if (dp && dp->rank() != 0) return 0;
    if (!r.completed) {
      if (a->json)
        std::printf("%s\n", nlohmann::json{{"completed", false}, {"state", r.state_dir},
                                           {"step", r.history.empty() ? 0 : r.history.back().step}}.dump().c_str());
      else
        std::printf("stopped at step %lld; resume with --resume (state in %s)\n",
                    static_cast<long long>(r.history.empty() ? 0 : r.history.back().step), r.state_dir.c_str());
      return g_interrupt.load() ? 130 : 0;
    }
    if (a->json) {
      nlohmann::json j = r.record;
      j["out"] = o.out;
      j["completed"] = true;
      std::printf("%s\n", j.dump().c_str());
    } else {
      const auto& f = r.record["final"];
      std::printf("finetuned %s for %lld steps (%lld tokens) in %.1fs: loss %.4f (ce %.4f, kd %.4f); wrote %s\n",
                  o.checkpoint.c_str(), static_cast<long long>(o.steps),
                  static_cast<long long>(r.record["tokens"].get<int64_t>()), r.record["seconds"].get<double>(),
                  f["loss"].get<double>(), f["ce"].get<double>(), f["kd"].get<double>(), o.out.c_str());
      if (r.record.contains("eval"))
        for (const auto& [file, bpb] : r.record["eval"]["bits_per_byte"].items())
          std::printf("eval %s: %.4f bits/byte\n", file.c_str(), bpb.get<double>());
    }
    return 0;
  };
});

}  // namespace

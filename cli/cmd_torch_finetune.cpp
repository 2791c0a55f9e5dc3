// `statecut finetune`: recover a pruned checkpoint with LoRA + distillation from its unpruned teacher (the paper's
// recipe, issue 13), or train every parameter (--full). Library: optimized/train/trainer.h.
#include "cli/train_common.h"

namespace {

statecut::cli::Command finetune_cmd("finetune", [](CLI::App& app) {
  auto a = std::make_shared<statecut::cli::TrainArgs>();
  auto& o = a->opt;
  app.description("recover a pruned checkpoint: LoRA on q/k/v + conv/norm/bias, CE + KD from the unpruned teacher");
  app.add_option("--checkpoint", o.checkpoint, "the pruned checkpoint folder (the student)")->required();
  app.add_option("--teacher", o.teacher, "the unpruned checkpoint folder (distillation teacher)");
  statecut::cli::add_optimisation_options(app, *a);
  app.add_option("--lora-rank", o.lora_rank, "LoRA rank r")->capture_default_str();
  app.add_option("--lora-alpha", o.lora_alpha, "LoRA alpha (scale alpha/r)")->capture_default_str();
  app.add_option("--kd-temp", o.kd_temp, "distillation temperature T")->capture_default_str();
  app.add_option("--kd-weight", o.kd_weight, "weight of T^2 KL(teacher || student)")->capture_default_str();
  app.add_flag("--no-kd", o.no_kd, "cross-entropy only (no teacher)");
  app.add_flag("--full", o.full, "train every parameter (no LoRA)");
  return [a, &app]() {
    a->warn_ignored = [a, &app]() {
      using statecut::cli::warn_ignored;
      if (a->opt.no_kd) warn_ignored(app, {"--teacher", "--kd-temp", "--kd-weight"}, "with --no-kd (cross-entropy only)");
      if (a->opt.full) warn_ignored(app, {"--lora-rank", "--lora-alpha"}, "with --full (every parameter trained, no LoRA)");
      if (a->opt.eval_text.empty()) warn_ignored(app, {"--eval-every", "--eval-tokens"}, "without --eval-text");
    };
    if (a->opt.no_kd) a->opt.teacher.clear();  // --no-kd ignores a teacher
    return statecut::cli::run_training(*a, "finetune", "finetuned");
  };
});

}  // namespace

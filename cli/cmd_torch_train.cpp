// `statecut train`: a fresh model of any family from a config.json (the libraries' initialisation, init.h), every
// parameter trained with cross-entropy on the same trainer as `finetune` (issue 13). Library: optimized/train/trainer.h.
#include "cli/train_common.h"

namespace {

statecut::cli::Command train_cmd("train", [](CLI::App& app) {
  auto a = std::make_shared<statecut::cli::TrainArgs>();
  auto& o = a->opt;
  o.full = true;
  o.no_kd = true;
  o.lr = 1e-3;
  o.warmup = 10;
  app.description("train a fresh model from a config.json (any family), every parameter, cross-entropy");
  app.add_option("--config", o.config, "the model's config.json (tokenizer files beside it are used and copied)")
      ->required();
  statecut::cli::add_optimisation_options(app, *a);
  return [a, &app]() {
    a->warn_ignored = [a, &app]() {
      if (a->opt.eval_text.empty())
        statecut::cli::warn_ignored(app, {"--eval-every", "--eval-tokens"}, "without --eval-text");
    };
    return statecut::cli::run_training(*a, "train", "trained");
  };
});

}  // namespace

// `statecut prune`: select k' key/query channels per head with one of six methods and write the pruned
// checkpoint atomically (DESIGN.md §2, §4). Library: optimized/prune/prune.h.
#include <nlohmann/json.hpp>

#include <cstdio>

#include "cli/command_registry.h"
#include "cli/progress_bar.h"
#include "cli/tokenizer_option.h"
#include "cli/usage.h"
#include "optimized/io/checkpoint.h"
#include "optimized/prune/prune.h"

namespace {

struct PruneArgs {
  statecut::PruneOptions opt;
  bool json = false;
  bool quiet = false;
};

void prune_warn(const std::string& what) { std::fprintf(stderr, "statecut prune: warning: %s\n", what.c_str()); }

/// Options the chosen method ignores get one warning line each (not a refusal: the output is exactly what the method
/// promises, and a sweep over methods passes one command line to all of them).
void warn_ignored_options(const CLI::App& app, const statecut::PruneOptions& o) {
  auto given = [&](const char* name) { return app.get_option(name)->count() > 0; };
  const bool from_file = !o.keep_from.empty();
  const bool data_free = !from_file && !o.method.empty() && !statecut::method_needs_calibration(o.method);
  const std::string who = from_file ? "--keep-from (it applies recorded keep sets)"
                                    : "--method " + o.method + " (it reads only the weights)";
  if (from_file || data_free) {
    std::vector<std::string> ignored;
    for (const char* n : {"--calib", "--calib-seqs", "--calib-len", "--calib-batch", "--tokenizer"})
      if (given(n)) ignored.push_back(n);
    if (!ignored.empty())
      prune_warn(statecut::cli::join(ignored, ", ") + (ignored.size() == 1 ? " is" : " are") + " ignored by " + who);
  }
  if (from_file) return;
  if (o.faithful && o.method != "drrqr")
    prune_warn("--faithful changes only --method drrqr (the published code's row subsample); --method " + o.method +
         " is the same without it");
  if (given("--f") && o.method != "drrqr") prune_warn("--f is the strong-RRQR parameter of --method drrqr; ignored by --method " + o.method);
  if (given("--seed") && o.method == "l1") prune_warn("--seed is ignored by --method l1 (nothing is drawn)");
  if (given("--select") && o.method == "rand") prune_warn("--select is ignored by --method rand (nothing is scored)");
}

/// Calibration windows are drawn at random starts; more window tokens than the text holds means they must overlap
/// (repeating text), which the user should know. Exact: the record counts the tokenised stream.
void warn_overlapping_windows(const nlohmann::json& record) {
  const auto it = record.find("calibration");
  if (it == record.end() || !it->is_object() || !it->contains("stream_tokens")) return;
  const int64_t n = it->at("stream_tokens").get<int64_t>(), seqs = it->at("seqs").get<int64_t>(),
                len = it->at("len").get<int64_t>();
  if (seqs * len <= n) return;
  char times[32];
  std::snprintf(times, sizeof times, "%.1f", static_cast<double>(seqs * len) / static_cast<double>(n));
  prune_warn("--calib-seqs " + std::to_string(seqs) + " x --calib-len " + std::to_string(len) + " = " +
       std::to_string(seqs * len) + " tokens from a calibration text of " + std::to_string(n) +
       " tokens: the windows overlap (each token used " + times + " times on average); give more text or fewer windows");
}

statecut::cli::Command prune_cmd("prune", [](CLI::App& app) {
  auto a = std::make_shared<PruneArgs>();
  app.description("prune key/query channels of a linear-attention checkpoint (rand, l1, swanda, grad, drrqr, pca)");
  app.add_option("--checkpoint", a->opt.checkpoint, "model folder (config.json + model.safetensors)")->required();
  app.add_option("--method", a->opt.method, "rand | l1 | swanda | grad | drrqr | pca");
  app.add_option("--keep-from", a->opt.keep_from, "apply the keep sets of a keep.json or statecut.json instead");
  auto* ratio = app.add_option("--ratio", a->opt.ratio,
                                "pruning ratio in (0,1): keep max(1, floor(dk (1 - R))) channels per head");
  app.add_option("--keep", a->opt.keep, "keep exactly K channels per head (1 <= K <= dk)")
      ->check(statecut::cli::at_least(1));
  app.add_option("--calib", a->opt.calib, "calibration text or token files (swanda, grad, drrqr, pca; rand and l1 ignore it, with a warning)");
  app.add_option("--calib-seqs", a->opt.calib_seqs, "calibration sequences N")->capture_default_str();
  app.add_option("--calib-len", a->opt.calib_len, "tokens per calibration sequence L")->capture_default_str();
  app.add_option("--calib-batch", a->opt.batch, "sequences per forward (0 = automatic)")
      ->check(statecut::cli::at_least(0))
      ->capture_default_str();
  app.add_option("--seed", a->opt.seed, "seed of window sampling, rand and the faithful subsample")
      ->check(statecut::cli::seed_value())
      ->capture_default_str();
  app.add_option("--select", a->opt.select, "score side: qk | q | k")->capture_default_str();
  app.add_flag("--faithful", a->opt.faithful, "drrqr as published: 5,000 sampled rows, <= 20 swaps (other methods: a warning)");
  app.add_option("--f", a->opt.f, "strong-RRQR parameter f > 1")->capture_default_str();
  app.add_option("--device", a->opt.device, "cpu | cuda")->check(statecut::cli::device_name())->capture_default_str();
  app.add_option("--stream-weights", a->opt.stream_weights,
                 "auto | on | off: calibrate with one block's weights in memory at a time (auto: on the CPU when the "
                 "fp32 model would take over half the available memory; never for grad)")
      ->capture_default_str();
  app.add_option("--out", a->opt.out, "output folder (must not exist; written atomically)")->required();
  statecut::cli::add_tokenizer_option(app, a->opt.tokenizer);
  app.add_flag("--json", a->json, "print the statecut.json record and timings as one JSON object on stdout");
  app.add_flag("--quiet", a->quiet, "no progress bar");
  return [a, ratio, &app]() {
    // The library reads ratio 0 as "not given"; a ratio the user gave is checked here, by its own name.
    if (ratio->count() && !(a->opt.ratio > 0 && a->opt.ratio < 1))
      throw statecut::OptionError("--ratio must lie in the open interval (0, 1), got " + ratio->as<std::string>());
    statecut::validate_prune_options(a->opt);  // a refusal comes before any warning
    warn_ignored_options(app, a->opt);
    statecut::ProgressBar bar("calibrate", !a->quiet);
    const statecut::PruneResult r = statecut::prune_checkpoint(a->opt, bar.callback());
    warn_overlapping_windows(r.record);
    const nlohmann::json timing = {{"load", r.seconds_load},
                                   {"calibrate", r.seconds_calibrate},
                                   {"select", r.seconds_select},
                                   {"write", r.seconds_write}};
    if (a->json) {
      nlohmann::json j = r.record;
      j["out"] = a->opt.out;
      j["seconds"] = timing;
      j["streamed_weights"] = r.streamed_weights;
      std::printf("%s\n", statecut::io::json_text(j).c_str());
    } else {
      std::printf("pruned %s with %s: dk %d -> %d in %zu layers; wrote %s\n", a->opt.checkpoint.c_str(),
                  r.record["method"].get<std::string>().c_str(), r.record["head_k_dim"].get<int>(), r.record["new_head_k_dim"].get<int>(),
                  r.selection.size(), a->opt.out.c_str());
      std::printf("time: load %.2fs, calibrate %.2fs%s, select %.2fs, write %.2fs\n", r.seconds_load,
                  r.seconds_calibrate, r.streamed_weights ? " (weights streamed block by block)" : "",
                  r.seconds_select, r.seconds_write);
    }
    return 0;
  };
});

}  // namespace

// `statecut eval`, three modes (DESIGN.md §2):
//   --text FILE...         bits per byte and token perplexity over windows (optimized/analysis/evaluation.h)
//   --task FILE.jsonl...   zero-shot multiple choice the lm-eval way, lm-eval's results JSON (evaluation_tasks.h)
//   --niah --text FILLER   passkey retrieval by likelihood rank over lengths x depths, heat-map SVG (niah.h)
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/command_registry.h"
#include "cli/progress_bar.h"
#include "cli/tokenizer_option.h"
#include "cli/usage.h"
#include "optimized/analysis/evaluation.h"
#include "optimized/analysis/evaluation_tasks.h"
#include "optimized/analysis/niah.h"
#include "optimized/analysis/svg.h"
#include "optimized/io/atomic_dir.h"
#include "optimized/io/checkpoint.h"
#include "optimized/models/device_check.h"

namespace {

struct EvalArgs {
  std::string checkpoint, device = "cpu", svg;
  std::vector<std::string> text, task;
  statecut::EvalOptions opt;
  statecut::NiahOptions niah;
  bool json = false, quiet = false, niah_mode = false, log_samples = false;
  statecut::TokenizerChoice tokenizer = statecut::TokenizerChoice::Auto;
  std::vector<CLI::Option*> niah_only, text_only;  ///< options that mean nothing in the other modes
};

std::string slurp_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open the filler text");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (ss.str().empty()) throw std::runtime_error(path + ": the filler text is empty");
  return ss.str();
}

int run_text(EvalArgs& a, statecut::CausalLM& model, const statecut::Tokenizer& tok) {
  a.opt.tokens_without_bytes = true;  // token files for a checkpoint without a tokenizer: perplexity, no bits/byte
  std::vector<statecut::TokenStream> streams;  // read all first: a bad file fails before any compute
  for (const auto& f : a.text) streams.push_back(statecut::read_tokens(f, tok, model.vocab_size()));
  std::vector<statecut::EvalResult> rs;  // all scored before anything is printed: a failure prints no table
  for (const auto& s : streams) {
    statecut::ProgressBar bar("eval", !a.quiet);
    rs.push_back(statecut::evaluate_stream(model, s, tok, a.opt, bar.callback()));
  }
  if (a.json) {
    nlohmann::json results = nlohmann::json::array();
    for (const auto& r : rs) {
      nlohmann::json x = {{"file", r.file},
                          {"bits_per_byte", r.no_bytes_reason.empty() ? nlohmann::json(r.bits_per_byte) : nullptr},
                          {"token_perplexity", r.token_perplexity},
                          {"tokens", r.tokens},
                          {"bytes", r.bytes},
                          {"seconds", r.seconds}};
      if (!r.no_bytes_reason.empty()) x["bits_per_byte_unavailable"] = r.no_bytes_reason;
      results.push_back(x);
    }
    std::printf(
        "%s\n",
        statecut::io::json_text(
            nlohmann::json{{"checkpoint", a.checkpoint}, {"window", a.opt.window}, {"results", results}})
            .c_str());
    return 0;
  }
  std::printf("%-40s %12s %12s %10s\n", "file", "bits/byte", "token ppl", "tokens");
  for (const auto& r : rs) {
    if (r.no_bytes_reason.empty())
      std::printf("%-40s %12.4f %12.4f %10lld\n", r.file.c_str(), r.bits_per_byte, r.token_perplexity,
                  static_cast<long long>(r.tokens));
    else
      std::printf("%-40s %12s %12.4f %10lld\n", r.file.c_str(), "-", r.token_perplexity,
                  static_cast<long long>(r.tokens));
  }
  if (!rs.empty() && !rs.front().no_bytes_reason.empty())
    std::printf("bits/byte: %s\n", rs.front().no_bytes_reason.c_str());
  return 0;
}

int run_tasks(EvalArgs& a, statecut::CausalLM& model, const statecut::Tokenizer& tok) {
  std::vector<statecut::ChoiceTask> tasks;  // read all first: a bad record fails before any compute
  for (const auto& f : a.task) tasks.push_back(statecut::read_choice_task(f));
  statecut::ChoiceTaskOptions o;
  o.max_length = a.opt.window;
  o.batch = a.opt.batch;
  std::vector<statecut::ChoiceTaskResult> results;
  for (const auto& t : tasks) {
    statecut::ProgressBar bar(t.name, !a.quiet);
    results.push_back(statecut::evaluate_choice_task(model, t, tok, o, bar.callback()));
  }
  const nlohmann::json config{{"model", "statecut"},
                              {"model_args", "checkpoint=" + a.checkpoint},
                              {"tokenizer", tok.describe()},
                              {"batch_size", a.opt.batch > 0 ? nlohmann::json(a.opt.batch) : nlohmann::json("auto")},
                              {"max_length", a.opt.window},
                              {"device", a.device},
                              {"num_fewshot", 0}};
  const auto j = statecut::lm_eval_results_json(results, config, a.log_samples);
  if (a.json) {
    std::printf("%s\n", statecut::io::json_text(j).c_str());
    return 0;
  }
  // lm-eval's table.
  std::printf("|%-20s|Version|Filter|n-shot|  Metric  |   | Value |   |Stderr|\n", "Tasks");
  std::printf("|%-20s|------:|------|-----:|----------|---|------:|---|-----:|\n", "--------------------");
  auto stderr_str = [](double v) {
    char b[32];
    std::snprintf(b, sizeof b, std::isnan(v) ? "   N/A" : "%6.4f", v);
    return std::string(b);
  };
  for (const auto& r : results) {
    if (r.multiple_choice) {
      std::printf("|%-20s|      1|none  |     0|acc       |↑  |%7.4f|±  |%s|\n", r.task.c_str(), r.acc,
                  stderr_str(r.acc_stderr).c_str());
      std::printf("|%-20s|       |none  |     0|acc_norm  |↑  |%7.4f|±  |%s|\n", "", r.acc_norm,
                  stderr_str(r.acc_norm_stderr).c_str());
    } else {
      std::printf("|%-20s|      1|none  |     0|acc       |↑  |%7.4f|±  |%s|\n", r.task.c_str(), r.acc,
                  stderr_str(r.acc_stderr).c_str());
      std::printf("|%-20s|       |none  |     0|perplexity|↓  |%7.2f|±  |   N/A|\n", "", r.perplexity);
    }
  }
  return 0;
}

int run_niah(EvalArgs& a, statecut::CausalLM& model, const statecut::Tokenizer& tok) {
  const std::string filler = slurp_text(a.text[0]);
  statecut::ProgressBar bar("niah", !a.quiet);
  const auto r = statecut::evaluate_niah(model, tok, a.text[0], filler, a.niah, bar.callback());
  if (!a.svg.empty())
    statecut::write_text_atomically(a.svg,
                                    statecut::niah_svg(r, "passkey retrieval: " + statecut::plot_name(a.checkpoint)));
  if (a.json) {
    nlohmann::json cells = nlohmann::json::array();
    for (const auto& c : r.cells)
      cells.push_back({{"length", c.length},
                       {"depth", c.depth},
                       {"accuracy", c.accuracy},
                       {"mean_rank", c.mean_rank},
                       {"ranks", c.ranks}});
    std::printf("%s\n", statecut::io::json_text(nlohmann::json{{"checkpoint", a.checkpoint},
                                       {"filler", r.filler},
                                       {"trials", a.niah.trials},
                                       {"candidates", a.niah.candidates},
                                       {"digits", a.niah.digits},
                                       {"seed", a.niah.seed},
                                       {"needle", a.niah.needle},
                                       {"question", a.niah.question},
                                       {"answer", a.niah.answer},
                                       {"accuracy", r.accuracy},
                                       {"chance", 1.0 / static_cast<double>(a.niah.candidates)},
                                       {"cells", cells},
                                       {"seconds", r.seconds}})
                            .c_str());
    return 0;
  }
  std::printf("passkey accuracy (%lld trials a cell, %lld candidates: chance %.2f)\n%-8s",
              static_cast<long long>(a.niah.trials), static_cast<long long>(a.niah.candidates),
              1.0 / static_cast<double>(a.niah.candidates), "length");
  for (double d : a.niah.depths) std::printf(" %7.2f", d);
  std::printf("\n");
  size_t k = 0;
  for (int64_t L : a.niah.lengths) {
    std::printf("%-8lld", static_cast<long long>(L));
    for (size_t j = 0; j < a.niah.depths.size(); ++j) std::printf(" %7.2f", r.cells[k++].accuracy);
    std::printf("\n");
  }
  std::printf("overall %.3f in %.1f s\n", r.accuracy, r.seconds);
  return 0;
}

int run_eval(EvalArgs& a) {
  const int modes = (a.task.empty() ? 0 : 1) + (a.niah_mode ? 1 : 0);
  if (modes > 1 || (a.text.empty() && a.task.empty()) || (!a.text.empty() && !a.task.empty()) ||
      (a.niah_mode && a.text.size() != 1)) {
    std::fprintf(stderr,
                 "statecut eval: usage: give --text FILE... (bits per byte), --task FILE.jsonl... (multiple "
                 "choice) or --niah --text FILLER (one filler file); see 'statecut eval --help'\n");
    return statecut::cli::kExitUsage;
  }
  // An option of another mode would be ignored silently: refuse it, one line.
  auto refuse = [](const std::vector<CLI::Option*>& opts, const char* mode) {
    for (const CLI::Option* o : opts)
      if (o->count() > 0) {
        std::fprintf(stderr, "statecut eval: usage: %s goes with %s; see 'statecut eval --help'\n",
                     o->get_name().c_str(), mode);
        return true;
      }
    return false;
  };
  const bool bits_per_byte = a.task.empty() && !a.niah_mode;
  if ((!a.niah_mode && refuse(a.niah_only, "--niah")) ||
      (!bits_per_byte && refuse(a.text_only, "--text FILE... alone")))
    return statecut::cli::kExitUsage;
  if (a.log_samples && a.task.empty()) {
    std::fprintf(stderr, "statecut eval: usage: --log-samples goes with --task; see 'statecut eval --help'\n");
    return statecut::cli::kExitUsage;
  }
  torch::Device dev(a.device);
  statecut::require_device_available(dev);
  if (!a.svg.empty()) statecut::require_new_output_file(a.svg, "--svg");  // before the model loads
  if (!a.task.empty())  // bad task files fail before the model loads
    for (const auto& f : a.task) (void)statecut::read_choice_task(f);
  const auto tok = statecut::Tokenizer::for_checkpoint(a.checkpoint, a.tokenizer);
  // Linear attention has no position limit, but a window past the trained length measures extrapolation: say so.
  const nlohmann::json cfg = statecut::io::read_config(a.checkpoint);
  if (const auto it = cfg.find("max_position_embeddings");
      !a.niah_mode && it != cfg.end() && it->is_number_integer() && a.opt.window > it->get<int64_t>())
    std::fprintf(stderr,
                 "statecut eval: warning: --window %lld is beyond max_position_embeddings %lld of %s/config.json: "
                 "the model was trained on shorter windows\n",
                 static_cast<long long>(a.opt.window), static_cast<long long>(it->get<int64_t>()), a.checkpoint.c_str());
  auto model = statecut::load_causal_lm(a.checkpoint, torch::kFloat32, dev);
  if (!a.task.empty()) return run_tasks(a, *model, tok);
  if (a.niah_mode) return run_niah(a, *model, tok);
  return run_text(a, *model, tok);
}

statecut::cli::Command eval_cmd("eval", [](CLI::App& app) {
  auto a = std::make_shared<EvalArgs>();
  auto niah = [&](CLI::Option* o) { a->niah_only.push_back(o); };
  auto text_only = [&](CLI::Option* o) { a->text_only.push_back(o); };
  app.description("bits per byte on text (--text), zero-shot multiple choice (--task), passkey retrieval (--niah)");
  app.add_option("--checkpoint", a->checkpoint, "model folder")->required();
  app.add_option("--text", a->text, "UTF-8 text or token files (.safetensors / .bin); with --niah the filler text");
  app.add_option("--task", a->task,
                 "JSONL task files, one {\"context\", \"choices\": [...], \"gold\": i} a line (README \"Downstream "
                 "evaluation\")");
  app.add_option("--window", a->opt.window, "tokens per window (--task: max length, inputs cut on the left)")
      ->capture_default_str();
  text_only(app.add_option("--stride", a->opt.stride, "window start every S tokens (default: the window, disjoint)")
                ->check(statecut::cli::at_least(0)));
  app.add_option("--batch", a->opt.batch, "windows (--task: choices) per forward (0 = automatic)")
      ->check(statecut::cli::at_least(0));
  text_only(app.add_option("--max-tokens", a->opt.max_tokens, "score only the first N tokens of each file (0 = all)")
                ->check(statecut::cli::at_least(0)));
  app.add_flag("--log-samples", a->log_samples, "--task --json: per-record log-likelihoods under \"samples\"");
  app.add_flag("--niah", a->niah_mode, "passkey retrieval over --lengths x --depths, filler from --text");
  niah(app.add_option("--lengths", a->niah.lengths, "--niah context lengths in tokens")
           ->delimiter(',')
           ->capture_default_str());
  niah(app.add_option("--depths", a->niah.depths, "--niah needle depths in [0, 1]")
           ->delimiter(',')
           ->capture_default_str());
  niah(app.add_option("--trials", a->niah.trials, "--niah needles per (length, depth)")->capture_default_str());
  niah(app.add_option("--candidates", a->niah.candidates, "--niah the key and candidates - 1 distractors")
           ->capture_default_str());
  niah(app.add_option("--digits", a->niah.digits, "--niah digits of a key")->capture_default_str());
  niah(app.add_option("--seed", a->niah.seed, "--niah seed of keys and filler offsets")
           ->check(statecut::cli::seed_value())
           ->capture_default_str());
  niah(app.add_option("--needle", a->niah.needle, "--niah needle text, {key} for the key")->capture_default_str());
  niah(app.add_option("--question", a->niah.question, "--niah text after the filler")->capture_default_str());
  niah(app.add_option("--answer", a->niah.answer, "--niah the scored continuation, {key} for the key")
           ->capture_default_str());
  niah(app.add_option("--svg", a->svg, "--niah: write the length x depth heat map here"));
  app.add_option("--device", a->device, "cpu | cuda")->check(statecut::cli::device_name())->capture_default_str();
  statecut::cli::add_tokenizer_option(app, a->tokenizer);
  app.add_flag("--json", a->json, "print JSON on stdout ({\"results\": [...]}; --task: lm-eval's results JSON)");
  app.add_flag("--quiet", a->quiet, "no progress bar");
  return [a]() { return run_eval(*a); };
});

}  // namespace

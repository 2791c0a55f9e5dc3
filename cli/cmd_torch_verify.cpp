// `statecut verify`: every check statecut has, on one checkpoint, for a model team's CI (issue 12).
// Exit 0: every check holds; 1: a check fails; 2: the checkpoint (or --text/--source) cannot be read.
// Human table on stdout (or one JSON object with --json), progress on stderr (none with --quiet).
// Library: optimized/verify/verify.h.
#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <cstdio>
#include <sstream>

#include "cli/command_registry.h"
#include "cli/tokenizer_option.h"
#include "cli/usage.h"
#include "optimized/analysis/svg.h"
#include "optimized/io/atomic_dir.h"
#include "optimized/io/checkpoint.h"
#include "optimized/verify/verify.h"
#include "optimized/verify/verify_svg.h"

namespace {

struct VerifyArgs {
  statecut::verify::VerifyOptions opt;
  std::vector<std::string> tokens;
  std::string only, skip, svg;
  bool json = false, quiet = false;
};

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> v;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');)
    if (!x.empty()) v.push_back(x);
  return v;
}

statecut::cli::Command verify_cmd("verify", [](CLI::App& app) {
  auto a = std::make_shared<VerifyArgs>();
  app.description("check a linear-attention checkpoint against the f64 reference, the paper's theorems and its "
                  "pruning record; exit 0 iff every check holds, 1 if one fails, 2 if the input cannot be read");
  app.add_option("--checkpoint", a->opt.checkpoint, "model folder (config.json + model.safetensors)")->required();
  app.add_option("--source", a->opt.source, "the unpruned checkpoint a pruned one was cut from");
  app.add_option("--text", a->opt.text, "text or token files the windows are drawn from (default: random tokens)");
  app.add_option("--tokens", a->tokens, "pre-tokenised .safetensors/.bin token files (same as --text)");
  statecut::cli::add_tokenizer_option(app, a->opt.tokenizer);
  app.add_option("--windows", a->opt.windows, "windows N (>= 1)")->capture_default_str();
  app.add_option("--len", a->opt.len, "tokens per window L (>= 2: a window of one token has no transition to check)")->capture_default_str();
  app.add_option("--seed", a->opt.seed, "seed of the windows, random tokens and permutations")
      ->check(statecut::cli::seed_value())
      ->capture_default_str();
  app.add_option("--device", a->opt.device, "cpu | cuda (cuda adds the kernels check)")
      ->check(statecut::cli::device_name())
      ->capture_default_str();
  app.add_option("--only", a->only, "comma-separated checks to run (load, config, pruned, reference, "
                                     "chunk-recurrent, state-carry, theorems, determinism, kernels)");
  app.add_option("--skip", a->skip, "comma-separated checks to leave out");
  app.add_flag("--json", a->json, "one JSON object on stdout instead of the table");
  app.add_option("--svg", a->svg, "new folder for report.svg: each check's figure over its limit, u per layer and "
                                 "head (written when a check fails too; not when the input cannot be read)");
  app.add_flag("--quiet", a->quiet, "no progress on stderr");
  app.footer("Exit codes: 0 every check holds, 1 a check fails (the table names it; a tokenizer file, tokenizer_config"
             ".json included, that cannot be read fails the load check), 2 the checkpoint's config or weights, --source "
             "or --text cannot be read (one line naming the file), or a usage error.");
  // An empty value would mean "every check" (--only), nothing (--skip) or no report (--svg): a usage error instead.
  for (const char* name : {"--only", "--skip", "--svg"})
    app.get_option(name)->check(CLI::Validator(
        [](std::string& v) { return v.empty() ? std::string("needs a value, got an empty one") : std::string(); },
        "NONEMPTY"));
  return [a]() {
    auto& o = a->opt;
    o.text.insert(o.text.end(), a->tokens.begin(), a->tokens.end());
    o.only = split_list(a->only);
    o.skip = split_list(a->skip);
    if (!a->svg.empty()) {  // before minutes of checks, not after; a usage error (exit 2) as the footer says
      try {
        statecut::require_new_output_file(a->svg, "--svg");
      } catch (const std::exception& e) {
        std::fprintf(stderr, "statecut verify: error: %s\n", e.what());
        return 2;
      }
    }
    const auto t0 = std::chrono::steady_clock::now();
    if (!a->quiet)
      o.progress = [t0](const std::string& line) {
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::fprintf(stderr, "verify [%6.1fs] %s\n", s, line.c_str());
        std::fflush(stderr);
      };
    statecut::verify::Report rep;
    try {
      rep = statecut::verify::run_verify(o);
    } catch (const statecut::verify::Unreadable& e) {
      std::fprintf(stderr, "statecut verify: error: %s\n", e.what());
      return 2;
    } catch (const statecut::OptionError&) {  // --only/--skip/--windows: main's usage line, exit 2
      throw;
    } catch (const std::invalid_argument& e) {  // --device cuda without a device: exit 2, as the help says
      std::fprintf(stderr, "statecut verify: error: %s\n", e.what());
      return 2;
    } catch (const c10::Error& e) {
      const std::string msg = e.what_without_backtrace();
      std::fprintf(stderr, "statecut verify: error: %s: %s\n", o.checkpoint.c_str(), msg.substr(0, msg.find('\n')).c_str());
      return 2;
    }
    if (!a->svg.empty()) {
      try {
        statecut::AtomicDir dir(a->svg, "--svg");
        statecut::write_text_atomically(
            dir.path() + "/report.svg", statecut::verify::report_svg(rep, "statecut verify: " + statecut::plot_name(o.checkpoint)));
        dir.commit();
      } catch (const std::runtime_error& e) {
        std::fprintf(stderr, "statecut verify: error: %s\n", e.what());
        return 2;
      }
    }
    if (a->json) {
      std::printf("%s\n", statecut::io::json_text(statecut::verify::to_json(rep)).c_str());
    } else {
      statecut::verify::print_table(rep, stdout);
    }
    std::fflush(stdout);
    return rep.exit_code();
  };
});

}  // namespace

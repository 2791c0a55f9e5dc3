// `statecut rank`: rank utilization u(t) of the recurrent state per layer and head (paper §2.2, Table 5),
// with JSON and SVG reports. Library: optimized/analysis/rank_analysis.h, optimized/analysis/svg.h.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <memory>

#include "cli/command_registry.h"
#include "cli/progress_bar.h"
#include "cli/tokenizer_option.h"
#include "cli/usage.h"
#include "optimized/analysis/rank_analysis.h"
#include "optimized/analysis/svg.h"
#include "optimized/io/atomic_dir.h"
#include "optimized/io/checkpoint.h"
#include "optimized/text/token_stream.h"
#include "optimized/text/tokenizer.h"
#include "optimized/models/device_check.h"

namespace {

namespace fs = std::filesystem;

struct RankArgs {
  std::string checkpoint, text, svg, baseline, device = "cpu";
  int64_t len = 2048, offset = 0;
  bool gated = false, json = false, curves = false, quiet = false;
  statecut::TokenizerChoice tokenizer = statecut::TokenizerChoice::Auto;
};

// What --help says after the options: the definition of u and of the state each family is analysed in.
constexpr const char* kFooter =
    "u(t) = er(S_{t-1}) / min(dk, dv), er(S) = ||S||_F^2 / ||S||_2^2 (the stable rank of the state S, dk x dv per\n"
    "value head): the share of the state's dimensions in use. u = 1/min(dk, dv) for a rank-one state, 1 when all\n"
    "singular values are equal; u(0) = 0 (the zero state before the first token). Columns: mean, std and max of u(t)\n"
    "over the positions, u(S_T) of the final state (exact SVD); 'mean u' averages heads, then layers (the paper's).\n"
    "State (default = the paper's: the decay gate dropped):\n"
    "  DeltaNet, Gated DeltaNet, Qwen3.5/Next  S_t = a_t (S_{t-1} - b_t k_t k_t^T S_{t-1}) + b_t k_t v_t^T, k L2-normed;\n"
    "                                          a_t = 1 (ungated delta state), --gated: a_t = exp(g_t), the layer's gate\n"
    "  Mamba-2 (key B, value dt*x per head)    S_t = a_t S_{t-1} + B_t (dt_t x_t)^T;\n"
    "                                          a_t = 1 (the SSD state without its decay), --gated: a_t = exp(dt_t A),\n"
    "                                          the state the model carries\n"
    "  DeltaNet has no gate: --gated changes nothing there (a warning says so).\n"
    "Exit codes: 0 ok, 1 failure (bad input included), 2 usage error.";

statecut::RankReport run_rank(const std::string& ckpt, const RankArgs& a, const std::string& label) {
  torch::Device dev(a.device);
  statecut::require_device_available(dev);
  const auto tok = statecut::Tokenizer::for_checkpoint(ckpt, a.tokenizer);
  auto model = statecut::load_causal_lm(ckpt, torch::kFloat32, dev);
  // Before the forward: a model of softmax-attention layers only has no state to analyse.
  if (model->prunable_layers().empty())
    throw std::runtime_error(ckpt + "/config.json: no linear-attention layer to analyse in this model (" +
                             model->model_type() + ")");
  const auto s = statecut::read_tokens(a.text, tok, model->vocab_size());
  const int64_t n = static_cast<int64_t>(s.ids.size());
  if (a.offset + 2 > n)  // --offset >= 0 is checked as the option parses
    throw std::runtime_error(a.text + ": --offset " + std::to_string(a.offset) + " leaves fewer than 2 of its " +
                             std::to_string(n) + " tokens");
  const int64_t len = std::min(a.len, n - a.offset);
  const torch::Tensor ids =
      torch::tensor(std::vector<int64_t>(s.ids.begin() + a.offset, s.ids.begin() + a.offset + len), torch::kInt64)
          .unsqueeze(0);
  statecut::ProgressBar bar(label, !a.quiet);
  statecut::RankOptions ro;
  ro.gated = a.gated;
  ro.progress = bar.callback();
  return statecut::analyze_rank(*model, ids, ro);
}

nlohmann::json to_json(const statecut::RankReport& r, const RankArgs& a) {
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& L : r.layers) {
    nlohmann::json heads = nlohmann::json::array();
    for (const auto& h : L.heads) {
      nlohmann::json hj = {{"key_head", h.key_head}, {"mean", h.mean},  {"std", h.std}, {"max", h.max},
                           {"final_u", h.final_u_exact}, {"spectrum", h.spectrum}};
      if (a.curves) hj["u"] = h.u;
      heads.push_back(hj);
    }
    layers.push_back({{"layer", L.layer},
                      {"dk", L.dk},
                      {"dv", L.dv},
                      {"key_heads", L.num_key_heads},
                      {"mean", L.mean},
                      {"heads", heads}});
  }
  return {{"checkpoint", a.checkpoint},
          {"model_type", r.model_type},
          {"text", a.text},
          {"tokens", r.tokens},
          {"gated", r.gated},
          {"state", statecut::rank_state_key(r.state)},
          {"mean_u", r.mean_u},
          {"mean_u_1024", r.mean_u_1024},
          {"layers", layers},
          {"curve", r.curve}};
}

void rank_warn(const std::string& what) { std::fprintf(stderr, "statecut rank: warning: %s\n", what.c_str()); }

/// Options that would do nothing are warned about, and an --svg folder that exists is refused by its option's name,
/// before the analysis runs.
void check_options(const RankArgs& a) {
  if (!a.baseline.empty() && a.svg.empty()) rank_warn("--baseline is drawn only in the --svg plots; without --svg it is ignored");
  if (a.curves && !a.json) rank_warn("--curves adds u(t) to the --json object; without --json it is ignored");
  if (!a.svg.empty()) statecut::require_new_output_file(a.svg, "--svg");
}

/// --baseline is the unpruned form of the same model: the same family, layers, heads and value width, only dk may
/// differ. Another model was drawn as "before pruning" behind the panels without a word.
void require_same_model(const statecut::RankReport& base, const statecut::RankReport& r, const std::string& base_dir,
                        const std::string& dir) {
  const auto shape = [](const statecut::RankReport& x) {
    std::string s = x.model_type + ", " + std::to_string(x.layers.size()) + " linear-attention layers";
    for (const auto& L : x.layers)
      s += " [" + std::to_string(L.layer) + ": " + std::to_string(L.num_key_heads) + "/" + std::to_string(L.heads.size()) +
           " heads, dv " + std::to_string(L.dv) + "]";
    return s;
  };
  const std::string want = shape(r), got = shape(base);
  if (got != want)
    throw std::runtime_error(base_dir + ": --baseline is " + got.substr(0, 120) + ", not the unpruned form of " + dir +
                             " (" + want.substr(0, 120) + ")");
}

statecut::cli::Command rank_cmd("rank", [](CLI::App& app) {
  auto a = std::make_shared<RankArgs>();
  app.description(
      "rank utilization u(t) of the recurrent state per layer and head (default: the paper's ungated state; "
      "--gated: the state the model carries)");
  app.footer(kFooter);
  app.add_option("--checkpoint", a->checkpoint, "model folder")->required();
  app.add_option("--text", a->text, "UTF-8 text or token file; the first --len tokens from --offset are used")->required();
  app.add_option("--len", a->len, "tokens in the sequence (>= 2)")
      ->check(statecut::cli::at_least(2))
      ->capture_default_str();
  app.add_option("--offset", a->offset, "first token")->check(statecut::cli::at_least(0))->capture_default_str();
  app.add_flag("--gated", a->gated,
               "apply the decay gate: the state the model carries (GDN exp(g), Mamba-2 exp(dt*A)) instead of the "
               "paper's gate-free state");
  statecut::cli::add_tokenizer_option(app, a->tokenizer);
  app.add_flag("--json", a->json, "one JSON object on stdout");
  app.add_flag("--curves", a->curves, "include every head's u(t) in the JSON");
  app.add_option("--svg", a->svg, "write u_curves.svg, heatmap.svg, spectra.svg into this new folder");
  app.add_option("--baseline", a->baseline, "unpruned checkpoint whose spectra are drawn behind in spectra.svg");
  app.add_option("--device", a->device, "cpu | cuda")->check(statecut::cli::device_name())->capture_default_str();
  app.add_flag("--quiet", a->quiet, "no progress bar");
  return [a]() {
    check_options(*a);
    // The plot folder is made (as a temporary sibling) before the analysis, so an unwritable place fails at once.
    std::unique_ptr<statecut::AtomicDir> svg_dir;
    if (!a->svg.empty()) svg_dir = std::make_unique<statecut::AtomicDir>(a->svg, "--svg");
    const statecut::RankReport r = run_rank(a->checkpoint, *a, "rank");
    for (const auto& n : r.notes) rank_warn(n);
    if (svg_dir) {
      statecut::RankReport base;
      if (!a->baseline.empty()) {
        base = run_rank(a->baseline, *a, "baseline");
        require_same_model(base, r, a->baseline, a->checkpoint);
      }
      statecut::PlotLabels labels;
      labels.name = statecut::plot_name(a->checkpoint);
      labels.baseline = a->baseline.empty() ? std::string() : statecut::plot_name(a->baseline);
      statecut::write_rank_svg_files(r, a->baseline.empty() ? nullptr : &base, labels, svg_dir->path());
      svg_dir->commit();
    }
    if (a->json) {
      std::printf("%s\n", statecut::io::json_text(to_json(r, *a)).c_str());
      return 0;
    }
    std::printf("rank utilization of %s over %lld tokens (%s)\n", a->checkpoint.c_str(),
                static_cast<long long>(r.tokens), statecut::rank_state_label(r.state));
    std::printf("%6s %5s %9s %9s %9s %9s\n", "layer", "head", "mean u", "std", "max", "u(S_T)");
    for (const auto& L : r.layers)
      for (size_t h = 0; h < L.heads.size(); ++h) {
        const auto& x = L.heads[h];
        std::printf("%6d %5zu %9.4f %9.4f %9.4f %9.4f\n", L.layer, h, x.mean, x.std, x.max, x.final_u_exact);
      }
    if (r.tokens > 1024)
      std::printf("mean u: %.4f (first 1024 positions: %.4f)\n", r.mean_u, r.mean_u_1024);
    else
      std::printf("mean u: %.4f\n", r.mean_u);
    return 0;
  };
});

}  // namespace

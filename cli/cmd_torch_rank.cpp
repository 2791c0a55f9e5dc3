// `statecut rank`: rank utilization u(t) of the recurrent state per layer and head (paper §2.2, Table 5),
// with JSON and SVG reports. Library: optimized/analysis/rank_analysis.h, optimized/analysis/svg.h.
#include <nlohmann/json.hpp>

#include <cstdio>

#include "cli/command_registry.h"
#include "cli/tokenizer_option.h"
#include "optimized/analysis/rank_analysis.h"
#include "optimized/analysis/svg.h"
#include "optimized/text/token_stream.h"
#include "optimized/text/tokenizer.h"

namespace {

struct Args {
  std::string checkpoint, text, svg, baseline, device = "cpu";
  int64_t len = 2048, offset = 0;
  bool gated = false, json = false, curves = false;
  statecut::TokenizerChoice tokenizer = statecut::TokenizerChoice::Auto;
};

statecut::RankReport run(const std::string& ckpt, const Args& a) {
  torch::Device dev(a.device);
  if (dev.is_cuda() && !torch::cuda::is_available()) throw statecut::cli::UsageError("--device cuda: no CUDA device available");
  const auto tok = statecut::Tokenizer::for_checkpoint(ckpt, a.tokenizer);
  auto model = statecut::load_causal_lm(ckpt, torch::kFloat32, dev);
  const auto s = statecut::read_tokens(a.text, tok, model->vocab_size());
  const int64_t n = static_cast<int64_t>(s.ids.size());
  if (a.offset < 0 || a.offset + 2 > n)
    throw statecut::cli::UsageError(a.text + ": --offset " + std::to_string(a.offset) + " leaves fewer than 2 of its " +
                                    std::to_string(n) + " tokens");
  const int64_t len = std::min(a.len, n - a.offset);
  const torch::Tensor ids =
      torch::tensor(std::vector<int64_t>(s.ids.begin() + a.offset, s.ids.begin() + a.offset + len), torch::kInt64)
          .unsqueeze(0);
  statecut::RankOptions ro;
  ro.gated = a.gated;
  return statecut::analyze_rank(*model, ids, ro);
}

nlohmann::json to_json(const statecut::RankReport& r, const Args& a) {
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& L : r.layers) {
    nlohmann::json heads = nlohmann::json::array();
    for (const auto& h : L.heads) {
      nlohmann::json hj = {{"mean", h.mean}, {"std", h.std},  {"min", h.min},
                           {"max", h.max},   {"final_u", h.final_u_exact}, {"spectrum", h.spectrum}};
      if (a.curves) hj["u"] = h.u;
      heads.push_back(hj);
    }
    layers.push_back({{"layer", L.layer}, {"dk", L.dk}, {"dv", L.dv}, {"mean", L.mean}, {"heads", heads}});
  }
  return {{"checkpoint", a.checkpoint}, {"text", a.text},   {"tokens", r.tokens}, {"gated", r.gated},
          {"mean_u", r.mean_u},         {"mean_u_1024", r.mean_u_1024}, {"layers", layers}, {"curve", r.curve}};
}

statecut::cli::Command rank_cmd("rank", [](CLI::App& app) {
  auto a = std::make_shared<Args>();
  app.description("rank utilization u(t) of the recurrent state per layer and head (ungated delta state by default)");
  app.add_option("--checkpoint", a->checkpoint, "model folder")->required();
  app.add_option("--text", a->text, "UTF-8 text or token file; the first --len tokens from --offset are used")->required();
  app.add_option("--len", a->len, "tokens in the sequence")->capture_default_str();
  app.add_option("--offset", a->offset, "first token")->capture_default_str();
  app.add_flag("--gated", a->gated, "the true (gated) state instead of the paper's ungated delta state");
  statecut::cli::add_tokenizer_option(app, a->tokenizer);
  app.add_flag("--json", a->json, "one JSON object on stdout");
  app.add_flag("--curves", a->curves, "include every head's u(t) in the JSON");
  app.add_option("--svg", a->svg, "write u_curves.svg, heatmap.svg, spectra.svg into this new folder");
  app.add_option("--baseline", a->baseline, "unpruned checkpoint whose spectra are drawn behind (before/after)");
  app.add_option("--device", a->device, "cpu | cuda")->capture_default_str();
  return [a]() {
    try {
      const statecut::RankReport r = run(a->checkpoint, *a);
      if (!a->svg.empty()) {
        statecut::RankReport base;
        if (!a->baseline.empty()) base = run(a->baseline, *a);
        statecut::write_rank_svgs(r, a->baseline.empty() ? nullptr : &base, a->checkpoint, a->svg);
      }
      if (a->json) {
        std::printf("%s\n", to_json(r, *a).dump().c_str());
        return 0;
      }
      std::printf("rank utilization of %s over %lld tokens (%s state)\n", a->checkpoint.c_str(),
                  static_cast<long long>(r.tokens), r.gated ? "gated" : "ungated delta");
      std::printf("%6s %5s %9s %9s %9s %9s %9s\n", "layer", "head", "mean u", "std", "min", "max", "u(S_T)");
      for (const auto& L : r.layers)
        for (size_t h = 0; h < L.heads.size(); ++h) {
          const auto& x = L.heads[h];
          std::printf("%6d %5zu %9.4f %9.4f %9.4f %9.4f %9.4f\n", L.layer, h, x.mean, x.std, x.min, x.max, x.final_u_exact);
        }
      std::printf("mean u: %.4f (first 1024 positions: %.4f)\n", r.mean_u, r.mean_u_1024);
    } catch (const c10::Error& e) {
      const std::string msg = e.what_without_backtrace();
      throw statecut::cli::UsageError(a->checkpoint + ": " + msg.substr(0, msg.find('\n')));
    }
    return 0;
  };
});

}  // namespace

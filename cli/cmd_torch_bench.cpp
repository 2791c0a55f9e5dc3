// `statecut bench`: prefill and decode speed, state and peak memory of a checkpoint, and side by side of others
// (--compare) with the speedup column (optimized/generate/model_bench.h says what each figure is).
// Defaults: CUDA prefill 1x2048,8x2048, decode 1,16,64,256, prompt 512, 128 new tokens, bf16, CUDA graphs;
// CPU (smaller) prefill 1x256, decode 1,8, prompt 128, 32 new tokens, f32.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "cli/command_registry.h"
#include "cli/usage.h"
#include "optimized/generate/model_bench.h"
#include "optimized/io/checkpoint.h"
#include "optimized/models/model.h"
#include "optimized/models/model_registry.h"
#include "optimized/models/device_check.h"

namespace {

struct BenchArgs {
  std::string checkpoint, device = "cpu", dtype = "auto";
  std::vector<std::string> compare, prefill, decode;
  int64_t prompt = -1, new_tokens = -1;
  int repeats = 3;
  bool json = false, no_graphs = false, quiet = false;
};

int64_t parse_positive(const std::string& s, const std::string& what) {
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != s.size() || s.empty() || v <= 0)
    throw statecut::OptionError(what + ": '" + s + "' is not a positive integer");
  return v;
}

std::vector<std::string> split_commas(const std::vector<std::string>& in) {
  std::vector<std::string> out;
  for (const auto& s : in) {
    std::stringstream ss(s);
    std::string item;
    while (std::getline(ss, item, ',')) out.push_back(item);
  }
  return out;
}

/// A figure the run could not measure (peak memory on CPU: -1) as null, not as a number.
nlohmann::json measured(int64_t v) { return v >= 0 ? nlohmann::json(v) : nlohmann::json(nullptr); }

/// The first case whose measurement failed, as one line naming the checkpoint and the case ("" when none failed):
/// the run then exits 1 after its table, not 0 beside a cell holding the start of an error.
std::string first_failure(const std::vector<std::string>& dirs, const std::vector<statecut::ModelBenchResult>& results) {
  int failed = 0;
  std::string first;
  for (size_t i = 0; i < dirs.size(); ++i) {
    for (const auto& f : results[i].prefill)
      if (!f.error.empty() && failed++ == 0)
        first = dirs[i] + ": prefill " + std::to_string(f.batch) + "x" + std::to_string(f.tokens) + ": " + f.error;
    for (const auto& f : results[i].decode)
      if (!f.error.empty() && failed++ == 0) first = dirs[i] + ": decode batch " + std::to_string(f.batch) + ": " + f.error;
  }
  return failed > 1 ? first + " (and " + std::to_string(failed - 1) + " more)" : first;
}

nlohmann::json to_json(const std::string& checkpoint, const statecut::ModelBenchResult& r) {
  nlohmann::json pre = nlohmann::json::array(), dec = nlohmann::json::array();
  for (const auto& f : r.prefill) {
    nlohmann::json j{{"batch", f.batch}, {"tokens", f.tokens}};
    if (f.error.empty())
      j.update({{"seconds", f.seconds}, {"tokens_per_s", f.tokens_per_s}, {"peak_bytes", measured(f.peak_bytes)}});
    else
      j["error"] = f.error;
    pre.push_back(j);
  }
  for (const auto& f : r.decode) {
    nlohmann::json j{{"batch", f.batch}, {"steps", f.steps}};
    if (f.error.empty())
      j.update({{"ms_per_step", f.ms_per_step},
                {"tokens_per_s", f.tokens_per_s},
                {"floor_ms", f.floor_ms},
                {"x_floor", f.ms_per_step / f.floor_ms},
                {"peak_bytes", measured(f.peak_bytes)},
                {"cuda_graph", f.graphed},
                {"check_rel_err", f.check_rel_err}});
    else
      j["error"] = f.error;
    dec.push_back(j);
  }
  return {{"checkpoint", checkpoint},
          {"model_type", r.model_type},
          {"dtype", r.dtype},
          {"device", r.device},
          {"parameters", r.parameters},
          {"weight_bytes_per_step", r.weight_bytes_per_step},
          {"state_bytes_per_seq", r.state_bytes_per_seq},
          {"kv_bytes_per_token", r.kv_bytes_per_token},
          {"bandwidth_bytes_per_s", r.bandwidth_bytes_per_s},
          {"max_batch_estimate", measured(r.max_batch_estimate)},
          {"prefill", pre},
          {"decode", dec}};
}

/// cmp / base of a figure, or -1 when either failed.
double ratio(double cmp, double base, bool ok) { return ok && base > 0 ? cmp / base : -1.0; }

int run_bench(const BenchArgs& a) {
  const bool cuda = a.device == "cuda";
  statecut::require_device_available(torch::Device(a.device));
  const torch::Device device = cuda ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
  const std::string dt = a.dtype == "auto" ? (cuda ? "bf16" : "f32") : a.dtype;
  const torch::Dtype dtype = dt == "bf16" ? torch::kBFloat16 : torch::kFloat32;

  statecut::BenchConfig cfg;
  const auto prefill = a.prefill.empty() ? std::vector<std::string>{cuda ? "1x2048,8x2048" : "1x256"} : a.prefill;
  for (const auto& s : split_commas(prefill)) {
    const auto x = s.find('x');
    if (x == std::string::npos) throw statecut::OptionError("--prefill: '" + s + "' is not BxT (e.g. 8x2048)");
    cfg.prefill.emplace_back(parse_positive(s.substr(0, x), "--prefill batch"),
                             parse_positive(s.substr(x + 1), "--prefill length"));
  }
  const auto decode = a.decode.empty() ? std::vector<std::string>{cuda ? "1,16,64,256" : "1,8"} : a.decode;
  for (const auto& s : split_commas(decode)) cfg.decode_batches.push_back(parse_positive(s, "--decode"));
  cfg.prompt = a.prompt > 0 ? a.prompt : (cuda ? 512 : 128);
  cfg.new_tokens = a.new_tokens > 0 ? a.new_tokens : (cuda ? 128 : 32);
  cfg.repeats = a.repeats;
  cfg.cuda_graphs = !a.no_graphs;

  std::vector<std::string> dirs = {a.checkpoint};
  dirs.insert(dirs.end(), a.compare.begin(), a.compare.end());
  // The --compare checkpoints checked as the loader checks them (no weights held) before minutes of timing the first
  // one; the first is loaded, and so checked, right below.
  for (size_t i = 1; i < dirs.size(); ++i) statecut::check_causal_lm_loads(dirs[i]);
  std::vector<statecut::ModelBenchResult> results;
  for (const auto& d : dirs) {
    auto model = statecut::load_causal_lm(d, dtype, device);  // one model in memory at a time
    auto progress = [&](const std::string& line) {
      if (!a.quiet) std::fprintf(stderr, "bench %s: %s\n", d.c_str(), line.c_str());
    };
    results.push_back(statecut::bench_model(*model, cfg, progress));
  }

  if (a.json) {
    nlohmann::json models = nlohmann::json::array(), speedups = nlohmann::json::array();
    for (size_t i = 0; i < dirs.size(); ++i) models.push_back(to_json(dirs[i], results[i]));
    for (size_t i = 1; i < dirs.size(); ++i) {
      nlohmann::json dec = nlohmann::json::array(), pre = nlohmann::json::array();
      for (size_t k = 0; k < cfg.decode_batches.size(); ++k) {
        const auto &b = results[0].decode[k], &c = results[i].decode[k];
        dec.push_back({{"batch", b.batch}, {"speedup", ratio(c.tokens_per_s, b.tokens_per_s, b.error.empty() && c.error.empty())}});
      }
      for (size_t k = 0; k < cfg.prefill.size(); ++k) {
        const auto &b = results[0].prefill[k], &c = results[i].prefill[k];
        pre.push_back({{"batch", b.batch}, {"tokens", b.tokens},
                       {"speedup", ratio(c.tokens_per_s, b.tokens_per_s, b.error.empty() && c.error.empty())}});
      }
      speedups.push_back({{"checkpoint", dirs[i]}, {"baseline", dirs[0]}, {"decode", dec}, {"prefill", pre}});
    }
    std::printf("%s\n", statecut::io::json_text(nlohmann::json{{"device", device.str()},
                                       {"dtype", dt},
                                       {"prompt", cfg.prompt},
                                       {"new_tokens", cfg.new_tokens},
                                       {"models", models},
                                       {"speedup", speedups}})
                            .c_str());
    if (const std::string failed = first_failure(dirs, results); !failed.empty()) throw std::runtime_error(failed);
    return 0;
  }

  std::printf("device %s, %s; copy bandwidth %.1f GB/s; prompt %lld, %lld decode steps\n", device.str().c_str(),
              dt.c_str(), results[0].bandwidth_bytes_per_s / 1e9, static_cast<long long>(cfg.prompt),
              static_cast<long long>(cfg.new_tokens));
  for (size_t i = 0; i < dirs.size(); ++i)
    std::printf("[%zu] %s: %s, %.2fM parameters, state %.1f KiB/sequence%s\n", i, dirs[i].c_str(),
                results[i].model_type.c_str(), static_cast<double>(results[i].parameters) / 1e6,
                static_cast<double>(results[i].state_bytes_per_seq) / 1024.0,
                results[i].kv_bytes_per_token > 0
                    ? (" + KV " + std::to_string(results[i].kv_bytes_per_token) + " B/token").c_str()
                    : "");
  std::printf("\ndecode   %6s", "batch");
  for (size_t i = 0; i < dirs.size(); ++i)
    std::printf(" | [%zu] %9s %11s %7s%s", i, "ms/step", "tokens/s", "x floor", i ? "  speedup" : "");
  std::printf("\n");
  for (size_t k = 0; k < cfg.decode_batches.size(); ++k) {
    std::printf("         %6lld", static_cast<long long>(cfg.decode_batches[k]));
    for (size_t i = 0; i < dirs.size(); ++i) {
      const auto& f = results[i].decode[k];
      if (!f.error.empty()) {
        std::printf(" | [%zu] %-29s%s", i, f.error.substr(0, 29).c_str(), i ? "         " : "");
        continue;
      }
      std::printf(" | [%zu] %9.3f %11.1f %7.2f", i, f.ms_per_step, f.tokens_per_s, f.ms_per_step / f.floor_ms);
      if (i) {
        const auto& b = results[0].decode[k];
        std::printf("  %6.2fx", ratio(f.tokens_per_s, b.tokens_per_s, b.error.empty()));
      }
    }
    std::printf("\n");
  }
  std::printf("\nprefill  %6s", "BxT");
  for (size_t i = 0; i < dirs.size(); ++i) std::printf(" | [%zu] %11s %9s%s", i, "tokens/s", "peak MiB", i ? "  speedup" : "");
  std::printf("\n");
  for (size_t k = 0; k < cfg.prefill.size(); ++k) {
    const auto label = std::to_string(cfg.prefill[k].first) + "x" + std::to_string(cfg.prefill[k].second);
    std::printf("         %6s", label.c_str());
    for (size_t i = 0; i < dirs.size(); ++i) {
      const auto& f = results[i].prefill[k];
      if (!f.error.empty()) {
        std::printf(" | [%zu] %-21s%s", i, f.error.substr(0, 21).c_str(), i ? "         " : "");
        continue;
      }
      if (f.peak_bytes >= 0)
        std::printf(" | [%zu] %11.1f %9.1f", i, f.tokens_per_s, static_cast<double>(f.peak_bytes) / (1024.0 * 1024.0));
      else  // not measured (CPU)
        std::printf(" | [%zu] %11.1f %9s", i, f.tokens_per_s, "-");
      if (i) {
        const auto& b = results[0].prefill[k];
        std::printf("  %6.2fx", ratio(f.tokens_per_s, b.tokens_per_s, b.error.empty()));
      }
    }
    std::printf("\n");
  }
  for (size_t i = 0; i < dirs.size(); ++i)
    if (results[i].max_batch_estimate > 0)
      std::printf("[%zu] largest batch that fits (estimate): %lld\n", i,
                  static_cast<long long>(results[i].max_batch_estimate));
  if (const std::string failed = first_failure(dirs, results); !failed.empty()) throw std::runtime_error(failed);
  return 0;
}

statecut::cli::Command bench_cmd("bench", [](CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  app.description("prefill and decode speed, state and peak memory of checkpoints, side by side");
  app.add_option("--checkpoint", a->checkpoint, "model folder (the baseline of the speedup column)")->required();
  app.add_option("--compare", a->compare, "further model folders measured the same way");
  app.add_option("--prefill", a->prefill, "BxT list, e.g. 1x2048,8x2048");
  app.add_option("--decode", a->decode, "batch list, e.g. 1,16,64,256");
  app.add_option("--prompt", a->prompt, "prompt tokens before the decode steps (CUDA 512, CPU 128)")
      ->check(statecut::cli::at_least(1));
  app.add_option("--new-tokens", a->new_tokens, "timed decode steps (CUDA 128, CPU 32)")
      ->check(statecut::cli::at_least(1));
  app.add_option("--repeats", a->repeats, "prefill repetitions (best taken)")
      ->check(statecut::cli::at_least(1))
      ->capture_default_str();
  app.add_option("--device", a->device, "cpu | cuda")->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
  app.add_option("--dtype", a->dtype, "auto (cuda bf16, cpu f32) | f32 | bf16")
      ->check(CLI::IsMember({"auto", "f32", "bf16"}))
      ->capture_default_str();
  app.add_flag("--no-graphs", a->no_graphs, "decode eagerly on CUDA (no CUDA graph)");
  app.add_flag("--quiet", a->quiet, "no progress lines on stderr");
  app.add_flag("--json", a->json, "print one object {models, speedup} on stdout");
  return [a]() { return run_bench(*a); };
});

}  // namespace

#include "optimized/verify/verify.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <random>
#include <set>

#include "optimized/io/checkpoint.h"
#include "optimized/io/input_file.h"
#include "optimized/io/option_error.h"
#include "optimized/models/layers_common.h"
#include "optimized/prune/surgery.h"
#include "optimized/text/token_stream.h"
#include "optimized/text/tokenizer.h"
#include "optimized/verify/verify_checks.h"
#include "optimized/models/device_check.h"

namespace statecut::verify {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using CheckFn = void (*)(Context&, std::vector<CheckResult>&);

const std::vector<std::pair<std::string, CheckFn>>& groups() {
  static const std::vector<std::pair<std::string, CheckFn>> g = {
      {"load", check_load},
      {"config", check_config},
      {"pruned", check_pruned},
      {"reference", check_reference},
      {"chunk-recurrent", check_chunk_recurrent},
      {"state-carry", check_state_carry},
      {"theorems", check_theorems},
      {"determinism", check_determinism},
      {"kernels", check_kernels}};
  return g;
}

/// The safetensors files of dir; each must parse (else the checkpoint cannot be read: exit 2).
/// The weight files as the loaders open them (io::Checkpoint: one file, or the index's shards, which must be file
/// names in the folder — an index naming ../x or /etc/passwd was read by verify though eval and prune refuse it).
std::vector<std::string> open_files(const std::string& dir) {
  std::vector<std::string> files;
  try {
    const io::Checkpoint ck = io::Checkpoint::open(dir);
    for (const auto& f : ck.files()) files.push_back(f.path());
  } catch (const std::exception& e) {
    throw Unreadable(e.what());
  }
  return files;
}

/// dir's config.json, and its weight files in `files`: a folder that is not there, a config or a weight file that does
/// not parse is Unreadable (exit 2, one line naming the file). The checkpoint and --source alike.
json read_checkpoint(const std::string& dir, std::vector<std::string>& files) {
  json config;
  try {
    io::require_checkpoint_folder(dir);
    config = io::read_config(dir);
  } catch (const std::exception& e) {
    throw Unreadable(e.what());
  }
  files = open_files(dir);
  return config;
}

/// The float dtype holding the most bytes.
torch::Dtype dominant_dtype(const std::vector<std::string>& files) {
  std::map<io::DType, size_t> bytes;
  for (const auto& f : files) {
    const auto st = io::SafetensorsFile::open(f);
    for (const auto& n : st.names()) bytes[st.tensor(n).dtype] += st.tensor(n).nbytes;
  }
  io::DType best = io::DType::F32;
  size_t most = 0;
  for (const auto& [d, b] : bytes)
    if ((d == io::DType::F32 || d == io::DType::BF16 || d == io::DType::F16 || d == io::DType::F64) && b > most)
      best = d, most = b;
  switch (best) {
    case io::DType::BF16: return torch::kBFloat16;
    case io::DType::F16: return torch::kFloat16;
    case io::DType::F64: return torch::kFloat64;
    default: return torch::kFloat32;
  }
}

/// N windows of L tokens: from the text/token files (seeded sample_windows), else seeded random ids.
void make_windows(Context& ctx) {
  const auto& o = ctx.opt;
  int64_t vocab = 256;
  try {
    vocab = cfg_int(ctx.config, "vocab_size", 256, ctx.config_path);
  } catch (...) {
  }
  if (vocab <= 0) vocab = 256;
  if (o.text.empty()) {
    std::mt19937_64 rng(o.seed);
    // The whole vocabulary: every embedding row can be drawn (the loaders hold embeddings to vocab_size rows), so a
    // row a window touches is any row, not only the 256 byte tokens of a BPE vocabulary.
    const uint64_t span = static_cast<uint64_t>(vocab);
    std::vector<int64_t> v(static_cast<size_t>(o.windows * o.len));
    for (auto& x : v) x = static_cast<int64_t>(bounded_draw(rng, span));
    ctx.ids = torch::tensor(v, torch::kInt64).view({o.windows, o.len});
    const int64_t max_id = v.empty() ? -1 : *std::max_element(v.begin(), v.end());
    ctx.input = {{"kind", "random"}, {"windows", o.windows}, {"len", o.len}, {"seed", o.seed}, {"max_id", max_id},
                 {"description", std::to_string(o.windows) + " x " + std::to_string(o.len) +
                                     " random token ids in [0, " + std::to_string(span) + ") (seed " +
                                     std::to_string(o.seed) + "; give --text for real activations)"}};
    return;
  }
  TokenStream all;
  std::string tokenizer;
  try {
    const Tokenizer tok = Tokenizer::for_checkpoint(ctx.dir, o.tokenizer);
    tokenizer = tok.available() ? tok.describe() : "none (token files only)";
    for (const auto& f : o.text) {
      if (const std::string why = io::input_file_problem(f); !why.empty()) throw Unreadable(f + ": " + why);
      TokenStream s = read_tokens(f, tok, vocab);
      all.ids.insert(all.ids.end(), s.ids.begin(), s.ids.end());
    }
  } catch (const Unreadable&) {
    throw;
  } catch (const std::exception& e) {
    throw Unreadable(e.what());
  }
  const int64_t n = static_cast<int64_t>(all.ids.size());
  if (n < 2) throw Unreadable(o.text.front() + ": fewer than 2 tokens");
  all.source = o.text.front();
  const int64_t len = std::min(o.len, n);
  const Windows w = sample_windows(all, o.windows, len, o.seed);
  ctx.ids = w.ids;
  std::string files;
  for (const auto& f : o.text) files += (files.empty() ? "" : ", ") + f;
  ctx.input = {{"kind", "text"}, {"files", o.text}, {"windows", o.windows}, {"len", len}, {"seed", o.seed},
               {"starts", w.starts}, {"tokenizer", tokenizer},
               {"description", std::to_string(o.windows) + " x " + std::to_string(len) + " tokens of " + files +
                                   " (seed " + std::to_string(o.seed) + ")"}};
}

bool selected(const VerifyOptions& o, const std::string& group) {
  if (!o.only.empty() && std::find(o.only.begin(), o.only.end(), group) == o.only.end()) return false;
  return std::find(o.skip.begin(), o.skip.end(), group) == o.skip.end();
}

}  // namespace

const std::vector<std::string>& check_groups() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& g : groups()) v.push_back(g.first);
    return v;
  }();
  return names;
}

Report run_verify(const VerifyOptions& opt) {
  const double t_start = now_seconds();
  for (const auto* list : {&opt.only, &opt.skip})
    for (const auto& g : *list)
      if (std::find(check_groups().begin(), check_groups().end(), g) == check_groups().end()) {
        // A row's name (pruned.weights) is a part of its check: the check runs or is left out whole.
        const std::string group = g.substr(0, g.find('.'));
        const bool row = g.find('.') != std::string::npos &&
                         std::find(check_groups().begin(), check_groups().end(), group) != check_groups().end();
        std::string names;
        for (const auto& c : check_groups()) names += (names.empty() ? "" : ", ") + c;
        throw OptionError((row ? "'" + g + "' is a row of the check '" + group +
                                       "': --only and --skip take whole checks"
                                 : "unknown check '" + g + "'") +
                          " (checks: " + names + ")");
      }
  if (opt.windows < 1 || opt.len < 2) throw OptionError("--windows must be >= 1 and --len >= 2");
  if (std::none_of(groups().begin(), groups().end(), [&](const auto& g) { return selected(opt, g.first); }))
    throw OptionError("--only and --skip leave no check to run");

  Context ctx;
  ctx.opt = opt;
  ctx.dir = opt.checkpoint;
  ctx.config_path = (fs::path(ctx.dir) / "config.json").string();
  std::vector<std::string> files;
  ctx.config = read_checkpoint(ctx.dir, files);
  if (!opt.source.empty()) {  // --source is read as the checkpoint is (exit 2, as the help says, not a FAIL row)
    std::vector<std::string> source_files;
    (void)read_checkpoint(opt.source, source_files);
  }
  const auto mt = ctx.config.find("model_type");  // not a string: as missing (the load row says so)
  ctx.model_type = mt != ctx.config.end() && mt->is_string() ? mt->get<std::string>() : std::string();
  try {
    ctx.layers = prunable_layers_from_config(ctx.config, ctx.config_path, /*allow_none=*/true);
  } catch (const std::exception& e) {
    ctx.layers_error = e.what();
  }
  ctx.stored_dtype = dominant_dtype(files);
  ctx.run_dtype = ctx.stored_dtype == torch::kFloat16 ? torch::kFloat32 : ctx.stored_dtype;
  ctx.device = torch::Device(opt.device);
  try {  // as every other command: not a quiet CPU run; for verify an input it cannot run on (exit 2)
    require_device_available(ctx.device);
  } catch (const DeviceUnavailable& e) {
    throw std::invalid_argument(e.what());
  }
  ctx.kind = ctx.model_type == "mamba2" ? RecKind::Mamba2 : RecKind::Delta;
  if (ctx.model_type == "delta_net") ctx.l2norm_qk = ctx.config.value("qk_norm", std::string("l2")) == "l2";
  if (ctx.kind == RecKind::Mamba2) ctx.l2norm_qk = false;
  make_windows(ctx);
  // The model in the dtype it is stored in: what `load` reports on and what the other checks run.
  ctx.say("reading the weights (" + std::string(dtype_label(ctx.run_dtype)) + " on " + ctx.device.str() + ")");
  try {
    ctx.weights = std::make_unique<WeightSource>(WeightSource::open_dir(ctx.dir));
    ctx.model = load_causal_lm(ctx.dir, ctx.run_dtype, ctx.device);
  } catch (const std::exception& e) {
    const auto* c = dynamic_cast<const c10::Error*>(&e);
    const std::string msg = c ? c->what_without_backtrace() : e.what();
    ctx.load_error = msg.substr(0, msg.find('\n'));
    ctx.model.reset();
  }

  Report rep;
  std::string geometry;
  if (!ctx.layers.empty())
    geometry = ", " + std::to_string(ctx.layers.size()) + " linear-attention layers, Hk " +
               std::to_string(ctx.layers.front().num_key_heads) + ", dk " +
               std::to_string(ctx.layers.front().head_k_dim);
  rep.header = {{"checkpoint", opt.checkpoint},
                {"model_type", ctx.model_type},
                {"dtype", dtype_label(ctx.stored_dtype)},
                {"run_dtype", dtype_label(ctx.run_dtype)},
                {"device", ctx.device.str()},
                {"input", ctx.input},
                {"summary", ctx.model_type + ", " + dtype_label(ctx.stored_dtype) + geometry + ", device " +
                                ctx.device.str()}};
  if (!opt.source.empty()) rep.header["source"] = opt.source;
  for (const auto& [name, fn] : groups()) {
    if (!selected(opt, name)) continue;
    ctx.say(name);
    const double t0 = now_seconds();
    std::vector<CheckResult> rows;
    try {
      fn(ctx, rows);
    } catch (const std::exception& e) {
      const auto* c = dynamic_cast<const c10::Error*>(&e);
      std::string msg = c ? c->what_without_backtrace() : e.what();
      CheckResult r;
      r.name = name;
      r.status = Status::Fail;
      r.message = "the check could not complete: " + msg.substr(0, msg.find('\n'));
      rows.push_back(r);
    }
    const double secs = seconds_since(t0);
    for (auto& r : rows) r.seconds = secs / static_cast<double>(rows.size());
    rep.checks.insert(rep.checks.end(), rows.begin(), rows.end());
  }
  rep.seconds = seconds_since(t_start);
  return rep;
}

CheckResult unavailable(const Context& ctx, const std::string& name, const std::string& why) {
  CheckResult r = skipped(name, why);
  if (ctx.model) r.status = Status::Fail, r.message = "the check could not run: " + why;
  return r;
}

CheckResult forward_unavailable(const Context& ctx, const std::string& name) {
  return ctx.layers.empty() ? skipped(name, ctx.no_layers_reason()) : unavailable(ctx, name, ctx.forward_error);
}

std::string first_problem(const std::vector<std::string>& problems) {
  if (problems.empty()) return "";
  return problems.front() + (problems.size() > 1 ? " (and " + std::to_string(problems.size() - 1) + " more)" : "");
}

CheckResult skipped(const std::string& name, const std::string& why) {
  CheckResult r;
  r.name = name;
  r.status = Status::Skip;
  r.message = why;
  return r;
}

}  // namespace statecut::verify

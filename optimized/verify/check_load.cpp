// `load`: the checkpoint as the family's loader sees it, plus what the loader does not look at (tensors it does not
// bind, values of every tensor, the tokenizer).
#include <algorithm>
#include <filesystem>
#include <set>

#include "optimized/io/checkpoint.h"
#include "optimized/models/model_registry.h"
#include "optimized/text/tokenizer.h"
#include "optimized/verify/verify_checks.h"

namespace statecut::verify {
namespace fs = std::filesystem;

namespace {

bool float_dtype(io::DType d) {
  return d == io::DType::F32 || d == io::DType::BF16 || d == io::DType::F16 || d == io::DType::F64;
}

std::string index_str(const std::vector<int64_t>& shape, int64_t flat) {
  std::vector<int64_t> idx(shape.size());
  for (size_t i = shape.size(); i-- > 0;) {
    idx[i] = shape[i] ? flat % shape[i] : 0;
    flat = shape[i] ? flat / shape[i] : 0;
  }
  std::string s = "[";
  for (size_t i = 0; i < idx.size(); ++i) s += (i ? "," : "") + std::to_string(idx[i]);
  return s + "]";
}

/// Problems of one stored tensor: unsupported dtype, NaN/Inf (with the first place).
void scan_tensor(const io::TensorView& t, const std::string& file, std::vector<std::string>& problems,
                 std::string& where) {
  if (!float_dtype(t.dtype)) {
    problems.push_back(file + ": " + t.name + ": dtype " + io::dtype_name(t.dtype) +
                       " (the models load F32, BF16, F16, F64)");
    if (where.empty()) where = t.name;
    return;
  }
  const torch::Tensor x = tensor_from_view(t).reshape({-1});
  const torch::Tensor bad = ~torch::isfinite(x);
  const int64_t nbad = bad.sum().item<int64_t>();
  if (nbad == 0) return;
  const int64_t nnan = torch::isnan(x).sum().item<int64_t>();
  const int64_t first = bad.nonzero().flatten()[0].item<int64_t>();
  problems.push_back(file + ": " + t.name + ": " + std::to_string(nnan) + " NaN and " + std::to_string(nbad - nnan) +
                     " Inf values (first at " + index_str(t.shape, first) + ")");
  if (where.empty()) where = t.name;
}

/// Stored tensors the loaders accept and set aside, as transformers does: a derived buffer (derived_buffer), and
/// lm_head.weight beside tied embeddings equal to it (the loaders refuse one that differs). The tie is the top-level
/// key, else a nested text_config's (Qwen3.5's multimodal release), as the loader reads it. Verify once failed these
/// checkpoints while every other command ran them.
bool set_aside_by_the_loaders(const std::string& name, const nlohmann::json& config) {
  if (derived_buffer(name)) return true;
  const nlohmann::json* tied = config.contains("tie_word_embeddings") ? &config.at("tie_word_embeddings") : nullptr;
  if (!tied && config.contains("text_config") && config.at("text_config").is_object() &&
      config.at("text_config").contains("tie_word_embeddings"))
    tied = &config.at("text_config").at("tie_word_embeddings");
  return name == "lm_head.weight" && tied && tied->is_boolean() && tied->get<bool>();
}

}  // namespace

void check_load(Context& ctx, std::vector<CheckResult>& out) {
  CheckResult r;
  r.name = "load";
  r.relation = "==";
  r.threshold = 0;
  r.reason = "every tensor the family binds present with the shape the config implies, none unexpected (an MTP head's "
             "or vision tower's aside), a float dtype, finite; shards as their index says; a usable tokenizer";
  std::vector<std::string> problems;
  std::set<std::string> stored;
  size_t n_tensors = 0;
  int64_t bytes = 0;
  // Values and dtypes of every stored tensor (the loader checks only those it binds).
  std::vector<std::string> files;
  const fs::path single = fs::path(ctx.dir) / "model.safetensors";
  if (fs::exists(single)) {
    files.push_back(single.string());
  } else {
    const auto idx = io::read_json_file((fs::path(ctx.dir) / "model.safetensors.index.json").string());
    std::set<std::string> shards;
    for (const auto& [n, s] : idx["weight_map"].items()) shards.insert(s.get<std::string>());
    for (const auto& s : shards) files.push_back((fs::path(ctx.dir) / s).string());
  }
  for (const auto& f : files) {
    const auto st = io::SafetensorsFile::open(f);
    for (const auto& n : st.names()) {
      scan_tensor(st.tensor(n), f, problems, r.where);
      stored.insert(n);
      ++n_tensors;
      bytes += static_cast<int64_t>(st.tensor(n).nbytes);
    }
  }
  // The family's loader: names, shapes against the config, shard index (WeightSource::open_dir).
  // Its error about a tensor the scan above already named ("<file>: <tensor>: ...", NaN or a dtype) is the same fact
  // twice: one problem, not two.
  const size_t file_end = ctx.load_error.find(": ");
  const size_t tensor_end = file_end == std::string::npos ? file_end : ctx.load_error.find(": ", file_end + 2);
  const std::string subject = tensor_end == std::string::npos ? "" : ctx.load_error.substr(0, tensor_end + 2);
  const bool told = !subject.empty() && std::any_of(problems.begin(), problems.end(), [&](const std::string& p) {
    return p.compare(0, subject.size(), subject) == 0;
  });
  if (!ctx.load_error.empty() && !told) {
    problems.push_back(ctx.load_error);
    if (r.where.empty()) r.where = "loader";
  }
  size_t bound = 0, outside = 0, derived = 0;
  if (ctx.model) {
    std::set<std::string> expected;
    for (const auto& [n, t] : ctx.model->named_parameters()) expected.insert(n);
    bound = expected.size();
    for (const auto& n : stored) {
      if (expected.count(n)) continue;
      if (outside_the_language_model(n)) {
        ++outside;
        continue;
      }
      if (set_aside_by_the_loaders(n, ctx.config)) {
        ++derived;
        continue;
      }
      problems.push_back(n + ": unexpected tensor (the " + ctx.model_type + " config binds " +
                         std::to_string(expected.size()) + " tensors, not this one)");
      if (r.where.empty()) r.where = n;
    }
  }
  // Tokenizer (tokenizer.h's rule): a tokenizer.model / tokenizer.json must load; without one the model is
  // byte-level only with vocab 256, else text cannot be read (token files still can) — reported, not a failure.
  std::string tok_desc;
  try {
    const Tokenizer tok = Tokenizer::for_checkpoint(ctx.dir);
    tok_desc = !tok.available() ? "none (" + tok.unavailable_reason() + ")"
               : tok.byte_level() ? std::string("byte-level (vocab 256, no tokenizer file)")
                                  : tok.describe();
    // Every other command refuses text whose ids the model cannot embed; a tokenizer larger than the embedding is
    // that, for any text (a smaller one is fine: embeddings are often padded).
    const int64_t model_vocab = ctx.config.value("vocab_size", int64_t{0});
    if (tok.available() && !tok.byte_level() && model_vocab > 0 && tok.vocab_size() > model_vocab) {
      problems.push_back(ctx.dir + ": the tokenizer (" + tok.describe() + ") has " + std::to_string(tok.vocab_size()) +
                         " ids but config.json's vocab_size is " + std::to_string(model_vocab) +
                         ": text would give ids the model cannot embed");
      if (r.where.empty()) r.where = "tokenizer";
    }
  } catch (const std::exception& e) {
    problems.push_back(e.what());
    if (r.where.empty()) r.where = "tokenizer";
  }
  // the loader reads the same config: its error is said once
  if (!ctx.layers_error.empty() && ctx.load_error.find(ctx.layers_error) == std::string::npos)
    problems.push_back(ctx.layers_error);

  r.figure = static_cast<double>(problems.size());
  r.status = problems.empty() ? Status::Pass : Status::Fail;
  if (problems.empty()) {
    r.message = std::to_string(n_tensors) + " tensors (" + std::to_string(bytes >> 20) + " MiB, " +
                dtype_label(ctx.stored_dtype) + ") in " + std::to_string(files.size()) + " file(s), all " +
                std::to_string(bound) + " bound by the " + ctx.model_type + " loader" +
                (outside ? " (" + std::to_string(outside) + " of an MTP head or vision tower, not the language model's)"
                         : std::string()) +
                (derived ? " (" + std::to_string(derived) + " the loaders derive instead: rotary inv_freq, a tied lm_head)"
                         : std::string()) +
                ", finite; tokenizer: " + tok_desc;
  } else {
    r.message = problems.front();
    for (size_t i = 1; i < problems.size() && i < 4; ++i) r.message += "; " + problems[i];
    if (problems.size() > 4) r.message += "; and " + std::to_string(problems.size() - 4) + " more";
  }
  r.details["problems"] = problems;
  out.push_back(std::move(r));
}

}  // namespace statecut::verify

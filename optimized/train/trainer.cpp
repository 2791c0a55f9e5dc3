// The finetune loop (trainer.h): LoRA/trained parameters, CE + KD, AdamW, resumable state, atomic output.
#include "optimized/train/trainer.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>

#include "optimized/analysis/evaluation.h"
#include "optimized/io/atomic_dir.h"
#include "optimized/io/checkpoint.h"
#include "optimized/io/input_file.h"
#include "optimized/io/option_error.h"
#include "optimized/io/remove_tree.h"
#include "optimized/models/model.h"
#include "optimized/models/streamed_model.h"
#include "optimized/text/token_stream.h"
#include "optimized/prune/prune_record.h"
#include "optimized/prune/surgery.h"
#include "optimized/train/data_parallel.h"
#include "optimized/train/init.h"
#include "optimized/train/lora.h"
#include "optimized/train/loss.h"
#include "optimized/train/optimizer.h"
#include "optimized/train/train_io.h"
#include "optimized/models/device_check.h"

namespace statecut {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;
using Named = std::vector<std::pair<std::string, torch::Tensor>>;

[[noreturn]] void trainer_fail(const std::string& msg) { throw std::runtime_error(msg); }
/// An option out of its range or left out: a usage error (exit 2), not a failure.
[[noreturn]] void option_fail(const std::string& msg) { throw OptionError(msg); }

double trainer_seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

/// splitmix64 of a combination: independent, platform-independent seeds per (seed, step, micro-batch).
uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t z = a + 0x9E3779B97F4A7C15ULL * (b + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

const char* dtype_label(torch::Dtype d) { return d == torch::kFloat64 ? "f64" : "f32"; }

/// The arithmetic of the passes: "bf16" (mixed, fp32 masters) or the masters' own dtype.
const char* precision_label(const FinetuneOptions& o) {
  return o.precision == TrainPrecision::Bf16 ? "bf16" : dtype_label(o.dtype);
}

/// The dtype the student's passes and the teacher's forward compute in.
torch::Dtype compute_dtype_of(const FinetuneOptions& o) {
  return o.precision == TrainPrecision::Bf16 ? torch::kBFloat16 : o.dtype;
}

/// What a resumed run must share with the run that saved the state (everything that changes the arithmetic).
nlohmann::json recipe_json(const FinetuneOptions& o, int world) {
  // The inputs by what they are, not by the path as typed (a resume from another working directory or spelling
  // matched nothing, and another model under the same relative name was resumed onto; train_io.h input_identity).
  nlohmann::json text = nlohmann::json::array();
  for (const auto& t : o.text) text.push_back(input_identity(t));
  return {{"checkpoint", input_identity(o.config.empty() ? o.checkpoint : o.config)},
          {"teacher", o.no_kd ? nlohmann::json("") : input_identity(o.teacher)}, {"text", text},
          {"steps", o.steps},           {"seq_len", o.seq_len},                {"batch", o.batch},
          {"accum", o.accum},           {"lr", o.lr},                          {"warmup", o.warmup},
          {"min_lr_ratio", o.min_lr_ratio}, {"weight_decay", o.weight_decay},  {"max_grad_norm", o.max_grad_norm},
          {"lora_rank", o.full ? 0 : o.lora_rank}, {"lora_alpha", o.full ? 0.0 : o.lora_alpha},
          {"kd_temp", o.kd_temp},       {"kd_weight", o.no_kd ? 0.0 : o.kd_weight}, {"kd", !o.no_kd},
          {"full", o.full},             {"seed", o.seed},                      {"dtype", dtype_label(o.dtype)},
          {"precision", precision_label(o)},
          {"betas", {0.9, 0.95}},       {"eps", 1e-15},                        {"world_size", world}};
}

TokenStream concat_streams(const std::vector<std::string>& files, const Tokenizer& tok, int64_t vocab) {
  TokenStream all;
  for (const auto& f : files) {
    TokenStream s = read_tokens(f, tok, vocab);
    all.source += (all.source.empty() ? "" : "+") + s.source;
    all.ids.insert(all.ids.end(), s.ids.begin(), s.ids.end());
    all.bytes = (all.bytes < 0 || s.bytes < 0) ? -1 : all.bytes + s.bytes;
  }
  return all;
}

struct Trainable {
  std::unique_ptr<Lora> lora;
  Named trained;  ///< master parameters the optimizer updates directly
  Named params;   ///< everything the optimizer updates (adapters first)
  /// (computing parameter, its master) for each trained parameter when they are different tensors (precision Bf16).
  std::vector<std::pair<torch::Tensor, torch::Tensor>> mirrors;
  std::set<std::string> changed;  ///< names of the parameters the training changes (adapted or trained)
  std::vector<torch::Tensor> tensors() const {
    std::vector<torch::Tensor> t;
    for (const auto& [n, p] : params) t.push_back(p);
    return t;
  }
  /// The computing parameters' gradients into the masters' (adapters: lora.h's chain rule), added to what is there,
  /// then cleared. Once per step at precision Full (G accumulates in the fp32 parameters), after every micro-batch at
  /// Bf16 (so the sum over micro-batches is taken in fp32).
  void collect_gradients() {
    if (lora) lora->backprop();
    torch::NoGradGuard no_grad;
    for (auto& [p, m] : mirrors) {
      if (!p.grad().defined()) continue;
      auto g = p.grad().to(m.scalar_type());
      m.mutable_grad() = m.grad().defined() ? m.grad() + g : g;
      p.mutable_grad() = torch::Tensor();
    }
  }
  /// The masters rounded into the computing parameters (after each optimizer step, at the start and on resume).
  void push_masters() {
    torch::NoGradGuard no_grad;
    for (auto& [p, m] : mirrors) p.copy_(m);
  }
};

/// What the optimizer trains: `model` computes (its trained parameters collect gradients), `master` holds the values
/// the optimizer updates (the same model at precision Full).
Trainable make_trainable(CausalLM& model, CausalLM& master, const FinetuneOptions& opt) {
  Trainable tr;
  auto named = model.named_parameters();
  std::map<std::string, torch::Tensor> masters;
  for (auto& [n, t] : master.named_parameters()) {
    t.requires_grad_(false);
    masters.emplace(n, t);
  }
  for (auto& [n, t] : named) t.requires_grad_(false);
  auto train = [&](const std::string& n, torch::Tensor& t) {
    t.requires_grad_(true);
    auto it = masters.find(n);
    if (it == masters.end()) trainer_fail("finetune: the master model has no parameter '" + n + "'");
    if (!it->second.is_same(t)) tr.mirrors.emplace_back(t, it->second);
    tr.trained.emplace_back(n, it->second);
    tr.changed.insert(n);
  };
  if (opt.full) {
    for (auto& [n, t] : named) train(n, t);
  } else {
    std::map<std::string, std::vector<int64_t>> shapes;
    for (auto& [n, t] : named) shapes[n] = t.sizes().vec();
    auto shape_of = [&](const std::string& n) {
      auto it = shapes.find(n);
      if (it == shapes.end()) trainer_fail("finetune: the model has no parameter '" + n + "'");
      return it->second;
    };
    auto blocks = lora_blocks(model.model_type(), model.prunable_layers(), shape_of);
    if (blocks.empty()) trainer_fail("finetune: the model has no linear-attention layer to adapt");
    std::set<std::string> adapted;
    for (const auto& b : blocks) adapted.insert(b.weight);
    tr.changed = adapted;
    tr.lora = std::make_unique<Lora>(model, master, std::move(blocks), LoraConfig{opt.lora_rank, opt.lora_alpha},
                                     mix(opt.seed, 0x4C6F5241ULL));
    for (auto& [n, t] : named) {
      if (adapted.count(n) || !recipe_trains_fully(n)) continue;
      train(n, t);
    }
    tr.params = tr.lora->tensors();
  }
  tr.params.insert(tr.params.end(), tr.trained.begin(), tr.trained.end());
  tr.push_masters();
  return tr;
}

/// Flattens the gradients of `params` (+ extra scalars), all-reduces the sum, divides by the world size, and scatters
/// the mean back; returns the reduced extras.
std::vector<double> all_reduce_mean(DataParallel& dp, const std::vector<torch::Tensor>& params, std::vector<double> extra) {
  std::vector<torch::Tensor> parts;
  for (const auto& p : params) {
    const auto& g = p.grad();
    parts.push_back((g.defined() ? g : torch::zeros_like(p)).reshape({-1}));
  }
  auto opts = params.empty() ? torch::TensorOptions().dtype(torch::kFloat32) : params.front().options();
  parts.push_back(torch::tensor(extra, torch::TensorOptions().dtype(torch::kFloat64)).to(opts.device(), opts.dtype()));
  torch::Tensor flat = torch::cat(parts);
  dp.all_reduce_sum(flat);
  flat.div_(static_cast<double>(dp.world_size()));
  int64_t at = 0;
  torch::NoGradGuard no_grad;
  for (const auto& p : params) {
    const int64_t n = p.numel();
    auto g = flat.narrow(0, at, n).view(p.sizes()).clone();
    p.mutable_grad() = g;
    at += n;
  }
  auto tail = flat.narrow(0, at, static_cast<int64_t>(extra.size())).to(torch::kCPU, torch::kFloat64);
  for (size_t i = 0; i < extra.size(); ++i) extra[i] = tail[static_cast<int64_t>(i)].item<double>();
  return extra;
}

double mean_eval_bpb(CausalLM& model, const std::vector<TokenStream>& streams, const Tokenizer& tok, int64_t tokens,
                     int64_t window, nlohmann::json* per_file) {
  torch::NoGradGuard no_grad;
  double sum = 0;
  for (const auto& s : streams) {
    EvalOptions eo;
    eo.window = window;
    eo.max_tokens = tokens;
    const auto r = evaluate_stream(model, s, tok, eo);
    sum += r.bits_per_byte;
    if (per_file) (*per_file)[s.source] = r.bits_per_byte;
  }
  return streams.empty() ? -1 : sum / static_cast<double>(streams.size());
}

struct SavedState {
  int64_t step = 0;
  double seconds = 0;
  int64_t skipped = 0;
  std::vector<StepRecord> history;
};

/// `recipe`: recipe_json of the run, formed once (it hashes the inputs: train_io.h input_identity).
void save_state(const std::string& dir, const Trainable& tr, const AdamW& adam, const nlohmann::json& recipe,
                const SavedState& st) {
  fs::create_directories(dir);
  Named tensors;
  for (const auto& [n, t] : tr.params) tensors.emplace_back("param." + n, t);
  for (const auto& [n, t] : adam.state()) tensors.emplace_back("adam." + n, t);
  save_tensor_file((fs::path(dir) / "state.safetensors").string(), tensors);
  nlohmann::json hist = nlohmann::json::array();
  for (const auto& r : st.history) hist.push_back(step_to_json(r));
  const nlohmann::json j = {{"format", 1},          {"step", st.step},       {"seconds", st.seconds},
                            {"skipped", st.skipped}, {"recipe", recipe}, {"history", hist}};
  write_text_atomically((fs::path(dir) / "state.json").string(), io::json_text(j, 1) + "\n");
}

SavedState load_state(const std::string& dir, Trainable& tr, AdamW& adam, const nlohmann::json& want) {
  const std::string jpath = (fs::path(dir) / "state.json").string();
  if (!fs::exists(jpath)) trainer_fail(dir + ": no saved state to resume from (a run with --save-every N writes it)");
  const nlohmann::json j = io::read_json_file(jpath);
  for (const auto& [k, v] : want.items())
    if (!j.at("recipe").contains(k) || j["recipe"][k] != v)
      trainer_fail(jpath + ": the saved run used " + k + " = " + (j["recipe"].contains(k) ? j["recipe"][k].dump() : "?") +
           ", this one " + v.dump() + " (resume needs the same recipe)");
  auto tensors = load_tensor_file((fs::path(dir) / "state.safetensors").string());
  torch::NoGradGuard no_grad;
  for (auto& [n, p] : tr.params) {
    auto it = tensors.find("param." + n);
    if (it == tensors.end() || it->second.sizes() != p.sizes())
      trainer_fail(dir + "/state.safetensors: missing or misshapen 'param." + n + "'");
    p.copy_(it->second);
  }
  Named moments;
  for (auto& [n, t] : tensors)
    if (n.rfind("adam.", 0) == 0) moments.emplace_back(n.substr(5), t);
  SavedState st;
  st.step = j.at("step").get<int64_t>();
  adam.load_state(moments, st.step - j.value("skipped", int64_t{0}));
  st.seconds = j.value("seconds", 0.0);
  st.skipped = j.value("skipped", int64_t{0});
  for (const auto& r : j.at("history")) st.history.push_back(step_from_json(r));
  return st;
}

nlohmann::json read_record(const std::string& dir) {
  const fs::path p = fs::path(dir) / "statecut.json";
  if (!fs::exists(p)) return nlohmann::json::object();
  return io::read_json_file(p.string());
}

/// train: the tokenizer files beside the config (tokenizer.model / tokenizer.json), else byte-level for vocab 256 (or
/// --tokenizer bytes); otherwise only token files can be read.
Tokenizer tokenizer_beside_config(const FinetuneOptions& opt, int64_t vocab) {
  const std::string dir = fs::absolute(fs::path(opt.config)).parent_path().string();
  if (opt.tokenizer == TokenizerChoice::Bytes || vocab == 256) return Tokenizer::bytes();
  if (fs::exists(fs::path(dir) / "tokenizer.model") || fs::exists(fs::path(dir) / "tokenizer.json"))
    return Tokenizer::for_checkpoint(dir, opt.tokenizer);
  for (const auto& f : opt.text) {
    const std::string ext = fs::path(f).extension().string();
    if (ext != ".safetensors" && ext != ".bin")
      trainer_fail(f + ": text needs a tokenizer, and " + opt.config + " has vocab_size " + std::to_string(vocab) +
           " with no tokenizer.model / tokenizer.json beside it (give token files, or --tokenizer bytes)");
  }
  return Tokenizer::bytes();
}

/// train's output: config.json as transformers writes it, model.safetensors of every parameter (the training dtype),
/// the tokenizer files beside the config.
void write_fresh_checkpoint(CausalLM& model, const nlohmann::json& config, const std::string& config_path,
                            const std::string& dir) {
  Named params;
  for (auto& [n, t] : model.named_parameters()) params.emplace_back(n, t);
  save_tensor_file((fs::path(dir) / "model.safetensors").string(), params);
  write_text_atomically((fs::path(dir) / "config.json").string(), python_json_dump(config));
  const fs::path src = fs::absolute(fs::path(config_path)).parent_path();
  io::copy_companion_files(src.string(), dir);  // the tokenizer beside the --config file, and its kin
}

}  // namespace

std::string finetune_state_dir(const std::string& out) {
  std::string o = out;
  while (o.size() > 1 && o.back() == '/') o.pop_back();
  return o + ".state";
}

void validate_finetune_options(const FinetuneOptions& o) {
  auto need_dir = [](const std::string& d, const char* what) {
    if (d.empty()) option_fail(std::string(what) + " is required");
    if (!fs::exists(fs::path(d) / "config.json")) trainer_fail(d + ": not a checkpoint folder (no config.json)");
  };
  if (!o.config.empty()) {
    if (const std::string why = io::input_file_problem(o.config); !why.empty()) trainer_fail(o.config + ": " + why);
    if (!o.no_kd || !o.full) trainer_fail("train: a fresh model trains every parameter without a teacher");
  } else {
    need_dir(o.checkpoint, "--checkpoint");
  }
  if (!o.no_kd) {
    if (o.teacher.empty()) option_fail("--teacher is required for distillation (or --no-kd)");
    need_dir(o.teacher, "--teacher");
  }
  if (o.text.empty()) option_fail("--text: at least one training file is required");
  for (const auto* files : {&o.text, &o.eval_text})
    for (const auto& f : *files)
      if (const std::string why = io::input_file_problem(f); !why.empty()) trainer_fail(f + ": " + why);
  if (o.out.empty()) option_fail("--out is required");
  require_new_output_file(o.out, "--out");
  if (o.steps < 1) option_fail("--steps must be >= 1");
  if (o.seq_len < 2) option_fail("--seq-len must be >= 2");
  if (o.batch < 1) option_fail("--batch must be >= 1");
  if (o.accum < 1) option_fail("--accum must be >= 1");
  if (!(o.lr > 0) || !std::isfinite(o.lr)) option_fail("--lr must be positive");
  if (o.warmup < 0) option_fail("--warmup must be >= 0");
  if (!(o.min_lr_ratio >= 0 && o.min_lr_ratio <= 1)) option_fail("--min-lr-ratio must lie in [0, 1]");
  if (!(o.weight_decay >= 0)) option_fail("--weight-decay must be >= 0");
  if (!(o.max_grad_norm > 0)) option_fail("--max-grad-norm must be positive");
  if (!o.full && o.lora_rank < 1) option_fail("--lora-rank must be >= 1");
  if (!o.full && !(o.lora_alpha > 0)) option_fail("--lora-alpha must be positive");
  if (!(o.kd_temp > 0)) option_fail("--kd-temp must be positive");
  if (!(o.kd_weight >= 0)) option_fail("--kd-weight must be >= 0");
  if (o.eval_every < 0 || o.save_every < 0 || o.eval_tokens < 0 || o.stop_after < 0)
    option_fail("--eval-every, --save-every and --eval-tokens must be >= 0");
  if (o.device != "cpu" && o.device.rfind("cuda", 0) != 0)
    option_fail("--device must be cpu or cuda, got '" + o.device + "'");
  if (o.dtype != torch::kFloat32 && o.dtype != torch::kFloat64) trainer_fail("finetune: training dtype must be f32 or f64");
  if (o.precision == TrainPrecision::Bf16 && o.dtype != torch::kFloat32)
    trainer_fail("finetune: bf16 mixed precision keeps f32 masters (the training dtype must be f32)");
}

FinetuneResult finetune(const FinetuneOptions& opt, const FinetuneCallbacks& cb, DataParallel* dp) {
  validate_finetune_options(opt);
  const auto t0 = Clock::now();
  const int rank = dp ? dp->rank() : 0, world = dp ? dp->world_size() : 1;
  torch::Device device(opt.device);
  require_device_available(device);
  const std::string state_dir = finetune_state_dir(opt.out);
  if (!opt.resume && fs::exists(state_dir))
    trainer_fail(state_dir + ": a saved state exists (--resume continues it; remove it to start over)");

  const bool scratch = !opt.config.empty();
  const bool mixed = opt.precision == TrainPrecision::Bf16;
  const torch::Dtype compute = compute_dtype_of(opt);
  nlohmann::json config;
  // `master` holds what the optimizer updates and the output is written from; `student` computes (the same model at
  // precision Full; a bf16 copy at Bf16, whose untrained parameters are the stored ones rounded to bf16 and whose
  // trained ones make_trainable rounds from the masters).
  std::unique_ptr<CausalLM> master, student_copy;
  if (scratch) {
    config = io::read_json_file(opt.config);
    master = fresh_causal_lm(config, opt.config, opt.dtype, device, mix(opt.seed, 0x1A17ULL));
    if (mixed) student_copy = fresh_causal_lm(config, opt.config, compute, device, mix(opt.seed, 0x1A17ULL));
  } else {
    master = load_causal_lm(opt.checkpoint, opt.dtype, device);
    if (mixed) student_copy = load_causal_lm(opt.checkpoint, compute, device);
  }
  CausalLM* student = mixed ? student_copy.get() : master.get();
  const Tokenizer tok = scratch ? tokenizer_beside_config(opt, student->vocab_size())
                                : Tokenizer::for_checkpoint(opt.checkpoint, opt.tokenizer);
  std::unique_ptr<CausalLM> teacher;
  if (!opt.no_kd) {
    teacher = load_causal_lm(opt.teacher, compute, device);
    if (teacher->vocab_size() != student->vocab_size())
      trainer_fail(opt.teacher + ": teacher vocab " + std::to_string(teacher->vocab_size()) + " differs from the student's " +
           std::to_string(student->vocab_size()));
    for (auto& [n, t] : teacher->named_parameters()) t.requires_grad_(false);
  }
  const TokenStream data = concat_streams(opt.text, tok, student->vocab_size());
  if (static_cast<int64_t>(data.ids.size()) < opt.seq_len)
    trainer_fail(data.source + ": " + std::to_string(data.ids.size()) + " tokens, fewer than --seq-len " +
         std::to_string(opt.seq_len));
  std::vector<TokenStream> eval_streams;
  for (const auto& f : opt.eval_text) eval_streams.push_back(read_tokens(f, tok, student->vocab_size()));
  // A micro-batch holds at least its fp32 logits and their gradient (and the teacher's logits): a --batch far past the
  // memory is refused here in one line; the kernel's OOM killer ended the process without a word (audit 22b D10).
  if (device.is_cpu()) {
    const int64_t avail = available_memory_bytes();
    const double need = static_cast<double>(opt.batch) * static_cast<double>(opt.seq_len) *
                        static_cast<double>(student->vocab_size()) * 4.0 * (teacher ? 3.0 : 2.0);
    if (avail > 0 && need > static_cast<double>(avail)) {
      char msg[256];
      std::snprintf(msg, sizeof msg,
                    "--batch %lld x --seq-len %lld: a micro-batch's fp32 logits and their gradient%s alone take %.1f GB, "
                    "more than the %.1f GB available; lower --batch (--accum keeps the step's size)",
                    static_cast<long long>(opt.batch), static_cast<long long>(opt.seq_len),
                    teacher ? " (and the teacher's)" : "", need / 1e9, static_cast<double>(avail) / 1e9);
      trainer_fail(msg);
    }
  }

  Trainable tr = make_trainable(*student, *master, opt);
  AdamW adam(tr.params, AdamWConfig{opt.lr, 0.9, 0.95, 1e-15, opt.weight_decay});
  SavedState st;
  const nlohmann::json recipe = recipe_json(opt, world);  // once: it reads and hashes the inputs
  if (opt.resume) {
    st = load_state(state_dir, tr, adam, recipe);
    tr.push_masters();
    if (cb.on_note) cb.on_note("resumed from " + state_dir + " at step " + std::to_string(st.step));
  }
  const auto params = tr.tensors();
  int64_t trainable_model = 0;
  for (const auto& [n, t] : tr.trained) trainable_model += t.numel();

  const int64_t tokens_per_step = static_cast<int64_t>(world) * opt.batch * opt.seq_len * opt.accum;
  FinetuneResult result;
  result.state_dir = state_dir;
  const double seconds_before = st.seconds;
  bool stopped = false;
  for (int64_t s = st.step; s < opt.steps; ++s) {
    RECORD_FUNCTION("statecut_train_step", std::vector<c10::IValue>());  // a range for tools/profile_step.cpp --train
    const double lr = cosine_lr(opt.lr, s, opt.steps, opt.warmup, opt.min_lr_ratio);
    if (tr.lora) tr.lora->materialise();
    double loss = 0, ce = 0, kd = 0;
    for (int64_t m = 0; m < opt.accum; ++m) {
      const Windows w = sample_windows(data, world * opt.batch, opt.seq_len, mix(opt.seed, s * opt.accum + m));
      const torch::Tensor ids = w.ids.narrow(0, rank * opt.batch, opt.batch).to(device);
      torch::Tensor tlogits;
      if (teacher) {
        torch::NoGradGuard no_grad;
        tlogits = teacher->forward(ids).logits;
      }
      const auto logits = student->forward(ids).logits;
      const LossParts parts = recovery_loss(logits, tlogits, ids, opt.kd_temp, opt.no_kd ? 0.0 : opt.kd_weight);
      (parts.total / static_cast<double>(opt.accum)).backward();
      if (mixed) tr.collect_gradients();
      loss += parts.total.item<double>() / static_cast<double>(opt.accum);
      ce += parts.ce.item<double>() / static_cast<double>(opt.accum);
      if (parts.kd.defined()) kd += parts.kd.item<double>() / static_cast<double>(opt.accum);
    }
    if (!mixed) tr.collect_gradients();
    bool interrupt = cb.interrupt && cb.interrupt->load();
    if (dp && world > 1) {
      const auto red = all_reduce_mean(*dp, params, {loss, ce, kd, interrupt ? 1.0 : 0.0});
      loss = red[0], ce = red[1], kd = red[2], interrupt = red[3] > 0;
    }
    const double norm = clip_grad_norm(params, opt.max_grad_norm);
    if (std::isfinite(norm)) {
      adam.step(lr);
    } else {
      ++st.skipped;  // flame's skip_nan_inf: this step changes nothing
    }
    for (const auto& p : params) p.mutable_grad() = torch::Tensor();
    tr.push_masters();

    StepRecord rec;
    rec.step = s + 1, rec.lr = lr, rec.loss = loss, rec.ce = ce, rec.kd = opt.no_kd ? 0.0 : kd, rec.grad_norm = norm;
    rec.tokens = (s + 1) * tokens_per_step;
    rec.seconds = seconds_before + trainer_seconds_since(t0);
    const bool last = s + 1 == opt.steps;
    if (!eval_streams.empty() && rank == 0 && ((opt.eval_every > 0 && (s + 1) % opt.eval_every == 0) || last)) {
      if (tr.lora) tr.lora->materialise();
      rec.eval_bpb = mean_eval_bpb(*student, eval_streams, tok, opt.eval_tokens, opt.seq_len, nullptr);
    }
    st.history.push_back(rec);
    st.step = s + 1;
    st.seconds = rec.seconds;
    if (cb.on_step) cb.on_step(rec, opt.steps);
    const bool stop = !last && (interrupt || (opt.stop_after > 0 && s + 1 >= opt.stop_after));
    if (!last && (stop || (opt.save_every > 0 && (s + 1) % opt.save_every == 0))) {
      if (rank == 0) save_state(state_dir, tr, adam, recipe, st);
      if (dp) dp->barrier();
      if (cb.on_note) cb.on_note("saved state at step " + std::to_string(s + 1) + " to " + state_dir);
    }
    if (stop) {
      stopped = true;
      break;
    }
  }
  result.history = st.history;
  if (stopped) return result;

  if (tr.lora) {
    tr.lora->materialise();
    tr.lora->merge_into_masters();
  }
  const StepRecord& final_rec = st.history.back();
  nlohmann::json eval = nlohmann::json::object();
  // Paths absolute, as prune's record holds them: verify and a later run find them from any working directory.
  const auto absolute = [](const std::string& p) { return fs::absolute(p).lexically_normal().string(); };
  std::vector<std::string> texts;
  for (const auto& t : opt.text) texts.push_back(absolute(t));
  nlohmann::json rec = {
      {"source", absolute(scratch ? opt.config : opt.checkpoint)},
      {"teacher", opt.no_kd ? nlohmann::json() : nlohmann::json(absolute(opt.teacher))},
      {"text", texts},
      {"recipe",
       {{"mode", scratch ? "scratch" : opt.full ? "full" : "lora"},
        {"lora_rank", opt.full ? 0 : opt.lora_rank},
        {"lora_alpha", opt.full ? 0.0 : opt.lora_alpha},
        {"lora_targets", "q, k, v row blocks of every linear-attention layer"},
        {"trained_fully", opt.full ? "every parameter" : "names containing conv1d, norm or bias"},
        {"loss", opt.no_kd ? "CE" : "CE + kd_weight * T^2 * KL(teacher || student)"},
        {"kd_temp", opt.kd_temp},
        {"kd_weight", opt.no_kd ? 0.0 : opt.kd_weight},
        {"optimizer", "AdamW"},
        {"lr", opt.lr},
        {"betas", {0.9, 0.95}},
        {"eps", 1e-15},
        {"weight_decay", opt.weight_decay},
        {"schedule", "warmup + cosine"},
        {"warmup", opt.warmup},
        {"min_lr_ratio", opt.min_lr_ratio},
        {"max_grad_norm", opt.max_grad_norm},
        {"seq_len", opt.seq_len},
        {"batch", opt.batch},
        {"accum", opt.accum},
        {"world_size", world},
        {"seed", opt.seed},
        {"dtype", dtype_label(opt.dtype)},
        {"precision", precision_label(opt)}}},
      {"steps", opt.steps},
      {"skipped_steps", st.skipped},
      {"tokens", final_rec.tokens},
      {"final", {{"loss", final_rec.loss}, {"ce", final_rec.ce}, {"kd", final_rec.kd}}},
      {"lora_parameters", tr.lora ? tr.lora->num_parameters() : 0},
      {"trained_parameters", trainable_model},
      {"device", opt.device},
      {"seconds", final_rec.seconds}};
  if (!eval_streams.empty() && rank == 0) {
    mean_eval_bpb(*student, eval_streams, tok, opt.eval_tokens, opt.seq_len, &eval);
    rec["eval"] = {{"bits_per_byte", eval}, {"tokens", opt.eval_tokens}, {"window", opt.seq_len}};
  }
  result.record = rec;
  result.completed = true;
  if (rank == 0) {
    std::map<std::string, torch::Tensor> changed;
    for (auto& [n, t] : master->named_parameters()) {
      if (scratch || tr.changed.count(n)) {
        // A diverged run (too high an --lr) leaves NaN/Inf weights that every command would then refuse to load: it
        // is an error here, with no output, not a checkpoint reported as written.
        if (!torch::isfinite(t.detach()).all().item<bool>())
          trainer_fail(opt.out + ": training diverged: " + n + " holds NaN or Inf after " + std::to_string(opt.steps) +
                       " steps (final loss " + std::to_string(final_rec.loss) + "); nothing written (lower --lr)");
        if (!scratch) changed.emplace(n, t.detach());
      }
    }
    AtomicDir out(opt.out);
    nlohmann::json record;
    if (scratch) {
      write_fresh_checkpoint(*master, config, opt.config, out.path());
      record["train"] = rec;
    } else {
      write_updated_checkpoint(opt.checkpoint, changed, out.path());
      record = read_record(opt.checkpoint);
      if (record.contains("finetune")) record["finetune_previous"].push_back(record["finetune"]);
      // What the fine-tune changed, by name: verify --source holds every other tensor to the source bit for bit.
      nlohmann::json names = nlohmann::json::array();
      for (const auto& [n, t] : changed) names.push_back(n);
      record["finetune"] = rec;
      record["finetune"]["changed_tensors"] = names;
    }
    write_text_atomically((fs::path(out.path()) / "statecut.json").string(), compact_record_text(record));
    write_text_atomically((fs::path(out.path()) / "loss.csv").string(), loss_csv(st.history));
    write_text_atomically((fs::path(out.path()) / "loss.svg").string(),
                          loss_svg(st.history, std::string(scratch ? "statecut train: " : "statecut finetune: ") +
                                                   fs::path(opt.out).filename().string()));
    out.commit();
    remove_tree(state_dir);
  }
  if (dp) dp->barrier();
  return result;
}

}  // namespace statecut

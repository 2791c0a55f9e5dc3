// LoRA adapters materialised into the model's parameters; math and the per-family row blocks in lora.h.
#include "optimized/train/lora.h"

#include <cmath>
#include <map>
#include <random>
#include <stdexcept>

namespace statecut {
namespace {

[[noreturn]] void lora_fail(const std::string& msg) { throw std::runtime_error("finetune: " + msg); }

RowBlock block(const std::string& weight, const char* role, int layer, int64_t offset, int64_t stride, int64_t heads,
               int64_t rows_per_head) {
  RowBlock b;
  b.weight = weight, b.role = role, b.layer = layer;
  b.offset = offset, b.stride = stride > 0 ? stride : rows_per_head, b.heads = heads, b.rows_per_head = rows_per_head;
  return b;
}

/// The q and k blocks exactly as PrunableLayer states them (heads × dk rows at offset + h·stride).
void add_qk(std::vector<RowBlock>& out, const PrunableLayer& L) {
  const int64_t H = L.num_key_heads, dk = L.head_k_dim;
  out.push_back(block(L.q_weight, "q", L.layer, L.q_row_offset, head_row_stride(L.q_row_stride, L.head_k_dim), H, dk));
  out.push_back(block(L.k_weight, "k", L.layer, L.k_row_offset, head_row_stride(L.k_row_stride, L.head_k_dim), H, dk));
}

}  // namespace

torch::Tensor RowBlock::index(torch::Device device) const {
  auto opt = torch::TensorOptions().dtype(torch::kInt64).device(device);
  auto c = torch::arange(rows_per_head, opt);
  return (c.unsqueeze(0) + torch::arange(heads, opt).unsqueeze(1) * stride + offset).reshape({-1});
}

std::vector<RowBlock> lora_blocks(const std::string& model_type, const std::vector<PrunableLayer>& layers,
                                  const std::function<std::vector<int64_t>(const std::string&)>& shape_of) {
  std::vector<RowBlock> out;
  for (const auto& L : layers) {
    const int64_t H = L.num_key_heads, dk = L.head_k_dim;
    add_qk(out, L);
    if (model_type == "delta_net" || model_type == "gated_deltanet") {
      const auto at = L.q_weight.rfind("q_proj");
      if (at == std::string::npos) lora_fail("layer " + std::to_string(L.layer) + ": '" + L.q_weight + "' is not a q_proj");
      const std::string v = L.q_weight.substr(0, at) + "v_proj" + L.q_weight.substr(at + 6);
      out.push_back(block(v, "v", L.layer, 0, 0, 1, shape_of(v).at(0)));
    } else if (model_type == "qwen3_5_text" || model_type == "qwen3_5") {  // [q | k | v]
      const int64_t begin = L.k_row_offset + H * dk;
      out.push_back(block(L.q_weight, "v", L.layer, begin, 0, 1, shape_of(L.q_weight).at(0) - begin));
    } else if (model_type == "qwen3_next") {  // per key head [q dk | k dk | v r·dv | z r·dv]
      const int64_t group = head_row_stride(L.q_row_stride, L.head_k_dim);
      if ((group - 2 * dk) % 2 != 0) lora_fail("layer " + std::to_string(L.layer) + ": odd v|z group in " + L.q_weight);
      out.push_back(block(L.q_weight, "v", L.layer, L.k_row_offset + dk, group, H, (group - 2 * dk) / 2));
    } else if (model_type == "mamba2") {  // [z I | x I | B | C | dt]: x is the value, I = the B block's offset / 2
      const int64_t inner = L.k_row_offset / 2;
      out.push_back(block(L.q_weight, "v", L.layer, inner, 0, 1, inner));
    } else {
      lora_fail("no LoRA target rule for model_type '" + model_type + "' (lora.h lists the families)");
    }
  }
  for (const auto& b : out) {
    const auto shape = shape_of(b.weight);
    const int64_t last = b.offset + (b.heads - 1) * b.stride + b.rows_per_head;
    if (shape.size() != 2 || b.rows_per_head <= 0 || b.offset < 0 || last > shape[0])
      lora_fail("layer " + std::to_string(b.layer) + ": " + b.role + " rows up to " + std::to_string(last) +
           " do not fit '" + b.weight + "'");
  }
  return out;
}

Lora::Lora(CausalLM& model, CausalLM& master, std::vector<RowBlock> blocks, const LoraConfig& cfg, uint64_t seed)
    : cfg_(cfg) {
  if (cfg.rank <= 0) lora_fail("--lora-rank must be positive");
  std::map<std::string, torch::Tensor> params, masters;
  for (auto& [n, t] : model.named_parameters()) params.emplace(n, t);
  for (auto& [n, t] : master.named_parameters()) masters.emplace(n, t);
  std::mt19937_64 rng(seed);
  torch::NoGradGuard no_grad;
  for (auto& b : blocks) {
    auto it = params.find(b.weight);
    auto mt = masters.find(b.weight);
    if (it == params.end() || mt == masters.end()) lora_fail("the model has no parameter '" + b.weight + "'");
    LoraAdapter a;
    a.param = it->second;
    a.master = mt->second;
    a.block = b;
    if (!b.contiguous()) a.index = b.index(a.param.device());
    a.w0 = (a.index.defined() ? a.master.index_select(0, a.index) : a.master.narrow(0, b.offset, b.rows())).clone();
    const int64_t in = a.param.size(1);
    // PEFT: kaiming_uniform_(A, a=√5) = U(−1/√in, 1/√in); drawn in double from our own engine, then cast.
    std::vector<double> u(static_cast<size_t>(cfg.rank * in));
    const double bound = 1.0 / std::sqrt(static_cast<double>(in));
    for (auto& x : u) x = (static_cast<double>(rng() >> 11) * 0x1.0p-53 * 2.0 - 1.0) * bound;
    a.A = torch::from_blob(u.data(), {cfg.rank, in}, torch::kFloat64).to(a.master.options().requires_grad(false)).clone();
    a.B = torch::zeros({b.rows(), cfg.rank}, a.master.options().requires_grad(false));
    a.param.requires_grad_(true);
    adapters_.push_back(std::move(a));
  }
}

namespace {

/// W0 + s·B·A into the adapter's rows of `dst` (cast to its dtype).
void write_rows(const LoraAdapter& a, double s, torch::Tensor& dst) {
  auto w = a.w0 + torch::matmul(a.B, a.A) * s;
  if (a.index.defined()) {
    dst.index_copy_(0, a.index, w.to(dst.scalar_type()));
  } else {
    dst.narrow(0, a.block.offset, a.block.rows()).copy_(w);
  }
}

}  // namespace

void Lora::materialise() {
  torch::NoGradGuard no_grad;
  for (auto& a : adapters_) write_rows(a, cfg_.scale(), a.param);
}

void Lora::merge_into_masters() {
  torch::NoGradGuard no_grad;
  for (auto& a : adapters_)
    if (!a.master.is_same(a.param)) write_rows(a, cfg_.scale(), a.master);
}

void Lora::backprop() {
  torch::NoGradGuard no_grad;
  const double s = cfg_.scale();
  for (auto& a : adapters_) {
    const torch::Tensor G = a.param.grad();
    if (!G.defined()) {
      if (!a.A.grad().defined()) a.A.mutable_grad() = torch::zeros_like(a.A);
      if (!a.B.grad().defined()) a.B.mutable_grad() = torch::zeros_like(a.B);
      continue;
    }
    const auto g = (a.index.defined() ? G.index_select(0, a.index) : G.narrow(0, a.block.offset, a.block.rows()))
                       .to(a.A.scalar_type());
    auto gB = torch::matmul(g, a.A.t()) * s;
    auto gA = torch::matmul(a.B.t(), g) * s;
    a.B.mutable_grad() = a.B.grad().defined() ? a.B.grad() + gB : gB;
    a.A.mutable_grad() = a.A.grad().defined() ? a.A.grad() + gA : gA;
  }
  for (auto& a : adapters_) a.param.mutable_grad() = torch::Tensor();
}

std::vector<std::pair<std::string, torch::Tensor>> Lora::tensors() {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (auto& a : adapters_) {
    const std::string base = a.block.weight + ".lora_" + a.block.role;
    out.emplace_back(base + ".A", a.A);
    out.emplace_back(base + ".B", a.B);
  }
  return out;
}

int64_t Lora::num_parameters() const {
  int64_t n = 0;
  for (const auto& a : adapters_) n += a.A.numel() + a.B.numel();
  return n;
}

bool recipe_trains_fully(const std::string& n) {
  return n.find("conv1d") != std::string::npos || n.find("norm") != std::string::npos ||
         n.find("bias") != std::string::npos;
}

}  // namespace statecut

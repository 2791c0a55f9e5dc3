// Shared model building blocks (see layers_common.h for the math).
#include "optimized/models/layers_common.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "optimized/io/safetensors.h"
#include "optimized/models/conv1d_autograd.h"
#include "optimized/models/fused_ops.h"
#include "optimized/models/weight_source.h"

#ifdef STATECUT_WITH_CUDA_KERNELS
#include "kernels/binding/fused_layer_ops_torch.h"
#include "kernels/binding/skinny_gemm_torch.h"
#endif

namespace statecut {

bool env_switch_on(const char* name) {
  const char* e = std::getenv(name);
  return e == nullptr || std::strcmp(e, "0") != 0;
}

bool fused_ops_usable(std::initializer_list<torch::Tensor> ts) {
#ifdef STATECUT_WITH_CUDA_KERNELS
  static const bool enabled = env_switch_on("STATECUT_FUSED");
  return enabled && cuda::fused_layer_ops_apply(ts);
#else
  (void)ts;
  return false;
#endif
}

bool fused_ops_apply(std::initializer_list<torch::Tensor> ts) { return !needs_autograd(ts) && fused_ops_usable(ts); }

bool needs_autograd(std::initializer_list<torch::Tensor> ts) {
  if (!torch::GradMode::is_enabled()) return false;
  for (const auto& t : ts)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

torch::Dtype compute_dtype(torch::Dtype d) { return d == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32; }

namespace {

/// rms_norm (w_offset 0) and rms_norm_zero_centered (w_offset 1): x · rsqrt(mean(x²) + eps) · (w_offset + w), the
/// offset added in the compute dtype only when it is not 0 (fla's and Mamba-2's norms keep their exact operations).
torch::Tensor offset_rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps, double w_offset) {
#ifdef STATECUT_WITH_CUDA_KERNELS
  if (fused_ops_apply({x, weight})) return cuda::fused_rms_norm(x, weight, eps, w_offset);
#endif
  const auto cd = compute_dtype(x.scalar_type());
  auto xf = x.to(cd);
  auto w = weight.to(cd);
  if (w_offset != 0.0) w = w_offset + w;
  return (xf * torch::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps) * w).to(x.scalar_type());
}

std::pair<torch::Tensor, torch::Tensor> offset_add_rms_norm(const torch::Tensor& x, const torch::Tensor& d,
                                                            const torch::Tensor& weight, double eps, double w_offset) {
  if (!d.defined()) return {x, offset_rms_norm(x, weight, eps, w_offset)};
#ifdef STATECUT_WITH_CUDA_KERNELS
  if (d.sizes() == x.sizes() && fused_ops_apply({x, d, weight}))
    return cuda::fused_add_rms_norm(x, d, weight, eps, w_offset);
#endif
  auto s = x + d;
  return {s, offset_rms_norm(s, weight, eps, w_offset)};
}

}  // namespace

torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  return offset_rms_norm(x, weight, eps, 0.0);
}

std::pair<torch::Tensor, torch::Tensor> add_rms_norm(const torch::Tensor& x, const torch::Tensor& d,
                                                     const torch::Tensor& weight, double eps) {
  return offset_add_rms_norm(x, d, weight, eps, 0.0);
}

torch::Tensor rms_norm_zero_centered(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  return offset_rms_norm(x, weight, eps, 1.0);
}

std::pair<torch::Tensor, torch::Tensor> add_rms_norm_zero_centered(const torch::Tensor& x, const torch::Tensor& d,
                                                                   const torch::Tensor& weight, double eps) {
  return offset_add_rms_norm(x, d, weight, eps, 1.0);
}

#ifdef STATECUT_WITH_CUDA_KERNELS
namespace {

/// Whether gemv_norm serves add_rms_norm then the GEMV of w (the fused ops' conditions and the binding's).
bool norm_gemv_applies(const torch::Tensor& x, const torch::Tensor& d, const torch::Tensor& weight,
                       const torch::Tensor& w) {
  return x.is_cuda() && cuda::fused_norm_gemv_pays(x, d, weight, w) && fused_ops_apply({x, d, weight, w});
}

}  // namespace
#endif

std::pair<torch::Tensor, torch::Tensor> add_rms_norm_linear(const torch::Tensor& x, const torch::Tensor& d,
                                                            const torch::Tensor& weight, double eps,
                                                            const torch::Tensor& w, bool zero_centered) {
  const double off = zero_centered ? 1.0 : 0.0;
#ifdef STATECUT_WITH_CUDA_KERNELS
  if (norm_gemv_applies(x, d, weight, w)) return cuda::fused_add_rms_norm_gemv(x, d, weight, eps, off, w, false);
#endif
  auto [s, y] = offset_add_rms_norm(x, d, weight, eps, off);
  return {s, statecut::linear(y, w)};
}

std::optional<std::pair<torch::Tensor, torch::Tensor>> add_rms_norm_linear_conv(
    const torch::Tensor& x, const torch::Tensor& d, const torch::Tensor& weight, double eps, const torch::Tensor& w,
    const torch::Tensor& conv_w, const torch::Tensor& conv_b, bool silu, torch::Tensor& conv, bool zero_centered) {
#ifdef STATECUT_WITH_CUDA_KERNELS
  if (!norm_gemv_applies(x, d, weight, w) || conv_w.dim() != 3) return std::nullopt;
  const auto window = conv.defined() ? conv : torch::zeros({1, conv_w.size(2) - 1, conv_w.size(0)}, x.options());
  if (!cuda::fused_norm_gemv_conv_pays(x, d, weight, w, conv_w, conv_b, window)) return std::nullopt;
  conv = window;
  return cuda::fused_add_rms_norm_gemv_conv(x, d, weight, eps, zero_centered ? 1.0 : 0.0, w, conv_w, conv_b, silu,
                                            conv);
#else
  (void)x, (void)d, (void)weight, (void)eps, (void)w, (void)conv_w, (void)conv_b, (void)silu, (void)conv;
  (void)zero_centered;
  return std::nullopt;
#endif
}

std::pair<torch::Tensor, torch::Tensor> add_rms_norm_gated_mlp(const torch::Tensor& x, const torch::Tensor& d,
                                                               const torch::Tensor& weight, double eps,
                                                               const torch::Tensor& gate_up,
                                                               const torch::Tensor& down_w, bool zero_centered) {
  const double off = zero_centered ? 1.0 : 0.0;
#ifdef STATECUT_WITH_CUDA_KERNELS
  if (gate_up.size(0) == 2 * down_w.size(1) && norm_gemv_applies(x, d, weight, gate_up)) {
    auto [s, m] = cuda::fused_add_rms_norm_gemv(x, d, weight, eps, off, gate_up, true);
    return {s, statecut::linear(m, down_w)};
  }
#endif
  auto [s, y] = offset_add_rms_norm(x, d, weight, eps, off);
  return {s, gated_mlp_packed(y, gate_up, down_w)};
}

torch::Tensor qwen_gated_rms_norm(const torch::Tensor& x, const torch::Tensor& gate, const torch::Tensor& weight,
                                  double eps) {
#ifdef STATECUT_WITH_CUDA_KERNELS
  if (gate.sizes() == x.sizes() && fused_ops_apply({x, gate, weight}))
    return cuda::fused_gated_rms_norm(x, gate, weight, eps, /*qwen_gate=*/true);
#endif
  const auto ct = compute_dtype(x.scalar_type());
  auto xf = x.to(ct);
  auto n = (xf * torch::rsqrt(xf.pow(2).mean(-1, true) + eps)).to(x.scalar_type());
  return ((weight * n) * torch::silu(gate.to(ct))).to(x.scalar_type());
}

torch::Tensor gated_rms_norm(const torch::Tensor& x, const torch::Tensor& gate, const torch::Tensor& weight,
                             double eps) {
#ifdef STATECUT_WITH_CUDA_KERNELS
  if (gate.sizes() == x.sizes() && fused_ops_apply({x, gate, weight}))
    return cuda::fused_gated_rms_norm(x, gate, weight, eps);
#endif
  const auto cd = compute_dtype(x.scalar_type());
  auto xf = x.to(cd);
  auto z = gate.to(cd);
  auto y = xf * torch::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps) * weight.to(cd);
  return (y * z * torch::sigmoid(z)).to(x.scalar_type());
}

torch::Tensor l2_normalize(const torch::Tensor& x, double eps) {
  auto xf = x.to(compute_dtype(x.scalar_type()));
  return xf * torch::rsqrt(xf.pow(2).sum(-1, /*keepdim=*/true) + eps);
}

torch::Tensor causal_conv1d(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias, bool silu) {
  TORCH_CHECK(x.dim() == 3 && weight.dim() == 3 && weight.size(1) == 1 && weight.size(0) == x.size(2),
              "causal_conv1d: x [B,T,C] and weight [C,1,W] expected");
#ifdef STATECUT_WITH_CUDA_KERNELS
  // Under autograd (training): the same forward kernel and conv1d_backward's kernels for the gradients
  // (conv1d_autograd.h).
  if (weight.size(2) <= cuda::kFusedConvMaxWidth && fused_ops_usable({x, weight, bias}))
    return needs_autograd({x, weight, bias}) ? fused_causal_conv1d(x, weight, bias, silu)
                                             : cuda::fused_conv1d(x, weight, bias, silu, torch::Tensor(), nullptr);
#endif
  return causal_conv1d_libtorch(x, weight, bias, silu);
}

torch::Tensor causal_conv1d_libtorch(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                                     bool silu) {
  TORCH_CHECK(x.dim() == 3 && weight.dim() == 3 && weight.size(1) == 1 && weight.size(0) == x.size(2),
              "causal_conv1d: x [B,T,C] and weight [C,1,W] expected");
  const auto cd = compute_dtype(x.scalar_type());
  const int64_t T = x.size(1), C = x.size(2), W = weight.size(2);
  auto xt = x.to(cd).transpose(1, 2);  // [B,C,T]
  torch::Tensor b = bias.defined() ? bias.to(cd) : torch::Tensor();
  auto y = torch::conv1d(xt, weight.to(cd), b, /*stride=*/1, /*padding=*/W - 1, /*dilation=*/1, /*groups=*/C);
  y = y.narrow(2, 0, T).transpose(1, 2);
  if (silu) y = torch::silu(y);
  return y.to(x.scalar_type()).contiguous();
}

torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& w) {
#ifdef STATECUT_WITH_CUDA_KERNELS
  // A decode step at batch 1: the small-batch GEMV instead of cuBLAS (fused_layer_ops.h, fused_gemv_pays); at 2-64
  // rows (a batched step) the weight-streaming GEMM (skinny_gemm_torch.h, skinny_gemm_pays).
  if (x.is_cuda() && cuda::fused_gemv_pays(x, w) && fused_ops_apply({x, w})) return cuda::fused_gemv(x, w);
  if (x.is_cuda() && cuda::skinny_gemm_pays(x, w) && fused_ops_apply({x, w})) return cuda::skinny_gemm(x, w);
#endif
  return torch::matmul(x, w.t());
}

torch::Tensor gated_mlp(const torch::Tensor& x, const torch::Tensor& gate_w, const torch::Tensor& up_w,
                        const torch::Tensor& down_w) {
  return statecut::linear(silu_mul(statecut::linear(x, gate_w), statecut::linear(x, up_w)), down_w);
}

torch::Tensor gated_mlp_packed(const torch::Tensor& x, const torch::Tensor& gate_up, const torch::Tensor& down_w) {
  const int64_t I = down_w.size(1);
#ifdef STATECUT_WITH_CUDA_KERNELS
  // A decode step at batch 1: the gate|up GEMV and silu·mul in one launch, bit-identical to the two (bench/README.md,
  // 24th wave: a 1.3B step 3% faster).
  if (x.is_cuda() && gate_up.size(0) == 2 * I && cuda::fused_gemv_pays(x, gate_up) && fused_ops_apply({x, gate_up}))
    return statecut::linear(cuda::fused_gemv_silu_mul(x, gate_up), down_w);
  // A batched step (2-64 rows): gate|up and silu·mul in one launch of the skinny GEMM, bit-identical to the GEMM then
  // silu_mul (skinny_gemm_torch.h; bench/README.md, 44th wave: a 1.3B step at batch 8 and 64 1-3% faster).
  if (x.is_cuda() && gate_up.size(0) == 2 * I && cuda::skinny_silu_mul_pays(x, gate_up) &&
      fused_ops_apply({x, gate_up}))
    return statecut::linear(cuda::skinny_gemm_silu_mul(x, gate_up), down_w);
#endif
  const auto y = statecut::linear(x, gate_up);
  return statecut::linear(silu_mul(y.narrow(-1, 0, I), y.narrow(-1, I, I)), down_w);
}

bool use_packed(const torch::Tensor& pack) { return pack.defined() && !torch::GradMode::is_enabled(); }

torch::Tensor pack_rows(std::initializer_list<torch::Tensor*> parts, bool pad,
                        std::vector<std::pair<std::string, torch::Tensor>>& params) {
  std::vector<torch::Tensor> ts;
  int64_t rows = 0;
  for (auto* t : parts)
    if (t->defined()) ts.push_back(*t), rows += t->size(0);
  TORCH_CHECK(!ts.empty(), "pack_rows: nothing to pack");
  if (pad && rows % 8) {
    auto shape = ts.front().sizes().vec();
    shape[0] = 8 - rows % 8;
    ts.push_back(torch::zeros(shape, ts.front().options()));
  }
  auto packed = torch::cat(ts, 0);
  int64_t off = 0;
  for (auto* t : parts) {
    if (!t->defined()) continue;
    auto view = packed.narrow(0, off, t->size(0));
    off += t->size(0);
    for (auto& [name, p] : params)
      if (p.is_same(*t)) p = view;
    *t = view;
  }
  return packed;
}

torch::Tensor silu_mul(const torch::Tensor& gate, const torch::Tensor& up) {
#ifdef STATECUT_WITH_CUDA_KERNELS
  if (gate.sizes() == up.sizes() && fused_ops_apply({gate, up})) return cuda::fused_silu_mul(gate, up);
#endif
  return torch::silu(gate) * up;
}

torch::Tensor embed_tokens(const torch::Tensor& input_ids, const torch::Tensor& embeddings) {
  TORCH_CHECK(input_ids.dim() == 2, "input_ids must be [B,T], got ", input_ids.sizes());
  const int64_t vocab = embeddings.size(0);
  auto ids = input_ids.to(embeddings.device(), torch::kInt64);
  if (ids.numel() > 0) {
    const int64_t lo = ids.min().item<int64_t>(), hi = ids.max().item<int64_t>();
    TORCH_CHECK(lo >= 0 && hi < vocab, "token id ", (lo < 0 ? lo : hi), " outside [0, ", vocab, ")");
  }
  return embeddings.index_select(0, ids.reshape({-1})).reshape({ids.size(0), ids.size(1), embeddings.size(1)});
}

namespace {
const nlohmann::json* config_field(const nlohmann::json& c, const std::string& key) {
  auto it = c.find(key);
  if (it == c.end() || it->is_null()) return nullptr;
  return &*it;
}
[[noreturn]] void bad(const std::string& origin, const std::string& key, const std::string& problem) {
  config_error(origin, "'" + key + "': " + problem);
}
}  // namespace

void config_error(const std::string& origin, const std::string& what) { throw io::Error(origin + ": " + what); }

double factor_truncating_to(int64_t target, int64_t base, const std::string& name, const std::string& origin) {
  const auto truncated = [&](double e) { return static_cast<int64_t>(static_cast<double>(base) * e); };
  double e = static_cast<double>(target) / static_cast<double>(base);
  for (int step = 0; step < 8 && truncated(e) < target; ++step) e = std::nextafter(e, 1e300);
  if (truncated(e) != target) config_error(origin, name + " cannot express " + std::to_string(target));
  return e;
}

torch::Tensor tied_output_head(const WeightSource& w, const torch::Tensor& embeddings,
                               const std::string& embeddings_name) {
  const std::string head = "lm_head.weight";
  const auto names = w.names();  // empty for a generated source
  if (!std::binary_search(names.begin(), names.end(), head)) return embeddings;
  // As stored (raw: a checks_only source hands out uninitialised tensors from get()), compared exactly.
  const torch::Tensor h = w.raw(head), e = w.raw(embeddings_name);
  const auto wide = torch::promote_types(h.scalar_type(), e.scalar_type());  // exact: only the narrower one converts
  const bool same = h.sizes() == e.sizes() && torch::equal(h.to(wide), e.to(wide));
  if (!same)
    throw io::Error(w.origin(head) + ": lm_head.weight differs from the embeddings (" + embeddings_name +
                    ") while config.json ties them (tie_word_embeddings true): which is the output head is ambiguous "
                    "(set tie_word_embeddings false to use the stored head, or drop the tensor)");
  return embeddings;
}

int64_t cfg_int(const nlohmann::json& c, const std::string& key, const std::string& origin) {
  const auto* f = config_field(c, key);
  if (!f) bad(origin, key, "missing required field");
  // nlohmann reads 2^63 .. 2^64-1 as unsigned, and get<int64_t> wraps them to negatives ("must be positive" for
  // a size of 2^63, or a layer count of 2^64-1 read as -1 layers): they are out of range, named so
  if (f->is_number_unsigned() && f->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    bad(origin, key, "expected an integer, got " + f->dump() + ", past the largest 64-bit integer");
  if (f->is_number_integer()) return f->get<int64_t>();
  bad(origin, key, "expected an integer, got " + f->dump());
}

int64_t cfg_int(const nlohmann::json& c, const std::string& key, int64_t dflt, const std::string& origin) {
  return config_field(c, key) ? cfg_int(c, key, origin) : dflt;
}

int64_t cfg_integral(const nlohmann::json& c, const std::string& key, int64_t dflt, const std::string& origin) {
  const auto* f = config_field(c, key);
  if (!f) return dflt;
  if (f->is_number_float()) {
    const double d = f->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15) return static_cast<int64_t>(d);
  }
  return cfg_int(c, key, origin);
}

int64_t cfg_layer_count(const nlohmann::json& c, const std::string& origin) {
  const int64_t n = cfg_int(c, "num_hidden_layers", origin);
  if (n > kMaxLayers)
    config_error(origin, "num_hidden_layers " + std::to_string(n) + " is more than any model has (" +
                             std::to_string(kMaxLayers) + " at most)");
  return n;
}

double cfg_double(const nlohmann::json& c, const std::string& key, double dflt, const std::string& origin) {
  const auto* f = config_field(c, key);
  if (!f) return dflt;
  if (!f->is_number()) bad(origin, key, "expected a number, got " + f->dump());
  return f->get<double>();
}

double cfg_norm_eps(const nlohmann::json& c, const std::string& key, double dflt, const std::string& origin) {
  const double e = cfg_double(c, key, dflt, origin);
  if (!(std::isfinite(e) && e >= 0)) bad(origin, key, "a norm epsilon must be finite and >= 0, got " + std::to_string(e));
  return e;
}

bool cfg_bool(const nlohmann::json& c, const std::string& key, bool dflt, const std::string& origin) {
  const auto* f = config_field(c, key);
  if (!f) return dflt;
  if (!f->is_boolean()) bad(origin, key, "expected true or false, got " + f->dump());
  return f->get<bool>();
}

std::string cfg_string(const nlohmann::json& c, const std::string& key, const std::string& dflt,
                       const std::string& origin) {
  const auto* f = config_field(c, key);
  if (!f) return dflt;
  if (!f->is_string()) bad(origin, key, "expected a string, got " + f->dump());
  return f->get<std::string>();
}

}  // namespace statecut

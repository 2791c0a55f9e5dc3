// The decode cache and the conv step of incremental decoding (decode_cache.h).
#include "optimized/models/decode_cache.h"

#include <algorithm>
#include <limits>
#include <string>

#include "optimized/models/fused_ops.h"
#include "optimized/models/layers_common.h"

#ifdef STATECUT_WITH_CUDA_KERNELS
#include "kernels/binding/fused_layer_ops_torch.h"
#endif

namespace statecut {

namespace {
int64_t tensor_bytes(const torch::Tensor& t) { return t.defined() ? t.numel() * static_cast<int64_t>(t.element_size()) : 0; }
}  // namespace

void DecodeCache::clear() {
  layers.clear();
  position = 0;
  batch = 0;
  kv_capacity = 0;
  device_position = torch::Tensor();
}

int64_t DecodeCache::recurrent_bytes() const {
  int64_t n = 0;
  for (const auto& l : layers) {
    n += tensor_bytes(l.state);
    for (const auto& c : l.conv) n += tensor_bytes(c);
  }
  return n;
}

int64_t DecodeCache::kv_bytes() const {
  int64_t n = 0;
  for (const auto& l : layers)
    for (const auto* t : {&l.key, &l.value})
      if (t->defined() && t->size(2) > 0) n += tensor_bytes(*t) / t->size(2) * std::min(position, t->size(2));
  return n;
}

void end_cached_forward(DecodeCache& cache, int64_t T) {
  cache.position += T;
  if (cache.device_position.defined()) cache.device_position.add_(T);
}

torch::Tensor token_positions(DecodeCache& cache, int64_t T, torch::Device device) {
  if (!cache.device_position.defined() || cache.device_position.device() != device)
    cache.device_position = torch::full({1}, cache.position, torch::TensorOptions().dtype(torch::kInt64).device(device));
  return cache.device_position + torch::arange(T, torch::TensorOptions().dtype(torch::kInt64).device(device));
}

namespace {
/// A buffer of `capacity` positions (dim 2) holding the first `filled` positions of `old` (undefined: none).
torch::Tensor regrow(const torch::Tensor& old, int64_t filled, int64_t capacity, const torch::Tensor& like) {
  auto t = torch::zeros({like.size(0), like.size(1), capacity, like.size(3)}, like.options());
  if (old.defined() && filled > 0) t.narrow(2, 0, filled).copy_(old.narrow(2, 0, filled));
  return t;
}
int64_t round_up_64(int64_t n) { return (n + 63) / 64 * 64; }
}  // namespace

void ensure_kv_buffers(DecodeCache& cache, LayerDecodeState& layer, int64_t needed, int64_t filled,
                       const torch::Tensor& like_kv) {
  TORCH_CHECK(like_kv.dim() == 4, "decode cache: key/value rows must be [B, Hkv, T, hd]");
  const bool fits = layer.key.defined() && layer.key.size(2) >= needed && layer.key.size(0) == like_kv.size(0) &&
                    layer.key.size(1) == like_kv.size(1) && layer.key.size(3) == like_kv.size(3) &&
                    layer.key.scalar_type() == like_kv.scalar_type() && layer.key.device() == like_kv.device();
  if (fits) return;
  const int64_t old = layer.key.defined() ? layer.key.size(2) : 0;
  const int64_t capacity = round_up_64(std::max({needed, cache.kv_capacity, 2 * old}));
  layer.key = regrow(layer.key, std::min(filled, old), capacity, like_kv);
  layer.value = regrow(layer.value, std::min(filled, old), capacity, like_kv);
  cache.kv_capacity = std::max(cache.kv_capacity, capacity);
}

void reserve_kv(DecodeCache& cache, int64_t positions) {
  // Exactly the room asked for (rounded to 64), not the doubling of a growing call: a replayed step's attention reads
  // the whole buffer, so every slot reserved but never filled costs bandwidth on each step.
  const int64_t capacity = round_up_64(positions);
  cache.kv_capacity = std::max(cache.kv_capacity, capacity);
  for (auto& l : cache.layers) {
    if (!l.key.defined() || l.key.size(2) >= positions) continue;
    const int64_t filled = std::min(cache.position, l.key.size(2));
    l.key = regrow(l.key, filled, capacity, l.key);
    l.value = regrow(l.value, filled, capacity, l.value);
  }
}

int64_t kv_room(const DecodeCache& cache) {
  int64_t room = std::numeric_limits<int64_t>::max();
  for (const auto& l : cache.layers)
    if (l.key.defined()) room = std::min(room, l.key.size(2));
  return room;
}

void assign_state(torch::Tensor& dst, const torch::Tensor& src) {
  if (dst.defined() && dst.sizes() == src.sizes() && dst.scalar_type() == src.scalar_type() &&
      dst.device() == src.device() && dst.is_contiguous()) {
    dst.copy_(src);
  } else {
    dst = src.contiguous();
  }
}

LayerDecodeState& layer_state(DecodeCache& cache, size_t layer, size_t num_layers) {
  if (cache.layers.size() < num_layers) cache.layers.resize(num_layers);
  TORCH_CHECK(layer < cache.layers.size(), "decode cache: layer ", layer, " out of range");
  return cache.layers[layer];
}

void begin_cached_forward(DecodeCache& cache, const torch::Tensor& input_ids, size_t num_layers) {
  TORCH_CHECK(input_ids.dim() == 2 && input_ids.size(1) >= 1, "forward_cached: input_ids must be [B,T] with T >= 1, got ",
              input_ids.sizes());
  if (cache.empty() && cache.layers.empty()) cache.batch = input_ids.size(0);
  TORCH_CHECK(input_ids.size(0) == cache.batch, "forward_cached: the cache holds ", cache.batch,
              " sequences, input_ids has ", input_ids.size(0));
  TORCH_CHECK(cache.layers.empty() || cache.layers.size() == num_layers, "forward_cached: the cache has ",
              cache.layers.size(), " layers, the model ", num_layers);
  cache.layers.resize(num_layers);
}

torch::Tensor embed_tokens_cached(const torch::Tensor& input_ids, const torch::Tensor& embeddings,
                                  const DecodeCache& cache) {
  if (cache.check_ids) return embed_tokens(input_ids, embeddings);
  auto ids = input_ids.to(embeddings.device(), torch::kInt64);
  return embeddings.index_select(0, ids.reshape({-1})).reshape({ids.size(0), ids.size(1), embeddings.size(1)});
}

torch::Tensor causal_conv1d_step(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                                 bool silu, torch::Tensor& conv) {
  TORCH_CHECK(x.dim() == 3 && weight.dim() == 3 && weight.size(1) == 1 && weight.size(0) == x.size(2),
              "causal_conv1d_step: x [B,T,C] and weight [C,1,W] expected");
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), W = weight.size(2);
  if (!conv.defined()) conv = torch::zeros({B, W - 1, C}, x.options());
  TORCH_CHECK(conv.dim() == 3 && conv.size(0) == B && conv.size(1) == W - 1 && conv.size(2) == C,
              "causal_conv1d_step: conv state must be [", B, ",", W - 1, ",", C, "], got ", conv.sizes());
#ifdef STATECUT_WITH_CUDA_KERNELS
  if (conv.is_contiguous() && W <= cuda::kFusedConvMaxWidth && fused_ops_apply({x, weight, bias, conv})) {
    if (T == 1) return cuda::fused_conv1d_step(x, weight, bias, silu, conv);
    torch::Tensor next;
    auto y = cuda::fused_conv1d(x, weight, bias, silu, conv, &next);
    assign_state(conv, next);
    return y;
  }
#endif
  auto window = torch::cat({conv.to(x.scalar_type()), x}, 1);  // [B, W−1+T, C]
  torch::Tensor y;
  if (T == 1) {
    // y_c = Σ_j w[c,0,j] · window[j,c] (+ b_c): the last output of the zero-padded conv over the window.
    const auto cd = compute_dtype(x.scalar_type());
    auto w = weight.to(cd).squeeze(1).t();  // [W, C]
    auto acc = (window.to(cd) * w.unsqueeze(0)).sum(1, /*keepdim=*/true);
    if (bias.defined()) acc = acc + bias.to(cd);
    if (silu) acc = torch::silu(acc);
    y = acc.to(x.scalar_type());
  } else {
    y = causal_conv1d(window, weight, bias, silu).narrow(1, W - 1, T);
  }
  assign_state(conv, window.narrow(1, T, W - 1));
  return y.contiguous();
}

DecodeCache map_cache(const DecodeCache& c, int64_t batch, const std::function<torch::Tensor(const torch::Tensor&)>& f) {
  DecodeCache out;
  out.batch = batch;
  out.position = c.position;
  out.check_ids = c.check_ids;
  out.kv_capacity = c.kv_capacity;
  auto g = [&f](const torch::Tensor& t) { return t.defined() ? f(t) : t; };
  // The position is the same for every sequence: it is copied, never mapped (a batch repeat would change its shape).
  if (c.device_position.defined()) out.device_position = c.device_position.clone();
  for (const auto& l : c.layers) {
    LayerDecodeState s;
    for (const auto& t : l.conv) s.conv.push_back(g(t));
    s.state = g(l.state);
    s.key = g(l.key);
    s.value = g(l.value);
    out.layers.push_back(std::move(s));
  }
  return out;
}

}  // namespace statecut

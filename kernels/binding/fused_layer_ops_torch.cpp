// LibTorch binding of the fused step kernels (fused_layer_ops_torch.h).
#include "kernels/binding/fused_layer_ops_torch.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>


#include "kernels/device_env.h"
#include "kernels/fused_layer_ops.h"

namespace statecut::cuda {
namespace {

/// [..., D] as rows x D: the non-unit leading dims, after merging those that nest (stride_i = stride_{i+1} size_{i+1}),
/// must be at most two levels (RowsArg's row and group strides) and the last dim contiguous.
bool as_rows(const at::Tensor& t, RowsArg& a, int64_t& rows) {
  if (t.dim() < 1) return false;
  const int64_t D = t.size(-1);
  a.row_stride = D, a.group = int64_t{1} << 30, a.group_stride = 0, rows = 1;
  if (t.numel() == 0) return rows = 0, true;  // nothing is read (a conv state of width 1 is [B, 0, C])
  if (t.stride(-1) != 1 && D > 1) return false;
  int64_t size[2] = {1, 1}, stride[2] = {D, 0};
  int levels = 0;
  for (int64_t i = t.dim() - 2; i >= 0; --i) {
    if (t.size(i) == 1) continue;
    if (levels > 0 && t.stride(i) == stride[levels - 1] * size[levels - 1]) {
      size[levels - 1] *= t.size(i);  // nests in the level below: same level
    } else {
      if (levels == 2) return false;
      size[levels] = t.size(i), stride[levels] = t.stride(i), ++levels;
    }
    rows *= t.size(i);
  }
  a.row_stride = stride[0];
  if (levels == 2) a.group = size[0], a.group_stride = stride[1];
  return true;
}

at::Tensor norm(const at::Tensor& x, const at::Tensor* z, const at::Tensor& w, double eps, double w_offset = 0.0,
                NormGate gate = NormGate::kFla) {
  TORCH_CHECK(fused_layer_ops_apply({x, w, z ? *z : at::Tensor()}), "statecut fused rms_norm: unsupported inputs");
  const int64_t D = x.size(-1);
  TORCH_CHECK(w.numel() == D, "statecut fused rms_norm: weight must have ", D, " elements, got ", w.numel());
  TORCH_CHECK(!z || z->sizes() == x.sizes(), "statecut fused rms_norm: gate ", z->sizes(), " != x ", x.sizes());
  const c10::cuda::CUDAGuard guard(x.device());
  int64_t rows = 0, zrows = 0;
  const RowsArg xa = rows_arg(x, rows);
  const RowsArg za = z ? rows_arg(*z, zrows) : RowsArg{};
  const at::Tensor wc = w.contiguous();
  at::Tensor y = at::empty(x.sizes(), x.options());
  check_launch(rms_norm_rows(elem_type(x), xa, wc.data_ptr(), za, y.data_ptr(), rows, static_cast<int>(D),
                             static_cast<float>(eps), at::cuda::getCurrentCUDAStream(), static_cast<float>(w_offset),
                             gate),
               "rms_norm");
  return y;
}

}  // namespace

ElemType elem_type(const at::Tensor& t) {
  return t.scalar_type() == at::kBFloat16 ? ElemType::kBF16 : ElemType::kF16;
}

void check_launch(cudaError_t e, const char* what) {
  TORCH_CHECK(e == cudaSuccess, "statecut: ", what, " launch failed: ", cudaGetErrorString(e));
}

RowsArg rows_arg(const at::Tensor& t, int64_t& rows) {
  RowsArg a;
  TORCH_CHECK(as_rows(t, a, rows), "statecut fused ops: ", t.sizes(), " with strides ", t.strides(),
              " is not rows of at most two stride levels with a contiguous last dim");
  a.p = t.data_ptr();
  return a;
}

bool fused_layer_ops_apply(std::initializer_list<at::Tensor> ts) {
  const at::Tensor* first = nullptr;
  for (const auto& t : ts) {
    if (!t.defined()) continue;
    if (!first) {
      first = &t;
      if (!t.is_cuda() || (t.scalar_type() != at::kBFloat16 && t.scalar_type() != at::kHalf)) return false;
    } else if (t.device() != first->device() || t.scalar_type() != first->scalar_type()) {
      return false;
    }
    RowsArg a;
    int64_t rows = 0;
    if (!as_rows(t, a, rows)) return false;
  }
  return first != nullptr;
}

at::Tensor fused_rms_norm(const at::Tensor& x, const at::Tensor& w, double eps, double w_offset) {
  return norm(x, nullptr, w, eps, w_offset);
}

bool aligned16(const at::Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0; }

bool row_gemm_operands(const at::Tensor& x, const at::Tensor& w, int64_t max_rows) {
  if (!x.defined() || !w.defined() || !x.is_cuda() || w.device() != x.device() || w.dim() != 2 || x.dim() < 1 ||
      w.scalar_type() != x.scalar_type())
    return false;
  const int64_t K = w.size(1), N = w.size(0);
  if (x.size(-1) != K || K % 8 != 0 || K == 0 || K > 0x7fffffff || !x.is_contiguous() || !w.is_contiguous())
    return false;
  const int64_t M = x.numel() / K;
  return M >= 1 && M <= max_rows && N >= 1 && N <= 0x7fffffff && aligned16(x) && aligned16(w);
}

bool fused_gemv_apply(const at::Tensor& x, const at::Tensor& w) {
  return row_gemm_operands(x, w, kGemvMaxRows) &&
         (x.scalar_type() == at::kBFloat16 || x.scalar_type() == at::kHalf);
}

namespace {

/// y [..., N] = gemv (or gemv_silu_mul with N = half of w's rows) of x and w.
template <typename Launch>
at::Tensor gemv_call(const at::Tensor& x, const at::Tensor& w, int64_t N, Launch launch, const char* what) {
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t K = w.size(1), M = x.numel() / K;
  auto shape = x.sizes().vec();
  shape.back() = N;
  at::Tensor y = at::empty(shape, x.options());
  check_launch(launch(elem_type(x), x.data_ptr(), w.data_ptr(), y.data_ptr(), static_cast<int>(M),
                      static_cast<int>(N), static_cast<int>(K), at::cuda::getCurrentCUDAStream()),
               what);
  return y;
}

}  // namespace

bool fused_gemv_pays(const at::Tensor& x, const at::Tensor& w) {
  return fused_gemv_apply(x, w) && x.numel() == w.size(1);
}

at::Tensor fused_gemv(const at::Tensor& x, const at::Tensor& w) {
  TORCH_CHECK(fused_gemv_apply(x, w), "statecut fused gemv: unsupported inputs ", x.sizes(), " x ", w.sizes());
  return gemv_call(x, w, w.size(0), gemv, "gemv");
}

at::Tensor fused_gemv_silu_mul(const at::Tensor& x, const at::Tensor& gate_up) {
  TORCH_CHECK(fused_gemv_apply(x, gate_up) && gate_up.size(0) % 2 == 0,
              "statecut fused gemv_silu_mul: unsupported inputs ", x.sizes(), " x ", gate_up.sizes());
  return gemv_call(x, gate_up, gate_up.size(0) / 2, gemv_silu_mul, "gemv_silu_mul");
}

namespace {

/// t is defined, contiguous, on x's device in x's dtype (an operand the one-row GEMVs read beside x).
bool alike(const at::Tensor& t, const at::Tensor& x) {
  return t.defined() && t.device() == x.device() && t.scalar_type() == x.scalar_type() && t.is_contiguous();
}

/// The outputs of a one-row gemv_norm call of N columns and its norm arguments: y [..., N], the residual sum (x itself
/// without delta).
struct NormGemvCall {
  at::Tensor y, sum;
  GemvNorm g;
  NormGemvCall(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& nw, double eps, double w_offset,
               int64_t N) {
    auto shape = x.sizes().vec();
    shape.back() = N;
    y = at::empty(shape, x.options());
    sum = delta.defined() ? at::empty(x.sizes(), x.options()) : x;
    g.delta = delta.defined() ? delta.data_ptr() : nullptr;
    g.w = nw.data_ptr();
    g.sum = delta.defined() ? sum.data_ptr() : nullptr;
    g.eps = static_cast<float>(eps), g.w_offset = static_cast<float>(w_offset);
  }
};

}  // namespace

bool fused_norm_gemv_pays(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& nw, const at::Tensor& w) {
  static const bool on = cuda::env_switch_on("STATECUT_NORM_GEMV");
  if (!on || !fused_gemv_pays(x, w) || !alike(nw, x) || nw.numel() != w.size(1) || !aligned16(nw)) return false;
  if (delta.defined() && (!alike(delta, x) || delta.sizes() != x.sizes() || !aligned16(delta))) return false;
  return w.size(1) <= kGemvNormMaxK;
}

std::pair<at::Tensor, at::Tensor> fused_add_rms_norm_gemv(const at::Tensor& x, const at::Tensor& delta,
                                                          const at::Tensor& nw, double eps, double w_offset,
                                                          const at::Tensor& w, bool silu_mul) {
  TORCH_CHECK(fused_norm_gemv_pays(x, delta, nw, w) && (!silu_mul || w.size(0) % 2 == 0),
              "statecut fused add_rms_norm_gemv: unsupported inputs ", x.sizes(), " x ", w.sizes());
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t K = w.size(1), N = silu_mul ? w.size(0) / 2 : w.size(0);
  NormGemvCall c(x, delta, nw, eps, w_offset, N);
  check_launch(gemv_norm(elem_type(x), x.data_ptr(), c.g, w.data_ptr(), c.y.data_ptr(), 1, static_cast<int>(N),
                         static_cast<int>(K), silu_mul, at::cuda::getCurrentCUDAStream()),
               "gemv_norm");
  return {c.sum, c.y};
}

bool fused_norm_gemv_conv_pays(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& nw, const at::Tensor& w,
                               const at::Tensor& conv_w, const at::Tensor& conv_b, const at::Tensor& window) {
  static const bool on = cuda::env_switch_on("STATECUT_GEMV_CONV");
  if (!on || !fused_norm_gemv_pays(x, delta, nw, w) || !alike(conv_w, x) || conv_w.dim() != 3 ||
      conv_w.size(1) != 1 || conv_w.size(2) != kGemvConvWidth)
    return false;
  const int64_t C = conv_w.size(0);
  if (C < 1 || C > w.size(0) || (conv_b.defined() && (!alike(conv_b, x) || conv_b.numel() != C))) return false;
  return alike(window, x) && window.sizes() == at::IntArrayRef({1, kGemvConvWidth - 1, C});
}

std::pair<at::Tensor, at::Tensor> fused_add_rms_norm_gemv_conv(const at::Tensor& x, const at::Tensor& delta,
                                                               const at::Tensor& nw, double eps, double w_offset,
                                                               const at::Tensor& w, const at::Tensor& conv_w,
                                                               const at::Tensor& conv_b, bool silu,
                                                               at::Tensor& window) {
  TORCH_CHECK(fused_norm_gemv_conv_pays(x, delta, nw, w, conv_w, conv_b, window),
              "statecut fused add_rms_norm_gemv_conv: unsupported inputs ", x.sizes(), " x ", w.sizes(), ", conv ",
              conv_w.sizes(), ", window ", window.sizes());
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t K = w.size(1), N = w.size(0);
  NormGemvCall c(x, delta, nw, eps, w_offset, N);
  GemvConv cv;
  cv.state = window.data_ptr(), cv.w = conv_w.data_ptr(), cv.bias = conv_b.defined() ? conv_b.data_ptr() : nullptr;
  cv.C = static_cast<int>(conv_w.size(0)), cv.W = kGemvConvWidth, cv.silu = silu;
  check_launch(gemv_norm_conv(elem_type(x), x.data_ptr(), c.g, cv, w.data_ptr(), c.y.data_ptr(), static_cast<int>(N),
                              static_cast<int>(K), at::cuda::getCurrentCUDAStream()),
               "gemv_norm_conv");
  return {c.sum, c.y};
}

std::pair<at::Tensor, at::Tensor> fused_add_rms_norm(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& w,
                                                     double eps, double w_offset) {
  TORCH_CHECK(fused_layer_ops_apply({x, delta, w}), "statecut fused add_rms_norm: unsupported inputs");
  const int64_t D = x.size(-1);
  TORCH_CHECK(w.numel() == D, "statecut fused add_rms_norm: weight must have ", D, " elements, got ", w.numel());
  TORCH_CHECK(delta.sizes() == x.sizes(), "statecut fused add_rms_norm: delta ", delta.sizes(), " != x ", x.sizes());
  const c10::cuda::CUDAGuard guard(x.device());
  int64_t rows = 0, drows = 0;
  const RowsArg xa = rows_arg(x, rows), da = rows_arg(delta, drows);
  const at::Tensor wc = w.contiguous();
  at::Tensor sum = at::empty(x.sizes(), x.options()), y = at::empty(x.sizes(), x.options());
  check_launch(add_rms_norm_rows(elem_type(x), xa, da, wc.data_ptr(), sum.data_ptr(), y.data_ptr(), rows,
                                 static_cast<int>(D), static_cast<float>(eps), at::cuda::getCurrentCUDAStream(),
                                 static_cast<float>(w_offset)),
               "add_rms_norm");
  return {sum, y};
}

at::Tensor fused_gated_rms_norm(const at::Tensor& x, const at::Tensor& z, const at::Tensor& w, double eps,
                                bool qwen_gate) {
  return norm(x, &z, w, eps, 0.0, qwen_gate ? NormGate::kQwen : NormGate::kFla);
}

namespace {

struct ConvGeometry {
  int64_t B, C, W;
};

/// The shared argument checks of the two conv entry points; `state` is the conv state ([B, W−1, C], contiguous) or
/// undefined where the caller allows it.
ConvGeometry check_conv(const char* what, const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias,
                        const at::Tensor& state) {
  TORCH_CHECK(x.dim() == 3 && w.dim() == 3 && w.size(1) == 1 && w.size(0) == x.size(2), "statecut fused ", what,
              ": x [B,T,C] and weight [C,1,W] expected");
  const ConvGeometry g{x.size(0), x.size(2), w.size(2)};
  TORCH_CHECK(fused_layer_ops_apply({x, w, bias, state}), "statecut fused ", what, ": unsupported inputs");
  TORCH_CHECK(!state.defined() || (state.is_contiguous() && state.dim() == 3 && state.size(0) == g.B &&
                                   state.size(1) == g.W - 1 && state.size(2) == g.C),
              "statecut fused ", what, ": conv state must be a contiguous [", g.B, ",", g.W - 1, ",", g.C, "]");
  TORCH_CHECK(!bias.defined() || bias.numel() == g.C, "statecut fused ", what, ": bias must have ", g.C, " elements");
  return g;
}

const void* ptr_or_null(const at::Tensor& t) { return t.defined() && t.numel() > 0 ? t.data_ptr() : nullptr; }

}  // namespace

static_assert(kFusedConvMaxWidth == kConvSeqMaxWidth, "the binding's bound is the kernel's");

at::Tensor fused_conv1d_step(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias, bool silu,
                             at::Tensor& conv) {
  TORCH_CHECK(x.dim() == 3 && x.size(1) == 1, "statecut fused conv1d_step: x [B,1,C] expected");
  TORCH_CHECK(conv.defined(), "statecut fused conv1d_step: a conv state is required");
  const ConvGeometry g = check_conv("conv1d_step", x, w, bias, conv);
  const c10::cuda::CUDAGuard guard(x.device());
  int64_t rows = 0;
  const RowsArg xa = rows_arg(x, rows);
  const at::Tensor wc = w.contiguous();
  const at::Tensor bc = bias.defined() ? bias.contiguous() : bias;
  at::Tensor y = at::empty({g.B, 1, g.C}, x.options());
  check_launch(conv1d_step(elem_type(x), xa, conv.data_ptr(), wc.data_ptr(), ptr_or_null(bc), y.data_ptr(),
                           static_cast<int>(g.B), static_cast<int>(g.C), static_cast<int>(g.W), silu,
                           at::cuda::getCurrentCUDAStream()),
               "conv1d_step");
  return y;
}

at::Tensor fused_conv1d(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias, bool silu,
                        const at::Tensor& init, at::Tensor* final_state) {
  const ConvGeometry g = check_conv("conv1d", x, w, bias, init);
  TORCH_CHECK(g.W <= kFusedConvMaxWidth, "statecut fused conv1d: width ", g.W, " > ", kFusedConvMaxWidth);
  const int64_t T = x.size(1);
  const c10::cuda::CUDAGuard guard(x.device());
  int64_t rows = 0;
  const RowsArg xa = rows_arg(x, rows);
  const at::Tensor wc = w.contiguous();
  const at::Tensor bc = bias.defined() ? bias.contiguous() : bias;
  at::Tensor y = at::empty({g.B, T, g.C}, x.options());
  if (final_state) *final_state = at::empty({g.B, g.W - 1, g.C}, x.options());
  check_launch(conv1d_seq(elem_type(x), xa, ptr_or_null(init), wc.data_ptr(), ptr_or_null(bc), y.data_ptr(),
                          final_state && g.W > 1 ? final_state->data_ptr() : nullptr, static_cast<int>(g.B),
                          static_cast<int>(T), static_cast<int>(g.C), static_cast<int>(g.W), silu,
                          at::cuda::getCurrentCUDAStream()),
               "conv1d");
  return y;
}

at::Tensor fused_silu_mul(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.sizes() == b.sizes(), "statecut fused silu_mul: ", a.sizes(), " != ", b.sizes());
  TORCH_CHECK(fused_layer_ops_apply({a, b}), "statecut fused silu_mul: unsupported inputs");
  const c10::cuda::CUDAGuard guard(a.device());
  int64_t rows = 0, brows = 0;
  const RowsArg aa = rows_arg(a, rows), ba = rows_arg(b, brows);
  at::Tensor y = at::empty(a.sizes(), a.options());
  check_launch(silu_mul(elem_type(a), aa, ba, y.data_ptr(), rows, static_cast<int>(a.size(-1)),
                        at::cuda::getCurrentCUDAStream()),
               "silu_mul");
  return y;
}

}  // namespace statecut::cuda

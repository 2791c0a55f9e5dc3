// LibTorch binding and TORCH_LIBRARY(statecut) registration of the gated delta rule CUDA kernels.
#include "kernels/binding/gated_delta_torch.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/gated_delta.h"

namespace statecut::cuda {
namespace {

enum class Mode { kChunk, kRecurrent };

struct Prepared {
  GatedDeltaArgs args;
  std::vector<at::Tensor> keep;  // contiguous / converted copies that must outlive the launch
  at::Tensor o;
  int64_t N = 0;
};

const float* f32_ptr(const OptTensor& t, const at::Tensor& like, int64_t numel, const char* name,
                     std::vector<at::Tensor>& keep) {
  if (!t.has_value() || !t->defined()) return nullptr;
  TORCH_CHECK(t->device() == like.device(), "statecut: ", name, " must be on ", like.device());
  TORCH_CHECK(t->numel() == numel, "statecut: ", name, " must have ", numel, " elements, got ", t->numel());
  at::Tensor c = t->to(at::kFloat).contiguous();
  keep.push_back(c);
  return c.data_ptr<float>();
}

/// t [B, T, inner...] with packed inner dims whose B·T tokens lie one stride apart (a slice of a packed projection
/// output): that stride in elements, when the kernel may read t in place; 0 otherwise. `vector_loads`: the kernel
/// reads t 4 elements at a time (q, k, v), so t must be 8-byte aligned and the stride a multiple of 4; g and beta are
/// read one element at a time, anywhere.
int64_t token_stride(const at::Tensor& t, bool vector_loads = true) {
  int64_t inner = 1;
  for (int64_t d = t.dim() - 1; d >= 2; --d) {
    if (t.size(d) != 1 && t.stride(d) != inner) return 0;
    inner *= t.size(d);
  }
  const int64_t B = t.size(0), T = t.size(1);
  int64_t stride = inner;
  if (T > 1 && (B == 1 || t.stride(0) == T * t.stride(1)))
    stride = t.stride(1);
  else if (T > 1)
    return 0;
  else if (B > 1)
    stride = t.stride(0);
  const bool aligned = !vector_loads || (reinterpret_cast<uintptr_t>(t.data_ptr()) % 8 == 0 && stride % 4 == 0);
  return aligned && stride >= inner ? stride : 0;
}

/// The decode op reads q, k, v, g and beta in place where token_stride allows (g and beta when they are of q's type,
/// at any alignment and stride: Gated DeltaNet 1.3B's six beta and six gate logits of a token sit at packed offsets
/// 9216 and 9222, and each took a conversion launch a layer before the kernel until the 47th wave): no copies or
/// conversions ahead of the launch.
void read_in_place(GatedDeltaArgs& a, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                   const OptTensor& g, const OptTensor& beta, std::vector<at::Tensor>& keep) {
  auto input = [&](const at::Tensor& t, const void*& p, int64_t& stride) {
    stride = token_stride(t);
    if (stride) {
      p = t.data_ptr();
    } else {
      keep.push_back(t.contiguous());
      p = keep.back().data_ptr();
    }
  };
  input(q, a.q, a.q_stride), input(k, a.k, a.k_stride), input(v, a.v, a.v_stride);
  // Strides equal to the packed ones are no strides: the [V,K] kernel's Packed instance (one offset for q and k)
  // is 8-9% faster at dk 128 than its strided one (bench/README.md, 29th-31st waves); same elements read.
  const int64_t qk = static_cast<int64_t>(q.size(2)) * q.size(3), vv = static_cast<int64_t>(v.size(2)) * v.size(3);
  if (a.q_stride == qk && a.k_stride == qk && a.v_stride == vv) a.q_stride = a.k_stride = a.v_stride = 0;
  auto typed = [&](const OptTensor& t, const void*& p, int64_t& stride) {
    if (!t.has_value() || !t->defined() || t->scalar_type() != q.scalar_type() || t->dim() != 3 ||
        t->size(0) != q.size(0) || t->size(1) != q.size(1) || t->size(2) != v.size(2) || t->device() != q.device())
      return false;
    stride = token_stride(*t, /*vector_loads=*/false);
    if (stride) p = t->data_ptr();
    return stride != 0;
  };
  if (typed(g, a.g_typed, a.g_stride)) a.g = nullptr;
  if (typed(beta, a.beta_typed, a.beta_stride)) a.beta = nullptr;
}

/// The chunk op reads q, k and v in place when their tokens lie one stride apart (slices of one packed projection
/// output), as the chunk kernel takes them: q and k with one stride, a multiple of 8 elements, 16-byte aligned; v with
/// token_stride's. Otherwise contiguous copies.
void chunk_inputs(GatedDeltaArgs& a, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                  std::vector<at::Tensor>& keep) {
  auto aligned16 = [](const at::Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0; };
  const int64_t qs = token_stride(q);
  if (qs && qs == token_stride(k) && qs % 8 == 0 && aligned16(q) && aligned16(k)) {
    a.q = q.data_ptr(), a.k = k.data_ptr(), a.q_stride = a.k_stride = qs;
  } else {
    keep.push_back(q.contiguous()), keep.push_back(k.contiguous());
    a.q = keep[keep.size() - 2].data_ptr(), a.k = keep.back().data_ptr();
  }
  if (const int64_t vs = token_stride(v)) {
    a.v = v.data_ptr(), a.v_stride = vs;
  } else {
    keep.push_back(v.contiguous());
    a.v = keep.back().data_ptr();
  }
}

Prepared prepare(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const OptTensor& g,
                 const OptTensor& beta, double scale, const OptTensor& cu_seqlens, bool l2norm, bool gate_in_kernel,
                 const OptTensor& A_log, const OptTensor& dt_bias, bool beta_sigmoid, bool state_v_first,
                 bool in_place = false, bool chunk = false) {
  TORCH_CHECK(q.is_cuda() && k.device() == q.device() && v.device() == q.device(),
              "statecut: q, k, v must be CUDA tensors on one device");
  TORCH_CHECK(q.dim() == 4 && k.sizes() == q.sizes() && v.dim() == 4,
              "statecut: q, k must be [B,T,H,K] of one shape and v [B,T,HV,V]");
  TORCH_CHECK(v.size(0) == q.size(0) && v.size(1) == q.size(1), "statecut: v must share B and T with q");
  TORCH_CHECK(q.scalar_type() == k.scalar_type() && q.scalar_type() == v.scalar_type() &&
                  (q.scalar_type() == at::kBFloat16 || q.scalar_type() == at::kHalf),
              "statecut: q, k, v must all be bf16 or all fp16");
  Prepared p;
  GatedDeltaArgs& a = p.args;
  const int64_t B = q.size(0), T = q.size(1), H = q.size(2), K = q.size(3), HV = v.size(2), V = v.size(3);
  a.H = static_cast<int>(H), a.HV = static_cast<int>(HV), a.K = static_cast<int>(K), a.V = static_cast<int>(V);
  a.in_type = q.scalar_type() == at::kBFloat16 ? ElemType::kBF16 : ElemType::kF16;
  if (in_place) {
    read_in_place(a, q, k, v, g, beta, p.keep);
    if (!a.g_typed) a.g = f32_ptr(g, q, B * T * HV, "g", p.keep);
    if (!a.beta_typed) a.beta = f32_ptr(beta, q, B * T * HV, "beta", p.keep);
  } else {
    if (chunk) {
      chunk_inputs(a, q, k, v, p.keep);
    } else {
      at::Tensor qc = q.contiguous(), kc = k.contiguous(), vc = v.contiguous();
      p.keep = {qc, kc, vc};
      a.q = qc.data_ptr(), a.k = kc.data_ptr(), a.v = vc.data_ptr();
    }
    a.g = f32_ptr(g, q, B * T * HV, "g", p.keep);
    a.beta = f32_ptr(beta, q, B * T * HV, "beta", p.keep);
  }
  a.A_log = f32_ptr(A_log, q, HV, "A_log", p.keep);
  a.dt_bias = f32_ptr(dt_bias, q, HV, "dt_bias", p.keep);
  a.l2norm_qk = l2norm, a.gate_in_kernel = gate_in_kernel, a.beta_sigmoid = beta_sigmoid;
  TORCH_CHECK(!gate_in_kernel || ((a.g || a.g_typed) && a.A_log), "statecut: use_gate_in_kernel needs g and A_log");
  a.scale = static_cast<float>(scale > 0 ? scale : 1.0 / std::sqrt(static_cast<double>(K)));
  a.layout = state_v_first ? StateLayout::kVK : StateLayout::kKV;
  if (cu_seqlens.has_value() && cu_seqlens->defined()) {
    TORCH_CHECK(B == 1, "statecut: cu_seqlens needs B = 1 (packed sequences), got B = ", B);
    at::Tensor host = cu_seqlens->to(at::kCPU, at::kLong).contiguous();
    TORCH_CHECK(host.dim() == 1 && host.numel() >= 2, "statecut: cu_seqlens must be [N+1] with N >= 1");
    const int64_t* c = host.data_ptr<int64_t>();
    TORCH_CHECK(c[0] == 0 && c[host.numel() - 1] == T, "statecut: cu_seqlens must run from 0 to T = ", T);
    int64_t mx = 0;
    for (int64_t i = 1; i < host.numel(); ++i) {
      TORCH_CHECK(c[i] >= c[i - 1], "statecut: cu_seqlens must be non-decreasing");
      mx = std::max(mx, c[i] - c[i - 1]);
    }
    at::Tensor dev = cu_seqlens->to(q.device(), at::kInt).contiguous();
    p.keep.push_back(dev);
    a.cu_seqlens = dev.data_ptr<int32_t>();
    p.N = host.numel() - 1;
    a.max_seq_len = static_cast<int>(mx);
  } else {
    p.N = B;
    a.seq_len = static_cast<int>(T);
  }
  a.N = static_cast<int>(p.N);
  p.o = at::empty({B, T, HV, V}, v.options());
  a.o = p.o.data_ptr();
  const char* why = check_args(a);
  TORCH_CHECK(why == nullptr, "statecut: ", why ? why : "");
  return p;
}

std::vector<int64_t> state_shape(const Prepared& p, bool state_v_first) {
  const GatedDeltaArgs& a = p.args;
  return state_v_first ? std::vector<int64_t>{p.N, a.HV, a.V, a.K} : std::vector<int64_t>{p.N, a.HV, a.K, a.V};
}

/// The fold's fields of `a` from f (gated_delta_torch.h, DecodeFold), then check_args' verdict on the whole.
void set_fold(GatedDeltaArgs& a, const DecodeFold& f, const at::Tensor& q, const at::Tensor& v,
              std::vector<at::Tensor>& keep) {
  const auto ok = [&](const at::Tensor& t) {
    return t.device() == q.device() && t.scalar_type() == q.scalar_type() && t.is_contiguous();
  };
  TORCH_CHECK(f.conv_w.defined() && ok(f.conv_w) && (f.conv_w.dim() == 2 || (f.conv_w.dim() == 3 && f.conv_w.size(1) == 1)),
              "statecut: the decode fold's conv weight must be [C, 1, W] or [C, W] of q's dtype and device, contiguous");
  const int64_t C = f.conv_w.size(0), W = f.conv_w.size(-1), B = q.size(0);
  TORCH_CHECK(!f.conv_b.defined() || (ok(f.conv_b) && f.conv_b.dim() == 1 && f.conv_b.size(0) == C),
              "statecut: the decode fold's conv bias must be [", C, "] like its weight");
  TORCH_CHECK(f.conv_state.defined() && ok(f.conv_state) &&
                  f.conv_state.sizes() == at::IntArrayRef({B, W - 1, C}),
              "statecut: the decode fold's conv window must be a contiguous [", B, ", ", W - 1, ", ", C,
              "] tensor of q's dtype");
  TORCH_CHECK(f.norm_w.defined() && ok(f.norm_w) && f.norm_w.dim() == 1 && f.norm_w.size(0) == v.size(3),
              "statecut: the decode fold's norm weight must be [", v.size(3), "] of q's dtype");
  a.fold = true;
  a.conv_state = f.conv_state.data_ptr();
  a.conv_w = f.conv_w.data_ptr(), a.conv_b = f.conv_b.defined() ? f.conv_b.data_ptr() : nullptr;
  a.conv_width = static_cast<int>(W), a.conv_channels = static_cast<int>(C);
  a.conv_q0 = static_cast<int>(f.q0), a.conv_k0 = static_cast<int>(f.k0), a.conv_v0 = static_cast<int>(f.v0);
  a.norm_w = f.norm_w.data_ptr(), a.norm_eps = static_cast<float>(f.norm_eps);
  if (f.z.defined()) {
    TORCH_CHECK(f.z.device() == q.device() && f.z.scalar_type() == q.scalar_type() && f.z.sizes() == v.sizes(),
                "statecut: the decode fold's gate z must be shaped as v, of q's dtype and device");
    const int64_t HVV = v.size(2) * v.size(3);
    const bool heads_packed = f.z.stride(3) == 1 && (f.z.size(2) == 1 || f.z.stride(2) == f.z.size(3));
    if (!heads_packed) keep.push_back(f.z.contiguous());
    const at::Tensor& z = heads_packed ? f.z : keep.back();
    a.norm_z = z.data_ptr(), a.z_stride = B > 1 ? z.stride(0) : HVV;
  }
  const char* why = check_args(a);
  TORCH_CHECK(why == nullptr, "statecut: ", why ? why : "");
}

void launch(Mode mode, const GatedDeltaArgs& a) {
  if (a.N == 0) return;
  cudaStream_t s = at::cuda::getCurrentCUDAStream();
  const cudaError_t e = mode == Mode::kChunk ? gated_delta_chunk(a, s) : gated_delta_recurrent(a, s);
  TORCH_CHECK(e == cudaSuccess, "statecut: kernel launch failed: ", cudaGetErrorString(e));
}

std::tuple<at::Tensor, at::Tensor> run(Mode mode, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                       const OptTensor& g, const OptTensor& beta, double scale,
                                       const OptTensor& initial_state, bool output_final_state,
                                       const OptTensor& cu_seqlens, bool l2norm, bool gate_in_kernel,
                                       const OptTensor& A_log, const OptTensor& dt_bias, bool beta_sigmoid,
                                       bool state_v_first, bool delta = true) {
  TORCH_CHECK(q.is_cuda(), "statecut: q, k, v must be CUDA tensors on one device");
  const c10::cuda::CUDAGuard guard(q.device());
  Prepared p = prepare(q, k, v, g, beta, scale, cu_seqlens, l2norm, gate_in_kernel, A_log, dt_bias, beta_sigmoid,
                       state_v_first, /*in_place=*/false, /*chunk=*/mode == Mode::kChunk);
  p.args.delta = delta;
  const std::vector<int64_t> shape = state_shape(p, state_v_first);
  if (initial_state.has_value() && initial_state->defined()) {
    TORCH_CHECK(initial_state->sizes() == at::IntArrayRef(shape), "statecut: initial_state must be ",
                at::IntArrayRef(shape), ", got ", initial_state->sizes());
    at::Tensor s0 = initial_state->to(q.device(), at::kFloat).contiguous();
    p.keep.push_back(s0);
    p.args.initial_state = s0.data_ptr<float>();
  }
  at::Tensor final_state = output_final_state ? at::empty(shape, q.options().dtype(at::kFloat))
                                              : at::empty({0}, q.options().dtype(at::kFloat));
  if (output_final_state) p.args.final_state = final_state.data_ptr<float>();
  launch(mode, p.args);
  return {p.o, final_state};
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> gated_delta_rule_chunk(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const OptTensor& g, const OptTensor& beta,
    double scale, const OptTensor& initial_state, bool output_final_state, const OptTensor& cu_seqlens,
    bool use_qk_l2norm_in_kernel, bool use_gate_in_kernel, const OptTensor& A_log, const OptTensor& dt_bias,
    bool use_beta_sigmoid_in_kernel, bool state_v_first) {
  return run(Mode::kChunk, q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens,
             use_qk_l2norm_in_kernel, use_gate_in_kernel, A_log, dt_bias, use_beta_sigmoid_in_kernel, state_v_first);
}

std::tuple<at::Tensor, at::Tensor> gated_delta_rule_recurrent(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const OptTensor& g, const OptTensor& beta,
    double scale, const OptTensor& initial_state, bool output_final_state, const OptTensor& cu_seqlens,
    bool use_qk_l2norm_in_kernel, bool use_gate_in_kernel, const OptTensor& A_log, const OptTensor& dt_bias,
    bool use_beta_sigmoid_in_kernel, bool state_v_first) {
  return run(Mode::kRecurrent, q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens,
             use_qk_l2norm_in_kernel, use_gate_in_kernel, A_log, dt_bias, use_beta_sigmoid_in_kernel, state_v_first);
}

std::tuple<at::Tensor, at::Tensor> gated_linear_attention_rule(
    bool chunk, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const OptTensor& g,
    const OptTensor& beta, double scale, const OptTensor& initial_state, bool output_final_state,
    const OptTensor& cu_seqlens, bool state_v_first) {
  return run(chunk ? Mode::kChunk : Mode::kRecurrent, q, k, v, g, beta, scale, initial_state, output_final_state,
             cu_seqlens, /*l2norm=*/false, /*gate_in_kernel=*/false, c10::nullopt, c10::nullopt,
             /*beta_sigmoid=*/false, state_v_first, /*delta=*/false);
}

at::Tensor gated_delta_rule_decode_(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                    const OptTensor& g, const OptTensor& beta, double scale, at::Tensor& state,
                                    const OptTensor& cu_seqlens, bool use_qk_l2norm_in_kernel,
                                    bool use_gate_in_kernel, const OptTensor& A_log, const OptTensor& dt_bias,
                                    bool use_beta_sigmoid_in_kernel, bool state_v_first, bool round_beta,
                                    bool delta, bool beta_dt, const DecodeFold* fold) {
  TORCH_CHECK(q.is_cuda(), "statecut: q, k, v must be CUDA tensors on one device");
  const c10::cuda::CUDAGuard guard(q.device());
  Prepared p = prepare(q, k, v, g, beta, scale, cu_seqlens, use_qk_l2norm_in_kernel, use_gate_in_kernel, A_log,
                       dt_bias, use_beta_sigmoid_in_kernel, state_v_first, /*in_place=*/true);
  p.args.beta_round = round_beta;
  p.args.delta = delta;
  p.args.beta_dt = beta_dt;
  TORCH_CHECK(!beta_dt || use_gate_in_kernel, "statecut: beta_dt needs use_gate_in_kernel (dt comes from g)");
  const std::vector<int64_t> shape = state_shape(p, state_v_first);
  TORCH_CHECK(state.device() == q.device() &&
                  (state.scalar_type() == at::kFloat || state.scalar_type() == at::kBFloat16) &&
                  state.is_contiguous() && state.sizes() == at::IntArrayRef(shape),
              "statecut: state must be a contiguous fp32 or bf16 CUDA tensor of shape ", at::IntArrayRef(shape));
  p.args.state_bf16 = state.scalar_type() == at::kBFloat16;
  p.args.initial_state = state.data_ptr();
  p.args.final_state = state.data_ptr();
  if (fold) set_fold(p.args, *fold, q, v, p.keep);
  launch(Mode::kRecurrent, p.args);
  return p.o;
}

bool decode_fold_pays(int64_t N, int64_t HV) {
  return N * HV <= at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
}

bool decode_fold_fits(int64_t H, int64_t HV, int64_t V, int64_t conv_width) {
  return H == HV && V <= 128 && V % 8 == 0 && conv_width == kFoldConvWidth;
}

namespace {
at::Tensor decode_op(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const OptTensor& g,
                     const OptTensor& beta, double scale, at::Tensor state, const OptTensor& cu_seqlens, bool l2,
                     bool gate, const OptTensor& A_log, const OptTensor& dt_bias, bool sig, bool vfirst,
                     bool round_beta) {
  return gated_delta_rule_decode_(q, k, v, g, beta, scale, state, cu_seqlens, l2, gate, A_log, dt_bias, sig, vfirst,
                                  round_beta);
}
}  // namespace

TORCH_LIBRARY(statecut, m) {
  const char* args =
      "(Tensor q, Tensor k, Tensor v, Tensor? g, Tensor? beta, float scale, Tensor? initial_state, "
      "bool output_final_state, Tensor? cu_seqlens, bool use_qk_l2norm_in_kernel, bool use_gate_in_kernel, "
      "Tensor? A_log, Tensor? dt_bias, bool use_beta_sigmoid_in_kernel, bool state_v_first) -> (Tensor, Tensor)";
  m.def((std::string("gated_delta_rule_chunk") + args).c_str());
  m.def((std::string("gated_delta_rule_recurrent") + args).c_str());
  m.def(
      "gated_delta_rule_decode_(Tensor q, Tensor k, Tensor v, Tensor? g, Tensor? beta, float scale, Tensor(a!) state, "
      "Tensor? cu_seqlens, bool use_qk_l2norm_in_kernel, bool use_gate_in_kernel, Tensor? A_log, Tensor? dt_bias, "
      "bool use_beta_sigmoid_in_kernel, bool state_v_first, bool round_beta=False) -> Tensor");
}

TORCH_LIBRARY_IMPL(statecut, CUDA, m) {
  m.impl("gated_delta_rule_chunk", &gated_delta_rule_chunk);
  m.impl("gated_delta_rule_recurrent", &gated_delta_rule_recurrent);
  m.impl("gated_delta_rule_decode_", &decode_op);
}

}  // namespace statecut::cuda

/// Reduced-state CUDA kernels (sm_90) of the gated delta rule, any key dim 1..256, any value dim up to 1024 (a multiple
/// of 4; value columns are independent, both kernels tile them over the grid: Gated DeltaNet 1.3B has dv = 512).
///
/// Per sequence n, value head hv (key head h = hv / (HV/H): grouped values share q/k), state S in R^{K x V}:
///   k_t, q_t <- x / sqrt(sum x^2 + 1e-6)            (when l2norm_qk, as fla's use_qk_l2norm_in_kernel)
///   g_t      <- -exp(A_log[hv]) softplus(a_t + dt_bias[hv])   (when gate_in_kernel; else g_t as given; no g: 0)
///   b_t      <- sigmoid(b_t)                        (when beta_sigmoid; no beta: 1)
///   b_t      <- softplus(a_t + dt_bias[hv])         (when beta_dt, recurrent only: Mamba-2's dt, g_t = A_log's
///                                                    −exp times it)
///   S_t = exp(g_t) (I - b_t k_t k_t^T) S_{t-1} + b_t k_t v_t^T,   o_t = S_t^T (scale q_t)
///   (delta = false, both kernels: S_t = exp(g_t) S_{t-1} + b_t k_t v_t^T, gated linear attention with b_t scaling
///   the value — Mamba-2's SSM with k = B, q = C, b = dt, g = dt A)
/// Shapes (token-major, contiguous): q, k [Ttot, H, K] and v, o [Ttot, HV, V] in bf16 or fp16; g, beta [Ttot, HV]
/// fp32 (both kernels take token strides for q, k, v — the chunk kernel one stride for q and k, a multiple of 8
/// elements with 16-byte aligned rows, and an even one for v — and the recurrent kernel g, beta in the input type:
/// the fields at the end of GatedDeltaArgs); A_log, dt_bias [HV] fp32; states [N, HV, K, V] (layout kKV) or [N, HV, V, K] (layout kVK) in fp32
/// (the recurrent kernel also takes bf16 states: state_bf16).
/// Sequence n covers tokens [cu_seqlens[n], cu_seqlens[n+1]) or, without cu_seqlens, [n*seq_len, (n+1)*seq_len).
///
/// Two entry points with the same arguments:
///   gated_delta_recurrent: token loop, state in registers (decode, T <= 8, any T); final_state may alias
///                          initial_state (in-place decode).
///   gated_delta_chunk:     chunked WY/UT prefill, chunk 64: a parallel kernel per chunk (T = (I + A)^-1, P) and a
///                          serial kernel per (sequence, head, value tile) for the state products; tensor cores
///                          (TF32, and bf16 x (hi + lo) state terms for bf16 inputs) with fp32 accumulation. Takes a
///                          workspace of 21.25 KiB per (chunk, value head) with cudaMallocAsync on `stream` (freed
///                          with cudaFreeAsync; the device's default pool is set to keep freed memory).
/// Neither includes torch: CI compiles this directory with nvcc alone.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace statecut::cuda {

enum class ElemType : int { kBF16 = 0, kF16 = 1 };
enum class StateLayout : int { kKV = 0, kVK = 1 };

struct GatedDeltaArgs {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const float* g = nullptr;     ///< log decay, or the gate input a_t when gate_in_kernel; nullptr: no decay
  const float* beta = nullptr;  ///< beta, or its logits when beta_sigmoid; nullptr: beta = 1
  const float* A_log = nullptr;
  const float* dt_bias = nullptr;  ///< optional even with gate_in_kernel
  void* o = nullptr;
  const void* initial_state = nullptr;   ///< nullptr: zero state; fp32, or bf16 when state_bf16
  void* final_state = nullptr;           ///< nullptr: not written; same type as initial_state
  const int32_t* cu_seqlens = nullptr;   ///< device pointer, [N + 1]
  int N = 0;           ///< number of sequences
  int seq_len = 0;     ///< tokens per sequence without cu_seqlens
  int max_seq_len = 0; ///< longest sequence (required with cu_seqlens; gated_delta_chunk sizes its workspace
                       ///< by it and processes at most ceil(max_seq_len / 64) chunks of any sequence)
  int H = 0, HV = 0, K = 0, V = 0;
  float scale = 1.f;
  ElemType in_type = ElemType::kBF16;
  StateLayout layout = StateLayout::kKV;
  bool l2norm_qk = false;
  bool gate_in_kernel = false;
  bool beta_sigmoid = false;
  bool state_bf16 = false;  ///< recurrent only: states stored in bf16 (fp32 in registers, rounded once per call)

  // Token strides (decode and prefill read the slices of one packed projection output in place, no copies):
  int64_t q_stride = 0, k_stride = 0, v_stride = 0;  ///< elements between tokens of q, k, v; 0: packed (H·K, H·K, HV·V)
  // Recurrent only:
  const void* g_typed = nullptr;     ///< g (or the gate input) of in_type instead of the fp32 g: element tok·g_stride + hv
  const void* beta_typed = nullptr;  ///< beta (or its logits) of in_type instead of the fp32 beta: tok·beta_stride + hv
  int64_t g_stride = 0, beta_stride = 0;
  bool beta_round = false;  ///< round beta (after the sigmoid) to in_type: a model computing sigmoid in that type (fla
                            ///< DeltaNet); with beta_sigmoid the sigmoid is LibTorch's 1 / (1 + expf(−x))
  bool delta = true;  ///< false: no delta term (gated linear attention, above)
  bool beta_dt = false;  ///< beta_t = softplus(a_t + dt_bias[hv]) from the gate input (needs gate_in_kernel; beta
                         ///< unused): Mamba-2's dt, so g_t = A dt_t and b_t = dt_t come from one raw input with
                         ///< A = −exp(A_log); the chunk kernel refuses it

  // Recurrent only, a decode step's neighbours folded in (fold): q, k, v are the raw projection outputs
  // (before the layer's short conv) and o is the output norm's result. Per sequence n (one token, layout kKV, H = HV,
  // V <= 128 and V % 8 == 0, conv width 4: one block owns a whole head's channels and output row; check_args), for each of the
  // head's q, k and v channels c = conv_q0 + h·K + i, conv_k0 + h·K + i, conv_v0 + hv·V + j:
  //   x_c <- round(silu(sum_{j<W-1} conv_w[c,j] win[n,j,c] + conv_w[c,W-1] x_c + conv_b[c])),
  //   win[n,j,c] <- win[n,j+1,c] (win[n,W-2,c] <- x_c)      (fused_layer_ops.h's conv1d_step with SiLU, bit for bit)
  // then the step above, then per head o <- rms_norm(round(o)) · norm_w (· z · sigmoid(z) with norm_z: fla's gated
  // form), the sums of the norm kernel's 8-wide rows in its order (fused_layer_ops.h's rms_norm, bit for bit).
  bool fold = false;
  void* conv_state = nullptr;    ///< [N, conv_width − 1, conv_channels] of in_type, read and shifted in place
  const void* conv_w = nullptr;  ///< [conv_channels, conv_width] of in_type
  const void* conv_b = nullptr;  ///< [conv_channels] of in_type, or nullptr
  int conv_width = 0, conv_channels = 0;
  int conv_q0 = 0, conv_k0 = 0, conv_v0 = 0;  ///< the first q, k and v channel of the window
  const void* norm_w = nullptr;  ///< [V] of in_type (required with conv_state)
  const void* norm_z = nullptr;  ///< the gate z of in_type, element tok·z_stride + hv·V + j; nullptr: no gate
  int64_t z_stride = 0;
  float norm_eps = 0.f;
};

/// The conv width the fold takes (fla's, Mamba-2's and Qwen3.5's; compiled in, so a thread's loads are all in flight).
constexpr int kFoldConvWidth = 4;

/// nullptr when the arguments are usable, else a one-line reason naming the argument.
const char* check_args(const GatedDeltaArgs& a);

cudaError_t gated_delta_recurrent(const GatedDeltaArgs& a, cudaStream_t stream);
cudaError_t gated_delta_chunk(const GatedDeltaArgs& a, cudaStream_t stream);

}  // namespace statecut::cuda

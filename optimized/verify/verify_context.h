/// What the checks of `statecut verify` share: the checkpoint as read once (config, files, model, windows, the
/// native forward with its recurrence boundary, the f64 model), and the per-layer recurrence inputs as both the
/// optimized path and reference/ take them. Internal to optimized/verify/.
#pragma once
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "optimized/models/parallel_for_each.h"
#include "optimized/models/model.h"
#include "optimized/prune/eigen_tensor.h"
#include "optimized/models/weight_source.h"
#include "optimized/verify/verify.h"
#include "reference/types.h"

namespace statecut::verify {

using ref::Mat;
using ref::Vec;
using ref::Index;

/// Which recurrence a family's linear-attention layers run (recurrence.h).
enum class RecKind { Delta, Mamba2 };

struct Context {
  VerifyOptions opt;
  std::string dir;
  nlohmann::json config;  ///< config.json as read
  std::string config_path;
  std::string model_type;
  std::vector<PrunableLayer> layers;  ///< prunable_layers_from_config (empty + layers_error when it throws)
  std::string layers_error;
  /// Why `layers` is empty, for the rows that skip: the config's error, or that every layer is full attention (a
  /// Qwen3.5 of full-attention layers only loads and runs; there is nothing to prune or hold to the reference).
  std::string no_layers_reason() const {
    return "no linear-attention layer: " +
           (layers_error.empty() ? "every layer of " + config_path + " is full attention" : layers_error);
  }
  torch::Dtype stored_dtype = torch::kFloat32;  ///< the float dtype most weight bytes are stored in
  torch::Dtype run_dtype = torch::kFloat32;     ///< what the model runs in: stored (f16 → f32: no CPU f16 matmul)
  torch::Device device{torch::kCPU};
  RecKind kind = RecKind::Delta;
  bool l2norm_qk = true;  ///< the family L2-normalises q, k before the recurrence (fla qk_norm = l2, Qwen)

  std::unique_ptr<WeightSource> weights;  ///< opened by run_verify (the files parsed)
  std::unique_ptr<CausalLM> model;        ///< run_dtype on device, or null with load_error
  std::string load_error;

  torch::Tensor ids;  ///< [N, L] int64 windows
  nlohmann::json input;

  /// The model's forward (chunk mode, boundary captured) on ids; false (and why in forward_error) when unavailable.
  bool ensure_forward();
  ForwardResult fwd;
  std::string forward_error;
  /// The same model in f64 (on the run's GPU, else or when that fails on the CPU: device64), its logits on ids
  /// (fp32, kept so: the model API returns fp32 logits) and its final (normed) hidden state in f64 on the CPU, whose
  /// image under lm_head the logits are; run a window at a time. The f64 model itself is not kept (the rows that
  /// need an f64 model again build their own, with changed weights).
  bool ensure_f64();
  torch::Device device64{torch::kCPU};
  torch::Tensor logits64, hidden64;
  std::string f64_error;
  /// Per window, the run-dtype logits' normwise distance from logits64 (`reference.model`'s figures, and the e that
  /// scales `chunk-recurrent.model`'s bf16 limit); computed once. Needs ensure_forward() and ensure_f64().
  const std::vector<double>& f64_distances();
  /// How far rounding alone can move this model's logits at the run dtype's precision: the f64 model with every weight
  /// multiplied by (1 ± u) (u: the run dtype's unit roundoff; the signs drawn with --seed) vs logits64, normwise
  /// relative, worst window; computed once (a second f64 model while it runs). NaN, and why in f64_error, when it
  /// cannot run. Needs ensure_f64().
  double f64_sensitivity();

  /// Model m's forward of window b alone (ids[b : b + 1]) on `dev`: rows that need only one window's logits at a time
  /// hold one window's (at a 152k vocabulary, 512 tokens of fp32 logits are 0.3 GB), not N.
  ForwardResult forward_window(CausalLM& m, int64_t b, torch::Device dev, const ForwardOptions& fo) const;

  void say(const std::string& line) const;

 private:
  std::optional<bool> forward_ok_, f64_ok_;
  std::vector<double> f64_distances_;
  std::optional<double> f64_sensitivity_;
};

/// One prunable layer's recurrence inputs from the boundary of the native forward.
struct LayerData {
  int layer = 0, Hk = 0, Hv = 0, dk = 0, dv = 0;
  int64_t B = 0, T = 0;
  bool gated = false;  ///< a log decay g is present (GDN, Qwen, Mamba-2)
  bool kernels = false;  ///< the forward ran this layer through the CUDA kernels (recurrence.h's dispatch)
  double scale = 1.0;
  // As the optimized recurrence takes them (device, activation/compute dtype): q, k raw (pre-L2) for Delta;
  // Mamba-2: q = C, k = B, v = dt·x (dt = g / A), g = dt·A.
  torch::Tensor q, k, v, beta, g;
  torch::Tensor final_state;  ///< [B,Hv,dk,dv] what the forward's recurrence returned
  // The same inputs in f64 on CPU, contiguous; q64/k64 L2-normalised in f64 when the family normalises.
  torch::Tensor q64, k64, v64, beta64, g64;
};

/// Throws std::runtime_error when the boundary of prunable layer `li` is missing.
LayerData layer_data(Context& ctx, size_t li);

/// Rows [t0, t0+n) of head h of window b of an f64 [B,T,H,D] tensor as [n, D]; of [B,T,H] as [n].
Mat head_mat(const torch::Tensor& x64, int64_t b, int64_t h, int64_t t0, int64_t n);
Vec head_vec(const torch::Tensor& x64, int64_t b, int64_t h, int64_t t0, int64_t n);

/// reference/ on value head j of window b, steps [t0, t0+n), start state S0 (nullptr = 0).
ref::HeadResult ref_head(const Context& ctx, const LayerData& d, int64_t b, int64_t j, int64_t t0, int64_t n,
                         const Mat* S0 = nullptr, bool chunked = false);
/// The optimized recurrence (recurrence.h) on steps [t0, t0+n) from state S0 (undefined = 0): o [B,n,Hv,dv] and
/// *S [B,Hv,dk,dv] in the compute dtype. With t0 = 0, n = T and no S0 it is the call the family made.
torch::Tensor opt_recurrence(const Context& ctx, const LayerData& d, RecurrenceMode mode, int64_t t0, int64_t n,
                             const torch::Tensor& S0, torch::Tensor* S);

/// ‖a − b‖_F / ‖b‖_F (0 when both are 0; NaN when a holds NaN/Inf).
double rel_err(const Mat& a, const Mat& b);
double rel_err(const torch::Tensor& a, const torch::Tensor& b);
/// Unit roundoff of a compute dtype.
double unit_roundoff(torch::Dtype d);
/// Half the smallest subnormal of a stored dtype: the absolute part of its rounding error, |fl(x) − x| ≤ u|x| + η
/// (u|x| alone fails in the subnormal range, where the spacing stops shrinking).
double subnormal_half_spacing(torch::Dtype d);
const char* dtype_label(torch::Dtype d);

/// Elapsed-time helper for CheckResult::seconds.
double seconds_since(double t0);
double now_seconds();

}  // namespace statecut::verify

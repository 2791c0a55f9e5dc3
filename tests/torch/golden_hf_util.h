// Helpers of the transformers golden tests (tests/torch/golden_hf_*.cpp): fixture lookup, golden tensors, errors,
// the logits + hidden-state comparison and the boundary-vs-prunable-rows check every HF family shares.
#pragma once
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "optimized/models/layers_common.h"
#include "optimized/models/model.h"
#include "optimized/models/weight_source.h"
#include "tests/rel_err_tensor.h"
#include "tests/test_env.h"

namespace statecut::golden_hf {

using test::fixture_dir;  // tests/test_env.h

/// ‖y − y_ref‖_F / ‖y_ref‖_F in double; NaN/Inf in y gives +inf so it fails first.
using statecut::test::rel_err;

/// Master seed: STATECUT_SEED or 42; printed so a failure can be replayed.
inline uint64_t master_seed() { return test::env_seed(42); }

inline const char* mode_name(RecurrenceMode m) { return m == RecurrenceMode::Chunk ? "chunk" : "recurrent"; }

/// Forward of golden run `run` (input_ids) with hidden states; logits and each of the n_hidden hidden states against
/// the golden at `tol`, every error printed with `label`.
inline void expect_matches_golden(CausalLM& model, const WeightSource& golden, const std::string& run,
                                  RecurrenceMode mode, double tol, const char* label, size_t n_hidden) {
  torch::NoGradGuard no_grad;
  ForwardOptions opt;
  opt.mode = mode;
  opt.output_hidden_states = true;
  auto r = model.forward(golden.raw(run + ".input_ids"), opt);
  const double e = rel_err(r.logits, golden.raw(run + ".logits"));
  std::printf("[%s] %s %s logits rel err %.3e (threshold %.0e)\n", label, run.c_str(), mode_name(mode), e, tol);
  EXPECT_LT(e, tol) << label << " " << run << " logits";
  ASSERT_EQ(r.hidden_states.size(), n_hidden);
  for (size_t i = 0; i < r.hidden_states.size(); ++i) {
    const double eh = rel_err(r.hidden_states[i], golden.raw(run + ".hidden_states." + std::to_string(i)));
    std::printf("[%s] %s hidden_states.%zu rel err %.3e\n", label, run.c_str(), i, eh);
    EXPECT_LT(eh, tol) << label << " " << run << " hidden_states." << i;
  }
}

/// The model parameter `name` (a test failure when absent).
inline torch::Tensor param(CausalLM& m, const std::string& name) {
  for (auto& [n, t] : m.named_parameters())
    if (n == name) return t;
  ADD_FAILURE() << "no parameter " << name;
  return {};
}

/// The bias next to weight `weight_name` (…weight → …bias), undefined when the model has none.
inline torch::Tensor bias_of(CausalLM& m, const std::string& weight_name) {
  const std::string b = weight_name.substr(0, weight_name.size() - std::string("weight").size()) + "bias";
  for (auto& [n, t] : m.named_parameters())
    if (n == b) return t;
  return {};
}

/// The rows/channels prunable_layers() names, pushed through projection + conv (+ bias) + SiLU, must give the
/// boundary q and k (before the L2 norm): this is what surgery slices, so a wrong offset would prune the wrong channels.
inline void expect_boundary_is_prunable_rows(CausalLM& model, const LayerBoundary& bd, const PrunableLayer& p) {
  const int64_t Bsz = bd.attn_in.size(0), T = bd.attn_in.size(1), rows = int64_t(p.num_key_heads) * p.head_k_dim;
  auto through = [&](const std::string& w, int64_t row, const std::string& conv, int64_t ch) {
    auto proj = statecut::linear(bd.attn_in, param(model, w).narrow(0, row, rows));
    auto cb = bias_of(model, conv);
    return causal_conv1d(proj, param(model, conv).narrow(0, ch, rows), cb.defined() ? cb.narrow(0, ch, rows) : cb,
                         /*silu=*/true)
        .reshape({Bsz, T, p.num_key_heads, p.head_k_dim});
  };
  EXPECT_LT(rel_err(bd.q, through(p.q_weight, p.q_row_offset, p.q_conv, p.q_conv_offset)), 1e-6) << "layer " << p.layer;
  EXPECT_LT(rel_err(bd.k, through(p.k_weight, p.k_row_offset, p.k_conv, p.k_conv_offset)), 1e-6) << "layer " << p.layer;
}

}  // namespace statecut::golden_hf

/// The check groups of `statecut verify` (verify.h lists what each proves). Each appends its rows to `out`; a check
/// that cannot run (no model, no source, no CUDA) appends a row with Status::Skip and says why.
#pragma once
#include <map>
#include <vector>

#include "optimized/verify/check_rotation.h"
#include "optimized/verify/verify_context.h"

namespace statecut::verify {

void check_load(Context& ctx, std::vector<CheckResult>& out);
void check_config(Context& ctx, std::vector<CheckResult>& out);
void check_pruned(Context& ctx, std::vector<CheckResult>& out);
void check_reference(Context& ctx, std::vector<CheckResult>& out);
void check_chunk_recurrent(Context& ctx, std::vector<CheckResult>& out);
void check_state_carry(Context& ctx, std::vector<CheckResult>& out);
void check_theorems(Context& ctx, std::vector<CheckResult>& out);
void check_determinism(Context& ctx, std::vector<CheckResult>& out);
void check_kernels(Context& ctx, std::vector<CheckResult>& out);

/// pruned.certificate (check_certificate.cpp): for a drrqr record, the strong-RRQR certificate of the recorded keep
/// sets on calibration features recomputed from the record with the unpruned `source`; for a pca record, that the
/// rotations the weights row recovered (`rotations`) are pca's on the same recomputed features.
void check_certificate(Context& ctx, const nlohmann::json& record, const std::string& source,
                       std::vector<CheckResult>& out, const RecoveredRotations* rotations = nullptr);

/// pruned.record (check_record.cpp): statecut.json against this checkpoint's geometry and against its own history;
/// fills `keep` (layer → key head → kept channels of the step's source) and sets *rotation for a rotation's record.
CheckResult record_row(const Context& ctx, const nlohmann::json& rec,
                       std::map<int, std::vector<std::vector<int64_t>>>& keep, bool* rotation);

/// A skipped row.
CheckResult skipped(const std::string& name, const std::string& why);
/// A failing row's one line: the first problem, then "(and N more)" when there are others.
std::string first_problem(const std::vector<std::string>& problems);
/// The row of a check whose input is unavailable (`why`: ctx.forward_error or ctx.f64_error): a failure when the model
/// loaded and its forward then threw (out of memory, a shape the loader let through: nothing was checked, so no pass),
/// skipped when it did not load (the `load` row fails and names the cause once).
CheckResult unavailable(const Context& ctx, const std::string& name, const std::string& why);
/// The row of a check that needs the forward, when it cannot have it: skipped without a linear-attention layer, else
/// unavailable(ctx, name, ctx.forward_error).
CheckResult forward_unavailable(const Context& ctx, const std::string& name);
/// The recurrence threshold of a compute dtype and its one-line reason (shared by reference, chunk-recurrent,
/// state-carry: all three compare recurrences on the same inputs).
/// kernels: the layer runs the CUDA kernels (bf16/fp16 on CUDA), whose chunk form takes TF32 operands.
/// T: tokens per window; past kGrowthFrom tokens every limit grows by rounding_growth(T).
double recurrence_threshold(torch::Dtype compute, bool kernels, int64_t T, std::string* reason);
/// sqrt(T / kGrowthFrom), at least 1. The transitions are non-expansive (||k|| = 1, beta <= 2, decay <= 1), so
/// rounding is never amplified, but neither is it always damped: beta = 2 (allow_neg_eigval's reflection) keeps the
/// component along k, and directions no recent key touched keep theirs, so errors of T steps add like a random walk.
/// Measured on a beta = 2 DeltaNet with near-collinear keys (audit 25): the fp32 recurrence 1.9e-5 from f64 at 256
/// tokens, 6.7e-5 at 8192, 1.9e-4 at 32768 (~T^0.45); a beta <= 1 model (the shipped one) stays at 4e-7 at 32768.
constexpr int64_t kGrowthFrom = 512;
double rounding_growth(int64_t T);
/// T / kGrowthFrom, at least 1: the whole model's fp32 limits. Each layer's recurrence error enters the next layers'
/// inputs and is carried on undamped there too, so the model's error follows the worst case of T non-expansive steps,
/// linear in T (the beta = 2 DeltaNet with rank-1 keys of audit 25: 1.6e-3 at 2048 tokens, 1.1e-2 at 32768, ~T^0.7).
double model_rounding_growth(int64_t T);
/// "; x sqrt(T/512) = g for T tokens ..." (whole_model: "x T/512"), the reason's note on the growth; "" where g is 1.
std::string growth_note(int64_t T, bool whole_model);
/// The normwise distance of logits unrelated to the reference, about their size: a limit that reaches it would pass
/// any wrong op, so such a row is a skip (not checkable), never a pass.
constexpr double kUnrelated = 1.0;

}  // namespace statecut::verify

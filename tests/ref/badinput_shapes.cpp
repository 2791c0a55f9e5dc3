// BadInput_Shapes: every reference entry point rejects inconsistent shapes with a ShapeError whose message
// names the function and the offending argument (and nothing is returned).
#include "reference/delta_rule.h"
#include "reference/gated_delta_rule.h"
#include "reference/general_rule.h"
#include "reference/linear_attention.h"
#include "reference/mamba2_ssd.h"
#include "reference/primitives.h"
#include "reference/recurrence_multihead.h"
#include "tests/ref/ref_test_util.h"

namespace statecut::ref {
namespace {

constexpr Index T = 5, dk = 3, dv = 2;
const Mat q = Mat::Ones(T, dk), k = Mat::Ones(T, dk), v = Mat::Ones(T, dv);
const Vec s = Vec::Ones(T), s_short = Vec::Ones(T - 1);
const Mat k_wide = Mat::Ones(T, dk + 1), v_short = Mat::Ones(T - 1, dv), S_bad = Mat::Zero(dv, dk);

TEST(BadInput_Shapes, linearAttentionNamesTheArgument) {
  STATECUT_EXPECT_SHAPE_ERROR(linear_attention_recurrent(q, k_wide, v, 1.0), "linear_attention_recurrent: k");
  STATECUT_EXPECT_SHAPE_ERROR(linear_attention_recurrent(q, k, v_short, 1.0), ": v");
  STATECUT_EXPECT_SHAPE_ERROR(linear_attention_chunked(q, k, v, 1.0, &S_bad), "linear_attention_chunked: S0");
  STATECUT_EXPECT_SHAPE_ERROR(linear_attention_chunked(q, k, v, 1.0, nullptr, 0), "chunk");
}

TEST(BadInput_Shapes, deltaRulesNameTheArgument) {
  STATECUT_EXPECT_SHAPE_ERROR(delta_rule_recurrent(q, k, v, s_short, 1.0), "delta_rule_recurrent: beta");
  STATECUT_EXPECT_SHAPE_ERROR(delta_rule_chunked(q, k, v, s_short, 1.0), "delta_rule_chunked: beta");
  STATECUT_EXPECT_SHAPE_ERROR(delta_rule_chunked(q, k, v, s, 1.0, nullptr, -1), "chunk");
  STATECUT_EXPECT_SHAPE_ERROR(delta_rule_chunked(q, k_wide, v, s, 1.0), ": k");
  STATECUT_EXPECT_SHAPE_ERROR(gated_delta_recurrent(q, k, v, s, s_short, 1.0), "gated_delta_recurrent: g");
  STATECUT_EXPECT_SHAPE_ERROR(gated_delta_recurrent(q, k, v, s_short, s, 1.0), "beta");
  STATECUT_EXPECT_SHAPE_ERROR(gated_delta_chunked(q, k, v, s, s_short, 1.0), "gated_delta_chunked: g");
  STATECUT_EXPECT_SHAPE_ERROR(gated_delta_chunked(q, k, v, s, s, 1.0, &S_bad), "S0");
  STATECUT_EXPECT_SHAPE_ERROR(gated_delta_chunked(q, k, v, s, s, 1.0, nullptr, 0), "chunk");
}

TEST(BadInput_Shapes, generalRuleNamesTheArgument) {
  STATECUT_EXPECT_SHAPE_ERROR(general_rule_recurrent(q, k, v, s_short, s, s, 1.0), "general_rule_recurrent: alpha");
  STATECUT_EXPECT_SHAPE_ERROR(general_rule_recurrent(q, k, v, s, s_short, s, 1.0), "beta");
  STATECUT_EXPECT_SHAPE_ERROR(general_rule_chunked(q, k, v, s, s, s_short, 1.0), "general_rule_chunked: gamma");
  STATECUT_EXPECT_SHAPE_ERROR(general_rule_chunked(q, k, v, s, s, s, 1.0, nullptr, 0), "chunk");
}

TEST(BadInput_Shapes, mamba2NamesTheArgument) {
  STATECUT_EXPECT_SHAPE_ERROR(mamba2_ssd_recurrent(q, k, v, s_short, -1, 0), "mamba2_ssd_recurrent: dt");
  STATECUT_EXPECT_SHAPE_ERROR(mamba2_ssd_chunked(q, k_wide, v, s, -1, 0), "mamba2_ssd_chunked: k");
  STATECUT_EXPECT_SHAPE_ERROR(mamba2_ssd_chunked(q, k, v, s, -1, 0, nullptr, 0), "chunk");
}

TEST(BadInput_Shapes, multiheadChecksHeadCounts) {
  MultiHeadInput in{{q, q}, {k, k}, {v, v, v}, {s, s, s}, {s, s, s}};
  STATECUT_EXPECT_SHAPE_ERROR(run_multihead(Rule::Linear, in, 1.0, false), "not a multiple of 2 key heads");
  in.v.push_back(v);
  STATECUT_EXPECT_SHAPE_ERROR(run_multihead(Rule::Delta, in, 1.0, false), "run_multihead: beta");
  in.beta.push_back(s);
  STATECUT_EXPECT_SHAPE_ERROR(run_multihead(Rule::GatedDelta, in, 1.0, false), "run_multihead: g");
  EXPECT_EQ(run_multihead(Rule::Delta, in, 1.0, true).size(), 4u);  // g is not needed by the delta rule
  const std::vector<Mat> S0(3, Mat::Zero(dk, dv));
  STATECUT_EXPECT_SHAPE_ERROR(run_multihead(Rule::Delta, in, 1.0, false, &S0), "run_multihead: S0");
  in.k.pop_back();
  STATECUT_EXPECT_SHAPE_ERROR(run_multihead(Rule::Linear, in, 1.0, false), "run_multihead: k");
  STATECUT_EXPECT_SHAPE_ERROR(run_multihead(Rule::Linear, MultiHeadInput{}, 1.0, false), "key heads");
  // A head with a bad shape is reported by the single-head function.
  MultiHeadInput bad{{q}, {k}, {v_short}, {s}, {s}};
  STATECUT_EXPECT_SHAPE_ERROR(run_multihead(Rule::Linear, bad, 1.0, false), ": v");
}

TEST(BadInput_Shapes, mamba2MultiheadChecksGroupsAndHeads) {
  const std::vector<Mat> C2{q, q}, B2{k, k}, B1{k}, x4{v, v, v, v}, x3{v, v, v};
  const std::vector<Vec> dt4(4, s), dt3(3, s);
  const Vec A4 = -Vec::Ones(4), D4 = Vec::Zero(4);
  STATECUT_EXPECT_SHAPE_ERROR(mamba2_multihead(C2, B1, x4, dt4, A4, D4, false), "mamba2_multihead: B");
  STATECUT_EXPECT_SHAPE_ERROR(mamba2_multihead(C2, B2, x3, dt3, A4.head(3), D4.head(3), false), "not a multiple");
  STATECUT_EXPECT_SHAPE_ERROR(mamba2_multihead(C2, B2, x4, dt3, A4, D4, false), "mamba2_multihead: dt");
  STATECUT_EXPECT_SHAPE_ERROR(mamba2_multihead(C2, B2, x4, dt4, A4.head(3), D4, false), "mamba2_multihead: A");
  STATECUT_EXPECT_SHAPE_ERROR(mamba2_multihead(C2, B2, x4, dt4, A4, D4.head(3), false), "mamba2_multihead: D");
  STATECUT_EXPECT_SHAPE_ERROR(mamba2_multihead({}, {}, x4, dt4, A4, D4, true), "groups");
  EXPECT_EQ(mamba2_multihead(C2, B2, x4, dt4, A4, D4, true).size(), 4u);
}

TEST(BadInput_Shapes, primitivesNameTheArgument) {
  const Mat x = Mat::Ones(4, 3);
  const Vec w3 = Vec::Ones(3), w2 = Vec::Ones(2);
  STATECUT_EXPECT_SHAPE_ERROR(causal_depthwise_conv(x, Mat::Ones(2, 4)), "causal_depthwise_conv: w");
  STATECUT_EXPECT_SHAPE_ERROR(causal_depthwise_conv(x, Mat::Ones(3, 0)), "no taps");
  STATECUT_EXPECT_SHAPE_ERROR(causal_depthwise_conv(x, Mat::Ones(3, 4), &w2), "causal_depthwise_conv: bias");
  const Mat hist = Mat::Zero(2, 3);
  STATECUT_EXPECT_SHAPE_ERROR(causal_depthwise_conv(x, Mat::Ones(3, 4), nullptr, true, &hist), "history");
  STATECUT_EXPECT_SHAPE_ERROR(rmsnorm_rows(x, w2, 1e-6), "rmsnorm_rows: w");
  STATECUT_EXPECT_SHAPE_ERROR(gated_rmsnorm_rows(x, Mat::Ones(4, 2), w3, 1e-6), "gated_rmsnorm_rows: z");
  STATECUT_EXPECT_SHAPE_ERROR(gated_rmsnorm_rows(x, x, w2, 1e-6), "gated_rmsnorm_rows: w");
  STATECUT_EXPECT_SHAPE_ERROR(gated_rmsnorm_rows(x, x, w3, 1e-6, true, 2), "group_size 2");
  STATECUT_EXPECT_SHAPE_ERROR(gated_rmsnorm_rows(x, x, w3, 1e-6, false, -1), "group_size -1");
  STATECUT_EXPECT_SHAPE_ERROR(keep_columns(x, {0, 3}), "index 3 outside");
  STATECUT_EXPECT_SHAPE_ERROR(keep_columns(x, {-1}), "index -1 outside");
  STATECUT_EXPECT_SHAPE_ERROR(keep_columns(x, {1, 1}), "index 1 repeated");
}

}  // namespace
}  // namespace statecut::ref

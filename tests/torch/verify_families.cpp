// `statecut verify` on every family: each shared fixture passes every check it can run, and a checkpoint written
// by `statecut prune` (l1, data-free) passes with its source, the pruned rows compared bit for bit.
#include <cstdint>
#include <fstream>

#include "tests/torch/verify_test_util.h"

namespace {
using namespace verify_test;
using statecut::verify::run_verify;

struct FamilyCase {
  const char* fixture;
  bool theorem_rotation;  ///< fla delta_net only: the rotation check runs (else it skips and says why)
};

void PrintTo(const FamilyCase& c, std::ostream* os) { *os << c.fixture; }

class Verify_Family : public ::testing::TestWithParam<FamilyCase> {};

TEST_P(Verify_Family, fixturePassesEveryCheck) {
  const std::string dir = fixture(GetParam().fixture);
  if (dir.empty()) GTEST_SKIP() << GetParam().fixture << ": fixture not found";
  const Report r = run_verify(quick(dir));
  EXPECT_TRUE(r.passed()) << failures(r);
  EXPECT_EQ(r.exit_code(), 0);
  // Every check that needs only the checkpoint ran (pruned: no statecut.json; kernels: CPU).
  for (const char* name : {"load", "config", "reference", "reference.model", "chunk-recurrent", "chunk-recurrent.model",
                           "state-carry", "theorems.eff-rank", "theorems.readout", "theorems.permutation",
                           "determinism"})
    EXPECT_EQ(row(r, name).status, Status::Pass) << name << ": " << row(r, name).message;
  EXPECT_EQ(row(r, "theorems.rotation").status, GetParam().theorem_rotation ? Status::Pass : Status::Skip)
      << row(r, "theorems.rotation").message;
  EXPECT_EQ(row(r, "pruned").status, Status::Skip);
  EXPECT_EQ(row(r, "kernels").status, Status::Skip);
  // The figures are measured, not placeholders: the recurrences agree but not bit for bit.
  EXPECT_GT(row(r, "reference").figure, 0.0);
  EXPECT_LT(row(r, "reference").figure, row(r, "reference").threshold);
}

TEST_P(Verify_Family, prunedByStatecutPassesWithItsSource) {
  const std::string dir = fixture(GetParam().fixture);
  if (dir.empty()) GTEST_SKIP() << GetParam().fixture << ": fixture not found";
  TempDir tmp("verify-fam");
  const std::string out = tmp / "pruned";
  prune_l1(dir, out);
  const Report r = run_verify(quick(out, dir));
  EXPECT_TRUE(r.passed()) << failures(r);
  EXPECT_EQ(row(r, "pruned.record").status, Status::Pass) << row(r, "pruned.record").message;
  EXPECT_EQ(row(r, "pruned.weights").status, Status::Pass) << row(r, "pruned.weights").message;
  EXPECT_EQ(row(r, "pruned.certificate").status, Status::Skip);  // l1 claims no certificate
  EXPECT_EQ(row(r, "config").status, Status::Pass) << row(r, "config").message;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Verify_Family,
                         ::testing::Values(FamilyCase{"fla_delta_net", true}, FamilyCase{"fla_delta_net_bf16", true},
                                           FamilyCase{"fla_gated_deltanet", false},
                                           FamilyCase{"fla_gated_deltanet_gva", false},
                                           FamilyCase{"hf_mamba2", false}, FamilyCase{"hf_qwen3_5", false},
                                           FamilyCase{"hf_qwen3_next", false}),
                         [](const auto& info) { return std::string(info.param.fixture); });

// The fixtures fla cut at 50% (keep.json, no statecut.json): verify runs every model check on them.
TEST(Verify_FlaPruned, fixturesPrunedByFlaPass) {
  for (const char* name : {"fla_delta_net_pruned50", "fla_gated_deltanet_pruned50"}) {
    const std::string dir = fixture(name);
    if (dir.empty()) continue;
    const Report r = run_verify(quick(dir));
    EXPECT_TRUE(r.passed()) << name << "\n" << failures(r);
  }
}

// fla DeltaNet's other layer options (elu+1 activation with sum-normalised q/k; relu): every check passes. The rotation
// theorem evaluates the layers without convs and activation and with l2-normed q/k — a sum-normed key is not rotation
// invariant, so keeping the checkpoint's `sum` there failed a valid model (figure 1.4).
TEST(Verify_FlaOptions, deltaNetLayerOptionsPassEveryCheck) {
  const std::string src = fixture("fla_delta_net");
  if (src.empty()) GTEST_SKIP() << "fla_delta_net: fixture not found";
  for (const auto& [act, norm] : {std::pair<const char*, const char*>{"elu", "sum"}, {"relu", "l2"}}) {
    SCOPED_TRACE(std::string(act) + " / " + norm);
    statecut::test::TempDir d("verify_opts");
    const std::string dir = d / "ck";
    copy_checkpoint(src, dir);
    edit_json(dir + "/config.json", [&](nlohmann::json& c) {
      c["qk_activation"] = act;
      c["qk_norm"] = norm;
    });
    const Report r = run_verify(quick(dir));
    EXPECT_TRUE(r.passed()) << failures(r);
    EXPECT_EQ(row(r, "theorems.rotation").status, Status::Pass) << row(r, "theorems.rotation").message;
  }
}

// The shipped trained model (bf16): the reference, theorem and invariance checks on real weights.
TEST(Verify_Shipped, byteDeltaNetPassesOnItsOwnText) {
  auto o = quick((kRoot / "assets" / "byte_delta_net_4L").string());
  o.text = {(kRoot / "assets" / "corpora" / "pydocs_valid.txt").string()};
  o.windows = 1;
  o.len = 160;
  const Report r = run_verify(o);
  EXPECT_TRUE(r.passed()) << failures(r);
  EXPECT_EQ(r.header["dtype"], "bf16");
  EXPECT_EQ(r.header["input"]["kind"], "text");
}

}  // namespace

// Checkpoints of tests/data/variants (configs unlike the fixtures'): Mamba-2 with a bias on in_proj, whose B and C rows
// prune cuts with their weight rows — verify's row map knew only the conv biases and failed a correct prune
// ("in_proj.bias: differs from the source"); fla DeltaNet whose config says conv_bias true while fla built no conv
// biases (its models never pass the key on): the checkpoint loads, prunes and verifies.
// Each is also pruned by DRRQR calibrated on a token file (the variants ship no tokenizer), and its strong-RRQR
// certificate checked.
TEST(Verify_Variants, prunedVariantsPassWithTheirSource) {
  TempDir tmp("verify-var");
  const std::string tokens = tmp / "calib.u16.bin";
  {
    std::ofstream f(tokens, std::ios::binary);
    for (uint32_t i = 0; i < 4096; ++i) {
      const uint16_t id = static_cast<uint16_t>((i * 2654435761u >> 7) % 128);  // vocab 128
      f.write(reinterpret_cast<const char*>(&id), sizeof(id));
    }
  }
  for (const char* name : {"hf_mamba2_bias_tied", "fla_delta_net_gate_elu_sum"}) {
    SCOPED_TRACE(name);
    const std::string dir = std::string(STATECUT_SOURCE_DIR) + "/tests/data/variants/" + name;
    const std::string out = tmp / (std::string(name) + "_l1");
    prune_l1(dir, out);
    const Report r = run_verify(quick(out, dir));
    EXPECT_TRUE(r.passed()) << failures(r);
    EXPECT_EQ(row(r, "pruned.weights").status, Status::Pass) << row(r, "pruned.weights").message;
    statecut::PruneOptions o;
    o.checkpoint = dir;
    o.out = tmp / (std::string(name) + "_drrqr");
    o.method = "drrqr";
    o.ratio = 0.5;
    o.calib = {tokens};
    o.calib_seqs = 4;
    o.calib_len = 256;
    statecut::prune_checkpoint(o);
    const Report rd = run_verify(quick(o.out, dir));
    EXPECT_TRUE(rd.passed()) << failures(rd);
    EXPECT_EQ(row(rd, "pruned.certificate").status, Status::Pass) << row(rd, "pruned.certificate").message;
  }
}

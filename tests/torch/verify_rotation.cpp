// pruned.weights on a pca prune (check_rotation.h): the rotated q/k rows are held to W' = fl(T W), the conv filters
// to fl((T∘T) C), with one orthonormal T per head recovered from the weights. A tampered row fails, naming the head;
// an equivalent rotation (the channels permuted in every block alike) passes, as it is one.
#include "optimized/io/checkpoint.h"
#include "tests/torch/verify_test_util.h"

namespace {
using namespace verify_test;
using statecut::verify::run_verify;

bool mentions(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }

/// The pruned.weights row of verify --only pruned against the source.
CheckResult weights_row(const std::string& out, const std::string& src) {
  auto v = quick(out, src);
  v.only = {"pruned"};
  return row(run_verify(v), "pruned.weights");
}

/// A pca prune of `src` (in tmp), verified once untouched.
std::string pruned_pca(const TempDir& tmp, const std::string& src) {
  const std::string out = tmp / "pruned";
  prune_calibrated(src, out, "pca");
  const CheckResult w = weights_row(out, src);
  EXPECT_EQ(w.status, Status::Pass) << w.message;
  EXPECT_TRUE(mentions(w.message, "rotated heads are one orthonormal T")) << w.message;
  return out;
}

const std::string kLayer1 = "model.layers.1.attn.";

struct Tamper {
  const char* what;
  std::vector<const char*> tensors;  ///< under model.layers.1.attn., each given the same edit
  std::function<void(torch::Tensor&)> edit;
  const char* expect;  ///< in the failing row's message
};

/// Each edit of layer 1's rows (head 0: rows 0..k'−1) is caught, on the shipped bf16 model and the f32 fixture.
/// A zeroed k row, two k rows swapped, a q row scaled alone leave the source's row space (the residual); the same
/// row scaled in q and k stays in it and is caught by T̂'s orthonormality; a conv filter moved by a twentieth of its
/// head's norm fails the conv line.
std::vector<Tamper> tampers() {
  const auto swap14 = [](torch::Tensor& t) {
    const torch::Tensor a = t[1].clone();
    t[1].copy_(t[4]);
    t[4].copy_(a);
  };
  return {
      {"a zeroed k row", {"k_proj.weight"}, [](torch::Tensor& t) { t[3].zero_(); },
       "channel 3 of the rotation (model.layers.1.attn.q_proj.weight row 3, model.layers.1.attn.k_proj.weight row 3): "
       "no rotation of the source's"},
      {"two k rows swapped, q left", {"k_proj.weight"}, swap14, "no rotation of the source's"},
      {"a q row scaled by 1.1", {"q_proj.weight"}, [](torch::Tensor& t) { t[2].mul_(1.1); }, "channel 2 of the rotation"},
      {"the same row scaled by 1.1 in q and k", {"q_proj.weight", "k_proj.weight"},
       [](torch::Tensor& t) { t[2].mul_(1.1); }, "channel 2 of the rotation (model.layers.1.attn.q_proj.weight row 2, "
       "model.layers.1.attn.k_proj.weight row 2): the q/k rows fit the source's only through a T̂ whose rows are not orthonormal"},
      {"a q conv filter moved by a twentieth of the head's norm", {"q_conv1d.weight"},
       [](torch::Tensor& t) {
         const int64_t kp = t.size(0) / 4;  // 4 key heads in both models; head 0's rows 0..k'-1
         const double n = t.narrow(0, 0, kp).to(torch::kFloat64).norm().item<double>();
         t[5][0][1].add_(0.05 * n);
       },
       "channel 5 of the rotation (model.layers.1.attn.q_conv1d.weight row 5, model.layers.1.attn.k_conv1d.weight row 5): "
       "the conv filters are not"},
  };
}

void expect_tampers_fail(const std::string& src, const std::string& label) {
  for (const Tamper& tm : tampers()) {
    SCOPED_TRACE(label + ": " + tm.what);
    TempDir tmp("verify-rot");
    const std::string out = pruned_pca(tmp, src);
    for (const char* t : tm.tensors) edit_tensor(out, kLayer1 + t, tm.edit);
    const CheckResult w = weights_row(out, src);
    EXPECT_EQ(w.status, Status::Fail) << w.message;
    EXPECT_EQ(w.where, "layer 1 head 0 rotation");
    EXPECT_TRUE(mentions(w.message, "layer 1 head 0: ")) << w.message;
    EXPECT_TRUE(mentions(w.message, tm.expect)) << w.message;
  }
}

TEST(Verify_Rotation, tamperedRowsOfAPcaPruneFailNamingTheHeadInBf16) {
  expect_tampers_fail((kRoot / "assets" / "byte_delta_net_4L").string(), "shipped model (bf16)");
}

TEST(Verify_Rotation, tamperedRowsOfAPcaPruneFailNamingTheHeadInF32) {
  const std::string src = fixture("fla_delta_net");
  if (src.empty()) GTEST_SKIP() << "fixture fla_delta_net not found";
  expect_tampers_fail(src, "fla_delta_net (f32)");
}

/// Channels i and j swapped in q, k and both convs alike is the rotation P·T (P a permutation): the same model up
/// to the order of the state's rows, and still one orthonormal T per head. It passes.
TEST(Verify_Rotation, channelsPermutedInEveryBlockAlikeIsStillARotation) {
  const std::string src = (kRoot / "assets" / "byte_delta_net_4L").string();
  TempDir tmp("verify-rot-perm");
  const std::string out = pruned_pca(tmp, src);
  for (const char* t : {"q_proj.weight", "k_proj.weight", "q_conv1d.weight", "k_conv1d.weight"})
    edit_tensor(out, kLayer1 + t, [](torch::Tensor& w) {
      const torch::Tensor a = w[1].clone();
      w[1].copy_(w[6]);
      w[6].copy_(a);
    });
  const CheckResult w = weights_row(out, src);
  EXPECT_EQ(w.status, Status::Pass) << w.message;
}

/// A fine-tune that changed q_proj (its record names it): T̂ is recovered from the k rows alone, so a zeroed k row
/// still fails, while the changed q rows are held to shape only.
TEST(Verify_Rotation, aFineTunedQProjLeavesTheKRowsChecked) {
  const std::string src = (kRoot / "assets" / "byte_delta_net_4L").string();
  TempDir tmp("verify-rot-ft");
  const std::string out = pruned_pca(tmp, src);
  std::vector<std::string> changed;
  for (int l = 0; l < 4; ++l) changed.push_back("model.layers." + std::to_string(l) + ".attn.q_proj.weight");
  edit_json(out + "/statecut.json", [&](nlohmann::json& j) { j["finetune"] = {{"steps", 1}, {"changed_tensors", changed}}; });
  edit_tensor(out, kLayer1 + "q_proj.weight", [](torch::Tensor& t) { t.add_(0.01); });
  EXPECT_EQ(weights_row(out, src).status, Status::Pass) << weights_row(out, src).message;
  edit_tensor(out, kLayer1 + "k_proj.weight", [](torch::Tensor& t) { t[3].zero_(); });
  const CheckResult w = weights_row(out, src);
  EXPECT_EQ(w.status, Status::Fail) << w.message;
  EXPECT_TRUE(mentions(w.message, "channel 3 of the rotation (model.layers.1.attn.k_proj.weight row 3)")) << w.message;
}

/// Without its statecut.json (dropped on the way) a pca prune is recognised as a rotation, since not one q row is
/// a source row, and held to the same bounds: it passes untouched and fails with a zeroed k row.
TEST(Verify_Rotation, aPcaPruneWithoutItsRecordIsCheckedAsARotation) {
  const std::string src = (kRoot / "assets" / "byte_delta_net_4L").string();
  TempDir tmp("verify-rot-norec");
  const std::string out = pruned_pca(tmp, src);
  fs::remove(fs::path(out) / "statecut.json");
  const CheckResult ok = weights_row(out, src);
  EXPECT_EQ(ok.status, Status::Pass) << ok.message;
  EXPECT_TRUE(mentions(ok.message, "checked as a rotation")) << ok.message;
  edit_tensor(out, kLayer1 + "k_proj.weight", [](torch::Tensor& t) { t[3].zero_(); });
  const CheckResult bad = weights_row(out, src);
  EXPECT_EQ(bad.status, Status::Fail) << bad.message;
  EXPECT_TRUE(mentions(bad.message, "layer 1 head 0: channel 3 of the rotation")) << bad.message;
}

/// Every family's layout of the rotated blocks (fla's separate q/k/conv tensors, Gated DeltaNet's grouped values,
/// Mamba-2's B and C inside in_proj and conv1d, the Qwen3.5 and Qwen3-Next packed projections) passes untouched.
TEST(Verify_Rotation, aPcaPruneOfEveryFamilyPasses) {
  for (const char* name : {"fla_gated_deltanet_gva", "hf_mamba2", "hf_qwen3_5", "hf_qwen3_next"}) {
    SCOPED_TRACE(name);
    const std::string src = fixture(name);
    if (src.empty()) continue;
    TempDir tmp("verify-rot-fam");
    pruned_pca(tmp, src);
  }
}

/// A chain with one rotation (l1 then pca, pca then l1) is one rotation Q = S₂·T·S₁ of its first source, conv filters
/// (Q∘Q)·C: checked so against --source FIRST, and a zeroed k row fails. Two rotations still give q/k rows T₂T₁·W,
/// checked (a zeroed row fails), but conv filters of no one rotation: the row skips, naming the step's own source.
TEST(Verify_Rotation, aChainWithOneRotationIsCheckedAgainstItsFirstSource) {
  const std::string src = (kRoot / "assets" / "byte_delta_net_4L").string();
  TempDir tmp("verify-rot-chain");
  const std::string l1 = tmp / "l1", pca = tmp / "pca";
  prune_l1(src, l1);
  prune_calibrated(src, pca, "pca");
  for (const auto& [first, second] : {std::pair{l1, "pca"}, std::pair{pca, "l1"}, std::pair{pca, "pca"}}) {
    SCOPED_TRACE(first + " then " + second);
    const std::string out = first + "_" + second;
    if (std::string(second) == "pca") prune_calibrated(first, out, "pca");
    else prune_l1(first, out);
    const CheckResult ok = weights_row(out, src);
    if (first == pca && std::string(second) == "pca") {  // q/k rows checked, convs out of reach: skipped
      EXPECT_EQ(ok.status, Status::Skip) << ok.message;
      EXPECT_TRUE(mentions(ok.message, "2 steps of the chain rotated channels (pca): their q/k rows are checked as one "
                                       "rotation of " + src)) << ok.message;
      EXPECT_TRUE(mentions(ok.message, "give --source " + pca)) << ok.message;
      EXPECT_TRUE(mentions(ok.message, "16 rotated heads are one orthonormal T")) << ok.message;
      edit_tensor(out, kLayer1 + "k_proj.weight", [](torch::Tensor& t) { t[3].zero_(); });
      const CheckResult bad = weights_row(out, src);
      EXPECT_EQ(bad.status, Status::Fail) << bad.message;
      EXPECT_TRUE(mentions(bad.message, "layer 1 head 0: channel 3 of the rotation")) << bad.message;
      continue;
    }
    EXPECT_EQ(ok.status, Status::Pass) << ok.message;
    EXPECT_TRUE(mentions(ok.message, "2 pruning steps, one a rotation")) << ok.message;
    edit_tensor(out, kLayer1 + "k_proj.weight", [](torch::Tensor& t) { t[3].zero_(); });
    const CheckResult bad = weights_row(out, src);
    EXPECT_EQ(bad.status, Status::Fail) << bad.message;
    EXPECT_TRUE(mentions(bad.message, "layer 1 head 0: channel 3 of the rotation")) << bad.message;
  }
}

/// A source head whose q/k rows do not determine T (a channel zeroed in q and k: rank dk − 1) is not passed: the row
/// is skipped naming it, while a pruned head of random rows still fails its fit to the source.
TEST(Verify_Rotation, aSourceHeadThatDoesNotDetermineTIsSkippedNotPassed) {
  TempDir tmp("verify-rot-rank");
  const std::string src = tmp / "src";
  copy_checkpoint((kRoot / "assets" / "byte_delta_net_4L").string(), src);
  for (const char* t : {"q_proj.weight", "k_proj.weight"})
    edit_tensor(src, "model.layers.0.attn." + std::string(t), [](torch::Tensor& w) { w[5].zero_(); });
  const std::string out = tmp / "pruned";
  prune_calibrated(src, out, "pca");
  const CheckResult w = weights_row(out, src);
  EXPECT_EQ(w.status, Status::Skip) << w.message;
  EXPECT_TRUE(mentions(w.message, "1 rotated heads not determined by the source: layer 0 head 0: the source's q/k rows "
                                  "of this head have rank 63 < dk 64")) << w.message;
  EXPECT_TRUE(mentions(w.message, "15 rotated heads are one orthonormal T")) << w.message;
  edit_tensor(out, "model.layers.0.attn.k_proj.weight", [](torch::Tensor& t) {
    t.narrow(0, 0, 32).copy_(torch::randn({32, t.size(1)}, torch::TensorOptions().dtype(t.scalar_type())));
  });
  const CheckResult bad = weights_row(out, src);
  EXPECT_EQ(bad.status, Status::Fail) << bad.message;
  EXPECT_TRUE(mentions(bad.message, "layer 0 head 0: channel")) << bad.message;
}

/// NaN in a rotated row: every bound's comparison with NaN is false, so it is refused outright.
TEST(Verify_Rotation, aNanInARotatedRowFails) {
  const std::string src = (kRoot / "assets" / "byte_delta_net_4L").string();
  TempDir tmp("verify-rot-nan");
  const std::string out = pruned_pca(tmp, src);
  edit_tensor(out, kLayer1 + "q_conv1d.weight", [](torch::Tensor& t) { t[9][0][2] = NAN; });
  const CheckResult w = weights_row(out, src);
  EXPECT_EQ(w.status, Status::Fail) << w.message;
  EXPECT_TRUE(mentions(w.message, "layer 1 head 0: channel 9 of the rotation (model.layers.1.attn.q_conv1d.weight row 9, "
                                  "model.layers.1.attn.k_conv1d.weight row 9): holds NaN or Inf")) << w.message;
}

/// Records a pca prune never writes: one layer rotated beside kept ones (its "rotation" switched every layer's
/// keep-set checks off), "rotation" not a boolean, a rotation under another method, a ratio that gives another k',
/// a head_k_dim that is not its named source's dk.
TEST(Verify_Rotation, recordsAPcaPruneNeverWritesFail) {
  const std::string src = (kRoot / "assets" / "byte_delta_net_4L").string();
  TempDir tmp("verify-rot-rec");
  const std::string l1 = tmp / "l1", pca = tmp / "pca";
  prune_l1(src, l1);
  pruned_pca(tmp, src);
  fs::rename(tmp / "pruned", pca);
  struct Edit {
    std::string dir, what;
    std::function<void(nlohmann::json&)> edit;
    std::string row, expect;
  };
  const std::vector<Edit> edits = {
      {l1, "layer 0 rotated, layer 1 keeping one channel twice",
       [](nlohmann::json& j) {
         j["selection"]["layers"][0] = {{"layer", 0}, {"rotation", true}};
         j["selection"]["layers"][1]["keep"][0][1] = j["selection"]["layers"][1]["keep"][0][0];
       },
       "pruned.record", "channel"},
      {l1, "layer 0 rotated, the others kept", [](nlohmann::json& j) {
         j["selection"]["layers"][0] = {{"layer", 0}, {"rotation", true}};
       }, "pruned.record", "1 layers rotated and 3 kept channels"},
      {pca, "rotation \"yes\"", [](nlohmann::json& j) { j["selection"]["layers"][1]["rotation"] = "yes"; },
       "pruned.record", "layer 1: \"rotation\" is \"yes\", not true or false"},
      {pca, "method l1", [](nlohmann::json& j) { j["method"] = "l1"; }, "pruned.record",
       "layers rotated, but method is \"l1\""},
      {pca, "ratio 0.9", [](nlohmann::json& j) { j["ratio"] = 0.9; }, "pruned.record", "ratio 0.9 of dk 64 keeps"},
      {pca, "head_k_dim 48, ratio null", [](nlohmann::json& j) {
         j["head_k_dim"] = 48;
         j["ratio"] = nullptr;
       }, "pruned.weights", "head_k_dim 48, but its source"},
  };
  for (const Edit& e : edits) {
    SCOPED_TRACE(e.what);
    const std::string out = e.dir + "_edited";
    fs::remove_all(out);
    copy_checkpoint(e.dir, out);
    edit_json(out + "/statecut.json", e.edit);
    auto v = quick(out, src);
    v.only = {"pruned"};
    const Report r = run_verify(v);
    EXPECT_EQ(r.exit_code(), 1);
    const CheckResult& c = row(r, e.row);
    EXPECT_EQ(c.status, Status::Fail) << c.message;
    EXPECT_TRUE(mentions(c.message, e.expect)) << c.message;
  }
}

/// pruned.certificate of a pca prune: the recovered rotations are pca's on the recomputed calibration features.
/// Layer 1 head 0 rewritten as another rotation of the source — a random orthonormal T, a channel subset labelled
/// pca, pca's own T with row 0's sign flipped — is still one rotation (pruned.weights passes) but not pca's: each
/// fails the certificate, naming the head.
TEST(Verify_Rotation, aRotationThatIsNotPcasFailsTheCertificate) {
  const std::string src = (kRoot / "assets" / "byte_delta_net_4L").string();
  TempDir tmp("verify-rot-cert");
  const std::string pca = pruned_pca(tmp, src);
  {
    auto v = quick(pca, src);
    v.only = {"pruned"};
    const CheckResult c = row(run_verify(v), "pruned.certificate");
    ASSERT_EQ(c.status, Status::Pass) << c.message;
  }
  const auto ws = statecut::WeightSource::open_dir(src);
  const int64_t dk = 64, kp = 32;
  torch::manual_seed(statecut::test::seed_value(7));
  const torch::Tensor pca_T = [&] {  // pca's own T of layer 1 head 0, recovered exactly from the f64 surgery's q rows
    const torch::Tensor wq = ws.raw(kLayer1 + "q_proj.weight").narrow(0, 0, dk).to(torch::kFloat64);
    const torch::Tensor wp = statecut::WeightSource::open_dir(pca).raw(kLayer1 + "q_proj.weight").narrow(0, 0, kp)
                                 .to(torch::kFloat64);
    return std::get<0>(torch::linalg_lstsq(wq.t(), wp.t(), c10::nullopt, c10::nullopt)).t();
  }();
  struct Variant {
    const char* what;
    torch::Tensor T;
    const char* expect;
  };
  torch::Tensor flipped = pca_T.clone();
  flipped[0].neg_();
  const std::vector<Variant> variants = {
      {"a random orthonormal T", std::get<0>(torch::linalg_qr(torch::randn({dk, kp}, torch::kFloat64))).t(),
       "layer 1 head 0: row 0 of the rotation is not pca's eigenvector 0"},
      {"channels 0..31 (a subset labelled pca)", torch::eye(dk, torch::kFloat64).narrow(0, 0, kp), "not pca's"},
      {"pca's T with row 0's sign flipped", flipped, "row 0 of the rotation is pca's eigenvector with the sign flipped"},
  };
  for (const Variant& var : variants) {
    SCOPED_TRACE(var.what);
    const std::string out = tmp / "variant";
    fs::remove_all(out);
    copy_checkpoint(pca, out);
    for (const char* t : {"q_proj.weight", "k_proj.weight", "q_conv1d.weight", "k_conv1d.weight"}) {
      const bool conv = std::string(t).find("conv") != std::string::npos;
      const torch::Tensor M = conv ? var.T * var.T : var.T;
      const torch::Tensor head = ws.raw(kLayer1 + t).narrow(0, 0, dk).to(torch::kFloat64);
      const torch::Tensor rot = M.matmul(head.reshape({dk, -1})).reshape({kp, head.size(1), -1});
      edit_tensor(out, kLayer1 + t, [&](torch::Tensor& w) {
        w.narrow(0, 0, kp).copy_(conv ? rot.reshape_as(w.narrow(0, 0, kp)) : rot.reshape({kp, -1}));
      });
    }
    auto v = quick(out, src);
    v.only = {"pruned"};
    const Report r = run_verify(v);
    EXPECT_EQ(row(r, "pruned.weights").status, Status::Pass) << row(r, "pruned.weights").message;
    const CheckResult& c = row(r, "pruned.certificate");
    EXPECT_EQ(c.status, Status::Fail) << c.message;
    EXPECT_EQ(c.where, "layer 1 head 0");
    EXPECT_TRUE(mentions(c.message, var.expect)) << c.message;
  }
}

}  // namespace

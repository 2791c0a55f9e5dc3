// `statecut verify` must see what is wrong and say where: each broken checkpoint below fails exactly the check that
// owns the fault, with a message naming the tensor / layer / head (issue 12's list of failures).
#include <limits>

#include "optimized/io/checkpoint.h"
#include "tests/torch/verify_test_util.h"

namespace {
using namespace verify_test;
using statecut::verify::run_verify;
using statecut::verify::Unreadable;

bool contains(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }

// A published Qwen3.5 checkpoint carries an MTP head (mtp.*) and a vision tower (model.visual.*) beside the language
// model: load counts them and passes; any other tensor the loader does not bind still fails it.
TEST(Verify_Failures, mtpHeadAndVisionTowerPassLoadButAStrayTensorFails) {
  const std::string src = fixture("hf_qwen3_5");
  if (src.empty()) GTEST_SKIP() << "fixture hf_qwen3_5 not found";
  for (const bool stray : {false, true}) {
    SCOPED_TRACE(stray ? "with a stray tensor" : "MTP and vision only");
    TempDir tmp("verify-mtp");
    const std::string dir = tmp / "ckpt";
    copy_checkpoint(src, dir);
    rewrite_model(dir, [&](const statecut::io::SafetensorsFile& f, statecut::io::SafetensorsWriter& w) {
      const std::string norm = f.has("model.norm.weight") ? "model.norm.weight" : "model.language_model.norm.weight";
      for (const auto& n : f.names()) w.add(f.tensor(n));
      std::vector<std::string> extra = {"mtp.layers.0.input_layernorm.weight", "model.visual.blocks.0.norm1.weight",
                                        "model.rotary_emb.inv_freq"};
      if (stray) extra.push_back("model.extra_norm.weight");
      for (const auto& n : extra) {
        const auto& v = f.tensor(norm);
        w.add(n, v.dtype, v.shape, v.data, v.nbytes);
      }
    });
    const Report r = run_verify(quick(dir));
    const CheckResult& load = row(r, "load");
    if (stray) {
      EXPECT_EQ(load.status, Status::Fail);
      // the loader refuses it (as every command does), naming it
      EXPECT_TRUE(contains(load.message, "model.extra_norm.weight: a weight that")) << load.message;
      EXPECT_FALSE(contains(load.message, "mtp.")) << load.message;
    } else {
      EXPECT_EQ(load.status, Status::Pass) << load.message;
      EXPECT_TRUE(contains(load.message, "2 of an MTP head or vision tower")) << load.message;
      EXPECT_TRUE(contains(load.message, "1 the loaders derive instead")) << load.message;  // not counted as MTP
      EXPECT_TRUE(r.passed()) << failures(r);
    }
  }
}

TEST(Verify_Failures, nanInOneConvWeightFailsLoadNamingTheTensor) {
  const std::string src = fixture("fla_delta_net");
  if (src.empty()) GTEST_SKIP() << "fixture fla_delta_net not found";
  TempDir tmp("verify-nan");
  const std::string dir = tmp / "ckpt";
  copy_checkpoint(src, dir);
  const std::string bad = "model.layers.1.attn.k_conv1d.weight";
  edit_tensor(dir, bad, [](torch::Tensor& t) { t[5][0][2] = std::numeric_limits<float>::quiet_NaN(); });
  const Report r = run_verify(quick(dir));
  EXPECT_EQ(r.exit_code(), 1);
  const CheckResult& load = row(r, "load");
  EXPECT_EQ(load.status, Status::Fail);
  EXPECT_EQ(load.where, bad);
  EXPECT_TRUE(contains(load.message, bad + ": 1 NaN")) << load.message;
  EXPECT_TRUE(contains(load.message, "[5,0,2]")) << load.message;
  EXPECT_EQ(row(r, "reference").status, Status::Skip);  // nothing runs on a model that does not load
}

// A weight stored as integers (here lm_head's fp32 bytes relabelled I32) fails load in verify's own words, naming
// the tensor and its dtype, once (the loader's refusal of the same tensor is the same fact); of six such weights the
// message names four and counts the rest.
TEST(Verify_Failures, anIntegerWeightFailsLoadNamingItsDtype) {
  const std::string src = fixture("fla_delta_net");
  if (src.empty()) GTEST_SKIP() << "fixture fla_delta_net not found";
  TempDir tmp("verify-int");
  const std::string dir = tmp / "ckpt";
  copy_checkpoint(src, dir);
  const std::string bad = "lm_head.weight";
  rewrite_model(dir, [&](const statecut::io::SafetensorsFile& f, statecut::io::SafetensorsWriter& w) {
    EXPECT_EQ(f.tensor(bad).dtype, statecut::io::DType::F32);
    for (const auto& n : f.names()) {
      const auto& v = f.tensor(n);
      w.add(n, n == bad ? statecut::io::DType::I32 : v.dtype, v.shape, v.data, v.nbytes);
    }
  });
  const Report r = run_verify(quick(dir));
  const CheckResult& load = row(r, "load");
  EXPECT_EQ(load.status, Status::Fail);
  EXPECT_EQ(load.where, bad);
  EXPECT_TRUE(contains(load.message, bad + ": dtype I32 (the models load F32, BF16, F16, F64)")) << load.message;
  EXPECT_EQ(r.exit_code(), 1);
  // Six such weights: the message lists four and counts the rest; details hold every one.
  const std::string six = tmp / "six";
  copy_checkpoint(src, six);
  int relabelled = 0;
  rewrite_model(six, [&](const statecut::io::SafetensorsFile& f, statecut::io::SafetensorsWriter& w) {
    for (const auto& n : f.names()) {
      const auto& v = f.tensor(n);
      const bool relabel = v.dtype == statecut::io::DType::F32 && relabelled < 6;
      relabelled += relabel ? 1 : 0;
      w.add(n, relabel ? statecut::io::DType::I32 : v.dtype, v.shape, v.data, v.nbytes);
    }
  });
  ASSERT_EQ(relabelled, 6);
  const Report many = run_verify(quick(six));
  const CheckResult& many_load = row(many, "load");
  EXPECT_EQ(many_load.details["problems"].size(), 6u) << many_load.details;
  const std::string tail = "; and 2 more";
  ASSERT_GT(many_load.message.size(), tail.size()) << many_load.message;
  EXPECT_EQ(many_load.message.substr(many_load.message.size() - tail.size()), tail) << many_load.message;
}

/// A prune that `statecut finetune` trained afterwards: its conv weights are no longer the source's bytes. With the
/// record's "finetune" entry naming the tensor the rest passes; without a finetune entry the same edit fails, and so
/// does an entry without "changed_tensors" (which statecut finetune always writes): it skipped the whole comparison,
/// so one line of JSON hid any edit, an o_norm or an embedding no fine-tune touched (audit 25 F4).
TEST(Verify_Failures, fineTunedPruneSkipsTheByteComparisonOnlyWithItsFinetuneRecord) {
  const std::string src = fixture("fla_delta_net");
  if (src.empty()) GTEST_SKIP() << "fixture fla_delta_net not found";
  TempDir tmp("verify-ft");
  const std::string out = tmp / "pruned";
  prune_l1(src, out);
  const std::string conv = "model.layers.0.attn.k_conv1d.weight";
  edit_tensor(out, conv, [](torch::Tensor& t) { t.add_(0.01); });
  const Report plain = run_verify(quick(out, src));
  EXPECT_EQ(row(plain, "pruned.weights").status, Status::Fail) << "a changed weight without a finetune record";
  edit_json(out + "/statecut.json", [&](nlohmann::json& j) { j["finetune"] = {{"steps", 1}, {"changed_tensors", {conv}}}; });
  const Report tuned = run_verify(quick(out, src));
  EXPECT_EQ(row(tuned, "pruned.weights").status, Status::Pass) << row(tuned, "pruned.weights").message;
  EXPECT_EQ(row(tuned, "pruned.record").status, Status::Pass);
  EXPECT_TRUE(tuned.passed()) << failures(tuned);
  edit_json(out + "/statecut.json", [](nlohmann::json& j) { j["finetune"] = {{"steps", 1}}; });
  const Report unnamed = run_verify(quick(out, src));
  const CheckResult& w = row(unnamed, "pruned.weights");
  EXPECT_EQ(w.status, Status::Fail);
  EXPECT_TRUE(contains(w.message, "without \"changed_tensors\"")) << w.message;
  EXPECT_EQ(unnamed.exit_code(), 1);
}

/// After `finetune --full` the record names every tensor as changed: nothing is left to compare with the source bit
/// for bit, so the kept channels go unchecked. The row says so and skips; it does not pass over nothing (audit 25).
TEST(Verify_Failures, aPruneWhoseEveryTensorWasFineTunedSkipsTheWeightsRowSayingWhy) {
  const std::string src = fixture("fla_delta_net");
  if (src.empty()) GTEST_SKIP() << "fixture fla_delta_net not found";
  TempDir tmp("verify-ft-full");
  const std::string out = tmp / "pruned";
  prune_l1(src, out);
  const std::vector<std::string> all = statecut::io::SafetensorsFile::open(out + "/model.safetensors").names();
  edit_json(out + "/statecut.json", [&](nlohmann::json& j) { j["finetune"] = {{"steps", 1}, {"changed_tensors", all}}; });
  edit_tensor(out, "model.layers.0.attn.q_proj.weight", [](torch::Tensor& t) { t.add_(0.01); });
  const Report r = run_verify(quick(out, src));
  const CheckResult& w = row(r, "pruned.weights");
  EXPECT_EQ(w.status, Status::Skip) << w.message;
  EXPECT_TRUE(contains(w.message, "every tensor was fine-tuned")) << w.message;
  // One tensor left out of the record is compared again, and the row passes on it.
  edit_json(out + "/statecut.json", [&](nlohmann::json& j) {
    auto names = all;
    names.erase(std::find(names.begin(), names.end(), "model.norm.weight"));
    j["finetune"]["changed_tensors"] = names;
  });
  const Report r2 = run_verify(quick(out, src));
  const CheckResult& w2 = row(r2, "pruned.weights");
  EXPECT_EQ(w2.status, Status::Pass) << w2.message;
}

TEST(Verify_Failures, recordWithTwoKeptRowsSwappedFailsPrunedNamingTheHead) {
  const std::string src = fixture("fla_delta_net");
  if (src.empty()) GTEST_SKIP() << "fixture fla_delta_net not found";
  TempDir tmp("verify-swap");
  const std::string out = tmp / "pruned";
  prune_l1(src, out);
  ASSERT_TRUE(run_verify(quick(out, src)).passed());
  edit_json(out + "/statecut.json", [](nlohmann::json& j) {
    auto& keep = j["selection"]["layers"][1]["keep"][0];
    std::swap(keep[2], keep[5]);
  });
  const Report r = run_verify(quick(out, src));
  EXPECT_EQ(r.exit_code(), 1);
  EXPECT_EQ(row(r, "pruned.record").status, Status::Pass);  // still a valid record: it just disagrees with the weights
  const CheckResult& w = row(r, "pruned.weights");
  EXPECT_EQ(w.status, Status::Fail);
  EXPECT_TRUE(contains(w.where, "layer 1 head 0")) << w.where;
  EXPECT_TRUE(contains(w.message, "channel 2 of the record")) << w.message;
  EXPECT_TRUE(contains(w.message, "holds source channel")) << w.message;
}

TEST(Verify_Failures, gatedDeltaNetExpandVNotUpdatedFailsConfig) {
  const std::string src = fixture("fla_gated_deltanet");
  if (src.empty()) GTEST_SKIP() << "fixture fla_gated_deltanet not found";
  TempDir tmp("verify-expandv");
  const std::string out = tmp / "pruned";
  prune_l1(src, out);
  const double old_expand_v = statecut::io::read_config(src)["expand_v"].get<double>();
  edit_json(out + "/config.json", [&](nlohmann::json& j) { j["expand_v"] = old_expand_v; });  // the paper code's bug
  auto o = quick(out);
  const Report r = run_verify(o);
  EXPECT_EQ(r.exit_code(), 1);
  const CheckResult& c = row(r, "config");
  EXPECT_EQ(c.status, Status::Fail);
  EXPECT_TRUE(contains(c.message, "expand_v")) << c.message;
  EXPECT_TRUE(contains(c.where, "v_proj")) << c.where;
  EXPECT_EQ(row(r, "load").status, Status::Fail);  // and the loader cannot bind v_proj either
}

TEST(Verify_Failures, qRowsKeptButConvChannelsNotFailsPruned) {
  const std::string src = fixture("fla_delta_net");
  if (src.empty()) GTEST_SKIP() << "fixture fla_delta_net not found";
  TempDir tmp("verify-conv");
  const std::string out = tmp / "pruned";
  prune_l1(src, out);
  // Layer 0's q conv gets the channels the record DROPPED (what a surgery that forgot the conv would leave).
  const auto rec = statecut::io::read_json_file(out + "/statecut.json");
  const auto keep = rec["selection"]["layers"][0]["keep"].get<std::vector<std::vector<int64_t>>>();
  const int64_t dk = rec["head_k_dim"].get<int64_t>();
  const auto src_ws = statecut::WeightSource::open_dir(src);
  const torch::Tensor conv = src_ws.raw("model.layers.0.attn.q_conv1d.weight");
  std::vector<int64_t> rows;
  for (size_t h = 0; h < keep.size(); ++h)
    for (int64_t c = 0; c < dk && rows.size() < (h + 1) * keep[h].size(); ++c)
      if (std::find(keep[h].begin(), keep[h].end(), c) == keep[h].end()) rows.push_back(static_cast<int64_t>(h) * dk + c);
  const torch::Tensor wrong = conv.index_select(0, torch::tensor(rows, torch::kInt64));
  edit_tensor(out, "model.layers.0.attn.q_conv1d.weight", [&](torch::Tensor& t) { t.copy_(wrong); });
  const Report r = run_verify(quick(out, src));
  EXPECT_EQ(r.exit_code(), 1);
  const CheckResult& w = row(r, "pruned.weights");
  EXPECT_EQ(w.status, Status::Fail);
  EXPECT_TRUE(contains(w.where, "layer 0 head 0 q conv")) << w.where;
  EXPECT_TRUE(contains(w.message, "model.layers.0.attn.q_conv1d.weight")) << w.message;
  EXPECT_EQ(row(r, "pruned.record").status, Status::Pass);
}

/// A drrqr prune of the shipped model into `out` (4 calibration windows of 512 byte ids), and the options that verify
/// its pruned group against the model.
statecut::verify::VerifyOptions shipped_drrqr_prune(const std::string& out) {
  const std::string src = (kRoot / "assets" / "byte_delta_net_4L").string();
  prune_calibrated(src, out, "drrqr", 4, 512);
  auto v = quick(out, src);
  v.only = {"pruned"};
  return v;
}

// The shipped model: its strong-RRQR selections need swaps (max rho in (1.01, 1.5]); the fixtures' QRCP pivots
// already have rho <= 1, so no record f > 1 could fail there.
TEST(Verify_Failures, drrqrRecordEditedToF101FailsTheCertificate) {
  TempDir tmp("verify-cert");
  const std::string out = tmp / "pruned";
  const auto v = shipped_drrqr_prune(out);
  const Report ok = run_verify(v);
  const CheckResult& c = row(ok, "pruned.certificate");
  ASSERT_EQ(c.status, Status::Pass) << c.message;
  EXPECT_LE(c.figure, 1.5);
  ASSERT_GT(c.figure, 1.01) << "no swap was needed: the edit below could not break the certificate";
  edit_json(out + "/statecut.json", [](nlohmann::json& j) { j["f"] = 1.01; });
  const Report bad = run_verify(v);
  const CheckResult& b = row(bad, "pruned.certificate");
  EXPECT_EQ(b.status, Status::Fail);
  EXPECT_EQ(bad.exit_code(), 1);
  EXPECT_TRUE(contains(b.message, "not a strong-RRQR selection")) << b.message;
  EXPECT_EQ(b.where, c.where);  // the head that needed the largest swap bound
  EXPECT_EQ(row(bad, "pruned.weights").status, Status::Pass);  // the weights still match the record
  // A drrqr record without its calibration has nothing to show for its claim: a failure, not a skip (an l1 selection
  // relabelled drrqr passed that way); the same selection applied with --keep-from points at the record it came from.
  edit_json(out + "/statecut.json", [](nlohmann::json& j) {
    j["f"] = 1.5;
    j["calibration"] = nullptr;
  });
  const Report nocal = run_verify(v);
  EXPECT_EQ(row(nocal, "pruned.certificate").status, Status::Fail);
  EXPECT_TRUE(contains(row(nocal, "pruned.certificate").message, "method drrqr without its calibration"));
  edit_json(out + "/statecut.json", [](nlohmann::json& j) { j["keep_from"] = "/elsewhere/statecut.json"; });
  const Report kf = run_verify(v);
  EXPECT_EQ(row(kf, "pruned.certificate").status, Status::Skip);
  EXPECT_TRUE(contains(row(kf, "pruned.certificate").message, "applied with --keep-from /elsewhere/statecut.json"));
}

// A record whose calibration windows do not lie in its files (a start edited past their end, or before their start)
// cannot re-derive its certificate: the pruned group fails naming the start, rather than reading outside the token
// stream (the 200000 byte ids of assets/corpora/pydocs_train.txt).
TEST(Verify_Failures, aCalibrationStartOutsideItsFilesFailsTheCertificate) {
  TempDir tmp("verify-cal");
  const std::string out = tmp / "pruned";
  const auto v = shipped_drrqr_prune(out);
  ASSERT_EQ(row(run_verify(v), "pruned.certificate").status, Status::Pass);
  for (const int64_t start : {int64_t{-1}, int64_t{1} << 40}) {
    SCOPED_TRACE(start);
    edit_json(out + "/statecut.json", [&](nlohmann::json& j) { j["calibration"]["starts"][1] = start; });
    const Report r = run_verify(v);
    const CheckResult& c = row(r, "pruned");  // the group's row: the check could not complete
    EXPECT_EQ(c.status, Status::Fail);
    EXPECT_TRUE(contains(c.message, "calibration start " + std::to_string(start) +
                                        " + len 512 lies outside the 200000 tokens of its files"))
        << c.message;
    EXPECT_EQ(r.exit_code(), 1);
  }
}

TEST(Verify_Failures, unreadableInputThrowsNamingTheFile) {
  TempDir tmp("verify-unreadable");
  EXPECT_THROW(run_verify(quick(tmp / "nope")), Unreadable);
  const std::string src = fixture("fla_delta_net");
  if (src.empty()) GTEST_SKIP() << "fixture fla_delta_net not found";
  const std::string dir = tmp / "ckpt";
  copy_checkpoint(src, dir);
  fs::resize_file(fs::path(dir) / "model.safetensors", 100);  // truncated: header length past EOF
  try {
    run_verify(quick(dir));
    ADD_FAILURE() << "no exception";
  } catch (const Unreadable& e) {
    EXPECT_TRUE(contains(e.what(), "model.safetensors")) << e.what();
  }
}

}  // namespace

namespace {

// A source whose geometry the record cannot index — another family, more key heads, or the pruned folder itself (a
// smaller dk) — fails pruned.weights naming the mismatch. It once indexed keep sets past their end: SIGSEGV, no table.
TEST(Verify_Failures, aSourceTheRecordCannotIndexFailsPrunedWithoutACrash) {
  const std::string m2 = fixture("hf_mamba2"), dn = fixture("fla_delta_net");
  if (m2.empty() || dn.empty()) GTEST_SKIP() << "fixtures hf_mamba2 / fla_delta_net not found";
  TempDir tmp("verify-geom");
  const std::string pm = tmp / "m2", pd = tmp / "dn";
  prune_l1(m2, pm);
  prune_l1(dn, pd);
  const Report fam_report = run_verify(quick(pm, dn));
  const CheckResult& fam = row(fam_report, "pruned.weights");
  EXPECT_EQ(fam.status, Status::Fail);
  EXPECT_EQ(fam.where, "source");
  EXPECT_TRUE(contains(fam.message, "model_type 'delta_net', this checkpoint's 'mamba2'")) << fam.message;
  const Report self_report = run_verify(quick(pd, pd));
  const CheckResult& self = row(self_report, "pruned.weights");
  EXPECT_EQ(self.status, Status::Fail);
  EXPECT_TRUE(contains(self.message, "the record keeps channel")) << self.message;
  EXPECT_TRUE(contains(self.message, "of a source head of dk 16")) << self.message;
}

// --source without a statecut.json (a prune made elsewhere, or its record dropped on the way): the keep sets are
// inferred from the q rows and every other row held to them; it was a silent skip, so two swapped q rows passed.
TEST(Verify_Failures, withoutARecordTheKeepSetsAreInferredFromTheQRows) {
  const std::string src = fixture("fla_delta_net");
  if (src.empty()) GTEST_SKIP() << "fixture fla_delta_net not found";
  TempDir tmp("verify-norec");
  const std::string out = tmp / "pruned";
  prune_l1(src, out);
  fs::remove(fs::path(out) / "statecut.json");
  const Report ok = run_verify(quick(out, src));
  EXPECT_EQ(row(ok, "pruned.weights").status, Status::Pass) << failures(ok);
  EXPECT_EQ(row(ok, "pruned.record").status, Status::Skip);
  edit_tensor(out, "model.layers.0.attn.q_proj.weight", [](torch::Tensor& t) {
    const torch::Tensor r0 = t[0].clone();
    t[0].copy_(t[1]);
    t[1].copy_(r0);
  });
  const Report bad = run_verify(quick(out, src));
  const CheckResult& w = row(bad, "pruned.weights");
  EXPECT_EQ(w.status, Status::Fail) << "q rows swapped, k rows not";
  EXPECT_TRUE(contains(w.message, "layer 0 head 0")) << w.message;
  EXPECT_EQ(bad.exit_code(), 1);
  EXPECT_TRUE(run_verify(quick(out)).passed()) << "without --source there is nothing to compare: a skip, as before";
}

// Dead query channels (exactly zero q rows, as trained models have them): without a record each pruned channel is
// matched to the source channel equal in q, k and the convs together; by its q row alone a zero row took the first
// zero source row, and the k rows and conv filters then failed against the wrong channel (audit 25 F5).
TEST(Verify_Failures, deadQueryChannelsAreToldApartByTheirKeyRowsWithoutARecord) {
  const std::string fx = fixture("fla_delta_net");
  if (fx.empty()) GTEST_SKIP() << "fixture fla_delta_net not found";
  TempDir tmp("verify-deadq");
  const std::string src = tmp / "src", out = tmp / "pruned", keep = tmp / "keep.json";
  copy_checkpoint(fx, src);
  nlohmann::json sets = nlohmann::json::object();
  for (int layer : {0, 1}) {
    edit_tensor(src, "model.layers." + std::to_string(layer) + ".attn.q_proj.weight", [](torch::Tensor& t) {
      for (int h = 0; h < 2; ++h) t.narrow(0, h * 32, 10).zero_();  // channels 0..9 of both heads
    });
    for (int h = 0; h < 2; ++h)
      sets[std::to_string(layer) + "." + std::to_string(h)] =
          std::vector<int>{9, 2, 20, 0, 5, 31, 1, 7, 12, 3, 30, 8, 6, 25, 4, 11};  // dead ones out of order
  }
  std::ofstream(keep) << nlohmann::json{{"dk", 32}, {"new_dk", 16}, {"keep", sets}}.dump();
  statecut::PruneOptions o;
  o.checkpoint = src;
  o.out = out;
  o.keep_from = keep;
  statecut::prune_checkpoint(o);
  ASSERT_TRUE(run_verify(quick(out, src)).passed()) << "with its record";
  fs::remove(fs::path(out) / "statecut.json");
  const Report r = run_verify(quick(out, src));
  EXPECT_EQ(row(r, "pruned.weights").status, Status::Pass) << row(r, "pruned.weights").message;
}

// A record's layer indices and head_k_dim are read as what they are: layers 2^32 and 2^32 + 1 read as int were layers
// 0 and 1 (the tampered record passed every row), head_k_dim 2^64 - 1 read as -1 (the record row passed "dk -1").
TEST(Verify_Failures, aRecordsLayerAndDkBeyondTheirIntegersFailTheRecordNotWrap) {
  const std::string src = fixture("fla_delta_net");
  if (src.empty()) GTEST_SKIP() << "fixture fla_delta_net not found";
  TempDir tmp("verify-wrap");
  const std::string out = tmp / "pruned";
  prune_l1(src, out);
  edit_json(out + "/statecut.json", [](nlohmann::json& j) {
    j["selection"]["layers"][0]["layer"] = 4294967296LL;
    j["selection"]["layers"][1]["layer"] = 4294967297LL;
  });
  const Report wrapped = run_verify(quick(out, src));
  EXPECT_EQ(row(wrapped, "pruned.record").status, Status::Fail);
  EXPECT_TRUE(contains(row(wrapped, "pruned.record").message, "without a layer index (an integer in [0, 2^31)): \"layer\" 4294967296"))
      << row(wrapped, "pruned.record").message;
  edit_json(out + "/statecut.json", [](nlohmann::json& j) {
    j["selection"]["layers"][0]["layer"] = 0;
    j["selection"]["layers"][1]["layer"] = 1;
  });
  ASSERT_EQ(row(run_verify(quick(out, src)), "pruned.record").status, Status::Pass) << "the record restored";
  edit_json(out + "/statecut.json", [](nlohmann::json& j) { j["head_k_dim"] = UINT64_MAX; });
  const Report dk = run_verify(quick(out, src));
  EXPECT_EQ(row(dk, "pruned.record").status, Status::Fail);
  EXPECT_TRUE(contains(row(dk, "pruned.record").message, "head_k_dim 18446744073709551615 is no key dimension"))
      << row(dk, "pruned.record").message;
  // new_head_k_dim past int64 is named as the record wrote it (it read "new_head_k_dim -1"), a missing one by name.
  edit_json(out + "/statecut.json", [](nlohmann::json& j) {
    j["head_k_dim"] = 32;
    j["new_head_k_dim"] = UINT64_MAX;
  });
  const Report new_dk = run_verify(quick(out, src));
  EXPECT_EQ(row(new_dk, "pruned.record").status, Status::Fail);
  EXPECT_TRUE(contains(row(new_dk, "pruned.record").message, "new_head_k_dim 18446744073709551615 but config.json gives dk 16"))
      << row(new_dk, "pruned.record").message;
  for (const char* wrapped_text : {"new_head_k_dim -1", "the record -1"})
    EXPECT_FALSE(contains(row(new_dk, "pruned.record").details.dump(), wrapped_text)) << row(new_dk, "pruned.record").details;
  edit_json(out + "/statecut.json", [](nlohmann::json& j) { j.erase("new_head_k_dim"); });
  const Report missing = run_verify(quick(out, src));
  EXPECT_EQ(row(missing, "pruned.record").status, Status::Fail);
  EXPECT_EQ(row(missing, "pruned.record").message, out + "/statecut.json: no \"new_head_k_dim\"");
}

// A fine-tune record holds every tensor outside its changed_tensors to the source bit for bit (a null "finetune" is no
// record), and a layer listed twice is a broken record (the first keep set was silently ignored).
TEST(Verify_Failures, aFinetuneRecordHoldsEveryUnchangedTensorToTheSource) {
  const std::string src = fixture("fla_delta_net");
  if (src.empty()) GTEST_SKIP() << "fixture fla_delta_net not found";
  TempDir tmp("verify-ftnames");
  const std::string out = tmp / "pruned";
  prune_l1(src, out);
  const std::string conv = "model.layers.0.attn.k_conv1d.weight";
  edit_tensor(out, conv, [](torch::Tensor& t) { t.add_(0.01); });
  edit_json(out + "/statecut.json", [&](nlohmann::json& j) { j["finetune"] = {{"steps", 1}, {"changed_tensors", {conv}}}; });
  const Report tuned = run_verify(quick(out, src));
  EXPECT_EQ(row(tuned, "pruned.weights").status, Status::Pass) << failures(tuned);
  EXPECT_TRUE(contains(row(tuned, "pruned.weights").message, "1 fine-tuned tensors held to shape only"));
  edit_tensor(out, "model.embeddings.weight", [](torch::Tensor& t) { t.zero_(); });
  const Report emb_report = run_verify(quick(out, src));
  const CheckResult& emb = row(emb_report, "pruned.weights");
  EXPECT_EQ(emb.status, Status::Fail);
  EXPECT_EQ(emb.where, "model.embeddings.weight");
  edit_json(out + "/statecut.json", [](nlohmann::json& j) { j["finetune"] = nullptr; });
  const Report null_ft_report = run_verify(quick(out, src));
  const CheckResult& null_ft = row(null_ft_report, "pruned.record");
  EXPECT_EQ(null_ft.status, Status::Fail);
  EXPECT_TRUE(contains(null_ft.message, "\"finetune\" is null, not a fine-tune's record")) << null_ft.message;
  edit_json(out + "/statecut.json", [](nlohmann::json& j) {
    j.erase("finetune");
    auto& layers = j["selection"]["layers"];
    layers.insert(layers.begin(), layers[1]);
  });
  const Report twice_report = run_verify(quick(out, src));
  const CheckResult& twice = row(twice_report, "pruned.record");
  EXPECT_EQ(twice.status, Status::Fail);
  EXPECT_TRUE(contains(twice.message, "layer 1 is listed twice")) << twice.message;
  // Malformed values are named in the record's terms (a string channel was nlohmann's "type_error.302").
  edit_json(out + "/statecut.json", [](nlohmann::json& j) {
    auto& layers = j["selection"]["layers"];
    layers.erase(layers.begin());
    layers[0]["keep"][0][0] = "0";
    j["head_k_dim"] = 1e300;
  });
  const Report malformed_report = run_verify(quick(out, src));
  const CheckResult& malformed = row(malformed_report, "pruned.record");
  EXPECT_EQ(malformed.status, Status::Fail);
  EXPECT_TRUE(contains(malformed.message, "\"head_k_dim\" is 1e+300, not an integer")) << malformed.message;
  EXPECT_TRUE(contains(malformed.details["problems"].dump(), "must hold one list of integer channels per key head"))
      << malformed.details.dump();
  EXPECT_FALSE(contains(malformed.message, "type_error")) << malformed.message;
}

// prune -> fine-tune -> prune, checked against the first source (keep sets composed back): the earlier step's
// changed tensors are held to shape only; it failed with "matches no source channel" on correct weights.
TEST(Verify_Failures, aChainWithAFinetuneComposesBackToTheFirstSource) {
  const std::string src = fixture("fla_delta_net");
  if (src.empty()) GTEST_SKIP() << "fixture fla_delta_net not found";
  TempDir tmp("verify-ftchain");
  const std::string p1 = tmp / "p1", p2 = tmp / "p2";
  prune_l1(src, p1);
  const std::string q = "model.layers.1.attn.q_proj.weight";
  edit_tensor(p1, q, [](torch::Tensor& t) { t.mul_(1.5); });
  edit_json(p1 + "/statecut.json", [&](nlohmann::json& j) { j["finetune"] = {{"steps", 1}, {"changed_tensors", {q}}}; });
  prune_l1(p1, p2);
  const Report r = run_verify(quick(p2, src));
  const CheckResult& w = row(r, "pruned.weights");
  EXPECT_EQ(w.status, Status::Pass) << failures(r);
  EXPECT_TRUE(contains(w.message, "composed over 2 pruning steps")) << w.message;
  edit_tensor(p2, "model.layers.1.attn.k_proj.weight", [](torch::Tensor& t) { t[0].add_(1.0); });
  const Report k_report = run_verify(quick(p2, src));
  EXPECT_EQ(row(k_report, "pruned.weights").status, Status::Fail) << "k was not fine-tuned";
}

}  // namespace

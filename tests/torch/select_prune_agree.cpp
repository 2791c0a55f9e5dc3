// `statecut select` and `statecut prune` are one selector (ref::select_head) with one seed rule
// (reference/select_rng.h): a head's matrix written from prune's own calibration, given to the `select` binary with
// the head's --layer/--head and prune's seed, keeps exactly the channels prune kept. The fla DeltaNet fixture
// (2 layers x 2 heads, dk 32, byte vocabulary), 3 x 1024 calibration tokens (6,144 rows of [Q; K] > the faithful
// 5,000, so the faithful subsample really draws), head 1 of layer 1 (both halves of the rule matter) and, for the
// seeded methods, head 0 of layer 0.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "optimized/io/safetensors.h"
#include "optimized/models/weight_source.h"
#include "optimized/prune/prune.h"
#include "optimized/text/token_stream.h"
#include "tests/cli/cli_run.h"
#include "tests/torch/pipeline_util.h"

namespace fs = std::filesystem;
using namespace statecut;
using nlohmann::json;

namespace {

const fs::path kRoot(STATECUT_SOURCE_DIR);
const fs::path kModel = pipeline_test::fixture_root() / "fla_delta_net";
const fs::path kCalib = kRoot / "assets" / "corpora" / "pydocs_train.txt";
constexpr int64_t kSeqs = 3, kLen = 1024;
// (layer, head): the seeded methods (rand, faithful drrqr) are checked on both, the others on the first
const std::vector<std::pair<int, int>> kHeads = {{1, 1}, {0, 0}};
const std::vector<std::pair<int, int>> kOneHead = {kHeads.front()};

/// prune's options for `method` (the library call prune_checkpoint runs before writing).
PruneOptions prune_options(const std::string& method, uint64_t seed, bool faithful = false) {
  PruneOptions o;
  o.checkpoint = kModel.string();
  o.out = "unused";  // select_for_checkpoint writes nothing
  o.method = method;
  o.ratio = 0.5;
  o.calib = {kCalib.string()};
  o.calib_seqs = kSeqs;
  o.calib_len = kLen;
  o.seed = seed;
  o.faithful = faithful;
  return o;
}

/// One tensor per name, F32 or F64 from a CPU tensor, in a .safetensors file.
void write_tensors(const std::string& path, const std::vector<std::pair<std::string, torch::Tensor>>& ts) {
  io::SafetensorsWriter w;
  std::vector<torch::Tensor> alive;
  for (const auto& [name, t0] : ts) {
    const torch::Tensor t = t0.contiguous();
    alive.push_back(t);
    w.add(name, t.scalar_type() == torch::kFloat32 ? io::DType::F32 : io::DType::F64, t.sizes().vec(), t.data_ptr(),
          static_cast<size_t>(t.nbytes()));
  }
  w.write(path);
}

class Equiv_SelectPrune : public ::testing::Test {
 protected:
  /// prune's calibration windows again (same file, tokenizer, seed), collecting every head's WHOLE [Q; K]
  /// (no subsample), its R factor and the RMS for swanda, in one pass; plus the seed (printed).
  static void SetUpTestSuite() {
    if (!fs::exists(kModel / "config.json")) return;
    seed_ = pipeline_test::master_seed();
    const Tokenizer tok = Tokenizer::for_checkpoint(kModel.string());
    const TokenStream s = read_tokens(kCalib.string(), tok, 256);
    windows_ = new Windows(sample_windows(s, kSeqs, kLen, seed_));
    auto model = load_causal_lm(kModel.string(), torch::kFloat32, torch::Device(torch::kCPU));
    CalibrationNeeds needs = calibration_needs(ref::SelectMethod::Drrqr, /*faithful=*/true);
    needs.faithful_rows = std::numeric_limits<int64_t>::max();  // every row of [Q; K]
    needs.features = needs.rms = true;
    needs.seed = seed_;
    cal_ = new Calibration(calibrate(*model, windows_->ids, needs));
    layers_ = new std::vector<PrunableLayer>(model->prunable_layers());
  }
  static void TearDownTestSuite() {
    delete windows_;
    delete cal_;
    delete layers_;
  }
  static size_t index_of(int layer) {
    for (size_t i = 0; i < layers_->size(); ++i)
      if ((*layers_)[i].layer == layer) return i;
    ADD_FAILURE() << "no prunable layer " << layer;
    return 0;
  }
  /// `statecut select <args>` → its JSON (the run must succeed).
  static json select(const std::string& args) {
    const test::CliRun r = test::run_statecut("select " + args);
    EXPECT_EQ(r.code, 0) << args << "\n" << r.err;
    return r.code == 0 ? json::parse(r.out) : json::object();
  }
  /// prune's keep set of (layer, head).
  static std::vector<int64_t> pruned_keep(const PruneResult& res, int layer, int head) {
    for (const auto& s : res.selection)
      if (s.layer == layer) return s.keep.at(head);
    ADD_FAILURE() << "no selection for layer " << layer;
    return {};
  }
  /// prune's drrqr diagnostics of (layer, head): {swaps, max_rho, certified}.
  static json pruned_diag(const PruneResult& res, int layer, int head) {
    for (const auto& l : res.record.at("drrqr"))
      if (l.at("layer").get<int>() == layer) return l.at("heads").at(head);
    ADD_FAILURE() << "no drrqr record for layer " << layer;
    return json::object();
  }
  /// Same keep set and, since the same rows in the same order went through the same code, the very same max rho
  /// and swap count (the keep set alone can survive another subsample of 5,000 of these 6,144 rows; rho cannot).
  static void expect_same_drrqr(const json& j, const PruneResult& res, int layer, int head) {
    EXPECT_EQ(j.value("keep", std::vector<int64_t>{}), pruned_keep(res, layer, head))
        << "layer " << layer << " head " << head << " seed " << seed_;
    const json d = pruned_diag(res, layer, head);
    EXPECT_EQ(j.value("max_rho", -1.0), d.value("max_rho", -2.0)) << "layer " << layer << " head " << head;
    EXPECT_EQ(j.value("swaps", -1), d.value("swaps", -2)) << "layer " << layer << " head " << head;
  }
  static std::string head_args(int layer, int head) {
    return " --layer " + std::to_string(layer) + " --head " + std::to_string(head) + " --seed " +
           std::to_string(seed_);
  }
  void SetUp() override {
    if (!cal_) GTEST_SKIP() << "no fixture " << kModel;
  }
  void check_windows(const PruneResult& res) {
    ASSERT_EQ(res.record["calibration"]["starts"].get<std::vector<int64_t>>(), windows_->starts)
        << "the test's windows are not prune's";
  }

  pipeline_test::TempDir dir{"select_prune"};
  static inline uint64_t seed_ = 0;
  static inline Windows* windows_ = nullptr;
  static inline Calibration* cal_ = nullptr;
  static inline std::vector<PrunableLayer>* layers_ = nullptr;
};

TEST_F(Equiv_SelectPrune, faithfulDrrqrOnTheWholeMatrixKeepsThePrunedChannels) {
  const PruneResult res = select_for_checkpoint(prune_options("drrqr", seed_, /*faithful=*/true));
  check_windows(res);
  for (const auto& [layer, head] : kHeads) {
    const torch::Tensor M = cal_->layers[index_of(layer)].rows.at(head);  // [2·3·1024, 32] f32, Q rows then K
    ASSERT_EQ(M.size(0), 2 * kSeqs * kLen);
    const std::string f = dir / ("m" + std::to_string(layer) + std::to_string(head) + ".safetensors");
    write_tensors(f, {{"m", M}});
    const json j = select("--matrix " + f + " --method drrqr --faithful --ratio 0.5" + head_args(layer, head));
    EXPECT_EQ(j.value("rows", 0), 2 * kSeqs * kLen);
    expect_same_drrqr(j, res, layer, head);
  }
}

TEST_F(Equiv_SelectPrune, strongDrrqrOnTheCalibrationRFactorKeepsThePrunedChannels) {
  const PruneResult res = select_for_checkpoint(prune_options("drrqr", seed_));
  check_windows(res);
  for (const auto& [layer, head] : kOneHead) {
    const torch::Tensor R = cal_->layers[index_of(layer)].r.at(head);
    const std::string f = dir / "r.safetensors";
    fs::remove(f);
    write_tensors(f, {{"r", R}});
    const json j = select("--matrix " + f + " --method drrqr --ratio 0.5" + head_args(layer, head));
    expect_same_drrqr(j, res, layer, head);
  }
}

TEST_F(Equiv_SelectPrune, pcaOfTheStackedFeaturesGivesThePrunedRotation) {
  // prune averages the q and k moments; select pools the rows of [Q; K]: for equal token counts the covariances
  // differ by the factor 2(n-1)/(2n-1) only, so the eigenvectors agree to rounding (not bitwise: the moments
  // are summed in another order). 1e-6 is far below the distance between any two distinct sign-fixed rotations.
  const PruneResult res = select_for_checkpoint(prune_options("pca", seed_));
  check_windows(res);
  for (const auto& [layer, head] : kOneHead) {
    const std::string f = dir / "x.safetensors";
    fs::remove(f);
    write_tensors(f, {{"x", cal_->layers[index_of(layer)].rows.at(head)}});
    const json j = select("--matrix " + f + " --method pca --ratio 0.5" + head_args(layer, head));
    const auto T = j.value("rotation", std::vector<std::vector<double>>{});
    torch::Tensor P;
    for (const auto& s : res.selection)
      if (s.layer == layer) P = s.rotation.at(head);
    ASSERT_TRUE(P.defined());
    ASSERT_EQ(static_cast<int64_t>(T.size()), P.size(0));
    double worst = 0;
    for (int64_t i = 0; i < P.size(0); ++i)
      for (int64_t c = 0; c < P.size(1); ++c) worst = std::max(worst, std::abs(T[i][c] - P[i][c].item<double>()));
    EXPECT_LE(worst, 1e-6) << "layer " << layer << " head " << head;
  }
}

TEST_F(Equiv_SelectPrune, swandaOnTheHeadWeightsAndCalibrationRmsKeepsThePrunedChannels) {
  const PruneResult res = select_for_checkpoint(prune_options("swanda", seed_));
  check_windows(res);
  const WeightSource w = WeightSource::open_dir(kModel.string());
  for (const auto& [layer, head] : kOneHead) {
    const PrunableLayer& L = (*layers_)[index_of(layer)];
    const int64_t dk = L.head_k_dim;
    const std::string f = dir / "w.safetensors";
    fs::remove(f);
    write_tensors(f, {{"wq", q_block_rows(w.raw(L.q_weight), L).to(torch::kFloat64).narrow(0, head * dk, dk)},
                      {"wk", k_block_rows(w.raw(L.k_weight), L).to(torch::kFloat64).narrow(0, head * dk, dk)},
                      {"rms", cal_->layers[index_of(layer)].rms()}});
    const json j = select("--matrix " + f + " --method swanda --wq wq --wk wk --rms rms --ratio 0.5" +
                          head_args(layer, head));
    EXPECT_EQ(j.value("keep", std::vector<int64_t>{}), pruned_keep(res, layer, head))
        << "layer " << layer << " head " << head;
  }
}

// grad scores a head by its own rows of dL/dWq and dL/dWk: prune's keep set of head 1 of layer 1 is what `select`
// keeps from that head's weights and the gradients of the same calibration (seed 304: every head scored with head
// 0's gradient rows survived, since no test looked past head 0).
TEST_F(Equiv_SelectPrune, gradOnTheHeadsOwnGradientRowsKeepsThePrunedChannels) {
  const PruneResult res = select_for_checkpoint(prune_options("grad", seed_));
  check_windows(res);
  auto model = load_causal_lm(kModel.string(), torch::kFloat32, torch::Device(torch::kCPU));
  const Calibration g = calibrate(*model, windows_->ids, calibration_needs(ref::SelectMethod::Grad, false));
  const WeightSource w = WeightSource::open_dir(kModel.string());
  for (const auto& [layer, head] : kOneHead) {
    const PrunableLayer& L = (*layers_)[index_of(layer)];
    const LayerCalibration& lc = g.layers[index_of(layer)];
    const int64_t dk = L.head_k_dim;
    auto rows = [&](const torch::Tensor& t) { return t.to(torch::kFloat64).narrow(0, head * dk, dk); };
    const std::string f = dir / "g.safetensors";
    fs::remove(f);
    write_tensors(f, {{"wq", rows(q_block_rows(w.raw(L.q_weight), L))},
                      {"wk", rows(k_block_rows(w.raw(L.k_weight), L))},
                      {"gq", rows(lc.grad_q)},
                      {"gk", rows(lc.grad_k)}});
    const json j = select("--matrix " + f + " --method grad --wq wq --wk wk --grad-wq gq --grad-wk gk --ratio 0.5" +
                          head_args(layer, head));
    EXPECT_EQ(j.value("keep", std::vector<int64_t>{}), pruned_keep(res, layer, head))
        << "layer " << layer << " head " << head;
  }
}

TEST_F(Equiv_SelectPrune, randWithTheHeadsLayerAndHeadDrawsThePrunedSubset) {
  const PruneResult res = select_for_checkpoint(prune_options("rand", seed_));
  const std::string f = dir / "any.safetensors";
  write_tensors(f, {{"m", torch::zeros({1, 32}, torch::kFloat64)}});
  for (const auto& [layer, head] : kHeads) {
    const json j = select("--matrix " + f + " --method rand --ratio 0.5" + head_args(layer, head));
    EXPECT_EQ(j.value("keep", std::vector<int64_t>{}), pruned_keep(res, layer, head))
        << "layer " << layer << " head " << head << " seed " << seed_;
  }
}

}  // namespace

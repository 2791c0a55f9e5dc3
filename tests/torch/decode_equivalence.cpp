// Equivalence: incremental decoding (CausalLM::forward_cached with a DecodeCache) equals one forward over the whole
// sequence, for every model family, in the metamorphic form run(x[0:P+n]) = prefill(x[0:P]) then n one-token steps.
//
// Every fixture (fla delta_net incl. gate and pruned dk, gated_deltanet incl. GVA and pruned dk, HF mamba2, Qwen3.5 with
// its softmax layers' KV cache, packed Qwen3-Next), batch 2 with different ids per row, prompt lengths 1, 63, 65
// (either side of the chunk size 64) and 100 (not a multiple of it), then 8 decoded tokens (more than the conv window,
// and 63 + 8 crosses a chunk boundary while stepping); a second test prefills 40, continues with a 30-token chunk on
// the filled cache (chunked form with an initial state, across the 64 boundary) and steps 4 more. Verdict: normwise
// relative error ‖y − y_ref‖_F / ‖y_ref‖_F in double over every position, of the final (normed) hidden state in the
// model's dtype and of the logits; the worst position printed as a diagnostic.
//
// Thresholds and why (both sides compute the same math; only the summation order differs: chunked WY form + conv over
// the whole sequence vs. the recurrent step + conv over a 4-token window):
//   f64 CPU  hidden 1e-13: ~900 unit roundoffs (1.1e-16) for the recurrence's growth over ≤ 108 steps and 2 layers
//            (measured ≤ 6.8e-16); logits 1e-6: every family returns fp32 logits, so one-ulp flips (6e-8) can show.
//   f32 CPU  4e-6: unit roundoff 6e-8, same growth (measured ≤ 4e-7 on logits and hidden states: 10× margin).
//   f32 CUDA 1e-4: TF32 switched off (cuBLAS and cuDNN), so both sides are fp32; GPU reductions reorder more (not
//            measured here: no GPU on the CPU machines).
//   bf16 CUDA (the project's chunk kernel for the prefill, its decode kernel for the steps): the project rule for
//            low-precision paths — the error against an f64 forward at most 2× the same-precision one-forward error.
#include <gtest/gtest.h>
#include <torch/torch.h>

#ifdef STATECUT_WITH_CUDA_KERNELS
#include <ATen/Context.h>
#endif

#include <algorithm>
#include <cstdio>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "optimized/generate/decode_step.h"
#include "optimized/generate/generate.h"
#include "optimized/models/decode_cache.h"
#include "optimized/models/model.h"
#include "optimized/models/recurrence.h"
#include "tests/rel_err_tensor.h"
#include "tests/test_env.h"

namespace statecut {
namespace {

/// ‖y − y_ref‖_F / ‖y_ref‖_F in double; +inf on a shape mismatch or a non-finite y (NaN/Inf fail first).
using statecut::test::rel_err;

/// The position (along T) whose logits differ most, relative to that position's norm (a diagnostic, never a verdict).
std::pair<int64_t, double> worst_position(const torch::Tensor& y, const torch::Tensor& ref) {
  auto a = y.to(torch::kCPU, torch::kFloat64), b = ref.to(torch::kCPU, torch::kFloat64);
  const std::vector<int64_t> dims = {0, 2};
  auto per = (a - b).pow(2).sum(dims).sqrt() / b.pow(2).sum(dims).sqrt();
  const int64_t t = per.argmax().item<int64_t>();
  return {t, per[t].item<double>()};
}

const std::vector<std::string> kDecodeFixtures = {"fla_delta_net",          "fla_delta_net_bf16",       "fla_delta_net_pruned50",
                                           "fla_gated_deltanet",     "fla_gated_deltanet_gva",   "fla_gated_deltanet_pruned50",
                                           "hf_mamba2",              "hf_qwen3_5",               "hf_qwen3_next"};

struct DecodeCase {
  std::string fixture;
  torch::Dtype dtype;
  bool cuda;
};

std::string dtype_name(torch::Dtype d);
void PrintTo(const DecodeCase& c, std::ostream* os) {  // gtest prints the case, not its bytes
  *os << c.fixture << " " << dtype_name(c.dtype) << (c.cuda ? " cuda" : " cpu");
}

std::string dtype_name(torch::Dtype d) {
  return d == torch::kFloat64 ? "f64" : d == torch::kBFloat16 ? "bf16" : "f32";
}

std::string decode_case_name(const testing::TestParamInfo<DecodeCase>& info) {
  return info.param.fixture + "_" + dtype_name(info.param.dtype) + (info.param.cuda ? "_cuda" : "_cpu");
}

/// Threshold on the final hidden state (model dtype) and on the fp32 logits.
std::pair<double, double> tolerance(const DecodeCase& c) {
  if (c.dtype == torch::kFloat64) return {1e-13, 1e-6};
  const double t = c.cuda ? 1e-4 : 4e-6;
  return {t, t};
}

/// Seeded ids [B, T] in [0, vocab): rows differ, so a batch mix-up shows.
torch::Tensor random_ids(int64_t B, int64_t T, int64_t vocab, uint64_t seed) {
  auto gen = at::detail::createCPUGenerator(seed);
  return torch::randint(vocab, {B, T}, gen, torch::TensorOptions().dtype(torch::kInt64));
}

bool cuda_usable() {
#ifdef STATECUT_WITH_CUDA_KERNELS
  return torch::cuda::is_available();
#else
  return false;
#endif
}

class Equiv_Decode : public testing::TestWithParam<DecodeCase> {
 protected:
  void SetUp() override {
    const auto& c = GetParam();
    if (c.cuda && !cuda_usable()) GTEST_SKIP() << "no CUDA device or built without the kernels";
    dir_ = test::fixture_dir(c.fixture);
    if (dir_.empty()) GTEST_SKIP() << "fixture " << c.fixture << " not found";
#ifdef STATECUT_WITH_CUDA_KERNELS
    if (c.cuda) {  // fp32 on both sides (cuDNN's conv defaults to TF32)
      at::globalContext().setAllowTF32CuBLAS(false);
      at::globalContext().setAllowTF32CuDNN(false);
    }
#endif
    model_ = load_causal_lm(dir_, c.dtype, c.cuda ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU));
    if (c.dtype == torch::kBFloat16) ref64_ = load_causal_lm(dir_, torch::kFloat64, torch::kCPU);
  }

  /// Runs `pieces` (lengths) of ids through forward_cached in order and compares the concatenated logits with one
  /// forward over all of ids.
  void expect_pieces_match_forward(const torch::Tensor& ids, const std::vector<int64_t>& pieces,
                                   const std::string& label) {
    const auto& c = GetParam();
    torch::NoGradGuard no_grad;
    const auto dev = c.cuda ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
    ForwardOptions opt;
    opt.output_hidden_states = true;
    DecodeCache cache;
    std::vector<torch::Tensor> out, hid;
    int64_t at = 0;
    for (int64_t len : pieces) {
      auto r = model_->forward_cached(ids.narrow(1, at, len).to(dev), cache, opt);
      out.push_back(r.logits.cpu());
      hid.push_back(r.hidden_states.back().cpu());
      at += len;
      ASSERT_EQ(cache.position, at);
    }
    auto got = torch::cat(out, 1), got_h = torch::cat(hid, 1);
    auto fr = model_->forward(ids.to(dev), opt);
    auto full = fr.logits.cpu(), full_h = fr.hidden_states.back().cpu();
    const double e = rel_err(got, full), eh = rel_err(got_h, full_h);
    const auto [t, et] = worst_position(got_h, full_h);
    if (c.dtype == torch::kBFloat16) {
      auto ref = ref64_->forward(ids).logits;
      const double e_dec = rel_err(got, ref), e_fwd = rel_err(full, ref);
      std::printf("[errors] %s %s: decode vs f64 %.3e, one forward vs f64 %.3e (decode vs forward %.3e, worst t=%lld)\n",
                  decode_case_name({c, 0}).c_str(), label.c_str(), e_dec, e_fwd, e, static_cast<long long>(t));
      EXPECT_LE(e_dec, 2.0 * e_fwd) << label;
      return;
    }
    const auto [tol_h, tol] = tolerance(c);
    std::printf("[errors] %s %s: hidden %.3e (threshold %.0e), logits %.3e (threshold %.0e), worst position t=%lld %.3e\n",
                decode_case_name({c, 0}).c_str(), label.c_str(), eh, tol_h, e, tol, static_cast<long long>(t), et);
    EXPECT_LT(eh, tol_h) << label << " final hidden state (worst position " << t << ")";
    EXPECT_LT(e, tol) << label << " logits";
  }

  std::string dir_;
  std::unique_ptr<CausalLM> model_, ref64_;
};

TEST_P(Equiv_Decode, promptThenStepsMatchesOneForward) {
  const uint64_t seed = test::env_seed(14);
  const int64_t steps = 8;
  for (int64_t prompt : {1, 63, 65, 100}) {
    auto ids = random_ids(2, prompt + steps, model_->vocab_size(), seed + static_cast<uint64_t>(prompt));
    std::vector<int64_t> pieces = {prompt};
    for (int64_t i = 0; i < steps; ++i) pieces.push_back(1);
    expect_pieces_match_forward(ids, pieces, "prompt " + std::to_string(prompt) + " + " + std::to_string(steps));
  }
}

TEST_P(Equiv_Decode, chunkContinuationMatchesOneForward) {
  const uint64_t seed = test::env_seed(14);
  auto ids = random_ids(2, 40 + 30 + 4, model_->vocab_size(), seed + 1000);
  expect_pieces_match_forward(ids, {40, 30, 1, 1, 1, 1}, "40 | 30 | 4 steps");
}

// ForwardOptions::last_logits (generate's prompt pass): the last position's logits alone, [B, 1, V], equal to the
// last row of a pass that forms them all, and the same cache: the next step's logits are bit for bit those after the
// full pass. The head then multiplies one row a sequence instead of T (another GEMM shape, another summation
// order): f32 / f64 within the decode tolerance, bf16 within one rounding of the bf16 head output each side (2^-8
// relative each, normwise ≤ 2 · 2^-8).
TEST_P(Equiv_Decode, lastLogitsOnlyAreTheLastRowAndLeaveTheSameCache) {
  const auto& c = GetParam();
  torch::NoGradGuard no_grad;
  const auto dev = c.cuda ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
  const uint64_t seed = test::env_seed(14);
  const double tol = c.dtype == torch::kBFloat16 ? 2.0 / 256.0 : tolerance(c).second;
  for (int64_t prompt : {1, 65}) {
    auto ids = random_ids(2, prompt + 1, model_->vocab_size(), seed + 7 + static_cast<uint64_t>(prompt)).to(dev);
    ForwardOptions last;
    last.last_logits = true;
    DecodeCache all_cache, last_cache;
    auto all = model_->forward_cached(ids.narrow(1, 0, prompt), all_cache).logits;
    auto only = model_->forward_cached(ids.narrow(1, 0, prompt), last_cache, last).logits;
    ASSERT_EQ(only.sizes(), (std::vector<int64_t>{2, 1, model_->vocab_size()})) << "prompt " << prompt;
    const double e = rel_err(only.cpu(), all.narrow(1, prompt - 1, 1).cpu());
    std::printf("[errors] %s prompt %lld: last-only logits vs the full pass's last row %.3e (threshold %.1e)\n",
                decode_case_name({c, 0}).c_str(), static_cast<long long>(prompt), e, tol);
    EXPECT_LE(e, tol) << "prompt " << prompt;
    auto step_all = model_->forward_cached(ids.narrow(1, prompt, 1), all_cache).logits;
    auto step_last = model_->forward_cached(ids.narrow(1, prompt, 1), last_cache).logits;
    EXPECT_TRUE(torch::equal(step_all.cpu(), step_last.cpu())) << "prompt " << prompt << ": the caches differ";
  }
}

// ForwardOptions::head = false (verify's f64 invariance rows): forward() leaves the logits out and returns the same
// hidden states, the final normed one included, bit for bit as a pass that forms the logits.
TEST_P(Equiv_Decode, withoutTheHeadTheHiddenStatesAreTheSameAndNoLogits) {
  torch::NoGradGuard no_grad;
  const auto dev = GetParam().cuda ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
  auto ids = random_ids(2, 33, model_->vocab_size(), test::env_seed(14) + 3).to(dev);
  ForwardOptions with, without;
  with.output_hidden_states = without.output_hidden_states = true;
  without.head = false;
  const ForwardResult a = model_->forward(ids, with), b = model_->forward(ids, without);
  EXPECT_TRUE(a.logits.defined());
  EXPECT_FALSE(b.logits.defined());
  ASSERT_EQ(a.hidden_states.size(), b.hidden_states.size());
  for (size_t i = 0; i < a.hidden_states.size(); ++i)
    EXPECT_TRUE(torch::equal(a.hidden_states[i].cpu(), b.hidden_states[i].cpu())) << "hidden state " << i;
}

TEST_P(Equiv_Decode, recurrentStateHasConstantSize) {
  torch::NoGradGuard no_grad;
  const auto dev = GetParam().cuda ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
  auto ids = random_ids(2, 20, model_->vocab_size(), test::env_seed(14)).to(dev);
  DecodeCache cache;
  model_->forward_cached(ids.narrow(1, 0, 10), cache);
  const int64_t after_prefill = cache.recurrent_bytes();
  EXPECT_GT(after_prefill, 0);
  for (int64_t t = 10; t < 20; ++t) model_->forward_cached(ids.narrow(1, t, 1), cache);
  EXPECT_EQ(cache.recurrent_bytes(), after_prefill);  // only softmax layers' KV cache grows
  int64_t kv = 0;  // the filled part: 20 positions of k and v per softmax layer
  for (const auto& l : cache.layers) {
    if (!l.key.defined()) continue;
    EXPECT_GE(l.key.size(2), 20);
    kv += 2 * l.key.size(0) * l.key.size(1) * 20 * l.key.size(3) * static_cast<int64_t>(l.key.element_size());
  }
  EXPECT_EQ(cache.kv_bytes(), kv);
}

// The CUDA graph of one greedy step (decode_step.h) replays what an eager step computes: 40 steps after a 33-token
// prompt, each replayed step's logits against an eager forward_cached on a copy of the cache fed the same ids. The room
// reserved for the KV buffers (6 planned steps: 64 positions after rounding) ends at step ~28, where the stepper must
// drop its graph and go on eagerly with grown buffers (softmax families). Threshold: the replay launches the same
// kernels on the same data, so only a library's choice of another reduction order under capture can differ — one
// rounding of the logits at most: 1e-5 in f32 (TF32 off), 1e-2 in bf16 (2^−7 per element, normwise below it).
TEST_P(Equiv_Decode, graphedStepsMatchEagerSteps) {
  const auto& c = GetParam();
  if (!c.cuda) GTEST_SKIP() << "CUDA graphs: CUDA cases only";
  torch::NoGradGuard no_grad;
  const torch::Device dev(torch::kCUDA);
  DecodeCache cache;
  auto prompt = random_ids(2, 33, model_->vocab_size(), test::env_seed(14)).to(dev);
  auto first = model_->forward_cached(prompt, cache).logits.select(1, -1).argmax(-1).view({2, 1});
  GreedyStepper stepper(*model_, cache, first, /*use_graph=*/true, /*planned_steps=*/6);
  ASSERT_TRUE(stepper.graphed());
  const bool has_kv = kv_room(cache) != std::numeric_limits<int64_t>::max();
  DecodeCache eager = clone_cache(cache);
  eager.check_ids = true;
  const double tol = c.dtype == torch::kBFloat16 ? 1e-2 : 1e-5;
  double worst = 0;
  for (int step = 0; step < 40; ++step) {
    auto ref = model_->forward_cached(stepper.ids().clone(), eager).logits;
    stepper.step();
    const double e = rel_err(stepper.logits().cpu(), ref.cpu());
    worst = std::max(worst, e);
    ASSERT_LT(e, tol) << "step " << step << (stepper.graphed() ? " (replayed)" : " (eager)");
    ASSERT_EQ(cache.position, eager.position);
  }
  std::printf("[errors] %s graphed vs eager steps: worst %.3e (threshold %.0e)\n", decode_case_name({c, 0}).c_str(),
              worst, tol);
  EXPECT_EQ(stepper.graphed(), !has_kv) << "softmax families run past the reserved room and must drop the graph";
}

// `statecut generate` on CUDA replays a captured step (generate.h): the same tokens as the eager loop, greedy (the
// stepper's argmax, one step in flight) and sampled (fed the host's draw), for 40 new tokens after a 33-token prompt.
// Exact equality: the replay is bit-identical to the eager step (graphedStepsMatchEagerSteps: worst difference 0).
// And greedy equals the host sampler's pick: top-k 1 at temperature 1 goes through sample_next (lowest id among
// equal maxima), the device argmax must agree.
TEST_P(Equiv_Decode, generateWithAGraphPicksTheEagerLoopsTokens) {
  const auto& c = GetParam();
  if (!c.cuda) GTEST_SKIP() << "CUDA graphs: CUDA cases only";
  auto prompt = random_ids(2, 33, model_->vocab_size(), test::env_seed(14)).to(torch::kCUDA);
  auto run = [&](double temperature, int64_t top_k, bool graphs) {
    GenerateOptions o;
    o.max_new_tokens = 40;
    o.sampling.temperature = temperature;
    o.sampling.top_k = top_k;
    o.cuda_graphs = graphs;
    const GenerateResult r = generate(*model_, prompt, o);
    EXPECT_EQ(r.cuda_graph, graphs);
    EXPECT_EQ(r.steps, 39);
    return r.tokens;
  };
  const auto greedy = run(0.0, 0, true);
  EXPECT_EQ(greedy, run(0.0, 0, false)) << "greedy, graph vs eager";
  EXPECT_EQ(greedy, run(1.0, 1, true)) << "the device argmax vs the host's top-1 draw";
  EXPECT_EQ(run(0.8, 0, true), run(0.8, 0, false)) << "sampled, graph vs eager";
}

// A row stops after emitting a stop id (kept), the others go on; the run ends when every row has stopped. Greedy
// (the stepper's argmax with a step in flight) and the host's top-1 draw stop at the same place: each row's tokens
// are its unstopped tokens up to and including the first stop id.
TEST_P(Equiv_Decode, generateStopsEachRowAfterItsFirstStopId) {
  const auto& c = GetParam();
  if (c.dtype == torch::kFloat64) GTEST_SKIP() << "the f32 CPU case covers the loop";
  auto prompt = random_ids(2, 9, model_->vocab_size(), test::env_seed(14) + 3).to(c.cuda ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU));
  GenerateOptions o;
  o.max_new_tokens = 24;
  const GenerateResult full = generate(*model_, prompt, o);
  o.stop_ids = {full.tokens[0][5]};  // row 0 stops at (or before) its 6th token
  for (const int64_t top_k : {int64_t{0}, int64_t{1}}) {
    o.sampling.temperature = top_k ? 1.0 : 0.0;
    o.sampling.top_k = top_k;
    const GenerateResult got = generate(*model_, prompt, o);
    for (size_t b = 0; b < 2; ++b) {
      const auto& f = full.tokens[b];
      const auto stop = std::find(f.begin(), f.end(), o.stop_ids[0]);
      const std::vector<int64_t> want(f.begin(), stop == f.end() ? f.end() : stop + 1);
      EXPECT_EQ(got.tokens[b], want) << "row " << b << " top_k " << top_k;
    }
  }
}

// A prompt prefilled in pieces (GenerateOptions::prefill_piece, each continuing the cache) picks the tokens one pass
// picks: 65 tokens in pieces of 64 and of 7 (a last piece of 1, which runs the one-token step) against one piece.
TEST_P(Equiv_Decode, aPromptPrefilledInPiecesPicksTheTokensOnePassPicks) {
  const auto& c = GetParam();
  if (c.cuda || c.dtype != torch::kFloat64) GTEST_SKIP() << "one case per family, f64: no near-tie can flip a pick";
  auto prompt = random_ids(2, 65, model_->vocab_size(), test::env_seed(14) + 11);
  GenerateOptions o;
  o.max_new_tokens = 12;
  o.prefill_piece = 0;
  const GenerateResult whole = generate(*model_, prompt, o);
  for (const int64_t piece : {int64_t{64}, int64_t{7}}) {
    o.prefill_piece = piece;
    EXPECT_EQ(generate(*model_, prompt, o).tokens, whole.tokens) << "pieces of " << piece;
  }
}

// --max-new-tokens far beyond any memory: the KV room reserved ahead is capped (generate.cpp), so a run that a stop id
// ends after two tokens does not try to allocate buffers for 2^40 positions first.
TEST_P(Equiv_Decode, generateWithAHugeTokenBudgetReservesBoundedRoom) {
  const auto& c = GetParam();
  if (c.cuda || c.dtype != torch::kFloat32) GTEST_SKIP() << "one case per family";
  auto prompt = random_ids(1, 9, model_->vocab_size(), test::env_seed(14) + 5);
  GenerateOptions o;
  o.max_new_tokens = 3;
  const GenerateResult first = generate(*model_, prompt, o);
  o.max_new_tokens = int64_t{1} << 40;
  o.stop_ids = {first.tokens[0][1]};
  const GenerateResult got = generate(*model_, prompt, o);
  ASSERT_GE(got.tokens[0].size(), 1u);
  EXPECT_LE(got.tokens[0].size(), 2u) << "stopped at the second token at the latest";
}

std::vector<DecodeCase> decode_cases() {
  std::vector<DecodeCase> cs;
  for (const auto& f : kDecodeFixtures) {
    cs.push_back({f, torch::kFloat32, false});
    cs.push_back({f, torch::kFloat64, false});
    cs.push_back({f, torch::kFloat32, true});
    cs.push_back({f, torch::kBFloat16, true});
  }
  return cs;
}

INSTANTIATE_TEST_SUITE_P(Families, Equiv_Decode, testing::ValuesIn(decode_cases()), decode_case_name);

// reserve_kv sizes the KV buffers to the room asked for (rounded to 64), not to a doubling: a replayed step reads the
// whole buffer. A call past the room then grows it (×2), keeping what it holds (the equivalence tests above).
TEST(Unit_DecodeCache, reserveSizesTheKvBuffersExactly) {
  const std::string dir = test::fixture_dir("hf_qwen3_5");
  if (dir.empty()) GTEST_SKIP() << "fixture hf_qwen3_5 not found";
  torch::NoGradGuard no_grad;
  auto model = load_causal_lm(dir, torch::kFloat32, torch::kCPU);
  DecodeCache cache;
  auto ids = random_ids(2, 101, model->vocab_size(), test::env_seed(14));
  model->forward_cached(ids.narrow(1, 0, 100), cache);
  ASSERT_EQ(kv_room(cache), 128);  // 100 positions, rounded to 64
  reserve_kv(cache, 130);
  EXPECT_EQ(kv_room(cache), 192);
  const auto before = cache.layers[3].key.narrow(2, 0, 100).clone();  // layer 3: the fixture's softmax layer
  model->forward_cached(ids.narrow(1, 100, 1), cache);
  EXPECT_EQ(kv_room(cache), 192);
  EXPECT_TRUE(torch::equal(cache.layers[3].key.narrow(2, 0, 100), before)) << "the filled part was not kept";
}

// Bad input: a cache is tied to its batch size; a different B is refused with one line, not silently mixed.
TEST(BadInput_Decode, batchSizeChangeIsRefused) {
  const std::string dir = test::fixture_dir("fla_delta_net");
  if (dir.empty()) GTEST_SKIP() << "fixture fla_delta_net not found";
  torch::NoGradGuard no_grad;
  auto model = load_causal_lm(dir, torch::kFloat32, torch::kCPU);
  DecodeCache cache;
  model->forward_cached(random_ids(2, 5, model->vocab_size(), 1), cache);
  try {
    model->forward_cached(random_ids(3, 1, model->vocab_size(), 2), cache);
    FAIL() << "a batch of 3 on a cache of 2 was accepted";
  } catch (const c10::Error& e) {
    const std::string msg = e.what_without_backtrace();
    EXPECT_NE(msg.find("holds 2 sequences"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace statecut

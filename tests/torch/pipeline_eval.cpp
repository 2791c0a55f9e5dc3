// Evaluation windows (optimized/analysis/evaluation.h) on models whose answers are known in closed form.
#include <gtest/gtest.h>

#include <cmath>

#include "optimized/analysis/evaluation.h"
#include "optimized/io/option_error.h"

using namespace statecut;

namespace {

/// Uniform over 256 tokens: every scored token costs ln 256 nats = 8 bits; counts its forward calls.
class FakeLM : public CausalLM {
 public:
  ForwardResult forward(const torch::Tensor& ids, const ForwardOptions&) override {
    ForwardResult r;
    r.logits = torch::zeros({ids.size(0), ids.size(1), 256});
    calls_ += 1;
    return r;
  }
  const std::string& model_type() const override { return type_; }
  int64_t vocab_size() const override { return 256; }
  std::vector<std::pair<std::string, torch::Tensor>> named_parameters() override { return {}; }
  int calls_ = 0;

 private:
  std::string type_ = "fake";
};

TokenStream stream_of(int64_t n) {
  TokenStream s;
  s.source = "synthetic";
  for (int64_t i = 0; i < n; ++i) s.ids.push_back((i * 37) % 256);
  s.bytes = n;
  return s;
}

}  // namespace

TEST(Unit_Evaluation, uniformModelCostsEightBitsPerByte) {
  FakeLM m;
  const auto r = evaluate_stream(m, stream_of(1000), Tokenizer::bytes(), EvalOptions{});
  // The logits are fp32, so log-softmax carries ~2^-24 relative rounding per token: 1e-6 relative is ~16 ulps.
  EXPECT_NEAR(r.bits_per_byte, 8.0, 8.0 * 1e-6);
  EXPECT_NEAR(r.token_perplexity, 256.0, 256.0 * 1e-6);
}

TEST(Unit_Evaluation, everyTokenAfterTheFirstIsScoredOnce) {
  for (const int64_t n : {2, 63, 64, 65, 127, 1000}) {
    for (const int64_t w : {1, 7, 64, 2048}) {
      for (const int64_t stride : {int64_t{0}, std::max<int64_t>(1, w / 2), int64_t{1}}) {
        if (stride > w) continue;
        FakeLM m;
        EvalOptions o;
        o.window = w;
        o.stride = stride;
        o.batch = 3;
        const auto r = evaluate_stream(m, stream_of(n), Tokenizer::bytes(), o);
        EXPECT_EQ(r.tokens, n - 1) << "n=" << n << " window=" << w << " stride=" << stride;
        EXPECT_EQ(r.bytes, n - 1);
      }
    }
  }
}

/// FakeLM that fails the test when an input row is not ids k, k+1, ...: the rows of the stream below hold 0..99 each,
/// so a window reaching into the next row shows as a drop from 99 to 0.
class RowCheckingLM : public FakeLM {
 public:
  ForwardResult forward(const torch::Tensor& ids, const ForwardOptions& o) override {
    const auto a = ids.accessor<int64_t, 2>();
    for (int64_t b = 0; b < ids.size(0); ++b)
      for (int64_t t = 1; t < ids.size(1); ++t)
        if (a[b][t] != a[b][t - 1] + 1) crossed_ = true;
    return FakeLM::forward(ids, o);
  }
  bool crossed_ = false;
};

TEST(Unit_Evaluation, rowsOfATokenFileAreSeparateSequences) {
  TokenStream s;
  s.source = "rows";
  for (int64_t i = 0; i < 300; ++i) s.ids.push_back(i % 100);  // [3, 100]
  s.bytes = 300;
  s.row_length = 100;
  for (const int64_t w : {7, 64, 99, 100, 2048}) {
    for (const int64_t stride : {int64_t{0}, std::max<int64_t>(1, w / 2)}) {
      RowCheckingLM m;
      EvalOptions o;
      o.window = w;
      o.stride = stride;
      const auto r = evaluate_stream(m, s, Tokenizer::bytes(), o);
      EXPECT_EQ(r.tokens, 3 * 99) << "window " << w << " stride " << stride << ": each row's first token has no context";
      EXPECT_FALSE(m.crossed_) << "window " << w << " stride " << stride << " reached into the next row";
    }
  }
}

TEST(Unit_Evaluation, maxTokensTruncatesTheStream) {
  FakeLM m;
  EvalOptions o;
  o.window = 100;
  o.max_tokens = 301;
  const auto r = evaluate_stream(m, stream_of(5000), Tokenizer::bytes(), o);
  EXPECT_EQ(r.tokens, 300);
  EXPECT_EQ(m.calls_, 1) << "three windows of 100 in one batch";
}

TEST(BadInput_Evaluation, oneTokenCannotBeScored) {
  FakeLM m;
  try {
    evaluate_stream(m, stream_of(1), Tokenizer::bytes(), EvalOptions{});
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("synthetic: needs at least 2 tokens"), std::string::npos) << e.what();
  }
  EvalOptions o;
  o.window = 10;
  o.stride = 11;
  EXPECT_THROW(evaluate_stream(m, stream_of(100), Tokenizer::bytes(), o), OptionError);  // a usage error (exit 2)
}

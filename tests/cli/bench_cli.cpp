// CLI end to end: `statecut bench` on the fla DeltaNet fixture and its 50% prune (tiny sizes, CPU): every figure is
// there and positive, the decode step checked itself against an eager step, the state of the pruned model is
// smaller by the pruned key dim (dk 32 → 16: the recurrent state halves, the conv windows shrink by a quarter), and the
// speedup column is the ratio of the two runs' tokens/s. Bad sizes are one line, exit 1.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "tests/cli/cli_run.h"
#include "tests/test_env.h"

namespace {

using statecut::test::fixture_dir;
using statecut::test::run_statecut;

TEST(Cli_Bench, figuresAndSpeedupOfAModelAndItsPrune) {
  const std::string full = fixture_dir("fla_delta_net"), pruned = fixture_dir("fla_delta_net_pruned50");
  if (full.empty() || pruned.empty()) GTEST_SKIP() << "fixtures fla_delta_net(_pruned50) not found";
  const auto r = run_statecut("bench --checkpoint " + full + " --compare " + pruned +
                              " --prefill 1x16,2x70 --decode 1,3 --prompt 9 --new-tokens 5 --repeats 1 --json --quiet");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.at("models").size(), 2u);
  for (const auto& m : j.at("models")) {
    EXPECT_EQ(m.at("model_type"), "delta_net");
    ASSERT_EQ(m.at("prefill").size(), 2u);
    ASSERT_EQ(m.at("decode").size(), 2u);
    for (const auto& f : m.at("prefill")) EXPECT_GT(f.at("tokens_per_s").get<double>(), 0.0) << f.dump();
    for (const auto& f : m.at("decode")) {
      EXPECT_GT(f.at("tokens_per_s").get<double>(), 0.0) << f.dump();
      EXPECT_GT(f.at("floor_ms").get<double>(), 0.0) << f.dump();
      EXPECT_LT(f.at("check_rel_err").get<double>(), 1e-6) << f.dump();  // eager CPU step vs eager step: same ops
      // ms a step and tokens/s are one timing: batch tokens every ms_per_step (a formula off in one shows here)
      const double want = static_cast<double>(f.at("batch").get<int64_t>()) * 1e3 / f.at("ms_per_step").get<double>();
      EXPECT_NEAR(f.at("tokens_per_s").get<double>(), want, 1e-9 * want) << f.dump();
    }
    // The copy bandwidth the floors divide by is a machine's: between 100 MB/s and 100 TB/s (2 x bytes / time).
    EXPECT_GT(m.at("bandwidth_bytes_per_s").get<double>(), 1e8);
    EXPECT_LT(m.at("bandwidth_bytes_per_s").get<double>(), 1e14);
  }
  // fixture: 2 layers, 2 heads, dk = dv = 32 (pruned: dk 16), conv 4 on q, k, v, fp32:
  // state layers·heads·dk·dv·4 = 2·2·32·32·4 = 16 KiB, conv windows layers·(W−1)·(64+64+64)·4 = 4.5 KiB; pruned
  // 8 KiB + 2·3·(32+32+64)·4 = 3 KiB.
  const auto& m0 = j.at("models")[0];
  const auto& m1 = j.at("models")[1];
  EXPECT_EQ(m0.at("state_bytes_per_seq").get<int64_t>(), 2 * 2 * 32 * 32 * 4 + 2 * 3 * 192 * 4);
  EXPECT_EQ(m1.at("state_bytes_per_seq").get<int64_t>(), 2 * 2 * 16 * 32 * 4 + 2 * 3 * 128 * 4);
  const auto& sp = j.at("speedup")[0];
  for (size_t k = 0; k < 2; ++k) {
    const double want = m1.at("decode")[k].at("tokens_per_s").get<double>() /
                        m0.at("decode")[k].at("tokens_per_s").get<double>();
    EXPECT_NEAR(sp.at("decode")[k].at("speedup").get<double>(), want, 1e-9 * want);
  }
}

// The floor's weights W are every parameter but an embedding table a step only looks rows up in. A tied table is the
// output head, read whole every step: W is then every parameter (it was left out, the floor ~17% low, on both tied
// variants). CPU runs f32: 4 bytes a parameter; the untied fixture's table is 256 x 64.
TEST(Cli_Bench, theFloorCountsATiedEmbeddingTableAsTheHead) {
  const std::string variants = std::string(STATECUT_SOURCE_DIR) + "/tests/data/variants/";
  const auto weights = [](const std::string& dir) {
    const auto r = run_statecut("bench --checkpoint " + dir +
                                " --prefill 1x4 --decode 1 --prompt 4 --new-tokens 2 --repeats 1 --json --quiet");
    EXPECT_EQ(r.code, 0) << dir << ": " << r.err;
    const auto m = nlohmann::json::parse(r.out).at("models")[0];
    return std::pair{m.at("weight_bytes_per_step").get<int64_t>(), 4 * m.at("parameters").get<int64_t>()};
  };
  for (const char* tied : {"hf_mamba2_bias_tied", "hf_qwen3_5_gva3_fullfirst"}) {
    const auto [w, all] = weights(variants + tied);
    EXPECT_EQ(w, all) << tied;
  }
  const std::string untied = fixture_dir("fla_delta_net");
  if (untied.empty()) return;
  const auto [w, all] = weights(untied);
  EXPECT_EQ(w, all - 256 * 64 * 4);
}

// The byte floor of a decode step is W + 2·B·s + B·kv·L over the copy bandwidth: the weights once, each sequence's
// recurrent state read and written, and its KV cache read at its mean length L over the timed steps (the prompt, the
// stepper's few warm-up and check steps, half the new tokens). On the hybrid fixture (recurrent layers and full
// attention) L, solved from each batch's floor, is the same at every batch and lies in [prompt + new / 2, + 8].
TEST(Cli_Bench, theFloorIsWeightsOnceStateReadAndWrittenAndTheKvCacheRead) {
  const std::string hybrid = fixture_dir("hf_qwen3_5");
  if (hybrid.empty()) GTEST_SKIP() << "fixture hf_qwen3_5 not found";
  const int prompt = 9, new_tokens = 6;
  const auto r = run_statecut("bench --checkpoint " + hybrid + " --prefill 1x4 --decode 1,3,5 --prompt " +
                              std::to_string(prompt) + " --new-tokens " + std::to_string(new_tokens) +
                              " --repeats 1 --json --quiet");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto m = nlohmann::json::parse(r.out).at("models")[0];
  const double W = m.at("weight_bytes_per_step").get<double>(), s = m.at("state_bytes_per_seq").get<double>(),
               kv = m.at("kv_bytes_per_token").get<double>(), bw = m.at("bandwidth_bytes_per_s").get<double>();
  ASSERT_GT(s, 0);
  ASSERT_GT(kv, 0) << "the hybrid's full-attention layers hold a KV cache";
  std::vector<double> lengths;
  for (const auto& f : m.at("decode")) {
    const double B = f.at("batch").get<double>(), bytes = f.at("floor_ms").get<double>() * 1e-3 * bw;
    lengths.push_back((bytes - W - 2 * B * s) / (B * kv));
    EXPECT_GE(lengths.back(), prompt + 0.5 * new_tokens - 1e-6) << f.dump();
    EXPECT_LE(lengths.back(), prompt + 0.5 * new_tokens + 8) << f.dump();
  }
  ASSERT_EQ(lengths.size(), 3u);
  for (double l : lengths) EXPECT_NEAR(l, lengths[0], 1e-6 * lengths[0]);
}

// A case that cannot be measured (a prefill of 10^10 tokens under an 8 GB address-space limit) fails the run: the
// table still shows the others, stderr has one line naming the checkpoint and the case, exit 1 (it exited 0). Peak
// memory, not measured on CPU, is null in the JSON and "-" in the table (it was -1).
TEST(Cli_Bench, aFailedMeasurementFailsTheRunAndUnmeasuredPeaksAreNull) {
  const std::string full = fixture_dir("fla_delta_net");
  if (full.empty()) GTEST_SKIP() << "fixture fla_delta_net not found";
  const std::string args = "bench --checkpoint " + full + " --prefill 1x8,100000x100000 --decode 1 --prompt 4 "
                           "--new-tokens 2 --repeats 1 --quiet";
  for (const bool json : {false, true}) {
    const auto r = statecut::test::run_program(std::string("ulimit -v 8000000; ") + STATECUT_CLI,
                                               args + (json ? " --json" : ""));
    EXPECT_EQ(r.code, 1) << r.out << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
    EXPECT_NE(r.err.find("statecut bench: error: " + full + ": prefill 100000x100000: "), std::string::npos) << r.err;
    if (json) {
      const auto j = nlohmann::json::parse(r.out);
      EXPECT_TRUE(j.at("models")[0].at("prefill")[0].at("peak_bytes").is_null()) << r.out;
      EXPECT_TRUE(j.at("models")[0].at("prefill")[1].contains("error")) << r.out;
    } else {
      EXPECT_EQ(r.out.find(" -1.0"), std::string::npos) << r.out;
    }
  }
}

TEST(Cli_Bench, humanTableHasASpeedupColumn) {
  const std::string full = fixture_dir("fla_delta_net"), pruned = fixture_dir("fla_delta_net_pruned50");
  if (full.empty() || pruned.empty()) GTEST_SKIP() << "fixtures not found";
  const auto r = run_statecut("bench --checkpoint " + full + " --compare " + pruned +
                              " --prefill 1x8 --decode 2 --prompt 4 --new-tokens 2 --repeats 1 --quiet");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("speedup"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ms/step"), std::string::npos) << r.out;
}

// A size that does not parse or is not positive is a usage error, as a value CLI11 refuses would be (exit 2).
TEST(BadInput_Bench, badSizesAreOneUsageLineAndExitTwo) {
  const std::string full = fixture_dir("fla_delta_net");
  if (full.empty()) GTEST_SKIP() << "fixture fla_delta_net not found";
  for (const std::string bad : {"--prefill 8y16", "--prefill 0x16", "--decode 1,x", "--decode 0"}) {
    const auto r = run_statecut("bench --checkpoint " + full + " " + bad);
    EXPECT_EQ(r.code, 2) << bad << ": " << r.err;
    EXPECT_EQ(r.err.rfind("statecut bench: usage: ", 0), 0u) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "not one line: " << r.err;
    EXPECT_TRUE(r.out.empty());
  }
}

// A --compare checkpoint that does not load fails before anything is timed (the first model was benchmarked, its
// progress printed, and only then the broken one named).
TEST(BadInput_Bench, brokenCompareCheckpointFailsBeforeAnyTiming) {
  const std::string full = fixture_dir("fla_delta_net");
  if (full.empty()) GTEST_SKIP() << "fixture fla_delta_net not found";
  statecut::test::TempDir d("bench-broken");
  const auto r = run_statecut("bench --checkpoint " + full + " --compare " + (d / "none") + " --decode 1 --prefill 1x8");
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "not one line (progress of the first model?): " << r.err;
  EXPECT_NE(r.err.find(d / "none"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
}

}  // namespace

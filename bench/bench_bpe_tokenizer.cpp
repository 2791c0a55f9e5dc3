// Byte-level BPE encode throughput (optimized/text/bpe_tokenizer.h), in bytes of UTF-8 input per second on one core.
// Target (the issue): >= 5 MB/s. Tokenizer: ../shared/fixtures/tokenizer_qwen3/tokenizer.json ($STATECUT_SHARED
// replaces ../shared) when present, else the in-repo tests/data/tokenizer_bpe/tokenizer.json (651 merges: longer
// BPE work per word, a lower bound). Text: the first 4 MB of ../shared/corpora/pydocs_train.txt, else
// assets/corpora/pydocs_train.txt (200 KB), cut at a newline.
// Before timing, the output is checked: decode(encode(text)) equals the text's NFC form (Qwen's normalizer; the
// corpus has a KELVIN SIGN that NFC turns into K), and the golden texts of the tokenizer encode to their HF ids.
//
//   BM_EncodeCorpusColdCache: one encode() call on the whole text, in a new thread each time, so the word cache
//                             (one per thread and tokenizer) starts empty: the number to quote.
//   BM_EncodeCorpus:          the same call repeated on one thread (the cache holds the text's words).
//   BM_EncodeLines:           one encode() call per line (many short texts, the cache warm).
//
// Built only with the tokenizer's library (STATECUT_HAVE_BPE_TOKENIZER, set where it is linked: PCRE2 is needed);
// elsewhere the file builds into one benchmark that reports the missing library.
#include <benchmark/benchmark.h>

#if defined(STATECUT_HAVE_BPE_TOKENIZER)
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "optimized/text/bpe_tokenizer.h"
#include "optimized/text/unicode_nfc.h"

namespace fs = std::filesystem;
using statecut::BpeTokenizer;

namespace {

constexpr size_t kCorpusBytes = size_t{4} << 20;

/// The build's STATECUT_SOURCE_DIR, else $STATECUT_SOURCE_DIR, else the folder above this file (when __FILE__ is
/// relative, that holds only when run from the folder it was compiled in).
fs::path repo_root() {
#ifdef STATECUT_SOURCE_DIR
  return fs::path(STATECUT_SOURCE_DIR);
#else
  if (const char* env = std::getenv("STATECUT_SOURCE_DIR"); env && *env) return fs::path(env);
  return fs::path(__FILE__).parent_path().parent_path();
#endif
}

fs::path shared_root() {
  if (const char* env = std::getenv("STATECUT_SHARED"); env && *env) return fs::path(env);
  return repo_root() / ".." / "shared";
}

fs::path tokenizer_dir() {
  const fs::path full = shared_root() / "fixtures" / "tokenizer_qwen3";
  return fs::exists(full / "tokenizer.json") ? full : repo_root() / "tests" / "data" / "tokenizer_bpe";
}

std::string read_text() {
  fs::path p = shared_root() / "corpora" / "pydocs_train.txt";
  if (!fs::exists(p)) p = repo_root() / "assets" / "corpora" / "pydocs_train.txt";
  std::ifstream in(p, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "%s: cannot open\n", p.string().c_str());
    std::exit(1);
  }
  std::string text(kCorpusBytes, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (const size_t nl = text.rfind('\n'); nl != std::string::npos) text.resize(nl + 1);
  return text;
}

struct Fixture {
  BpeTokenizer tok;
  std::string text;
  std::vector<std::string> lines;
};

/// Loads and checks once; exits non-zero when the tokenizer's output is wrong (a benchmark of wrong output is void).
const Fixture& fixture() {
  static const Fixture f = [] {
    const fs::path dir = tokenizer_dir();
    Fixture x{BpeTokenizer::from_file((dir / "tokenizer.json").string()), read_text(), {}};
    std::istringstream golden_in([&] {
      std::ifstream g(dir / "golden.jsonl");
      std::stringstream ss;
      ss << g.rdbuf();
      return ss.str();
    }());
    int golden = 0;
    for (std::string l; std::getline(golden_in, l);) {
      if (l.empty()) continue;
      const auto j = nlohmann::json::parse(l);
      if (x.tok.encode(j.at("text").get<std::string>()) != j.at("ids").get<std::vector<int64_t>>()) {
        std::fprintf(stderr, "check failed: golden text %s encodes differently from HF\n", j.at("text").dump().c_str());
        std::exit(1);
      }
      ++golden;
    }
    if (x.tok.decode(x.tok.encode(x.text)) != statecut::nfc(x.text)) {
      std::fprintf(stderr, "check failed: decode(encode(text)) != NFC(text)\n");
      std::exit(1);
    }
    std::istringstream lines(x.text);
    for (std::string l; std::getline(lines, l);) x.lines.push_back(l + "\n");
    std::printf("tokenizer %s, text %zu bytes; checked: %d golden texts, decode(encode) round trip\n",
                dir.string().c_str(), x.text.size(), golden);
    return x;
  }();
  return f;
}

void BM_EncodeCorpusColdCache(benchmark::State& state) {
  const Fixture& f = fixture();
  for (auto _ : state) {
    std::vector<int64_t> ids;
    double cpu_s = 0;
    std::thread([&] {  // a fresh thread has an empty word cache
      timespec a{}, b{};
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
      ids = f.tok.encode(f.text);
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
      cpu_s = static_cast<double>(b.tv_sec - a.tv_sec) + 1e-9 * static_cast<double>(b.tv_nsec - a.tv_nsec);
    }).join();
    benchmark::DoNotOptimize(ids.data());
    state.SetIterationTime(cpu_s);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * f.text.size()));
}
// The encoding thread's own CPU time (the benchmark's CPU clock does not see another thread; wall time counts the
// other processes of a shared machine).
BENCHMARK(BM_EncodeCorpusColdCache)->Unit(benchmark::kMillisecond)->MinTime(2.0)->UseManualTime();

void BM_EncodeCorpus(benchmark::State& state) {
  const Fixture& f = fixture();
  size_t tokens = 0;
  for (auto _ : state) {
    auto ids = f.tok.encode(f.text);
    tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * f.text.size()));
  state.counters["tokens"] = static_cast<double>(tokens);
  state.counters["bytes_per_token"] = static_cast<double>(f.text.size()) / static_cast<double>(tokens);
}
BENCHMARK(BM_EncodeCorpus)->Unit(benchmark::kMillisecond)->MinTime(2.0);

void BM_EncodeLines(benchmark::State& state) {
  const Fixture& f = fixture();
  for (auto _ : state) {
    for (const auto& l : f.lines) {
      auto ids = f.tok.encode(l);
      benchmark::DoNotOptimize(ids.data());
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * f.text.size()));
}
BENCHMARK(BM_EncodeLines)->Unit(benchmark::kMillisecond)->MinTime(2.0);

}  // namespace

#else

static void BM_BpeTokenizerNotBuilt(benchmark::State& state) {
  for (auto _ : state) {
  }
  state.SkipWithError("built without the BPE tokenizer library (define STATECUT_HAVE_BPE_TOKENIZER where it links)");
}
BENCHMARK(BM_BpeTokenizerNotBuilt);

#endif

BENCHMARK_MAIN();

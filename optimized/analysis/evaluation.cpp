#include "optimized/analysis/evaluation.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "optimized/io/option_error.h"

namespace statecut {

EvalResult evaluate_stream(CausalLM& model, const TokenStream& s, const Tokenizer& tok, const EvalOptions& opt,
                           const Progress& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  if (opt.window < 1) throw OptionError("--window must be >= 1");
  const int64_t W = opt.window;
  const int64_t S = opt.stride > 0 ? opt.stride : W;
  if (S > W) throw OptionError("--stride must be <= --window");
  int64_t n = static_cast<int64_t>(s.ids.size());
  if (opt.max_tokens > 0) n = std::min(n, opt.max_tokens);
  if (n < 2) throw std::runtime_error(s.source + ": needs at least 2 tokens to score, has " + std::to_string(n));

  // Windows (start, length of input) and the first target position each one scores.
  struct Win {
    int64_t start, len, first_target;
  };
  std::vector<Win> wins;
  // The windows of one sequence ids[base, base + m): no window reaches into the next row of a [B, T] token file.
  auto add_windows = [&](int64_t base, int64_t m) {
    int64_t scored_until = base;  // every target position <= this is scored
    for (int64_t st = base; scored_until < base + m - 1; st += S) {
      const int64_t len = std::min(W, base + m - 1 - st);  // inputs ids[st, st+len), targets ids[st+1, st+len]
      if (len <= 0) break;
      wins.push_back({st, len, std::max(st + 1, scored_until + 1)});
      scored_until = st + len;
    }
  };
  const int64_t row = s.row_length > 0 ? s.row_length : n;
  for (int64_t base = 0; base < n; base += row) add_windows(base, std::min(row, n - base));
  if (wins.empty()) throw std::runtime_error(s.source + ": rows of " + std::to_string(row) + " token(s): nothing to score");
  const int64_t batch = opt.batch > 0 ? opt.batch : (model.vocab_size() > 4096 ? 1 : 8);
  const torch::Tensor all = torch::from_blob(const_cast<int64_t*>(s.ids.data()), {n}, torch::kInt64);
  const bool count_bytes = tok.available();
  if (!count_bytes && !opt.tokens_without_bytes)
    throw std::runtime_error(tok.unavailable_fact() + ": bits per byte need the bytes of these token ids (give the "
                             "checkpoint its tokenizer file, or --tokenizer bytes when the ids are bytes)");
  EvalResult r;
  if (!count_bytes) r.no_bytes_reason = tok.unavailable_fact() + ": bits per byte need a tokenizer to count the bytes";
  r.file = s.source;
  torch::NoGradGuard no_grad;
  size_t i = 0;
  int64_t done = 0;
  while (i < wins.size()) {
    // Group consecutive windows of equal length into one batch.
    size_t j = i;
    while (j < wins.size() && j - i < static_cast<size_t>(batch) && wins[j].len == wins[i].len) ++j;
    const int64_t len = wins[i].len;
    std::vector<torch::Tensor> rows, tgts;
    for (size_t w = i; w < j; ++w) {
      rows.push_back(all.narrow(0, wins[w].start, len));
      tgts.push_back(all.narrow(0, wins[w].start + 1, len));
    }
    const torch::Tensor x = torch::stack(rows), y = torch::stack(tgts);
    torch::Tensor logits = model.forward(x).logits;  // [b, len, V]
    if (logits.scalar_type() != torch::kFloat64) logits = logits.to(torch::kFloat32);
    const torch::Tensor nll = -torch::log_softmax(logits, -1)
                                   .gather(2, y.to(logits.device()).unsqueeze(-1))
                                   .squeeze(-1)
                                   .to(torch::kCPU, torch::kFloat64);  // [b, len]
    // A model whose forward overflows on this text (weights in range, activations not) has no bits/byte: say where.
    if (!torch::isfinite(nll).all().item<bool>())
      throw std::runtime_error(s.source + ": the model's logits are not finite (NaN or Inf) in the window of tokens [" +
                               std::to_string(wins[i].start) + ", " + std::to_string(wins[i].start + len) +
                               ") or one batched with it: its forward overflows on this text");
    const auto acc = nll.accessor<double, 2>();
    for (size_t w = i; w < j; ++w) {
      for (int64_t t = wins[w].first_target - (wins[w].start + 1); t < len; ++t) {
        r.nll += acc[w - i][t];
        r.tokens += 1;
        if (count_bytes) r.bytes += tok.bytes_of(s.ids[wins[w].start + 1 + t]);
      }
    }
    done += static_cast<int64_t>(j - i);
    if (progress) progress(done, static_cast<int64_t>(wins.size()));
    i = j;
  }
  // Text scored whole: the file's own bytes less those of the unscored tokens (lm-eval divides by the document's
  // UTF-8 length). Σ bytes_of differs from it where the tokenizer normalises (NFC shortens NFD text), adds a
  // SentencePiece dummy-prefix space or maps characters to a zero-byte unknown piece.
  if (count_bytes && s.text_bytes >= 0 && n == static_cast<int64_t>(s.ids.size())) r.bytes += s.text_bytes - s.bytes;
  if (count_bytes && r.bytes <= 0) throw std::runtime_error(s.source + ": the scored tokens stand for no bytes");
  r.bits_per_byte = count_bytes ? r.nll / (std::log(2.0) * static_cast<double>(r.bytes))
                                : std::numeric_limits<double>::quiet_NaN();
  r.token_perplexity = std::exp(r.nll / static_cast<double>(r.tokens));
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace statecut

// The passkey retrieval task and its heat map (niah.h).
#include "optimized/analysis/niah.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <stdexcept>

#include "optimized/analysis/svg.h"
#include "optimized/io/option_error.h"
#include "optimized/models/decode_cache.h"

namespace statecut {

namespace {

std::string with_key(std::string t, const std::string& key) {
  for (size_t p = t.find("{key}"); p != std::string::npos; p = t.find("{key}", p + key.size())) t.replace(p, 5, key);
  return t;
}

std::string random_key(std::mt19937_64& rng, int64_t digits) {
  std::string k;
  for (int64_t i = 0; i < digits; ++i)
    k.push_back(static_cast<char>('0' + (i == 0 ? 1 + rng() % 9 : rng() % 10)));  // no leading zero
  return k;
}

/// A copy of a batch-1 cache repeated to `g` sequences (forward_cached updates its cache in place).
DecodeCache repeat_cache(const DecodeCache& c, int64_t g) {
  return map_cache(c, g, [g](const torch::Tensor& t) {
    std::vector<int64_t> reps(static_cast<size_t>(t.dim()), 1);
    reps[0] = g;
    return t.repeat(reps);
  });
}

std::string niah_fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

}  // namespace

NiahResult evaluate_niah(CausalLM& model, const Tokenizer& tok, const std::string& filler_path,
                         const std::string& filler_text, const NiahOptions& opt, const Progress& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  if (opt.lengths.empty() || opt.depths.empty())
    throw OptionError("--niah needs at least one length and one depth");
  for (double d : opt.depths)
    if (!(d >= 0 && d <= 1)) throw OptionError("--depths: " + niah_fmt("%g", d) + " is outside [0, 1]");
  if (opt.trials < 1) throw OptionError("--trials must be >= 1");
  if (opt.digits < 1 || opt.digits > 18) throw OptionError("--digits must be in [1, 18]");
  if (opt.candidates < 2) throw OptionError("--candidates must be >= 2 (the key and a distractor)");
  if (static_cast<double>(opt.candidates) > 0.5 * 9 * std::pow(10.0, static_cast<double>(opt.digits - 1)))
    throw OptionError("--candidates " + std::to_string(opt.candidates) + " is too many for " +
                             std::to_string(opt.digits) + "-digit keys");
  const std::vector<int64_t> filler = tok.encode(filler_text);
  if (filler.empty()) throw std::runtime_error(filler_path + ": the filler text encodes to no tokens");
  const int64_t V = model.vocab_size();
  for (int64_t id : filler)
    if (id < 0 || id >= V)
      throw std::runtime_error(filler_path + ": the tokenizer gave id " + std::to_string(id) +
                               " outside the model's vocabulary");
  if (opt.needle.find("{key}") == std::string::npos) throw OptionError("--needle must hold {key}");
  if (opt.answer.find("{key}") == std::string::npos) throw OptionError("--answer must hold {key}");
  const std::vector<int64_t> question = tok.encode(opt.question);
  {  // every length must hold the needle and the question: check before any compute
    const size_t fixed =
        tok.encode(with_key(opt.needle, std::string(static_cast<size_t>(opt.digits), '7'))).size() + question.size();
    for (int64_t L : opt.lengths)
      if (L < static_cast<int64_t>(fixed) + 1)
        throw OptionError("--lengths: " + std::to_string(L) +
                                 " tokens cannot hold the needle and the question (" + std::to_string(fixed) +
                                 " tokens) and some filler");
  }
  const auto device = model.named_parameters().front().second.device();

  NiahResult res;
  res.filler = filler_path;
  res.options = opt;
  std::mt19937_64 rng(opt.seed);
  const int64_t total = static_cast<int64_t>(opt.lengths.size() * opt.depths.size()) * opt.trials;
  int64_t done = 0, hits = 0;
  torch::NoGradGuard no_grad;
  for (int64_t L : opt.lengths) {
    for (double d : opt.depths) {
      NiahCell cell;
      cell.length = L;
      cell.depth = d;
      for (int64_t trial = 0; trial < opt.trials; ++trial) {
        const std::string key = random_key(rng, opt.digits);
        std::vector<std::string> keys{key};
        std::set<std::string> seen{key};
        while (static_cast<int64_t>(keys.size()) < opt.candidates) {
          std::string k = random_key(rng, opt.digits);
          if (seen.insert(k).second) keys.push_back(k);
        }
        const size_t offset = static_cast<size_t>(rng() % filler.size());
        const std::vector<int64_t> needle = tok.encode(with_key(opt.needle, key));
        const int64_t f = L - static_cast<int64_t>(needle.size() + question.size());
        if (f < 0)
          throw OptionError("--lengths: " + std::to_string(L) +
                                   " tokens cannot hold the needle and the question (" +
                                   std::to_string(needle.size() + question.size()) + " tokens)");
        const int64_t a = std::llround(d * static_cast<double>(f));
        std::vector<int64_t> prompt;
        prompt.reserve(static_cast<size_t>(L));
        auto add_filler = [&](int64_t from, int64_t to) {
          for (int64_t i = from; i < to; ++i)
            prompt.push_back(filler[(offset + static_cast<size_t>(i)) % filler.size()]);
        };
        add_filler(0, a);
        prompt.insert(prompt.end(), needle.begin(), needle.end());
        add_filler(a, f);
        prompt.insert(prompt.end(), question.begin(), question.end());

        // One prefill; each group of equally long candidates continues a repeated copy of its state. Only the last
        // position's logits are read, so only they are formed (at a 152k vocabulary the whole prompt's were 0.6 MB
        // a token: 10.7 GB at 16k tokens).
        DecodeCache cache;
        const torch::Tensor x = torch::tensor(prompt, torch::kInt64).view({1, -1}).to(device);
        ForwardOptions last_only;
        last_only.last_logits = true;
        const torch::Tensor last = torch::log_softmax(
            model.forward_cached(x, cache, last_only).logits[0][-1].to(torch::kCPU, torch::kFloat64), -1);
        std::map<size_t, std::vector<std::pair<size_t, std::vector<int64_t>>>> by_len;
        for (size_t c = 0; c < keys.size(); ++c) {
          auto ids = tok.encode(with_key(opt.answer, keys[c]));
          if (ids.empty())
            throw std::runtime_error("the tokenizer encodes the answer '" + with_key(opt.answer, keys[c]) +
                                     "' to no tokens");
          by_len[ids.size()].push_back({c, std::move(ids)});
        }
        std::vector<double> ll(keys.size(), 0.0);
        for (auto& [n, group] : by_len) {
          const int64_t G = static_cast<int64_t>(group.size());
          for (const auto& [c, ids] : group) ll[c] = last[ids[0]].item<double>();
          if (n == 1) continue;
          std::vector<int64_t> rows;
          for (const auto& [c, ids] : group) rows.insert(rows.end(), ids.begin(), ids.end() - 1);
          DecodeCache g = repeat_cache(cache, G);
          const torch::Tensor lp = torch::log_softmax(
              model
                  .forward_cached(torch::tensor(rows, torch::kInt64).view({G, static_cast<int64_t>(n) - 1}).to(device),
                                  g)
                  .logits.to(torch::kCPU, torch::kFloat64),
              -1);  // [G, n-1, V]
          for (int64_t r = 0; r < G; ++r) {
            const auto& [c, ids] = group[static_cast<size_t>(r)];
            for (size_t j = 1; j < n; ++j) ll[c] += lp[r][static_cast<int64_t>(j) - 1][ids[j]].item<double>();
          }
        }
        int64_t rank = 0;
        for (size_t c = 1; c < keys.size(); ++c) rank += ll[c] > ll[0] ? 1 : 0;
        cell.ranks.push_back(rank);
        hits += rank == 0 ? 1 : 0;
        if (progress) progress(++done, total);
      }
      int64_t right = 0, sum = 0;
      for (int64_t r : cell.ranks) right += r == 0 ? 1 : 0, sum += r;
      cell.accuracy = static_cast<double>(right) / static_cast<double>(opt.trials);
      cell.mean_rank = static_cast<double>(sum) / static_cast<double>(opt.trials);
      res.cells.push_back(std::move(cell));
    }
  }
  res.accuracy = static_cast<double>(hits) / static_cast<double>(total);
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

std::string niah_svg(const NiahResult& r, const std::string& title) {
  const auto& o = r.options;
  const int cw = 78, ch = 34, left = 90, top = 64;
  // The legend (11 steps of 12 px) may be taller than the grid: the depth axis title goes below both.
  const int grid_h = ch * static_cast<int>(o.lengths.size()), body = std::max(grid_h, 11 * 12 + 8);
  const int W = std::max(left + cw * static_cast<int>(o.depths.size()) + 120, 560), H = top + body + 50;
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(W) + "\" height=\"" +
                  std::to_string(H) + "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  s += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s += "<text x=\"" + std::to_string(W / 2) + "\" y=\"22\" text-anchor=\"middle\" font-size=\"14\">" +
       xml_escape(title) + "</text>\n";
  s += "<text x=\"" + std::to_string(W / 2) + "\" y=\"40\" text-anchor=\"middle\" fill=\"#555\">accuracy: the key ranked first among " +
       std::to_string(o.candidates) + " candidates (" + std::to_string(o.trials) + " trials a cell, chance " + niah_fmt("%.2f", 1.0 / static_cast<double>(o.candidates)) +
       ")</text>\n";
  // Red (0) through yellow (0.5) to green (1).
  auto colour = [](double a) {
    const double t = std::clamp(a, 0.0, 1.0);
    const int rr = t < 0.5 ? 215 : static_cast<int>(215 - (t - 0.5) * 2 * (215 - 26));
    const int gg =
        t < 0.5 ? static_cast<int>(48 + t * 2 * (190 - 48)) : static_cast<int>(190 - (t - 0.5) * 2 * (190 - 150));
    const int bb = t < 0.5 ? 39 : static_cast<int>(39 + (t - 0.5) * 2 * (80 - 39));
    char b[16];
    std::snprintf(b, sizeof b, "#%02x%02x%02x", rr, gg, bb);
    return std::string(b);
  };
  for (size_t i = 0; i < o.lengths.size(); ++i) {
    const int y = top + ch * static_cast<int>(i);
    s += "<text x=\"" + std::to_string(left - 8) + "\" y=\"" + std::to_string(y + ch / 2 + 4) +
         "\" text-anchor=\"end\">" + std::to_string(o.lengths[i]) + "</text>\n";
    for (size_t j = 0; j < o.depths.size(); ++j) {
      const NiahCell& c = r.cells[i * o.depths.size() + j];
      const int x = left + cw * static_cast<int>(j);
      s += "<rect x=\"" + std::to_string(x) + "\" y=\"" + std::to_string(y) + "\" width=\"" + std::to_string(cw - 2) +
           "\" height=\"" + std::to_string(ch - 2) + "\" fill=\"" + colour(c.accuracy) + "\"><title>length " +
           std::to_string(c.length) + ", depth " + niah_fmt("%g", c.depth) + ": accuracy " + niah_fmt("%.2f", c.accuracy) +
           ", mean rank " + niah_fmt("%.2f", c.mean_rank) + "</title></rect>\n";
      s += "<text x=\"" + std::to_string(x + cw / 2 - 1) + "\" y=\"" + std::to_string(y + ch / 2 + 4) +
           "\" text-anchor=\"middle\">" + niah_fmt("%.2f", c.accuracy) + "</text>\n";
    }
  }
  const int yb = top + ch * static_cast<int>(o.lengths.size());
  for (size_t j = 0; j < o.depths.size(); ++j)
    s += "<text x=\"" + std::to_string(left + cw * static_cast<int>(j) + cw / 2 - 1) + "\" y=\"" +
         std::to_string(yb + 16) + "\" text-anchor=\"middle\">" + niah_fmt("%g", o.depths[j]) + "</text>\n";
  s += "<text x=\"" + std::to_string(W / 2) + "\" y=\"" + std::to_string(top + body + 36) +
       "\" text-anchor=\"middle\">needle depth (0 = start of the context, 1 = just before the question)</text>\n";
  s += "<text x=\"20\" y=\"" + std::to_string(top + ch * static_cast<int>(o.lengths.size()) / 2) +
       "\" text-anchor=\"middle\" transform=\"rotate(-90 20 " +
       std::to_string(top + ch * static_cast<int>(o.lengths.size()) / 2) + ")\">context length (tokens)</text>\n";
  // Legend.
  const int lx = left + cw * static_cast<int>(o.depths.size()) + 24;
  for (int k = 0; k <= 10; ++k)
    s += "<rect x=\"" + std::to_string(lx) + "\" y=\"" + std::to_string(top + (10 - k) * 12) +
         "\" width=\"18\" height=\"12\" fill=\"" + colour(k / 10.0) + "\"/>\n";
  s += "<text x=\"" + std::to_string(lx + 24) + "\" y=\"" + std::to_string(top + 10) + "\">1</text>\n";
  s += "<text x=\"" + std::to_string(lx + 24) + "\" y=\"" + std::to_string(top + 130) + "\">0</text>\n";
  s += "</svg>\n";
  return s;
}

}  // namespace statecut

// Zero-shot multiple choice the lm-eval way (evaluation_tasks.h).
#include "optimized/analysis/evaluation_tasks.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <stdexcept>

#include "optimized/io/option_error.h"
#include "optimized/text/utf8.h"

namespace statecut {

namespace {

std::string at_line(const std::string& path, int64_t line) { return path + ":" + std::to_string(line) + ": "; }

bool blank(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; });
}

const nlohmann::json& task_field(const nlohmann::json& j, const char* name, const std::string& where) {
  const auto it = j.find(name);
  if (it == j.end()) throw std::runtime_error(where + "missing \"" + name + "\"");
  return *it;
}

/// lm-eval's mean_stderr: sample standard deviation / sqrt(n).
double mean_stderr(const std::vector<double>& x) {
  const double n = static_cast<double>(x.size());
  const double mu = std::accumulate(x.begin(), x.end(), 0.0) / n;
  double ss = 0;
  for (double v : x) ss += (v - mu) * (v - mu);
  return std::sqrt(ss / (n - 1)) / std::sqrt(n);
}

int64_t first_argmax(const std::vector<double>& v) {
  return static_cast<int64_t>(std::max_element(v.begin(), v.end()) - v.begin());  // first of equal maxima
}

}  // namespace

ChoiceTask read_choice_task(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open the task file");
  ChoiceTask t;
  t.file = path;
  t.name = std::filesystem::path(path).stem().string();
  std::string text;
  int64_t line = 0, first_one_choice = 0, first_many = 0;
  while (std::getline(in, text)) {
    ++line;
    if (blank(text)) continue;
    const std::string where = at_line(path, line);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      std::string m = e.what();
      throw std::runtime_error(where + "not a JSON object: " + m.substr(0, m.find('\n')));
    }
    if (!j.is_object()) throw std::runtime_error(where + "not a JSON object");
    ChoiceRecord r;
    r.line = line;
    auto read_string = [&](const nlohmann::json& v, const std::string& name) {
      if (!v.is_string()) throw std::runtime_error(where + name + " is not a string");
      std::string x = v.get<std::string>();
      if (x.empty()) throw std::runtime_error(where + name + " is empty");
      return x;
    };
    if (j.contains("contexts")) {  // winogrande's form: one context per choice, one shared continuation
      if (j.contains("context") || j.contains("choices"))
        throw std::runtime_error(where + "give \"context\" + \"choices\" or \"contexts\" + \"continuation\", not both");
      const auto& cs = j["contexts"];
      if (!cs.is_array()) throw std::runtime_error(where + "\"contexts\" is not an array");
      if (cs.empty()) throw std::runtime_error(where + "\"contexts\" is empty");
      const std::string cont = read_string(task_field(j, "continuation", where), "\"continuation\"");
      for (size_t i = 0; i < cs.size(); ++i) {
        r.choice_contexts.push_back(read_string(cs[i], "contexts[" + std::to_string(i) + "]"));
        r.choices.push_back(cont);
      }
    } else {
      const auto& ctx = task_field(j, "context", where);
      if (!ctx.is_string()) throw std::runtime_error(where + "\"context\" is not a string");
      r.context = ctx.get<std::string>();
      const auto& ch = task_field(j, "choices", where);
      if (!ch.is_array()) throw std::runtime_error(where + "\"choices\" is not an array");
      if (ch.empty()) throw std::runtime_error(where + "\"choices\" is empty");
      for (size_t i = 0; i < ch.size(); ++i) {
        if (!ch[i].is_string()) throw std::runtime_error(where + "choices[" + std::to_string(i) + "] is not a string");
        r.choices.push_back(ch[i].get<std::string>());
        if (r.choices.back().empty())
          throw std::runtime_error(where + "choices[" + std::to_string(i) +
                                   "] is empty (acc_norm divides by its bytes)");
      }
    }
    const auto& g = task_field(j, "gold", where);
    if (!g.is_number_integer()) throw std::runtime_error(where + "\"gold\" is not an integer");
    r.gold = g.get<int64_t>();
    if (r.gold < 0 || r.gold >= static_cast<int64_t>(r.choices.size()))
      throw std::runtime_error(where + "\"gold\" " + std::to_string(r.gold) + " is out of range [0, " +
                               std::to_string(r.choices.size()) + ")");
    if (const auto d = j.find("delimiter"); d != j.end()) {
      if (!d->is_string()) throw std::runtime_error(where + "\"delimiter\" is not a string");
      r.delimiter = d->get<std::string>();
    }
    int64_t& first = r.choices.size() == 1 ? first_one_choice : first_many;
    if (first == 0) first = line;
    if (first_one_choice && first_many)
      throw std::runtime_error(where + "mixes one-choice records (line " + std::to_string(first_one_choice) +
                               ") with multiple-choice records (line " + std::to_string(first_many) +
                               "): a task file is one or the other");
    t.records.push_back(std::move(r));
  }
  if (in.bad()) throw std::runtime_error(path + ": read error");
  if (t.records.empty()) throw std::runtime_error(path + ": no records (one JSON object a line)");
  t.multiple_choice = first_many != 0;
  return t;
}

ChoiceTaskResult evaluate_choice_task(CausalLM& model, const ChoiceTask& task, const Tokenizer& tok,
                                      const ChoiceTaskOptions& opt, const Progress& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  if (opt.max_length < 1) throw OptionError("--window (max length) must be >= 1");
  if (!tok.available()) throw std::runtime_error(tok.unavailable_reason());
  const int64_t V = model.vocab_size();

  // Every (record, choice) as lm-eval's request: input ids and the continuation's length.
  struct Row {
    size_t rec, choice;
    std::vector<int64_t> input;  // x[:-1]
    std::vector<int64_t> cont;   // the last cont.size() targets
  };
  std::vector<Row> rows;
  ChoiceTaskResult res;
  res.task = task.name;
  res.file = task.file;
  res.multiple_choice = task.multiple_choice;
  res.records.resize(task.records.size());
  for (size_t r = 0; r < task.records.size(); ++r) {
    const ChoiceRecord& rec = task.records[r];
    const std::string where = at_line(task.file, rec.line);
    // lm-eval's _encode_pair: trailing whitespace of the context belongs to the continuation.
    auto split_context = [&](const std::string& full, std::string& context, std::string& moved) {
      const size_t keep = utf8::rstrip_python_space(full);  // Python's context.rstrip(): Unicode whitespace too
      context = full.substr(0, keep);
      moved = full.substr(keep);
      if (context.empty())
        throw std::runtime_error(where +
                                 "the context is empty or only whitespace (statecut adds no BOS/EOT to condition on)");
    };
    std::string context, moved;
    std::vector<int64_t> ctx;
    if (rec.choice_contexts.empty()) {
      split_context(rec.context, context, moved);
      ctx = tok.encode(context);
    }
    res.records[r].choices.resize(rec.choices.size());
    res.records[r].line = rec.line;
    res.records[r].gold = rec.gold;
    for (size_t c = 0; c < rec.choices.size(); ++c) {
      if (!rec.choice_contexts.empty()) {
        split_context(rec.choice_contexts[c], context, moved);
        ctx = tok.encode(context);
      }
      const std::vector<int64_t> whole = tok.encode(context + moved + rec.delimiter + rec.choices[c]);
      if (whole.size() <= ctx.size())
        throw std::runtime_error(where + "choices[" + std::to_string(c) + "] adds no token to the context");
      Row row{r, c, {}, std::vector<int64_t>(whole.begin() + static_cast<std::ptrdiff_t>(ctx.size()), whole.end())};
      if (static_cast<int64_t>(row.cont.size()) > opt.max_length)
        throw std::runtime_error(where + "choices[" + std::to_string(c) + "] is " + std::to_string(row.cont.size()) +
                                 " tokens, more than the max length " + std::to_string(opt.max_length));
      std::vector<int64_t> all = ctx;
      all.insert(all.end(), row.cont.begin(), row.cont.end());
      for (int64_t id : all)
        if (id < 0 || id >= V)
          throw std::runtime_error(where + "the tokenizer gave id " + std::to_string(id) +
                                   " outside the model's vocabulary [0, " + std::to_string(V) + ")");
      if (static_cast<int64_t>(all.size()) > opt.max_length + 1) {
        all.erase(all.begin(), all.end() - (opt.max_length + 1));
        res.truncated += 1;
      }
      all.pop_back();
      row.input = std::move(all);
      auto& s = res.records[r].choices[c];
      s.tokens = static_cast<int64_t>(row.cont.size());
      s.bytes = static_cast<int64_t>(rec.choices[c].size());
      rows.push_back(std::move(row));
    }
  }

  // Longest first, so a batch pads little; right padding never reaches the scored positions (causal model).
  std::vector<size_t> order(rows.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return rows[a].input.size() > rows[b].input.size(); });
  const auto device =
      model.named_parameters().empty() ? torch::Device(torch::kCPU) : model.named_parameters().front().second.device();
  torch::NoGradGuard no_grad;
  size_t i = 0;
  while (i < order.size()) {
    const int64_t T = static_cast<int64_t>(rows[order[i]].input.size());
    size_t j = i + 1;
    if (opt.batch > 0) {
      j = std::min(order.size(), i + static_cast<size_t>(opt.batch));
    } else {
      while (j < order.size() && static_cast<int64_t>(j - i + 1) * T <= 16384 &&
             static_cast<int64_t>(j - i + 1) * T * V <= (int64_t{1} << 27))
        ++j;
    }
    const int64_t B = static_cast<int64_t>(j - i);
    torch::Tensor x = torch::zeros({B, T}, torch::kInt64);
    auto xa = x.accessor<int64_t, 2>();
    for (int64_t b = 0; b < B; ++b) {
      const auto& in = rows[order[i + static_cast<size_t>(b)]].input;
      for (size_t t = 0; t < in.size(); ++t) xa[b][static_cast<int64_t>(t)] = in[t];
    }
    const torch::Tensor logits = model.forward(x.to(device)).logits;  // [B, T, V]
    for (int64_t b = 0; b < B; ++b) {
      const Row& row = rows[order[i + static_cast<size_t>(b)]];
      const int64_t L = static_cast<int64_t>(row.input.size()), n = static_cast<int64_t>(row.cont.size());
      const torch::Tensor lp =
          torch::log_softmax(logits[b].narrow(0, L - n, n).to(torch::kCPU, torch::kFloat64), -1);  // [n, V]
      const torch::Tensor tgt = torch::tensor(row.cont, torch::kInt64);
      const torch::Tensor picked = lp.gather(1, tgt.unsqueeze(1)).squeeze(1);
      auto& s = res.records[row.rec].choices[row.choice];
      s.loglikelihood = picked.sum().item<double>();
      s.is_greedy = lp.argmax(1).eq(tgt).all().item<bool>();
    }
    i = j;
    if (progress) progress(static_cast<int64_t>(i), static_cast<int64_t>(order.size()));
  }

  std::vector<double> acc, acc_norm, lls;
  for (size_t r = 0; r < task.records.size(); ++r) {
    RecordResult& rr = res.records[r];
    std::vector<double> ll, lln;
    for (const auto& s : rr.choices) {
      ll.push_back(s.loglikelihood);
      lln.push_back(s.loglikelihood / static_cast<double>(s.bytes));
    }
    if (task.multiple_choice) {
      rr.pred = first_argmax(ll);
      rr.pred_norm = first_argmax(lln);
      rr.acc = rr.pred == task.records[r].gold ? 1.0 : 0.0;
      rr.acc_norm = rr.pred_norm == task.records[r].gold ? 1.0 : 0.0;
    } else {
      rr.acc = rr.choices[0].is_greedy ? 1.0 : 0.0;
      lls.push_back(ll[0]);
    }
    acc.push_back(rr.acc);
    acc_norm.push_back(rr.acc_norm);
  }
  const double n = static_cast<double>(acc.size());
  res.acc = std::accumulate(acc.begin(), acc.end(), 0.0) / n;
  res.acc_norm = std::accumulate(acc_norm.begin(), acc_norm.end(), 0.0) / n;
  res.acc_stderr = acc.size() > 1 ? mean_stderr(acc) : std::nan("");
  res.acc_norm_stderr = acc.size() > 1 ? mean_stderr(acc_norm) : std::nan("");
  if (!task.multiple_choice) res.perplexity = std::exp(-std::accumulate(lls.begin(), lls.end(), 0.0) / n);
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

nlohmann::json lm_eval_results_json(const std::vector<ChoiceTaskResult>& results, const nlohmann::json& config,
                                    bool with_samples) {
  using nlohmann::json;
  auto stderr_value = [](double v) { return std::isnan(v) ? json("N/A") : json(v); };
  json out{{"results", json::object()},   {"group_subtasks", json::object()},
           {"configs", json::object()},   {"versions", json::object()},
           {"n-shot", json::object()},    {"higher_is_better", json::object()},
           {"n-samples", json::object()}, {"config", config}};
  if (with_samples) out["samples"] = json::object();
  for (const auto& r : results) {
    json m{{"alias", r.task}};
    json metric_list = json::array();
    if (r.multiple_choice) {
      m["acc,none"] = r.acc;
      m["acc_stderr,none"] = stderr_value(r.acc_stderr);
      m["acc_norm,none"] = r.acc_norm;
      m["acc_norm_stderr,none"] = stderr_value(r.acc_norm_stderr);
      for (const char* k : {"acc", "acc_norm"})
        metric_list.push_back({{"metric", k}, {"aggregation", "mean"}, {"higher_is_better", true}});
      out["higher_is_better"][r.task] = {{"acc", true}, {"acc_norm", true}};
    } else {
      m["perplexity,none"] = r.perplexity;
      m["perplexity_stderr,none"] = "N/A";  // lm-eval bootstraps it; statecut does not
      m["acc,none"] = r.acc;
      m["acc_stderr,none"] = stderr_value(r.acc_stderr);
      metric_list.push_back({{"metric", "perplexity"}, {"aggregation", "perplexity"}, {"higher_is_better", false}});
      metric_list.push_back({{"metric", "acc"}, {"aggregation", "mean"}, {"higher_is_better", true}});
      out["higher_is_better"][r.task] = {{"perplexity", false}, {"acc", true}};
    }
    out["results"][r.task] = m;
    out["group_subtasks"][r.task] = json::array();
    out["configs"][r.task] = {{"task", r.task},
                              {"dataset_path", r.file},
                              {"output_type", r.multiple_choice ? "multiple_choice" : "loglikelihood"},
                              {"num_fewshot", 0},
                              {"metric_list", metric_list},
                              {"truncated_requests", r.truncated}};
    out["versions"][r.task] = 1.0;
    out["n-shot"][r.task] = 0;
    const auto n = static_cast<int64_t>(r.records.size());
    out["n-samples"][r.task] = {{"original", n}, {"effective", n}};
    if (with_samples) {
      json s = json::array();
      for (size_t i = 0; i < r.records.size(); ++i) {
        const auto& rr = r.records[i];
        json resps = json::array();
        for (const auto& c : rr.choices) resps.push_back(json::array({c.loglikelihood, c.is_greedy}));
        json one{{"doc_id", i}, {"line", rr.line}, {"target", rr.gold}, {"resps", resps}, {"acc", rr.acc}};
        if (r.multiple_choice) one["acc_norm"] = rr.acc_norm;
        s.push_back(one);
      }
      out["samples"][r.task] = s;
    }
  }
  return out;
}

}  // namespace statecut

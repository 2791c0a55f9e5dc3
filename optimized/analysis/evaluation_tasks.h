/// `statecut eval --task FILE.jsonl`: zero-shot multiple-choice tasks scored the way lm-eval 0.4 scores its
/// `multiple_choice` tasks (arc_easy, arc_challenge, hellaswag, piqa, winogrande...), and one-choice records the
/// way it scores `loglikelihood` tasks (lambada).
///
/// Task file, one JSON object a line (blank lines skipped, other fields ignored):
///   {"context": "Question: ...\nAnswer:", "choices": ["red", "blue", "green"], "gold": 1}
///   "delimiter" (optional, default " ") is lm-eval's target_delimiter: choice i is scored as delimiter + choices[i].
///   {"contexts": [c_0, c_1], "continuation": "...", "gold": i} is winogrande's form (lm-eval's multiple_input): the
///   same continuation scored after each context; acc_norm then equals acc (one divisor for all).
/// Every record of a file has at least 2 choices (multiple choice), or every record exactly 1 (loglikelihood).
///
/// Per choice, as lm-eval's HFLM._encode_pair and _loglikelihood_tokens do:
///   whitespace at the end of the context moves to the front of the continuation c = delimiter + choice;
///   ctx = encode(context), cont = encode(context + c)[len(ctx):], x = (ctx ++ cont), the last max_length + 1 kept;
///   ll = Σ_{j < |cont|} log softmax(logits(x[:-1]))[p_j][cont_j]   (p_j the positions predicting cont; f64 sums)
///   is_greedy = every cont_j is the argmax at its position.
/// Per record (np.argmax: the first maximum wins ties):
///   acc = [argmax_i ll_i == gold],   acc_norm = [argmax_i ll_i / bytes(choices[i]) == gold]
/// bytes = UTF-8 bytes of the choice without the delimiter. lm-eval divides by Python's len(choice) (code points):
/// the same number for ASCII text, which every English task is.
/// One-choice files: acc = mean(is_greedy), perplexity = exp(−mean ll) (lm-eval's lambada metrics).
/// Task metrics are means over records; stderr = sample standard deviation (n − 1) / √n, as lm-eval's mean_stderr.
/// Choices are batched right-padded (a causal model's logits at a position do not see later positions).
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "optimized/models/model.h"
#include "optimized/prune/calibration.h"
#include "optimized/text/tokenizer.h"

namespace statecut {

struct ChoiceRecord {
  std::string context;
  std::vector<std::string> choice_contexts;  ///< {"contexts", "continuation"} records: context i goes with choice i
  std::vector<std::string> choices;          ///< (there: the continuation, repeated)
  int64_t gold = 0;
  std::string delimiter = " ";
  int64_t line = 0;  ///< 1-based line of the file
};

struct ChoiceTask {
  std::string name;  ///< the file's stem
  std::string file;
  std::vector<ChoiceRecord> records;
  bool multiple_choice = true;  ///< false: every record has one choice (loglikelihood task)
};

/// Reads and checks a task file; throws std::runtime_error "<file>:<line>: <problem>" (one line) on a missing or
/// ill-typed field, empty choices, an empty choice, gold out of range, invalid JSON; "<file>: ..." when the file
/// cannot be read or holds no record.
ChoiceTask read_choice_task(const std::string& path);

struct ChoiceScore {
  double loglikelihood = 0;
  bool is_greedy = false;
  int64_t tokens = 0;  ///< continuation tokens scored
  int64_t bytes = 0;   ///< UTF-8 bytes of the choice (the acc_norm divisor)
};

struct RecordResult {
  int64_t line = 0, gold = 0;
  std::vector<ChoiceScore> choices;
  int64_t pred = 0, pred_norm = 0;
  double acc = 0, acc_norm = 0;
};

struct ChoiceTaskResult {
  std::string task, file;
  bool multiple_choice = true;
  std::vector<RecordResult> records;
  double acc = 0, acc_stderr = 0, acc_norm = 0, acc_norm_stderr = 0;
  double perplexity = 0;  ///< one-choice tasks
  int64_t truncated = 0;  ///< choices whose context was cut on the left to fit max_length
  double seconds = 0;
};

struct ChoiceTaskOptions {
  int64_t max_length = 2048;  ///< lm-eval's max_length: longer inputs keep their last max_length tokens
  int64_t batch = 0;          ///< choices per forward (0: as many as fit ~16k tokens and ~512 MB of logits)
};

/// Tokenises every choice first (so a bad record stops the run before any forward: "<file>:<line>: ..."), then scores.
ChoiceTaskResult evaluate_choice_task(CausalLM& model, const ChoiceTask& task, const Tokenizer& tok,
                                      const ChoiceTaskOptions& opt, const Progress& progress = {});

/// lm-eval's results JSON for these tasks: "results" {task: {"alias", "acc,none", "acc_stderr,none", "acc_norm,none",
/// "acc_norm_stderr,none"} (one-choice tasks: "perplexity,none", "acc,none")}, "configs", "versions", "n-shot",
/// "higher_is_better", "n-samples", and `config` as "config". A stderr over fewer than 2 records is "N/A", as in
/// lm-eval. with_samples adds "samples" {task: [{"doc_id", "line", "target", "resps", "acc", "acc_norm"}]}.
nlohmann::json lm_eval_results_json(const std::vector<ChoiceTaskResult>& results, const nlohmann::json& config,
                                    bool with_samples);

}  // namespace statecut

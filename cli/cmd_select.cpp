// `statecut select`: run one selector of the reference (reference/selectors.h) on tensors from a
// .safetensors file and print the kept channels as JSON, so a selection can be compared with any
// other implementation.
//   drrqr | pca | rand : M [rows, dk] = --tensor (or the file's only tensor); drrqr treats M as the
//                        stacked [Q; K] matrix, pca as the key features (L2-normed inside)
//   l1 | swanda | grad : --wq/--wk [dk, hidden] (+ --rms [hidden] for swanda, --grad-wq/--grad-wk for grad)
// Output: {"keep": [sorted indices], "method": ..., "dk": ..., "k": ..., ...}; pca prints "rotation"
// [k, dk] instead of "keep". Any bad input: one line on stderr naming the file, exit 1, no stdout.
// The selector is ref::select_head, the one `statecut prune` runs per head; --layer/--head name the head for the
// seed rule (reference/select_rng.h), so rand and drrqr --faithful on a head's matrix draw what prune drew.
#include "cli/command_registry.h"
#include "cli/usage.h"
#include "optimized/io/checkpoint.h"
#include "optimized/io/safetensors.h"
#include "reference/selection_budget.h"
#include "reference/selectors.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <iostream>
#include <memory>
#include <string>

namespace {
using namespace statecut::ref;

struct SelectArgs {
  std::string file, tensor, method, side = "qk", wq, wk, rms, grad_wq, grad_wk;
  long keep = 0;
  double ratio = 0.0, f = 1.5;
  bool faithful = false, adversarial = false, keep_given = false, ratio_given = false;
  std::uint64_t seed = 42;
  long layer = 0, head = 0;
};

// A float tensor of the file as a double matrix ([n] becomes [n, 1]); rejects other ranks/dtypes.
Mat read_matrix(const statecut::io::SafetensorsFile& st, const std::string& name, const char* role) {
  const auto& t = st.tensor(name);
  using statecut::io::DType;
  if (t.dtype != DType::F32 && t.dtype != DType::F64 && t.dtype != DType::BF16 && t.dtype != DType::F16)
    throw std::runtime_error(st.path() + ": tensor '" + name + "' (" + role + ") has dtype " +
                     statecut::io::dtype_name(t.dtype) + "; expected a float dtype (F32 or F64)");
  if (t.shape.size() != 2 && t.shape.size() != 1)
    throw std::runtime_error(st.path() + ": tensor '" + name + "' (" + role + ") must be 2-D, has rank " +
                     std::to_string(t.shape.size()));
  const Index rows = t.shape[0], cols = t.shape.size() == 2 ? t.shape[1] : 1;
  if (rows < 1 || cols < 1) throw std::runtime_error(st.path() + ": tensor '" + name + "' (" + role + ") is empty");
  const std::vector<double> v = statecut::io::to_double(t);
  Mat m = Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(v.data(), rows, cols);
  if (!m.allFinite())
    throw std::runtime_error(st.path() + ": tensor '" + name + "' (" + role + ") contains NaN or Inf");
  return m;
}

std::string need_name(const std::string& v, const char* opt, const std::string& method) {
  if (v.empty()) throw statecut::OptionError("--method " + method + " needs " + opt);
  return v;
}

/// The reference's name lookup, its refusal as a usage error naming the option.
template <class Parse>
auto option_value(Parse parse, const std::string& value, const char* option) {
  try {
    return parse(value);
  } catch (const std::exception& e) {
    throw statecut::OptionError(std::string(option) + ": " + e.what());
  }
}

int run_select(const SelectArgs& a) {
  const SelectMethod method = option_value(method_from_name, a.method, "--method");
  const ScoreSide side = option_value(side_from_name, a.side, "--select");
  if (!(a.f > 1.0) || !std::isfinite(a.f))
    throw statecut::OptionError("--f must be finite and > 1, got " + std::to_string(a.f));
  if (!a.keep_given && !a.ratio_given) throw statecut::OptionError("give --keep K or --ratio R");
  if (a.keep_given && a.keep < 1) throw statecut::OptionError("--keep must be >= 1, got " + std::to_string(a.keep));
  if (a.ratio_given && !(a.ratio > 0.0 && a.ratio < 1.0))
    throw statecut::OptionError("--ratio must lie in (0, 1), got " + std::to_string(a.ratio));
  const auto st = statecut::io::SafetensorsFile::open(a.file);
  SelectOptions opt;
  opt.method = method;
  opt.side = side;
  opt.keep = a.keep;
  opt.ratio = a.ratio;
  opt.seed = a.seed;
  opt.f = a.f;
  opt.faithful = a.faithful;
  opt.pca_adversarial = a.adversarial;
  if (a.layer < 0 || a.head < 0) throw statecut::OptionError("--layer and --head must be >= 0");
  opt.layer = a.layer;
  HeadInputs h;
  Vec rms;
  nlohmann::ordered_json out;
  Mat M;
  Index dk = 0;
  if (method == SelectMethod::Drrqr || method == SelectMethod::Pca || method == SelectMethod::Rand) {
    std::string name = a.tensor;
    if (name.empty()) {
      if (st.names().size() != 1)
        throw std::runtime_error(a.file + ": has " + std::to_string(st.names().size()) +
                         " tensors; name the activation matrix with --tensor");
      name = st.names().front();
    }
    M = read_matrix(st, name, "activation matrix");
    dk = M.cols();
    out["tensor"] = name;
  } else {
    h.wq = read_matrix(st, need_name(a.wq, "--wq", a.method), "Wq");
    h.wk = read_matrix(st, need_name(a.wk, "--wk", a.method), "Wk");
    if (h.wq.rows() != h.wk.rows() || h.wq.cols() != h.wk.cols())
      throw std::runtime_error(a.file + ": Wq and Wk shapes differ");
    if (method == SelectMethod::SWanda) {
      const Mat r = read_matrix(st, need_name(a.rms, "--rms", a.method), "rms");
      if (r.size() != h.wq.cols())
        throw std::runtime_error(a.file + ": --rms has " + std::to_string(r.size()) + " entries, Wq has " +
                         std::to_string(h.wq.cols()) + " input features");
      rms = Eigen::Map<const Vec>(r.data(), r.size());
    }
    if (method == SelectMethod::Grad) {
      h.grad_wq = read_matrix(st, need_name(a.grad_wq, "--grad-wq", a.method), "dL/dWq");
      h.grad_wk = read_matrix(st, need_name(a.grad_wk, "--grad-wk", a.method), "dL/dWk");
      if (h.grad_wq.rows() != h.wq.rows() || h.grad_wq.cols() != h.wq.cols() ||
          h.grad_wk.rows() != h.wk.rows() || h.grad_wk.cols() != h.wk.cols())
        throw std::runtime_error(a.file + ": gradient shapes differ from the weights");
    }
    dk = h.wq.rows();
  }
  Index k = 0;
  try {
    k = resolve_budget(opt, dk);
  } catch (const ShapeError& e) {
    throw std::runtime_error(a.file + ": " + e.what());
  }
  out["method"] = a.method;
  out["dk"] = dk;
  out["k"] = k;
  if (method == SelectMethod::Drrqr || method == SelectMethod::Rand) h.m = M;  // drrqr: M is [Q; K] as given
  if (method == SelectMethod::Pca) {
    h.k = M;  // pca of the matrix as key features (for M = [Q; K] the same directions as prune's averaged q/k moments)
    opt.side = ScoreSide::KOnly;
  }
  const HeadSelection r = select_head(h, rms, opt, a.head);
  if (method == SelectMethod::Drrqr) {
    out["keep"] = r.keep;
    out["pivots"] = r.pivots;
    out["mode"] = a.faithful ? "faithful" : "strong";
    out["f"] = a.f;
    out["rows"] = r.rows;
    out["swaps"] = r.swaps;
    out["max_rho"] = r.max_rho;
    out["certified"] = r.certified;
    out["k_certified"] = r.k_certified;
  } else if (method == SelectMethod::Pca) {
    const Mat& T = r.rotation;
    std::vector<std::vector<double>> rows(T.rows(), std::vector<double>(T.cols()));
    for (Index i = 0; i < T.rows(); ++i)
      for (Index j = 0; j < T.cols(); ++j) rows[i][j] = T(i, j);
    out["rotation"] = rows;
    out["adversarial"] = a.adversarial;
  } else {
    out["keep"] = r.keep;
    out["select"] = a.side;
    if (method == SelectMethod::Rand) out["seed"] = a.seed;
  }
  std::cout << statecut::io::json_text(out) << "\n";
  return 0;
}

statecut::cli::Command select_cmd("select", [](CLI::App& app) {
  app.description("select key/query channels of one head from tensors in a .safetensors file (JSON out)");
  auto a = std::make_shared<SelectArgs>();
  app.add_option("--matrix", a->file, "input .safetensors file")->required();
  app.add_option("--tensor", a->tensor, "activation matrix M [rows, dk] (default: the file's only tensor)");
  app.add_option("--method", a->method, "rand|l1|swanda|grad|drrqr|pca")->required();
  auto* keep = app.add_option("--keep", a->keep, "channels to keep (1..dk)");
  auto* ratio = app.add_option("--ratio", a->ratio, "pruning ratio in (0,1): keep max(1, floor(dk(1-R)))");
  keep->excludes(ratio);
  app.add_flag("--json", "accepted for symmetry: the output is one JSON object already");
  app.add_flag("--faithful", a->faithful, "drrqr: reproduce the published code (5000 rows, <= 20 swaps)");
  app.add_option("--f", a->f, "strong-RRQR parameter f > 1 (default 1.5)");
  app.add_option("--seed", a->seed, "seed for rand and the faithful row subsample (default 42)")
      ->check(statecut::cli::seed_value());
  app.add_option("--layer", a->layer, "the model layer this head is from, for the seed rule (default 0)");
  app.add_option("--head", a->head, "the key head within the layer, for the seed rule (default 0)");
  app.add_option("--select", a->side, "score side: qk|q|k (paper Table 16; weight methods)");
  app.add_option("--wq", a->wq, "Wq rows of the head [dk, hidden] (l1, swanda, grad)");
  app.add_option("--wk", a->wk, "Wk rows of the head [dk, hidden] (l1, swanda, grad)");
  app.add_option("--rms", a->rms, "RMS of the q_proj input [hidden] (swanda)");
  app.add_option("--grad-wq", a->grad_wq, "dL/dWq [dk, hidden] (grad)");
  app.add_option("--grad-wk", a->grad_wk, "dL/dWk [dk, hidden] (grad)");
  app.add_flag("--adversarial", a->adversarial, "pca: keep the smallest-variance directions");
  return [a, keep, ratio, &app]() {
    a->keep_given = keep->count() > 0;
    a->ratio_given = ratio->count() > 0;
    int rc = 0;
    try {
      rc = run_select(*a);
    } catch (const statecut::ref::ShapeError& e) {
      throw std::runtime_error(a->file + ": " + e.what());
    }
    // After the selection: a refusal is the only line of a run that fails.
    if (a->method != "pca")
      statecut::cli::warn_ignored(app, {"--adversarial"}, "by --method " + a->method + " (a pca option)");
    if (a->method != "drrqr")
      statecut::cli::warn_ignored(app, {"--faithful"}, "by --method " + a->method + " (a drrqr option)");
    return rc;
  };
});
}  // namespace

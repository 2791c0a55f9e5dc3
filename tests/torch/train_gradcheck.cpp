// Gradients of what `statecut finetune` trains, checked against finite differences in double on the tiny fixture model
// of every family (issue 13): the LoRA factors A and B of the q/k/v blocks (through lora.h's chain rule) and every
// fully trained parameter (conv1d, norms, biases). Loss = CE + T²·KL(teacher ‖ student) at T = 2 over 70 tokens (two
// chunks of the chunked form). And the chunked and recurrent forms give the same gradients.
//
// Finite differences are directional, along a seeded unit direction d per tensor (and one over all A, one over all B):
// central differences D(h) = (L(θ + hd) − L(θ − hd)) / 2h at h = 1e-3 and h/2, Richardson-extrapolated
// (4 D(h/2) − D(h)) / 3 (truncation O(h⁴)), against ⟨∇L, d⟩. Allowed error: 1e-6·‖∇L‖ (the tensor's gradient norm:
// a directional derivative can be small by cancellation, the gradient's scale cannot) plus 1000× the f64 roundoff of
// the difference quotient, u·|L|/(h/2) ≈ 1e-9. A missing term, a wrong row block or a transposed factor errs by
// O(‖∇L‖).
#include <gtest/gtest.h>

#include <cmath>

#include "optimized/train/lora.h"
#include "optimized/train/loss.h"
#include "tests/torch/train_util.h"

using namespace statecut;

namespace {

struct Rig {
  std::unique_ptr<CausalLM> model;
  std::unique_ptr<Lora> lora;
  std::vector<std::pair<std::string, torch::Tensor>> trained;
  torch::Tensor lm_head, ids, teacher;
};

/// The final linear is done here in f64 on the last hidden state (the families return fp32 logits); the last hidden
/// state is the final-normed one in every family (checked against the model's logits first).
torch::Tensor logits_f64(Rig& s, RecurrenceMode mode) {
  ForwardOptions fo;
  fo.mode = mode;
  fo.output_hidden_states = true;
  const auto res = s.model->forward(s.ids, fo);
  return torch::matmul(res.hidden_states.back(), s.lm_head.t());
}

Rig make_rig(const std::string& fixture) {
  Rig s;
  s.model = train_test::load(fixture, torch::kFloat64);
  std::map<std::string, torch::Tensor> params;
  for (auto& [n, t] : s.model->named_parameters()) {
    t.requires_grad_(false);
    params[n] = t;
  }
  s.lm_head = params.count("lm_head.weight") ? params["lm_head.weight"] : torch::Tensor();
  if (!s.lm_head.defined())
    for (auto& [n, t] : params)
      if (n.find("embed") != std::string::npos) s.lm_head = t;
  s.lora = std::make_unique<Lora>(*s.model, train_test::blocks_of(*s.model), LoraConfig{4, 8}, train_test::seed());
  uint64_t k = 1;
  for (auto& a : s.lora->adapters()) a.B.copy_(train_test::random_like(a.B, 0.05, train_test::seed() + k++));
  std::set<std::string> adapted;
  for (const auto& a : s.lora->adapters()) adapted.insert(a.block.weight);
  for (auto& [n, t] : params)
    if (!adapted.count(n) && recipe_trains_fully(n)) {
      t.requires_grad_(true);
      s.trained.emplace_back(n, t);
    }
  s.ids = train_test::random_ids(1, 70, s.model->vocab_size(), train_test::seed() + 99);
  s.teacher = train_test::random_like(torch::zeros({1, 70, s.model->vocab_size()}, torch::kFloat64), 3.0,
                                      train_test::seed() + 98);
  return s;
}

double loss_value(Rig& s, RecurrenceMode mode) {
  torch::NoGradGuard no_grad;
  s.lora->materialise();
  return recovery_loss(logits_f64(s, mode), s.teacher, s.ids, 2.0, 1.0).total.item<double>();
}

/// Gradients by autograd + the LoRA chain rule, keyed "A", "B" (concatenated over adapters) and by parameter name.
std::map<std::string, torch::Tensor> gradients(Rig& s, RecurrenceMode mode) {
  s.lora->materialise();
  recovery_loss(logits_f64(s, mode), s.teacher, s.ids, 2.0, 1.0).total.backward();
  s.lora->backprop();
  std::map<std::string, torch::Tensor> g;
  std::vector<torch::Tensor> ga, gb;
  for (auto& a : s.lora->adapters()) {
    ga.push_back(a.A.grad().reshape({-1})), gb.push_back(a.B.grad().reshape({-1}));
    a.A.mutable_grad() = torch::Tensor(), a.B.mutable_grad() = torch::Tensor();  // backprop() adds to what is there
  }
  g["A"] = torch::cat(ga), g["B"] = torch::cat(gb);
  for (auto& [n, t] : s.trained) {
    g[n] = t.grad().defined() ? t.grad().clone() : torch::zeros_like(t);
    t.mutable_grad() = torch::Tensor();
  }
  return g;
}

class Train_Gradcheck : public ::testing::TestWithParam<std::string> {};

TEST_P(Train_Gradcheck, loraAndTrainedParametersMatchFiniteDifferences) {
  REQUIRE_FIXTURE(GetParam());
  Rig s = make_rig(GetParam());
  {  // the f64 head on the last hidden state is the model's own logits
    torch::NoGradGuard no_grad;
    s.lora->materialise();
    EXPECT_LT(train_test::rel_err(logits_f64(s, RecurrenceMode::Chunk), s.model->forward(s.ids).logits), 1e-6);
  }
  ASSERT_FALSE(s.trained.empty());
  const auto grads = gradients(s, RecurrenceMode::Chunk);
  uint64_t k = 1000;
  // A unit direction d over the given tensors; D(h) = (L(θ+hd) − L(θ−hd))/2h, Richardson fd = (4D(h/2) − D(h))/3.
  auto check = [&](const std::string& what, const std::vector<torch::Tensor>& tensors, const torch::Tensor& g) {
    std::vector<torch::Tensor> dirs;
    double dn = 0;
    for (const auto& t : tensors) {
      dirs.push_back(train_test::random_like(t, 1.0, k++));
      dn += dirs.back().pow(2).sum().item<double>();
    }
    double analytic = 0;
    int64_t at = 0;
    for (size_t i = 0; i < tensors.size(); ++i) {
      dirs[i] /= std::sqrt(dn);
      analytic += (g.reshape({-1}).narrow(0, at, tensors[i].numel()) * dirs[i].reshape({-1})).sum().item<double>();
      at += tensors[i].numel();
    }
    auto shift = [&](double h) {
      torch::NoGradGuard no_grad;
      for (size_t i = 0; i < tensors.size(); ++i) tensors[i].add_(dirs[i], h);
    };
    auto central = [&](double h) {
      shift(h);
      const double up = loss_value(s, RecurrenceMode::Chunk);
      shift(-2 * h);
      const double down = loss_value(s, RecurrenceMode::Chunk);
      shift(h);
      return (up - down) / (2 * h);
    };
    const double h = 1e-3;
    const double fd = (4 * central(h / 2) - central(h)) / 3;
    const double gnorm = g.norm().item<double>();
    const double roundoff = 1e3 * 1.1e-16 * std::fabs(loss_value(s, RecurrenceMode::Chunk)) / (h / 2);
    EXPECT_LT(std::fabs(fd - analytic), 1e-6 * gnorm + roundoff)
        << what << ": finite difference " << fd << " vs autograd " << analytic << " (|grad| " << gnorm << ")";
    EXPECT_GT(gnorm, 0) << what << ": no gradient reaches it";
  };
  std::vector<torch::Tensor> As, Bs;
  for (auto& a : s.lora->adapters()) As.push_back(a.A), Bs.push_back(a.B);
  check("LoRA A", As, grads.at("A"));
  check("LoRA B", Bs, grads.at("B"));
  for (auto& [n, t] : s.trained) check(n, {t}, grads.at(n));
}

TEST_P(Train_Gradcheck, chunkedAndRecurrentGiveTheSameGradients) {
  REQUIRE_FIXTURE(GetParam());
  Rig s = make_rig(GetParam());
  const auto chunk = gradients(s, RecurrenceMode::Chunk);
  const auto rec = gradients(s, RecurrenceMode::Recurrent);
  // Both forms are exact in exact arithmetic; f64 over 70 steps agrees to ~1e-13 (1e-10: headroom for the triangular
  // solve's growth on these random weights).
  for (const auto& [n, g] : chunk) EXPECT_LT(train_test::rel_err(rec.at(n), g), 1e-10) << n;
}

INSTANTIATE_TEST_SUITE_P(Families, Train_Gradcheck, ::testing::ValuesIn(train_test::families()),
                         [](const auto& info) { return info.param; });

}  // namespace

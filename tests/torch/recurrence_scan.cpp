// The inter-chunk scan's autograd node (optimized/models/recurrence_scan.h) against the plain loop it replaces,
// recorded by LibTorch's autograd: the forward bit for bit, every input's gradient within 1e-12 in f64 (the two
// backward passes sum the same terms in other orders: at most N·C·dk·eps ≈ 1e-14 apart on these sizes; measured
// ≤ 1e-15). Every combination of delta rule / gated linear attention and gate / no gate, N = 1 and 5 chunks, chunk
// C = 8 with dk = 5 ≠ dv = 7 (a transposed operand would not even multiply), 3 rows.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <vector>

#include "optimized/models/recurrence_scan.h"
#include "tests/rel_err_tensor.h"
#include "tests/test_env.h"

namespace statecut {
namespace {

struct Inputs {
  torch::Tensor u, w, k, d, S0;
};

/// The loop run_chunked held before the node: two GEMMs a chunk, stacked states.
ChunkScan plain_loop(const Inputs& x) {
  std::vector<torch::Tensor> states, v_new;
  auto S = x.S0;
  for (int64_t n = 0; n < x.u.size(1); ++n) {
    states.push_back(S);
    auto vn = x.w.defined() ? torch::baddbmm(x.u.select(1, n), x.w.select(1, n), S, 1, -1) : x.u.select(1, n);
    v_new.push_back(vn);
    S = torch::baddbmm(x.d.defined() ? x.d.select(1, n) * S : S, x.k.select(1, n).transpose(-1, -2), vn);
  }
  return {torch::stack(states, 1), torch::stack(v_new, 1), S};
}

Inputs make(bool delta, bool gate, int64_t N, uint64_t seed) {
  torch::manual_seed(seed);
  const int64_t R = 3, C = 8, dk = 5, dv = 7;
  auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  Inputs x;
  // scaled so that the state neither explodes nor vanishes over 5 chunks (d in (0.3, 1), k and w of size ~0.3)
  x.u = torch::randn({R, N, C, dv}, f64).requires_grad_();
  if (delta) x.w = (0.3 * torch::randn({R, N, C, dk}, f64)).requires_grad_();
  x.k = (0.3 * torch::randn({R, N, C, dk}, f64)).requires_grad_();
  if (gate) x.d = (0.3 + 0.7 * torch::rand({R, N, 1, 1}, f64)).requires_grad_();
  x.S0 = torch::randn({R, dk, dv}, f64).requires_grad_();
  return x;
}

/// ∂L/∂(u, w, k, d, S0) of L = ⟨A, states⟩ + ⟨B, v_new⟩ + ⟨E, S_N⟩ with fixed random A, B, E.
std::vector<torch::Tensor> grads(const Inputs& x, const ChunkScan& s, uint64_t seed) {
  torch::manual_seed(seed + 1);
  auto loss = (torch::randn_like(s.states) * s.states).sum() + (torch::randn_like(s.v_new) * s.v_new).sum() +
              (torch::randn_like(s.last) * s.last).sum();
  std::vector<torch::Tensor> in = {x.u, x.k, x.S0};
  if (x.w.defined()) in.push_back(x.w);
  if (x.d.defined()) in.push_back(x.d);
  return torch::autograd::grad({loss}, in);
}

TEST(Recurrence_Scan, nodeMatchesTheRecordedLoopForwardAndBackward) {
  const uint64_t seed = test::env_seed(20261203ULL);
  for (bool delta : {true, false})
    for (bool gate : {true, false})
      for (int64_t N : {1, 5}) {
        const Inputs x = make(delta, gate, N, seed);
        const ChunkScan node = chunk_scan(x.u, x.w, x.k, x.d, x.S0), loop = plain_loop(x);
        EXPECT_TRUE(torch::equal(node.states, loop.states)) << delta << gate << N;
        EXPECT_TRUE(torch::equal(node.v_new, loop.v_new)) << delta << gate << N;
        EXPECT_TRUE(torch::equal(node.last, loop.last)) << delta << gate << N;
        const auto gn = grads(x, node, seed), gl = grads(x, loop, seed);
        ASSERT_EQ(gn.size(), gl.size());
        const char* names[] = {"u", "k", "S0", delta ? "w" : "d", "d"};
        for (size_t i = 0; i < gn.size(); ++i) {
          const double e = test::rel_err(gn[i], gl[i]);
          std::printf("[scan] delta=%d gate=%d N=%lld d%s: %.2e\n", delta, gate, static_cast<long long>(N), names[i], e);
          EXPECT_LE(e, 1e-12) << "d" << names[i] << " delta=" << delta << " gate=" << gate << " N=" << N;
        }
      }
}

// The training path sends only some inputs with requires_grad (LoRA: the state's inputs but not S0): the node
// returns gradients for those and leaves the others alone.
TEST(Recurrence_Scan, nodeGivesGradientsOnlyWhereAsked) {
  const uint64_t seed = test::env_seed(20261203ULL);
  Inputs x = make(true, true, 3, seed);
  x.S0 = x.S0.detach();
  x.d = x.d.detach();
  const ChunkScan node = chunk_scan(x.u, x.w, x.k, x.d, x.S0), loop = plain_loop(x);
  auto loss = [](const ChunkScan& s) { return s.states.pow(2).sum() + s.v_new.sum() + s.last.sum(); };
  const auto gn = torch::autograd::grad({loss(node)}, {x.u, x.w, x.k});
  const auto gl = torch::autograd::grad({loss(loop)}, {x.u, x.w, x.k});
  for (size_t i = 0; i < gn.size(); ++i) EXPECT_LE(test::rel_err(gn[i], gl[i]), 1e-12) << i;
}

}  // namespace
}  // namespace statecut

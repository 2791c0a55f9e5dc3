// `determinism`: a second forward of the same windows gives bit-identical logits and final states.
#include "optimized/verify/verify_checks.h"

namespace statecut::verify {

void check_determinism(Context& ctx, std::vector<CheckResult>& out) {
  if (!ctx.ensure_forward()) {
    out.push_back(unavailable(ctx, "determinism", ctx.forward_error));
    return;
  }
  CheckResult r;
  r.name = "determinism";
  r.relation = "==";
  r.threshold = 0;
  r.reason = "the same inputs on the same device must give the same bits (no unseeded randomness, no "
             "order-dependent reductions), or results cannot be reproduced or bisected";
  ForwardResult again;
  {
    torch::NoGradGuard ng;
    ForwardOptions fo;
    fo.mode = RecurrenceMode::Chunk;
    fo.capture_boundary = true;
    ctx.say("determinism: second forward");
    again = ctx.model->forward(ctx.ids.to(ctx.device), fo);
  }
  const torch::Tensor a = ctx.fwd.logits.to(torch::kCPU), b = again.logits.to(torch::kCPU);
  int64_t ndiff = 0;
  if (!torch::equal(a, b)) {  // the element map only when they differ (a bool per logit: 0.3 GB at 152k x 2048)
    const torch::Tensor diff = a.ne(b);
    ndiff = diff.sum().item<int64_t>();
    const auto idx = diff.nonzero()[0];
    r.where = "logits window " + std::to_string(idx[0].item<int64_t>()) + " position " +
              std::to_string(idx[1].item<int64_t>()) + " token " + std::to_string(idx[2].item<int64_t>());
  }
  int64_t nstate = 0;
  for (size_t i = 0; i < ctx.fwd.boundary.size() && i < again.boundary.size(); ++i) {
    const auto& s1 = ctx.fwd.boundary[i].final_state;
    const auto& s2 = again.boundary[i].final_state;
    if (!s1.defined() || !s2.defined()) continue;
    const int64_t n = s1.ne(s2).sum().item<int64_t>();
    if (n && r.where.empty()) r.where = "final state of layer " + std::to_string(i);
    nstate += n;
  }
  r.figure = static_cast<double>(ndiff + nstate);
  r.status = r.figure == 0 ? Status::Pass : Status::Fail;
  r.message = "two forwards on " + ctx.device.str() + ": " + std::to_string(ndiff) + " of " +
              std::to_string(a.numel()) + " logits and " + std::to_string(nstate) + " final-state entries differ";
  out.push_back(std::move(r));
}

}  // namespace statecut::verify

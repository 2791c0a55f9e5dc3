// A check that could not run is no pass: when the model loads but its forward (or the f64 forward) then throws — out
// of memory on a CI machine, a shape the loader let through — the checks that needed it fail, naming why; when the
// model does not load they are skipped (the `load` row fails and names the cause once); and a report in which every
// row was skipped (nothing checked) does not pass. (The CLI's side: Cli_Verify.nothingCheckedIsNoPass.)
#include "optimized/models/model_registry.h"
#include "optimized/verify/verify_checks.h"
#include "optimized/verify/verify_context.h"
#include "tests/torch/verify_test_util.h"

namespace {
using namespace verify_test;
using statecut::verify::Context;
using statecut::verify::unavailable;

TEST(Verify_Unrun, checksWhoseForwardThrowsFailOnlyWhenTheModelLoaded) {
  Context ctx;
  const std::string why = "the forward throws: DefaultCPUAllocator: can't allocate memory";
  const CheckResult not_loaded = unavailable(ctx, "reference", why);
  EXPECT_EQ(not_loaded.status, Status::Skip);
  EXPECT_EQ(not_loaded.message, why);
  ctx.model = statecut::load_causal_lm((kRoot / "assets" / "byte_delta_net_4L").string(), torch::kFloat32,
                                       torch::Device(torch::kCPU));
  const CheckResult loaded = unavailable(ctx, "reference", why);
  EXPECT_EQ(loaded.status, Status::Fail);
  EXPECT_EQ(loaded.message, "the check could not run: " + why);
  EXPECT_EQ(loaded.name, "reference");
}

TEST(Verify_Unrun, aReportThatCheckedNothingDoesNotPass) {
  Report r;
  EXPECT_FALSE(r.passed());  // no rows at all
  r.checks.push_back(statecut::verify::skipped("kernels", "runs with --device cuda"));
  r.checks.push_back(statecut::verify::skipped("pruned", "no statecut.json"));
  EXPECT_FALSE(r.passed());
  EXPECT_EQ(r.exit_code(), 1);
  CheckResult ok;
  ok.name = "load";
  ok.status = Status::Pass;
  r.checks.push_back(ok);
  EXPECT_TRUE(r.passed());
  EXPECT_EQ(r.exit_code(), 0);
  CheckResult bad = ok;
  bad.status = Status::Fail;
  r.checks.push_back(bad);
  EXPECT_FALSE(r.passed());
}

}  // namespace

#include "optimized/verify/verify_report.h"

#include <cmath>

namespace statecut::verify {
using nlohmann::json;

const char* status_name(Status s) {
  switch (s) {
    case Status::Pass: return "pass";
    case Status::Fail: return "FAIL";
    case Status::Skip: return "skip";
  }
  return "?";
}

void Worst::add(double v, const std::string& at) {
  if (std::isnan(v)) {
    if (!nan) where = at;
    nan = true;
    return;
  }
  if (!nan && v > value) {
    value = v;
    where = at;
  }
}

Status le(double v, double limit) { return (!std::isnan(v) && v <= limit) ? Status::Pass : Status::Fail; }

bool Report::passed() const {
  bool any_pass = false;
  for (const auto& c : checks) {
    if (c.status == Status::Fail) return false;
    any_pass = any_pass || c.status == Status::Pass;
  }
  return any_pass;  // a run that checked nothing (every row skipped) assures nothing
}

std::string at_head(int layer, int head, int window) {
  std::string s = "layer " + std::to_string(layer) + " head " + std::to_string(head);
  if (window >= 0) s += " window " + std::to_string(window);
  return s;
}

std::string fmt(double v) {
  if (std::isnan(v)) return "-";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == 0) return "0";
  char buf[32];
  const double a = std::fabs(v);
  if (a == std::floor(a) && a < 1e9) std::snprintf(buf, sizeof buf, "%.0f", v);
  else if (a >= 1e-3 && a < 1e4) std::snprintf(buf, sizeof buf, "%.4g", v);
  else std::snprintf(buf, sizeof buf, "%.2e", v);
  return buf;
}

namespace {
json json_num(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }
}  // namespace

json to_json(const Report& r) {
  json checks = json::array();
  for (const auto& c : r.checks) {
    json j = {{"name", c.name},         {"status", c.status == Status::Fail ? "fail" : status_name(c.status)},
              {"figure", json_num(c.figure)}, {"threshold", json_num(c.threshold)},
              {"relation", c.relation},  {"reason", c.reason},
              {"where", c.where},        {"message", c.message},
              {"seconds", c.seconds}};
    // An infinite figure of a check that ran is its result ("inf"); a skipped check has none (null), and every row
    // has its details object, empty when there are none (README lists it among each check's fields).
    if (std::isinf(c.figure) && c.status != Status::Skip) j["figure"] = c.figure > 0 ? "inf" : "-inf";
    j["details"] = c.details.is_null() ? json::object() : c.details;
    checks.push_back(std::move(j));
  }
  json out = r.header;
  out["passed"] = r.passed();
  out["exit_code"] = r.exit_code();
  out["seconds"] = r.seconds;
  out["checks"] = checks;
  return out;
}

void print_table(const Report& r, std::FILE* out) {
  const auto& h = r.header;
  std::fprintf(out, "statecut verify %s\n", h.value("checkpoint", std::string()).c_str());
  if (h.contains("summary")) std::fprintf(out, "  %s\n", h["summary"].get<std::string>().c_str());
  if (h.contains("input")) std::fprintf(out, "  input: %s\n", h["input"].value("description", std::string()).c_str());
  std::fprintf(out, "\n%-22s %-6s %-10s %-12s %s\n", "check", "result", "figure", "limit", "worst at");
  for (const auto& c : r.checks) {
    std::string limit = std::isnan(c.threshold) ? "-" : c.relation + " " + fmt(c.threshold);
    std::fprintf(out, "%-22s %-6s %-10s %-12s %s\n", c.name.c_str(), status_name(c.status), fmt(c.figure).c_str(),
                 limit.c_str(), c.where.empty() ? "-" : c.where.c_str());
    if (!c.message.empty()) std::fprintf(out, "    %s\n", c.message.c_str());
    if (!c.reason.empty() && c.status != Status::Skip) std::fprintf(out, "    limit: %s\n", c.reason.c_str());
  }
  int pass = 0, fail = 0, skip = 0;
  for (const auto& c : r.checks) (c.status == Status::Pass ? pass : c.status == Status::Fail ? fail : skip)++;
  std::fprintf(out, "\n%s: %d passed, %d failed, %d skipped in %.1f s\n",
               fail ? "FAILED" : pass == 0 ? "NOTHING CHECKED" : "OK", pass, fail, skip, r.seconds);
}

}  // namespace statecut::verify

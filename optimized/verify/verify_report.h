/// The result of `statecut verify`: one row per check, a human table and one JSON object.
///
/// Every row carries the measured figure, the limit it is held to with a one-line reason, and where the figure is
/// worst (layer/head, tensor), so a failure names the place and the size, never only "failed" (issue 12).
/// Row names are "<group>" or "<group>.<part>" (e.g. "reference", "reference.model"); --only/--skip select groups.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdio>
#include <limits>
#include <string>
#include <vector>

namespace statecut::verify {

enum class Status { Pass, Fail, Skip };
const char* status_name(Status s);

struct CheckResult {
  std::string name;
  Status status = Status::Skip;
  double figure = std::numeric_limits<double>::quiet_NaN();     ///< the measured number (NaN: none)
  double threshold = std::numeric_limits<double>::quiet_NaN();  ///< the limit (NaN: none)
  std::string relation = "<=";  ///< how figure compares to threshold to pass ("<=", "==", ">=")
  std::string reason;           ///< one line: why this limit
  std::string where;            ///< worst layer/head or tensor ("" when not applicable)
  std::string message;          ///< one line: what was measured, or why it failed / was skipped
  nlohmann::json details = nlohmann::json::object();  ///< per layer/head figures (JSON only)
  double seconds = 0;
};

/// Tracks the largest value seen and where (ties keep the first).
struct Worst {
  double value = -std::numeric_limits<double>::infinity();
  std::string where;
  bool nan = false;  ///< a NaN was seen (it is the worst figure of all)
  void add(double v, const std::string& at);
  bool any() const { return nan || value > -std::numeric_limits<double>::infinity(); }
  double figure() const { return nan ? std::numeric_limits<double>::quiet_NaN() : value; }
};

/// Pass when v <= limit and v is not NaN.
Status le(double v, double limit);

struct Report {
  nlohmann::json header = nlohmann::json::object();  ///< checkpoint, model_type, dtype, input, ...
  std::vector<CheckResult> checks;
  double seconds = 0;
  bool passed() const;  ///< no row failed and at least one passed
  int exit_code() const { return passed() ? 0 : 1; }
};

nlohmann::json to_json(const Report& r);
/// The table for people: one line per check and an indented line with its note and the limit's reason.
void print_table(const Report& r, std::FILE* out);

/// "layer 3 head 1" / "layer 3 head 1 window 2".
std::string at_head(int layer, int head, int window = -1);
/// Compact number for tables: "0", "3.1e-06", "0.4123".
std::string fmt(double v);

}  // namespace statecut::verify

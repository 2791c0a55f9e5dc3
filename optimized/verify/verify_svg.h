/// `statecut verify --svg DIR` (DIR/report.svg): the report as one picture a model team can read at a glance.
///
/// Top panel, one row per check: how close its figure is to its limit, as the margin
///   m = figure / threshold   (relation "<=": the row passes for m <= 1)      m = threshold / figure   (">=")
/// on a log axis from 10^-8 to 10 with the limit drawn at 1; the bar is green (pass), red (fail) or absent (skip,
/// and "==" rows, whose figure is a count that must match exactly: their status is written instead). A row whose
/// figure is NaN or infinite is drawn at the axis' right end in red. The worst place (layer/head) follows the name.
/// Bottom panel (when the theorems check ran): rank utilization u of each (layer, head) of the final states, mean
/// over windows, as a heat map (0 white → 1 dark) with the value in each cell.
#pragma once
#include <string>

#include "optimized/verify/verify_report.h"

namespace statecut::verify {

std::string report_svg(const Report& r, const std::string& title);

}  // namespace statecut::verify

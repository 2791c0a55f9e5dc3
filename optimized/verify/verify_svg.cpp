// The verify report as an SVG (verify_svg.h).
#include "optimized/verify/verify_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "optimized/analysis/svg.h"

namespace statecut::verify {
namespace {

constexpr double kLeft = 330, kPlotW = 420, kRowH = 22, kTop = 60;
constexpr double kLogMin = -8, kLogMax = 1;  // the margin axis: 1e-8 .. 10

double x_of(double log10_margin) {
  const double t = (std::clamp(log10_margin, kLogMin, kLogMax) - kLogMin) / (kLogMax - kLogMin);
  return kLeft + t * kPlotW;
}

std::string svg_num(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

/// Mean u per (layer, head) over windows, from the theorems.eff-rank row's details.
std::map<int, std::map<int, std::pair<double, int>>> u_by_layer_head(const Report& r) {
  std::map<int, std::map<int, std::pair<double, int>>> u;
  for (const auto& c : r.checks) {
    if (c.name != "theorems.eff-rank" || !c.details.contains("layers")) continue;
    for (const auto& l : c.details["layers"])
      for (const auto& h : l["heads"]) {
        auto& cell = u[l["layer"].get<int>()][h["head"].get<int>()];
        cell.first += h["u"].get<double>();
        cell.second += 1;
      }
  }
  return u;
}

}  // namespace

std::string report_svg(const Report& r, const std::string& title) {
  const auto u = u_by_layer_head(r);
  int heads = 0;
  for (const auto& [layer, hs] : u) heads = std::max(heads, static_cast<int>(hs.size()));
  const double cell = 34, u_top = kTop + kRowH * static_cast<double>(r.checks.size()) + 70;
  const double W = std::max(kLeft + kPlotW + 150, 90 + cell * heads + 40);
  const double H = u.empty() ? u_top - 20 : u_top + 44 + cell * static_cast<double>(u.size());
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
    << "\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << W / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">" << xml_escape(title)
    << "</text>\n<text x=\"" << W / 2 << "\" y=\"40\" text-anchor=\"middle\" fill=\"#555\">"
    << (r.passed() ? "every check holds" : "a check FAILS") << ": figure / limit per check (pass when left of 1)"
    << "</text>\n";
  // Axis: decades, the limit at 1.
  const double axis_bottom = kTop + kRowH * static_cast<double>(r.checks.size());
  for (int e = static_cast<int>(kLogMin); e <= static_cast<int>(kLogMax); ++e) {
    const double x = x_of(e);
    o << "<line x1=\"" << x << "\" y1=\"" << kTop - 4 << "\" x2=\"" << x << "\" y2=\"" << axis_bottom << "\" stroke=\""
      << (e == 0 ? "#000" : "#ddd") << "\" stroke-width=\"" << (e == 0 ? 1.5 : 1) << "\"/>\n"
      << "<text x=\"" << x << "\" y=\"" << axis_bottom + 14 << "\" text-anchor=\"middle\" fill=\"#555\">"
      << (e == 0 ? "1" : "1e" + std::to_string(e)) << "</text>\n";
  }
  o << "<text x=\"" << kLeft + kPlotW / 2 << "\" y=\"" << axis_bottom + 30
    << "\" text-anchor=\"middle\">figure / limit (log scale; the limit's reason is in the table)</text>\n";
  for (size_t i = 0; i < r.checks.size(); ++i) {
    const CheckResult& c = r.checks[i];
    const double y = kTop + kRowH * static_cast<double>(i);
    std::string label = c.name + (c.where.empty() ? "" : "  (" + c.where + ")");
    if (label.size() > 52) label = label.substr(0, 51) + "\u2026";
    o << "<text x=\"" << kLeft - 8 << "\" y=\"" << y + 15 << "\" text-anchor=\"end\">" << xml_escape(label)
      << "<title>" << xml_escape(c.message) << "</title></text>\n";
    const char* colour = c.status == Status::Fail ? "#d62728" : "#2ca02c";
    const bool ratio = (c.relation == "<=" || c.relation == ">=") && !std::isnan(c.threshold) && c.threshold > 0 &&
                       c.status != Status::Skip;
    if (!ratio) {
      o << "<text x=\"" << kLeft + 6 << "\" y=\"" << y + 15 << "\" fill=\"" << (c.status == Status::Skip ? "#777" : colour)
        << "\">" << status_name(c.status) << (c.relation == "==" ? " (exact: " + fmt(c.figure) + ")" : "")
        << "</text>\n";
      continue;
    }
    double m = c.relation == "<=" ? c.figure / c.threshold : c.threshold / c.figure;
    const bool bad = !std::isfinite(m);
    const double lm = bad ? kLogMax : (m <= 0 ? kLogMin : std::log10(m));
    const double x = x_of(lm);
    o << "<rect x=\"" << kLeft << "\" y=\"" << y + 4 << "\" width=\"" << std::max(1.0, x - kLeft) << "\" height=\""
      << kRowH - 8 << "\" fill=\"" << (bad ? "#d62728" : colour) << "\" opacity=\"0.8\"><title>"
      << xml_escape(c.name + ": " + fmt(c.figure) + " " + c.relation + " " + fmt(c.threshold)) << "</title></rect>\n"
      << "<text x=\"" << kLeft + kPlotW + 8 << "\" y=\"" << y + 15 << "\" fill=\"" << (bad ? "#d62728" : colour)
      << "\">" << status_name(c.status) << " " << (bad ? std::string("non-finite") : fmt(m)) << "</text>\n";
  }
  if (!u.empty()) {
    o << "<text x=\"" << W / 2 << "\" y=\"" << u_top << "\" text-anchor=\"middle\" font-size=\"14\">rank utilization u"
      << " of the final state per layer and head (mean over windows)</text>\n";
    int row = 0;
    for (const auto& [layer, hs] : u) {
      const double y = u_top + 14 + cell * row++;
      o << "<text x=\"82\" y=\"" << y + cell / 2 + 4 << "\" text-anchor=\"end\">layer " << layer << "</text>\n";
      for (const auto& [head, acc] : hs) {
        const double v = acc.second ? acc.first / acc.second : 0, x = 90 + cell * head;
        const int shade = static_cast<int>(255 - 200 * std::clamp(v, 0.0, 1.0));
        o << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"" << cell - 2 << "\" height=\"" << cell - 2
          << "\" fill=\"rgb(" << shade << "," << shade << ",255)\"><title>layer " << layer << " head " << head
          << ": u " << svg_num("%.4f", v) << "</title></rect>\n<text x=\"" << x + cell / 2 - 1 << "\" y=\""
          << y + cell / 2 + 4 << "\" text-anchor=\"middle\" font-size=\"10\" fill=\"" << (v > 0.6 ? "white" : "black")
          << "\">" << svg_num("%.2f", v) << "</text>\n";
      }
    }
    for (int h = 0; h < heads; ++h)
      o << "<text x=\"" << 90 + cell * h + cell / 2 - 1 << "\" y=\"" << u_top + 14 + cell * row + 12
        << "\" text-anchor=\"middle\" fill=\"#555\">h" << h << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace statecut::verify

#include "optimized/analysis/svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "optimized/io/atomic_dir.h"

namespace statecut {
namespace {

namespace fs = std::filesystem;

std::string svg_fmt(double v, int prec = 3) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", prec, v);
  return b;
}

/// A tick label with as few decimals as the value needs (0.25, 0.3, 512).
std::string tick_label(double v) {
  for (int prec = 0; prec <= 6; ++prec) {
    const double p = std::pow(10.0, prec);
    if (std::abs(std::round(v * p) / p - v) <= 1e-9 * std::max(1.0, std::abs(v))) return svg_fmt(v, prec);
  }
  return svg_fmt(v, 6);
}

/// Code points of a UTF-8 string (what the width estimate counts).
size_t glyphs(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

/// Estimated width in px of `s` at font size `size`: 0.6 em per glyph, a little more than sans-serif's average, so
/// that a box sized by it holds the text.
double text_px(const std::string& s, double size) { return 0.6 * size * static_cast<double>(glyphs(s)); }

/// `s` shortened in the middle ("…") to fit `max_px` at font size `size`.
std::string elide(const std::string& s, double max_px, double size) {
  if (text_px(s, size) <= max_px) return s;
  const size_t keep = static_cast<size_t>(std::max(2.0, max_px / (0.6 * size) - 1));
  // Cut on code-point boundaries: count glyphs from each end.
  std::vector<size_t> starts;
  for (size_t i = 0; i < s.size(); ++i)
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) starts.push_back(i);
  const size_t head = keep / 2, tail = keep - head;
  if (head + tail >= starts.size()) return s;
  return s.substr(0, starts[head]) + "\u2026" + s.substr(starts[starts.size() - tail]);
}

const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                          "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

/// A perceptual-ish sequential scale (dark blue → teal → yellow) for t in [0, 1].
std::string colour(double t) {
  t = std::clamp(t, 0.0, 1.0);
  const double stops[3][3] = {{68, 1, 84}, {33, 145, 140}, {253, 231, 37}};
  const double x = t * 2;
  const int i = std::min(1, static_cast<int>(x));
  const double f = x - i;
  char b[16];
  std::snprintf(b, sizeof b, "#%02x%02x%02x", static_cast<int>(stops[i][0] + f * (stops[i + 1][0] - stops[i][0])),
                static_cast<int>(stops[i][1] + f * (stops[i + 1][1] - stops[i][1])),
                static_cast<int>(stops[i][2] + f * (stops[i + 1][2] - stops[i][2])));
  return b;
}

constexpr double kTitleSize = 15, kFontSize = 12;

/// Opens the document: white background, the title (elided to the width) and a grey subtitle line.
void header(std::ostringstream& o, double W, double H, const std::string& title, const std::string& subtitle) {
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H << "\" viewBox=\"0 0 " << W
    << " " << H << "\" font-family=\"sans-serif\" font-size=\"" << kFontSize << "\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << W / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"" << kTitleSize << "\">"
    << xml_escape(elide(title, W - 20, kTitleSize)) << "</text>\n"
    << "<text x=\"" << W / 2 << "\" y=\"40\" text-anchor=\"middle\" fill=\"#555\">"
    << xml_escape(elide(subtitle, W - 20, kFontSize)) << "</text>\n";
}

/// Width that holds the title and subtitle (at most 1200 px; longer titles are elided).
double title_width(const std::string& title, const std::string& subtitle) {
  return std::min(1200.0, std::max(text_px(title, kTitleSize), text_px(subtitle, kFontSize)) + 40);
}

std::string subtitle_of(const RankReport& r) {
  std::string s = std::to_string(r.tokens) + " tokens, " + rank_state_label(r.state);
  if (!r.model_type.empty()) s += " (" + r.model_type + ")";
  return s;
}

/// True when some layer has more value heads than key heads (grouped values): heads are then labelled with their key.
bool grouped_values(const RankReport& r) {
  for (const auto& L : r.layers)
    if (L.num_key_heads > 0 && static_cast<int>(L.heads.size()) > L.num_key_heads) return true;
  return false;
}

void polyline_start(std::ostringstream& o, const std::string& col, double width, const char* extra = "") {
  o << "<polyline fill=\"none\" stroke=\"" << col << "\" stroke-width=\"" << width << "\"" << extra << " points=\"";
}

}  // namespace

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '&') o += "&amp;";
    else if (c == '"') o += "&quot;";
    else o += c;
  }
  return o;
}

std::string plot_name(const std::string& checkpoint_dir) {
  fs::path p = fs::path(checkpoint_dir).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();  // "dir/" → "dir"
  std::string n = p.filename().string();
  if (n.empty() || n == "." || n == "..") {
    std::error_code ec;
    const fs::path a = fs::absolute(p, ec).lexically_normal();
    n = (a.filename().empty() ? a.parent_path() : a).filename().string();
  }
  return n.empty() ? checkpoint_dir : n;
}

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!(hi > lo)) return {lo};
  const double span = hi - lo;
  struct Cand {
    double step;
    bool ends_on_hi;
    double cost;
  };
  std::vector<double> steps;
  const int e0 = static_cast<int>(std::floor(std::log10(span / target)));
  for (int e = e0 - 1; e <= e0 + 1; ++e)
    for (double m : {1.0, 2.0, 2.5, 5.0}) steps.push_back(m * std::pow(10.0, e));
  for (double p = 1; p <= span; p *= 2) steps.push_back(p);  // powers of two for integer axes (positions, indices)
  bool any = false;
  Cand best{0, false, 1e300};
  for (double s : steps) {
    const double n = span / s;
    if (n < 3 - 1e-9 || n > 8 + 1e-9) continue;
    const double q = hi / s;
    const bool ends = std::abs(q - std::round(q)) <= 1e-9 * std::max(1.0, std::abs(q));
    const bool pow2 = std::abs(std::log2(s) - std::round(std::log2(s))) < 1e-12 && s >= 1;
    const bool decimal = [&] {
      const double m = s / std::pow(10.0, std::floor(std::log10(s) + 1e-12));
      return std::abs(m - 1) < 1e-9 || std::abs(m - 2) < 1e-9 || std::abs(m - 2.5) < 1e-9 || std::abs(m - 5) < 1e-9;
    }();
    // Ending on hi matters most (the axis' end is a labelled value); then decimal steps over powers of two (a power
    // of two only wins where it ends on hi and no decimal step does); then about `target` intervals.
    const double cost = (ends ? 0 : 10) + (decimal ? 0 : (pow2 ? 0.5 : 20)) + std::abs(n - target);
    if (cost < best.cost) best = {s, ends, cost}, any = true;
  }
  if (!any) best.step = std::pow(10.0, std::floor(std::log10(span)));
  std::vector<double> t;
  const double s = best.step;
  for (double k = std::floor(lo / s + 1e-9); k <= std::ceil(hi / s - 1e-9); k += 1) t.push_back(k * s);
  return t;
}

std::string svg_u_curves(const RankReport& r, const PlotLabels& labels) {
  const std::string title = labels.name + ": rank utilization u(t)";
  const std::string subtitle = subtitle_of(r) + "; thin: mean over a layer's heads, thick: all layers";
  const int64_t T = r.tokens;
  std::vector<std::vector<double>> lines;
  double ymax = 0;
  for (const auto& L : r.layers) {
    std::vector<double> m(T, 0);
    for (const auto& h : L.heads)
      for (int64_t t = 0; t < T; ++t) m[t] += h.u[t] / L.heads.size();
    for (double v : m) ymax = std::max(ymax, v);
    lines.push_back(std::move(m));
  }
  std::vector<std::string> legend;
  for (const auto& L : r.layers) legend.push_back("layer " + std::to_string(L.layer) + " (mean " + svg_fmt(L.mean) + ")");
  legend.push_back("all layers (mean " + svg_fmt(r.mean_u) + ")");
  double legend_px = 0;
  for (const auto& s : legend) legend_px = std::max(legend_px, text_px(s, kFontSize));

  const double x0 = 70, y0 = 58, w = 620, h = 320;
  const double lx = x0 + w + 14;  // legend: 20 px of line, 4 px gap, the label
  const double W = std::max(lx + 24 + legend_px + 12, title_width(title, subtitle));
  const double Ht = std::max(y0 + h + 48, y0 + 8 + 18.0 * legend.size() + 12);
  std::ostringstream o;
  header(o, W, Ht, title, subtitle);

  const std::vector<double> yt = nice_ticks(0, ymax > 0 ? 1.05 * ymax : 1.0, 5);  // headroom above the highest curve
  const double ytop = yt.back();
  const std::vector<double> xt = nice_ticks(0, static_cast<double>(T), 5);
  auto X = [&](double t) { return x0 + w * t / static_cast<double>(std::max<int64_t>(1, T)); };
  auto Y = [&](double u) { return y0 + h * (1 - u / ytop); };
  for (double u : yt)
    o << "<line x1=\"" << x0 << "\" x2=\"" << x0 + w << "\" y1=\"" << Y(u) << "\" y2=\"" << Y(u)
      << "\" stroke=\"#ddd\"/><text x=\"" << x0 - 6 << "\" y=\"" << Y(u) + 4 << "\" text-anchor=\"end\">"
      << tick_label(u) << "</text>\n";
  for (double t : xt) {
    if (t > static_cast<double>(T) + 1e-9) continue;
    o << "<line x1=\"" << X(t) << "\" x2=\"" << X(t) << "\" y1=\"" << y0 + h << "\" y2=\"" << y0 + h + 4
      << "\" stroke=\"#333\"/><text x=\"" << X(t) << "\" y=\"" << y0 + h + 17 << "\" text-anchor=\"middle\">"
      << tick_label(t) << "</text>\n";
  }
  o << "<rect x=\"" << x0 << "\" y=\"" << y0 << "\" width=\"" << w << "\" height=\"" << h
    << "\" fill=\"none\" stroke=\"#333\"/>\n"
    << "<text x=\"" << x0 + w / 2 << "\" y=\"" << y0 + h + 36 << "\" text-anchor=\"middle\">position t</text>\n"
    << "<text transform=\"translate(18," << y0 + h / 2 << ") rotate(-90)\" text-anchor=\"middle\">rank utilization u(t)</text>\n";
  const int64_t step = std::max<int64_t>(1, T / 800);
  auto polyline = [&](const std::vector<double>& m, const std::string& col, double width) {
    polyline_start(o, col, width);
    for (int64_t t = 0; t < T; t += step) o << svg_fmt(X(t), 1) << "," << svg_fmt(Y(m[t]), 1) << " ";
    if ((T - 1) % step != 0) o << svg_fmt(X(T - 1), 1) << "," << svg_fmt(Y(m[T - 1]), 1);
    o << "\"/>\n";
  };
  for (size_t l = 0; l < lines.size(); ++l) polyline(lines[l], kPalette[l % 10], 1.2);
  polyline(std::vector<double>(r.curve.begin(), r.curve.end()), "#000", 2.2);
  double ly = y0 + 8;
  for (size_t l = 0; l < legend.size(); ++l) {
    const bool overall = l + 1 == legend.size();
    const std::string col = overall ? "#000" : kPalette[l % 10];
    o << "<line x1=\"" << lx << "\" x2=\"" << lx + 20 << "\" y1=\"" << ly << "\" y2=\"" << ly << "\" stroke=\"" << col
      << "\" stroke-width=\"" << (overall ? 2.2 : 1.2) << "\"/><text x=\"" << lx + 24 << "\" y=\"" << ly + 4 << "\">"
      << xml_escape(legend[l]) << "</text>\n";
    ly += 18;
  }
  o << "</svg>\n";
  return o.str();
}

std::string svg_heatmap(const RankReport& r, const PlotLabels& labels) {
  const std::string title = labels.name + ": mean u per head";
  const std::string subtitle = subtitle_of(r);
  size_t H = 0;
  for (const auto& L : r.layers) H = std::max(H, L.heads.size());
  const bool gva = grouped_values(r);
  const double cell = 56, x0 = 90, y0 = gva ? 84 : 70;
  const double content = x0 + cell * H + 120;
  const double W = std::max(content, title_width(title, subtitle));
  const double Ht = y0 + cell * r.layers.size() + 30;
  std::ostringstream o;
  header(o, W, Ht, title, subtitle);
  double umax = 0;
  for (const auto& L : r.layers)
    for (const auto& h : L.heads) umax = std::max(umax, h.mean);
  umax = umax > 0 ? umax : 1;
  for (size_t l = 0; l < r.layers.size(); ++l) {
    const LayerRank& L = r.layers[l];
    o << "<text x=\"" << x0 - 8 << "\" y=\"" << y0 + cell * l + cell / 2 + 4 << "\" text-anchor=\"end\">layer "
      << L.layer << "</text>\n";
    for (size_t h = 0; h < L.heads.size(); ++h) {
      const HeadRank& hr = L.heads[h];
      const double v = hr.mean;
      const double x = x0 + cell * h, y = y0 + cell * l;
      o << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"" << cell - 2 << "\" height=\"" << cell - 2 << "\" fill=\""
        << colour(v / umax) << "\"><title>layer " << L.layer << " head " << h;
      if (gva) o << " (key head " << hr.key_head << ")";
      o << ": mean u " << svg_fmt(v, 4) << ", std " << svg_fmt(hr.std, 4) << "</title></rect>\n"
        << "<text x=\"" << x + cell / 2 - 1 << "\" y=\"" << y + cell / 2 + 4 << "\" text-anchor=\"middle\" fill=\""
        << (v / umax > 0.6 ? "#000" : "#fff") << "\">" << svg_fmt(v, 3) << "</text>\n";
    }
  }
  for (size_t h = 0; h < H; ++h) {
    const double cx = x0 + cell * h + cell / 2 - 1;
    o << "<text x=\"" << cx << "\" y=\"" << y0 - (gva ? 22 : 8) << "\" text-anchor=\"middle\">head " << h << "</text>\n";
    if (!gva) continue;
    for (const auto& L : r.layers)
      if (h < L.heads.size()) {
        o << "<text x=\"" << cx << "\" y=\"" << y0 - 8 << "\" text-anchor=\"middle\" fill=\"#555\" font-size=\"11\">key "
          << L.heads[h].key_head << "</text>\n";
        break;
      }
  }
  // colour bar, labelled
  const double bx = x0 + cell * H + 24, bh = cell * r.layers.size() - 2;
  for (int i = 0; i < 50; ++i)
    o << "<rect x=\"" << bx << "\" y=\"" << y0 + bh * (1 - (i + 1) / 50.0) << "\" width=\"16\" height=\"" << bh / 50 + 0.5
      << "\" fill=\"" << colour(i / 49.0) << "\"/>\n";
  o << "<text x=\"" << bx + 8 << "\" y=\"" << y0 - 8 << "\" text-anchor=\"middle\">mean u</text>\n"
    << "<text x=\"" << bx + 20 << "\" y=\"" << y0 + 10 << "\">" << svg_fmt(umax, 3) << "</text><text x=\"" << bx + 20
    << "\" y=\"" << y0 + bh << "\">0</text>\n</svg>\n";
  return o.str();
}

std::string svg_spectra(const RankReport& r, const RankReport* base, const PlotLabels& labels) {
  const std::string title = labels.name + ": final-state spectra";
  const std::string subtitle = subtitle_of(r) + "; singular values of S_T, each head scaled by its largest";
  const size_t n = r.layers.size();
  const size_t cols = std::min<size_t>(n, 2), rows = (n + cols - 1) / cols;
  const double pw = 380, ph = 220, gx = 80, gy = 70;
  const double W = std::max(gx + cols * (pw + gx) - 40, title_width(title, subtitle));
  const bool gva = grouped_values(r);

  // Legend entries: the value heads (with their key head under GVA; taken from the first layer that has the head),
  // then the baseline.
  size_t H = 0;
  for (const auto& L : r.layers) H = std::max(H, L.heads.size());
  struct Entry {
    std::string label, col;
    bool dashed;
  };
  std::vector<Entry> legend;
  for (size_t h = 0; h < H; ++h) {
    std::string label = "head " + std::to_string(h);
    if (gva)
      for (const auto& L : r.layers)
        if (h < L.heads.size()) {
          label += " (key " + std::to_string(L.heads[h].key_head) + ")";
          break;
        }
    legend.push_back({label, kPalette[h % 10], false});
  }
  if (base) legend.push_back({"before pruning: " + (labels.baseline.empty() ? std::string("baseline") : labels.baseline), "#aaa", true});
  // Lay the legend out in rows that fit the width.
  std::vector<std::pair<double, double>> at;  // x, y of each entry
  double lx = 20, ly = 62;
  for (const auto& e : legend) {
    const double ew = 24 + text_px(e.label, kFontSize) + 18;
    if (lx + ew > W - 10 && lx > 20) lx = 20, ly += 18;
    at.emplace_back(lx, ly);
    lx += ew;
  }
  const double top = ly + 34;
  const double Ht = top + rows * (ph + gy) - 10;
  std::ostringstream o;
  header(o, W, Ht, title, subtitle);
  for (size_t i = 0; i < legend.size(); ++i) {
    const auto& e = legend[i];
    o << "<line x1=\"" << at[i].first << "\" x2=\"" << at[i].first + 20 << "\" y1=\"" << at[i].second << "\" y2=\""
      << at[i].second << "\" stroke=\"" << e.col << "\" stroke-width=\"1.6\""
      << (e.dashed ? " stroke-dasharray=\"4 3\"" : "") << "/><text x=\"" << at[i].first + 24 << "\" y=\""
      << at[i].second + 4 << "\">" << xml_escape(e.label) << "</text>\n";
  }

  // One y-range for every panel, from the data: the smallest σ_i/σ_1 > 0 shown rounded down to a decade (at most 17
  // decades: f64 SVD of an fp32 state resolves nothing below), at least one decade.
  double smallest = 1;
  auto scan = [&](const RankReport& rep) {
    for (const auto& L : rep.layers)
      for (const auto& h : L.heads)
        if (!h.spectrum.empty() && h.spectrum[0] > 0)
          for (double s : h.spectrum)
            if (s > 0) smallest = std::min(smallest, s / h.spectrum[0]);
  };
  scan(r);
  if (base) scan(*base);
  const double ldata = std::clamp(std::floor(std::log10(smallest) + 1e-12), -17.0, -1.0);
  const int ystep = static_cast<int>(std::ceil(-ldata / 6.0));  // at most 7 decade labels
  const double lmin = -std::ceil(-ldata / ystep) * ystep;         // the axis ends on a labelled decade

  for (size_t l = 0; l < n; ++l) {
    const double x0 = gx + (l % cols) * (pw + gx), y0 = top + (l / cols) * (ph + gy);
    const LayerRank& L = r.layers[l];
    const LayerRank* B = nullptr;
    if (base)
      for (const auto& bl : base->layers)
        if (bl.layer == L.layer) B = &bl;
    size_t dmax = 1;
    for (const auto& h : L.heads) dmax = std::max(dmax, h.spectrum.size());
    if (B)
      for (const auto& h : B->heads) dmax = std::max(dmax, h.spectrum.size());
    // x: index i = 1..dmax (σ_1 largest)
    auto X = [&](double i) { return dmax > 1 ? x0 + pw * (i - 1) / static_cast<double>(dmax - 1) : x0 + pw / 2; };
    auto Y = [&](double s) { return y0 + ph * (std::max(lmin, std::log10(std::max(s, 1e-300))) / lmin); };
    o << "<rect x=\"" << x0 << "\" y=\"" << y0 << "\" width=\"" << pw << "\" height=\"" << ph
      << "\" fill=\"none\" stroke=\"#333\"/>\n<text x=\"" << x0 + pw / 2 << "\" y=\"" << y0 - 7
      << "\" text-anchor=\"middle\">layer " << L.layer << " (dk " << L.dk << ", dv " << L.dv << ")</text>\n";
    for (int e = 0; e >= lmin; e -= ystep) {
      const double y = Y(std::pow(10.0, e));
      o << "<line x1=\"" << x0 << "\" x2=\"" << x0 + pw << "\" y1=\"" << y << "\" y2=\"" << y
        << "\" stroke=\"#eee\"/><text x=\"" << x0 - 5 << "\" y=\"" << y + 4 << "\" text-anchor=\"end\">"
        << (e == 0 ? std::string("1") : "1e" + std::to_string(e)) << "</text>\n";
    }
    for (double t : nice_ticks(0, static_cast<double>(dmax), 4)) {
      if (t > static_cast<double>(dmax) + 1e-9) continue;
      const double i = std::max(1.0, t);
      o << "<line x1=\"" << X(i) << "\" x2=\"" << X(i) << "\" y1=\"" << y0 + ph << "\" y2=\"" << y0 + ph + 4
        << "\" stroke=\"#333\"/><text x=\"" << X(i) << "\" y=\"" << y0 + ph + 16 << "\" text-anchor=\"middle\">"
        << tick_label(i) << "</text>\n";
    }
    o << "<text x=\"" << x0 + pw / 2 << "\" y=\"" << y0 + ph + 32 << "\" text-anchor=\"middle\">index i</text>\n"
      << "<text transform=\"translate(" << x0 - 48 << "," << y0 + ph / 2
      << ") rotate(-90)\" text-anchor=\"middle\">σ<tspan baseline-shift=\"sub\" font-size=\"9\">i</tspan> / "
         "σ<tspan baseline-shift=\"sub\" font-size=\"9\">1</tspan></text>\n";
    auto draw = [&](const HeadRank& h, const std::string& col, const char* dash) {
      if (h.spectrum.empty() || h.spectrum[0] <= 0) return;
      polyline_start(o, col, 1.3, dash);
      for (size_t i = 0; i < h.spectrum.size(); ++i)
        o << svg_fmt(X(static_cast<double>(i + 1)), 1) << "," << svg_fmt(Y(h.spectrum[i] / h.spectrum[0]), 1) << " ";
      o << "\"/>\n";
    };
    if (B)
      for (const auto& h : B->heads) draw(h, "#aaa", " stroke-dasharray=\"4 3\"");
    for (size_t h = 0; h < L.heads.size(); ++h) draw(L.heads[h], kPalette[h % 10], "");
  }
  o << "</svg>\n";
  return o.str();
}

void write_rank_svg_files(const RankReport& r, const RankReport* baseline, const PlotLabels& labels,
                          const std::string& folder) {
  const std::pair<const char*, std::string> files[] = {{"u_curves.svg", svg_u_curves(r, labels)},
                                                       {"heatmap.svg", svg_heatmap(r, labels)},
                                                       {"spectra.svg", svg_spectra(r, baseline, labels)}};
  for (const auto& [name, text] : files) {
    std::ofstream f(fs::path(folder) / name, std::ios::binary);
    f << text;
    if (!f) throw std::runtime_error(folder + ": cannot write " + name);
  }
}

void write_rank_svgs(const RankReport& r, const RankReport* baseline, const PlotLabels& labels, const std::string& dir) {
  AtomicDir out(dir, "--svg");
  write_rank_svg_files(r, baseline, labels, out.path());
  out.commit();
}

}  // namespace statecut

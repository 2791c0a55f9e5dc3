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

std::string esc(const std::string& s) {
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

std::string fmt(double v, int prec = 3) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", prec, v);
  return b;
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

struct Frame {
  double x0 = 70, y0 = 40, w = 620, h = 320;  // plot area
};

void header(std::ostringstream& o, double W, double H, const std::string& title) {
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H << "\" viewBox=\"0 0 " << W
    << " " << H << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << W / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">" << esc(title) << "</text>\n";
}

}  // namespace

std::string svg_u_curves(const RankReport& r, const std::string& title) {
  std::ostringstream o;
  const Frame f;
  header(o, 860, 410, title);
  double ymax = 0;
  const int64_t T = r.tokens;
  std::vector<std::vector<double>> lines;
  for (const auto& L : r.layers) {
    std::vector<double> m(T, 0);
    for (const auto& h : L.heads)
      for (int64_t t = 0; t < T; ++t) m[t] += h.u[t] / L.heads.size();
    for (double v : m) ymax = std::max(ymax, v);
    lines.push_back(std::move(m));
  }
  ymax = ymax > 0 ? std::ceil(ymax * 10.0 * 1.05) / 10.0 : 1.0;
  auto X = [&](double t) { return f.x0 + f.w * t / std::max<int64_t>(1, T - 1); };
  auto Y = [&](double u) { return f.y0 + f.h * (1 - u / ymax); };
  // axes and grid
  for (int i = 0; i <= 5; ++i) {
    const double u = ymax * i / 5;
    o << "<line x1=\"" << f.x0 << "\" x2=\"" << f.x0 + f.w << "\" y1=\"" << Y(u) << "\" y2=\"" << Y(u)
      << "\" stroke=\"#ddd\"/><text x=\"" << f.x0 - 6 << "\" y=\"" << Y(u) + 4 << "\" text-anchor=\"end\">" << fmt(u, 2)
      << "</text>\n";
  }
  for (int i = 0; i <= 4; ++i) {
    const double t = (T - 1) * i / 4.0;
    o << "<text x=\"" << X(t) << "\" y=\"" << f.y0 + f.h + 16 << "\" text-anchor=\"middle\">" << static_cast<int64_t>(t)
      << "</text>\n";
  }
  o << "<rect x=\"" << f.x0 << "\" y=\"" << f.y0 << "\" width=\"" << f.w << "\" height=\"" << f.h
    << "\" fill=\"none\" stroke=\"#333\"/>\n"
    << "<text x=\"" << f.x0 + f.w / 2 << "\" y=\"" << f.y0 + f.h + 34 << "\" text-anchor=\"middle\">position t</text>\n"
    << "<text transform=\"translate(18," << f.y0 + f.h / 2 << ") rotate(-90)\" text-anchor=\"middle\">rank utilization u(t)</text>\n";
  const int64_t step = std::max<int64_t>(1, T / 800);
  auto polyline = [&](const std::vector<double>& m, const std::string& col, double width) {
    o << "<polyline fill=\"none\" stroke=\"" << col << "\" stroke-width=\"" << width << "\" points=\"";
    for (int64_t t = 0; t < T; t += step) o << fmt(X(t), 1) << "," << fmt(Y(m[t]), 1) << " ";
    o << "\"/>\n";
  };
  for (size_t l = 0; l < lines.size(); ++l) polyline(lines[l], kPalette[l % 10], 1.2);
  std::vector<double> all(r.curve.begin(), r.curve.end());
  polyline(all, "#000", 2.2);
  // legend
  double ly = f.y0 + 8;
  for (size_t l = 0; l <= lines.size(); ++l) {
    const bool overall = l == lines.size();
    const std::string col = overall ? "#000" : kPalette[l % 10];
    const std::string label = overall ? "all layers (mean " + fmt(r.mean_u) + ")"
                                      : "layer " + std::to_string(r.layers[l].layer) + " (mean " + fmt(r.layers[l].mean) + ")";
    o << "<line x1=\"" << f.x0 + f.w + 14 << "\" x2=\"" << f.x0 + f.w + 34 << "\" y1=\"" << ly << "\" y2=\"" << ly
      << "\" stroke=\"" << col << "\" stroke-width=\"" << (overall ? 2.2 : 1.2) << "\"/><text x=\"" << f.x0 + f.w + 38
      << "\" y=\"" << ly + 4 << "\">" << esc(label) << "</text>\n";
    ly += 18;
  }
  o << "</svg>\n";
  return o.str();
}

std::string svg_heatmap(const RankReport& r, const std::string& title) {
  std::ostringstream o;
  size_t H = 0;
  for (const auto& L : r.layers) H = std::max(H, L.heads.size());
  const double cell = 56, x0 = 90, y0 = 50;
  const double W = x0 + cell * H + 110, Ht = y0 + cell * r.layers.size() + 50;
  header(o, W, Ht, title);
  double umax = 0;
  for (const auto& L : r.layers)
    for (const auto& h : L.heads) umax = std::max(umax, h.mean);
  umax = umax > 0 ? umax : 1;
  for (size_t l = 0; l < r.layers.size(); ++l) {
    o << "<text x=\"" << x0 - 8 << "\" y=\"" << y0 + cell * l + cell / 2 + 4 << "\" text-anchor=\"end\">layer "
      << r.layers[l].layer << "</text>\n";
    for (size_t h = 0; h < r.layers[l].heads.size(); ++h) {
      const double v = r.layers[l].heads[h].mean;
      const double x = x0 + cell * h, y = y0 + cell * l;
      o << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"" << cell - 2 << "\" height=\"" << cell - 2 << "\" fill=\""
        << colour(v / umax) << "\"><title>layer " << r.layers[l].layer << " head " << h << ": mean u " << fmt(v, 4)
        << ", std " << fmt(r.layers[l].heads[h].std, 4) << "</title></rect>\n"
        << "<text x=\"" << x + cell / 2 - 1 << "\" y=\"" << y + cell / 2 + 4 << "\" text-anchor=\"middle\" fill=\""
        << (v / umax > 0.6 ? "#000" : "#fff") << "\">" << fmt(v, 3) << "</text>\n";
    }
  }
  for (size_t h = 0; h < H; ++h)
    o << "<text x=\"" << x0 + cell * h + cell / 2 << "\" y=\"" << y0 - 8 << "\" text-anchor=\"middle\">head " << h
      << "</text>\n";
  // colour bar
  const double bx = x0 + cell * H + 30, bh = cell * r.layers.size();
  for (int i = 0; i < 50; ++i)
    o << "<rect x=\"" << bx << "\" y=\"" << y0 + bh * (1 - (i + 1) / 50.0) << "\" width=\"16\" height=\"" << bh / 50 + 0.5
      << "\" fill=\"" << colour(i / 49.0) << "\"/>\n";
  o << "<text x=\"" << bx + 20 << "\" y=\"" << y0 + 10 << "\">" << fmt(umax, 3) << "</text><text x=\"" << bx + 20
    << "\" y=\"" << y0 + bh << "\">0</text>\n</svg>\n";
  return o.str();
}

std::string svg_spectra(const RankReport& r, const RankReport* base, const std::string& title) {
  std::ostringstream o;
  const size_t n = r.layers.size();
  const size_t cols = std::min<size_t>(n, 2), rows = (n + cols - 1) / cols;
  const double pw = 380, ph = 240, W = 40 + cols * (pw + 60), Ht = 60 + rows * (ph + 60);
  header(o, W, Ht, title + (base ? " (dashed grey: before pruning)" : ""));
  const double lmin = -6;  // log10 of the smallest σ_i/σ_1 shown
  for (size_t l = 0; l < n; ++l) {
    const double x0 = 60 + (l % cols) * (pw + 60), y0 = 50 + (l / cols) * (ph + 60);
    const LayerRank& L = r.layers[l];
    const LayerRank* B = nullptr;
    if (base)
      for (const auto& bl : base->layers)
        if (bl.layer == L.layer) B = &bl;
    size_t dmax = 0;
    for (const auto& h : L.heads) dmax = std::max(dmax, h.spectrum.size());
    if (B)
      for (const auto& h : B->heads) dmax = std::max(dmax, h.spectrum.size());
    auto X = [&](double i) { return x0 + pw * i / std::max<double>(1, dmax - 1); };
    auto Y = [&](double s) { return y0 + ph * (std::max(lmin, std::log10(std::max(s, 1e-300))) / lmin); };
    o << "<rect x=\"" << x0 << "\" y=\"" << y0 << "\" width=\"" << pw << "\" height=\"" << ph
      << "\" fill=\"none\" stroke=\"#333\"/>\n<text x=\"" << x0 + pw / 2 << "\" y=\"" << y0 - 6
      << "\" text-anchor=\"middle\">layer " << L.layer << ": σ_i(S_T)/σ_1, dk=" << L.dk << "</text>\n";
    for (int e = 0; e >= lmin; e -= 2)
      o << "<text x=\"" << x0 - 4 << "\" y=\"" << Y(std::pow(10.0, e)) + 4 << "\" text-anchor=\"end\">1e" << e
        << "</text>\n";
    o << "<text x=\"" << x0 + pw / 2 << "\" y=\"" << y0 + ph + 16 << "\" text-anchor=\"middle\">index i (0.." << dmax - 1
      << ")</text>\n";
    auto draw = [&](const HeadRank& h, const std::string& col, const char* dash) {
      if (h.spectrum.empty() || h.spectrum[0] <= 0) return;
      o << "<polyline fill=\"none\" stroke=\"" << col << "\" stroke-width=\"1.3\"" << dash << " points=\"";
      for (size_t i = 0; i < h.spectrum.size(); ++i)
        o << fmt(X(i), 1) << "," << fmt(Y(h.spectrum[i] / h.spectrum[0]), 1) << " ";
      o << "\"/>\n";
    };
    if (B)
      for (const auto& h : B->heads) draw(h, "#aaa", " stroke-dasharray=\"4 3\"");
    for (size_t h = 0; h < L.heads.size(); ++h) draw(L.heads[h], kPalette[h % 10], "");
  }
  o << "</svg>\n";
  return o.str();
}

void write_rank_svgs(const RankReport& r, const RankReport* baseline, const std::string& title, const std::string& dir) {
  AtomicDir out(dir);
  const std::pair<const char*, std::string> files[] = {
      {"u_curves.svg", svg_u_curves(r, title + ": rank utilization u(t)")},
      {"heatmap.svg", svg_heatmap(r, title + ": mean u per head")},
      {"spectra.svg", svg_spectra(r, baseline, title + ": final-state spectra")}};
  for (const auto& [name, text] : files) {
    std::ofstream f(std::filesystem::path(out.path()) / name, std::ios::binary);
    f << text;
    if (!f) throw std::runtime_error(dir + ": cannot write " + name);
  }
  out.commit();
}

}  // namespace statecut

// The rank plots (optimized/analysis/svg.h) are readable: round ticks, titles by folder name that fit, every label
// inside the canvas, a head legend (value heads named with their key head under GVA), a y-range from the data.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "optimized/analysis/svg.h"

namespace {

using namespace statecut;

/// A report with `layers` layers of `hv` value heads over `hk` key heads, T positions, spectra 1, r, r², ... (dk = d).
RankReport synthetic(int layers, int hv, int hk, int64_t T, int d, double r) {
  RankReport rep;
  rep.tokens = T;
  rep.model_type = "gated_deltanet";
  rep.curve.assign(T, 0.f);
  for (int l = 0; l < layers; ++l) {
    LayerRank L;
    L.layer = l;
    L.dk = L.dv = d;
    L.num_key_heads = hk;
    for (int h = 0; h < hv; ++h) {
      HeadRank hr;
      hr.key_head = h / (hv / hk);
      for (int64_t t = 0; t < T; ++t) hr.u.push_back(0.3f * static_cast<float>(t) / T);
      hr.mean = 0.15, hr.max = 0.3;
      for (int i = 0; i < d; ++i) hr.spectrum.push_back(std::pow(r, i));
      L.heads.push_back(hr);
    }
    L.mean = 0.15;
    rep.layers.push_back(L);
  }
  for (int64_t t = 0; t < T; ++t) rep.curve[t] = 0.3f * static_cast<float>(t) / T;
  rep.mean_u = 0.15;
  return rep;
}

double attr(const std::string& svg, const std::string& name) {
  std::smatch m;
  EXPECT_TRUE(std::regex_search(svg, m, std::regex("<svg[^>]* " + name + "=\"([0-9.]+)\""))) << name;
  return std::stod(m[1]);
}

/// Every <text x=".." [text-anchor=".."]>label</text> (not rotated) must lie inside [0, width] at 0.6 em per glyph of
/// its font size (the SVG's own estimate; rsvg's sans-serif averages ~0.55 em, so this is the tighter side).
void expect_text_inside(const std::string& svg, const std::string& what) {
  const double W = attr(svg, "width");
  const std::regex text(R"re(<text x="([-0-9.]+)" y="[-0-9.]+"([^>]*)>([^<]*)</text>)re");
  int n = 0;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), text); it != std::sregex_iterator(); ++it, ++n) {
    const double x = std::stod((*it)[1]);
    const std::string attrs = (*it)[2], label = (*it)[3];
    double size = 12;
    std::smatch fs;
    if (std::regex_search(attrs, fs, std::regex(R"re(font-size="([0-9.]+)")re"))) size = std::stod(fs[1]);
    size_t glyphs = 0;
    for (unsigned char c : label) glyphs += (c & 0xC0) != 0x80;
    const double w = 0.6 * size * glyphs;
    double left = x, right = x + w;
    if (attrs.find("text-anchor=\"middle\"") != std::string::npos) left = x - w / 2, right = x + w / 2;
    if (attrs.find("text-anchor=\"end\"") != std::string::npos) left = x - w, right = x;
    EXPECT_GE(left, 0.0) << what << ": '" << label << "' starts outside the canvas";
    EXPECT_LE(right, W) << what << ": '" << label << "' ends at " << right << " > width " << W;
  }
  EXPECT_GT(n, 5) << what;
}

}  // namespace

TEST(Plot_Ticks, roundValuesThatEndOnTheAxis) {
  EXPECT_EQ(nice_ticks(0, 2048), (std::vector<double>{0, 512, 1024, 1536, 2048}));
  EXPECT_EQ(nice_ticks(0, 256), (std::vector<double>{0, 64, 128, 192, 256}));
  EXPECT_EQ(nice_ticks(0, 200), (std::vector<double>{0, 50, 100, 150, 200}));
  EXPECT_EQ(nice_ticks(0, 1000), (std::vector<double>{0, 200, 400, 600, 800, 1000}));
  EXPECT_EQ(nice_ticks(0, 8000), (std::vector<double>{0, 2000, 4000, 6000, 8000}));
  EXPECT_EQ(nice_ticks(0, 64, 4), (std::vector<double>{0, 16, 32, 48, 64}));
  // not a round end: decimal steps, covering the end
  const auto t257 = nice_ticks(0, 257);
  EXPECT_EQ(t257.front(), 0);
  EXPECT_DOUBLE_EQ(t257[1], 50);
  EXPECT_GE(t257.back(), 257);
  const auto u = nice_ticks(0, 0.33);
  ASSERT_GE(u.size(), 4u);
  EXPECT_NEAR(u[1], 0.05, 1e-12);
  EXPECT_NEAR(u.back(), 0.35, 1e-12);
}

TEST(Plot_Names, titlesUseTheFolderName) {
  EXPECT_EQ(plot_name("/very/long/absolute/path/to/runs/half"), "half");
  EXPECT_EQ(plot_name("runs/half/"), "half");
  EXPECT_EQ(plot_name("half"), "half");
  EXPECT_FALSE(plot_name(".").empty());
  EXPECT_NE(plot_name("."), ".");
  const RankReport r = synthetic(2, 4, 4, 2048, 8, 0.5);
  const std::string s = svg_u_curves(r, {"half", ""});
  EXPECT_NE(s.find(">half: rank utilization u(t)<"), std::string::npos);
  EXPECT_NE(s.find("2048 tokens, ungated delta state"), std::string::npos);
}

// STATECUT_PLOT_DIR=<folder> also writes every plot there, to look at (rsvg-convert x.svg -o x.png).
TEST(Plot_Layout, everyLabelInsideTheCanvas) {
  const char* dump = std::getenv("STATECUT_PLOT_DIR");
  int n = 0;
  for (const std::string name : {std::string("half"), std::string(200, 'x')}) {
    for (const RankReport& r : {synthetic(4, 4, 4, 2048, 64, 0.8), synthetic(24, 4, 2, 257, 32, 0.5),
                                synthetic(1, 16, 16, 100, 16, 0.9)}) {
      const PlotLabels labels{name, "base"};
      const std::string plots[] = {svg_u_curves(r, labels), svg_heatmap(r, labels), svg_spectra(r, &r, labels)};
      const char* kinds[] = {"u_curves", "heatmap", "spectra"};
      for (int k = 0; k < 3; ++k) {
        expect_text_inside(plots[k], std::string(kinds[k]) + " " + name.substr(0, 8));
        if (dump) std::ofstream(std::string(dump) + "/" + kinds[k] + "_" + std::to_string(n) + ".svg") << plots[k];
      }
      ++n;
    }
  }
}

TEST(Plot_UCurves, positionTicksAreRound) {
  const std::string s = svg_u_curves(synthetic(2, 4, 4, 2048, 8, 0.5), {"m", ""});
  for (const char* t : {">512<", ">1024<", ">1536<", ">2048<"}) EXPECT_NE(s.find(t), std::string::npos) << t;
  for (const char* t : {">511<", ">1023<", ">1535<", ">2047<"}) EXPECT_EQ(s.find(t), std::string::npos) << t;
  EXPECT_NE(s.find(">all layers (mean 0.150)<"), std::string::npos);
}

TEST(Plot_Spectra, headLegendTicksAndARangeFromTheData) {
  // spectra 1 .. 0.5^7 = 7.8e-3: the axis reaches 1e-3, not 1e-6
  const std::string s = svg_spectra(synthetic(2, 4, 4, 100, 8, 0.5), nullptr, {"m", ""});
  for (int h = 0; h < 4; ++h) EXPECT_NE(s.find(">head " + std::to_string(h) + "<"), std::string::npos) << h;
  EXPECT_NE(s.find(">1e-3<"), std::string::npos) << s;
  EXPECT_EQ(s.find(">1e-4<"), std::string::npos);
  EXPECT_EQ(s.find(">1e-6<"), std::string::npos);
  EXPECT_NE(s.find(">index i<"), std::string::npos);
  for (const char* t : {">1<", ">2<", ">4<", ">6<", ">8<"}) EXPECT_NE(s.find(t), std::string::npos) << t;
  // a deep spectrum (0.6^63 = 1e-14) gets a deep axis, labelled every 3 decades down to one below the data
  const std::string deep = svg_spectra(synthetic(1, 2, 2, 100, 64, 0.6), nullptr, {"m", ""});
  EXPECT_NE(deep.find(">1e-15<"), std::string::npos);
  EXPECT_NE(deep.find(">1e-3<"), std::string::npos);
  // the baseline is drawn dashed and named
  const std::string b = svg_spectra(synthetic(1, 2, 2, 100, 8, 0.5), nullptr, {"m", ""});
  const RankReport base = synthetic(1, 2, 2, 100, 16, 0.5);
  const std::string withb = svg_spectra(synthetic(1, 2, 2, 100, 8, 0.5), &base, {"m", "unpruned"});
  EXPECT_NE(withb.find("stroke-dasharray"), std::string::npos);
  EXPECT_NE(withb.find(">before pruning: unpruned<"), std::string::npos);
  EXPECT_EQ(b.find("stroke-dasharray"), std::string::npos);
}

TEST(Plot_GroupedValues, valueHeadsNameTheirKeyHead) {
  const RankReport gva = synthetic(2, 4, 2, 100, 8, 0.5);
  const std::string spectra = svg_spectra(gva, nullptr, {"qwen", ""});
  EXPECT_NE(spectra.find(">head 3 (key 1)<"), std::string::npos);
  EXPECT_NE(spectra.find(">head 0 (key 0)<"), std::string::npos);
  const std::string heat = svg_heatmap(gva, {"qwen", ""});
  EXPECT_NE(heat.find(">key 1<"), std::string::npos);
  EXPECT_NE(heat.find("head 2 (key head 1)"), std::string::npos);
  // without grouped values no key labels
  const RankReport plain = synthetic(2, 4, 4, 100, 8, 0.5);
  EXPECT_EQ(svg_spectra(plain, nullptr, {"m", ""}).find("(key "), std::string::npos);
  EXPECT_EQ(svg_heatmap(plain, {"m", ""}).find(">key "), std::string::npos);
}

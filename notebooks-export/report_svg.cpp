// The report's inline-SVG figures (see report_svg.hpp): heatmaps with colour bars and line charts, drawn
// as text so the page needs no script or network to show them.
#include "report_svg.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace vocablens::report_detail {

namespace {

// ---------------------------------------------------------------------------------------------------
// Colour maps

struct RGB {
  double r, g, b;
};

RGB lerp_stops(const RGB* stops, int n, double t) {
  if (!std::isfinite(t)) return {0.85, 0.85, 0.85};
  t = std::clamp(t, 0.0, 1.0) * (n - 1);
  int i = std::min(n - 2, static_cast<int>(t));
  double f = t - i;
  return {stops[i].r + f * (stops[i + 1].r - stops[i].r), stops[i].g + f * (stops[i + 1].g - stops[i].g),
          stops[i].b + f * (stops[i + 1].b - stops[i].b)};
}

// matplotlib's viridis, 11 stops.
constexpr RGB kViridis[] = {{0.267, 0.005, 0.329}, {0.283, 0.141, 0.458}, {0.254, 0.265, 0.530}, {0.207, 0.372, 0.553},
                            {0.164, 0.471, 0.558}, {0.128, 0.567, 0.551}, {0.135, 0.659, 0.518}, {0.267, 0.749, 0.441},
                            {0.478, 0.821, 0.318}, {0.741, 0.873, 0.150}, {0.993, 0.906, 0.144}};
// matplotlib's magma, 11 stops (for entropies: dark = confident).
constexpr RGB kMagma[] = {{0.001, 0.000, 0.014}, {0.078, 0.054, 0.211}, {0.232, 0.060, 0.438}, {0.390, 0.100, 0.502},
                          {0.550, 0.161, 0.506}, {0.716, 0.215, 0.475}, {0.868, 0.288, 0.409}, {0.967, 0.439, 0.360},
                          {0.994, 0.624, 0.427}, {0.997, 0.812, 0.573}, {0.987, 0.991, 0.750}};
// RdBu reversed (blue = negative, red = positive), 9 stops.
constexpr RGB kDiverging[] = {{0.020, 0.188, 0.380}, {0.129, 0.400, 0.675}, {0.263, 0.576, 0.765},
                              {0.573, 0.773, 0.871}, {0.969, 0.969, 0.969}, {0.957, 0.647, 0.510},
                              {0.839, 0.376, 0.302}, {0.698, 0.094, 0.169}, {0.404, 0.000, 0.122}};

RGB colour(Cmap m, double t) {
  switch (m) {
    case Cmap::Magma: return lerp_stops(kMagma, 11, t);
    case Cmap::Diverging: return lerp_stops(kDiverging, 9, t);
    default: return lerp_stops(kViridis, 11, t);
  }
}

std::string css(RGB c) {
  auto b = [](double x) { return static_cast<int>(std::lround(std::clamp(x, 0.0, 1.0) * 255)); };
  return fmt::format("#{:02x}{:02x}{:02x}", b(c.r), b(c.g), b(c.b));
}

bool is_dark(RGB c) { return 0.2126 * c.r + 0.7152 * c.g + 0.0722 * c.b < 0.5; }

const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                          "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

// ---------------------------------------------------------------------------------------------------
// Axis ticks

std::vector<double> nice_ticks(double lo, double hi, int want) {
  std::vector<double> t;
  if (!(hi > lo)) return {lo};
  double span = hi - lo, raw = span / want;
  double mag = std::pow(10, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  // Ticks by integer index k·step, not by repeated addition: near ±1e308 (found by fuzz_results) `v += step`
  // stopped advancing or the span overflowed, and the loop never ended. Such ranges get just their ends.
  const double k0 = std::ceil(lo / step), k1 = std::floor(hi / step + 1e-9);
  // (|k| < 2^52 so that consecutive indices are distinct doubles: a range far narrower than its magnitude,
  // e.g. [1e304, 1e304 + 1e290], has no such ticks.)
  if (!std::isfinite(step) || !(std::fabs(k0) < 0x1p52) || !(std::fabs(k1) < 0x1p52) || k1 - k0 > 4.0 * want + 4) return {lo, hi};
  for (int64_t i = 0; i <= static_cast<int64_t>(k1 - k0); ++i) {
    double v = (k0 + static_cast<double>(i)) * step;
    t.push_back(std::fabs(v) < step * 1e-9 ? 0 : v);
  }
  if (t.empty()) t = {lo, hi};
  return t;
}

// A tick label with just enough decimals to tell neighbouring ticks apart.
std::string tick_label(double v, double step) {
  if (v == 0) return "0";
  double a = std::fabs(v);
  if (a >= 1e6 || step < 1e-4) return fmt::format("{:.3g}", v);
  int d = std::max(0, static_cast<int>(std::ceil(-std::log10(step) - 1e-9)));
  double scaled = step * std::pow(10.0, d);
  if (std::fabs(scaled - std::round(scaled)) > 1e-6) ++d;
  return fmt::format("{:.{}f}", v, std::min(d, 8));
}

int g_gradient_id = 0;

}  // namespace

// ---------------------------------------------------------------------------------------------------
// Text helpers

std::string esc(std::string_view s) { return html_escape(s); }

std::string num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{}", static_cast<int64_t>(v));
  return fmt::format("{:.4g}", v);
}

// SVG coordinates: short, locale-free.
std::string co(double v) { return fmt::format("{:.1f}", v); }

// Token text with whitespace made visible (a leading space is the most common thing a token carries).
std::string visible(const std::string& t) {
  if (t.empty()) return "\xE2\x88\x85";  // ∅
  std::string o;
  for (char c : t) {
    if (c == ' ') o += "\xE2\x90\xA3";        // ␣
    else if (c == '\n') o += "\xE2\x86\xB5";  // ↵
    else if (c == '\t') o += "\xE2\x87\xA5";  // ⇥
    else if (c == '\r') o += "\xE2\x90\x8D";  // ␍
    else o.push_back(c);
  }
  return o;
}

// The first `n` code points of valid UTF-8 text, "…" appended when cut.
std::string clip(const std::string& s, size_t n) {
  std::string v = valid_utf8(s);
  size_t cps = 0, i = 0;
  while (i < v.size()) {
    if (cps == n) return v.substr(0, i) + "\xE2\x80\xA6";
    unsigned char c = static_cast<unsigned char>(v[i]);
    i += c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : 4;
    ++cps;
  }
  return v;
}

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (char c : s)
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
  return n;
}

// ---------------------------------------------------------------------------------------------------
// Arrays as grids

std::vector<int64_t> squeezed_shape(const NdArray& a) {
  std::vector<int64_t> s;
  for (auto d : a.shape)
    if (d != 1) s.push_back(d);
  return s;
}

bool as_grid(const NdArray& a, Grid& g, int64_t slice) {
  std::vector<int64_t> s = a.shape;
  while (s.size() > 2 && s.front() == 1) s.erase(s.begin());
  if (s.size() == 3 && slice >= 0 && slice < s[2]) {
    g.rows = s[0];
    g.cols = s[1];
    g.v.resize(static_cast<size_t>(g.rows * g.cols));
    for (int64_t i = 0; i < g.rows * g.cols; ++i) g.v[static_cast<size_t>(i)] = ndarray_value(a, i * s[2] + slice);
    return true;
  }
  if (s.size() != 2) return false;
  g.rows = s[0];
  g.cols = s[1];
  g.v.resize(static_cast<size_t>(g.rows * g.cols));
  for (int64_t i = 0; i < g.rows * g.cols; ++i) g.v[static_cast<size_t>(i)] = ndarray_value(a, i);
  return true;
}

std::vector<double> as_vector(const NdArray& a) {
  std::vector<double> v(static_cast<size_t>(a.numel()));
  for (int64_t i = 0; i < a.numel(); ++i) v[static_cast<size_t>(i)] = ndarray_value(a, i);
  return v;
}

Grid downsample(const Grid& g, int64_t max_r, int64_t max_c) {
  int64_t sr = std::max<int64_t>(1, (g.rows + max_r - 1) / max_r);
  int64_t sc = std::max<int64_t>(1, (g.cols + max_c - 1) / max_c);
  if (sr == 1 && sc == 1) return g;
  Grid o;
  o.rows = (g.rows + sr - 1) / sr;
  o.cols = (g.cols + sc - 1) / sc;
  o.row_step = sr;
  o.col_step = sc;
  o.v.assign(static_cast<size_t>(o.rows * o.cols), kNaN);
  for (int64_t i = 0; i < o.rows; ++i)
    for (int64_t j = 0; j < o.cols; ++j) {
      double s = 0;
      int64_t n = 0;
      for (int64_t a = i * sr; a < std::min(g.rows, (i + 1) * sr); ++a)
        for (int64_t b = j * sc; b < std::min(g.cols, (j + 1) * sc); ++b) {
          double x = g.at(a, b);
          if (std::isfinite(x)) {
            s += x;
            ++n;
          }
        }
      if (n) o.v[static_cast<size_t>(i * o.cols + j)] = s / static_cast<double>(n);
    }
  return o;
}

void finite_range(const std::vector<double>& v, double& lo, double& hi) {
  lo = std::numeric_limits<double>::infinity();
  hi = -lo;
  for (double x : v)
    if (std::isfinite(x)) {
      lo = std::min(lo, x);
      hi = std::max(hi, x);
    }
  if (!(lo <= hi)) lo = hi = 0;
}

// ---------------------------------------------------------------------------------------------------
// SVG figures

std::string svg_heatmap(const Heatmap& h) {
  const Grid& g = *h.grid;
  double lo = h.vmin, hi = h.vmax;
  if (std::isnan(lo) || std::isnan(hi)) {
    double a, b;
    finite_range(g.v, a, b);
    if (std::isnan(lo)) lo = a;
    if (std::isnan(hi)) hi = b;
    if (h.cmap == Cmap::Diverging) {
      double m = std::max(std::fabs(lo), std::fabs(hi));
      lo = -m;
      hi = m;
    }
  }
  if (!(hi > lo)) hi = lo + 1;
  auto label_of = [](const std::vector<std::string>& labels, int64_t i, int64_t step) {
    if (i < static_cast<int64_t>(labels.size()) && step == 1) return labels[static_cast<size_t>(i)];
    return step == 1 ? std::to_string(i) : std::to_string(i * step);
  };
  // Margins sized from the longest label (monospace ~7px per character at 11px).
  size_t max_row_label = 1;
  for (int64_t i = 0; i < g.rows; ++i)
    max_row_label = std::max(max_row_label, std::min<size_t>(15, code_points(visible(label_of(h.row_labels, i, g.row_step)))));
  bool rotate_cols = h.cell_w < 40;
  double left = 16 + 7.0 * static_cast<double>(max_row_label) + (h.row_axis.empty() ? 0 : 14);
  double top = rotate_cols ? 70 : 34;
  double W = left + static_cast<double>(g.cols * h.cell_w) + 20;
  double legend_y = top + static_cast<double>(g.rows * h.cell_h) + 16;
  double H = legend_y + 46;
  int gid = ++g_gradient_id;
  std::string s = fmt::format(
      "<svg class=\"heatmap\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "role=\"img\" aria-label=\"{}\">",
      co(std::max(W, 320.0)), co(H), co(std::max(W, 320.0)), co(H), esc(h.value_label + " heatmap"));
  // Column labels.
  int64_t col_every = rotate_cols ? (13 + h.cell_w - 1) / std::max(1, h.cell_w) : 1;
  for (int64_t j = 0; j < g.cols; j += col_every) {
    std::string lab = label_of(h.col_labels, j, g.col_step);
    double x = left + (static_cast<double>(j) + 0.5) * h.cell_w;
    if (rotate_cols)
      s += fmt::format("<text class=\"lab\" x=\"{}\" y=\"{}\" transform=\"rotate(-55 {} {})\"><title>{}</title>{}</text>",
                       co(x + 3), co(top - 4), co(x + 3), co(top - 4), esc(lab), esc(clip(visible(lab), 10)));
    else
      s += fmt::format("<text class=\"lab\" x=\"{}\" y=\"{}\" text-anchor=\"middle\"><title>{}</title>{}</text>", co(x),
                       co(top - 6), esc(lab), esc(clip(visible(lab), static_cast<size_t>(std::max(2, h.cell_w / 7)))));
  }
  if (!h.col_axis.empty()) s += fmt::format("<text class=\"axis\" x=\"{}\" y=\"12\">{}</text>", co(left), esc(h.col_axis));
  // Row labels.
  int64_t row_every = (12 + h.cell_h - 1) / std::max(1, h.cell_h);
  for (int64_t i = 0; i < g.rows; i += row_every) {
    std::string lab = label_of(h.row_labels, i, g.row_step);
    s += fmt::format("<text class=\"lab\" x=\"{}\" y=\"{}\" text-anchor=\"end\"><title>{}</title>{}</text>", co(left - 5),
                     co(top + (static_cast<double>(i) + 0.5) * h.cell_h + 4), esc(lab), esc(clip(visible(lab), 14)));
  }
  if (!h.row_axis.empty())
    s += fmt::format("<text class=\"axis\" transform=\"rotate(-90 10 {})\" x=\"10\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                     co(top + g.rows * h.cell_h / 2.0), co(top + g.rows * h.cell_h / 2.0), esc(h.row_axis));
  // Cells.
  size_t max_chars = static_cast<size_t>(std::max(1, (h.cell_w - 4) / 7));
  bool tips = g.rows * g.cols <= 40000;
  for (int64_t i = 0; i < g.rows; ++i)
    for (int64_t j = 0; j < g.cols; ++j) {
      double v = g.at(i, j);
      RGB c = colour(h.cmap, (v - lo) / (hi - lo));
      double x = left + static_cast<double>(j * h.cell_w), y = top + static_cast<double>(i * h.cell_h);
      std::string tip;
      if (tips) {
        tip = h.tooltip ? h.tooltip(i, j)
                        : fmt::format("{} {}, {} {}: {}", h.row_axis.empty() ? "row" : h.row_axis,
                                      label_of(h.row_labels, i, g.row_step), h.col_axis.empty() ? "column" : h.col_axis,
                                      label_of(h.col_labels, j, g.col_step), num(v));
      }
      s += "<g class=\"cell\">";
      s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"/>", co(x), co(y), h.cell_w, h.cell_h,
                       css(c));
      if (h.cell_text) {
        std::string t = h.cell_text(i, j);
        if (!t.empty())
          s += fmt::format("<text class=\"{}\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                           is_dark(c) ? "ondark" : "onlight", co(x + h.cell_w / 2.0), co(y + h.cell_h / 2.0 + 4),
                           esc(clip(visible(t), max_chars)));
      }
      if (tips) s += "<title>" + esc(tip) + "</title>";
      s += "</g>";
    }
  // Colour bar.
  double bar_w = std::min(240.0, std::max(120.0, W - left - 40));
  s += fmt::format("<defs><linearGradient id=\"grad{}\" x1=\"0\" x2=\"1\" y1=\"0\" y2=\"0\">", gid);
  for (int k = 0; k <= 10; ++k)
    s += fmt::format("<stop offset=\"{}\" stop-color=\"{}\"/>", k / 10.0, css(colour(h.cmap, k / 10.0)));
  s += "</linearGradient></defs>";
  s += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"10\" fill=\"url(#grad{})\" stroke=\"#999\" stroke-width=\"0.5\"/>", co(left),
      co(legend_y), co(bar_w), gid);
  s += fmt::format("<text class=\"lab\" x=\"{}\" y=\"{}\">{}</text>", co(left), co(legend_y + 24), esc(num(lo)));
  s += fmt::format("<text class=\"lab\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>", co(left + bar_w), co(legend_y + 24),
                   esc(num(hi)));
  s += fmt::format("<text class=\"lab\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>", co(left + bar_w / 2),
                   co(legend_y + 38), esc(h.value_label));
  s += "</svg>";
  return s;
}

std::string svg_line_chart(const LineChart& c) {
  const double W = 640, H = 280, L = 62, R = 16, T = 14 + 16.0 * std::ceil(c.series.size() / 3.0), B = 44;
  size_t n = 0;
  for (const auto& s : c.series) n = std::max(n, s.y.size());
  std::vector<double> all;
  for (const auto& s : c.series)
    for (double v : s.y)
      if (std::isfinite(v) && (!c.log_y || v > 0)) all.push_back(c.log_y ? std::log10(v) : v);
  double lo, hi;
  finite_range(all, lo, hi);
  if (!std::isnan(c.y_min)) lo = c.log_y ? std::log10(c.y_min) : c.y_min;
  if (!std::isnan(c.y_max)) hi = c.log_y ? std::log10(c.y_max) : c.y_max;
  if (!(hi > lo)) {
    hi = lo + (lo == 0 ? 1 : std::fabs(lo) * 0.1);
    lo = lo - (hi - lo);
  } else if (std::isnan(c.y_min) && std::isnan(c.y_max) && !c.log_y) {
    double pad = (hi - lo) * 0.05;
    hi += pad;
    if (lo != 0) lo -= pad;
  }
  double pw = W - L - R, ph = H - T - B;
  auto X = [&](size_t i) { return L + (n <= 1 ? pw / 2 : pw * static_cast<double>(i) / static_cast<double>(n - 1)); };
  auto Y = [&](double v) { return T + ph * (1 - (v - lo) / (hi - lo)); };
  std::string s = fmt::format(
      "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"{}\">", W, H,
      esc(c.y_label));
  // Grid and y ticks.
  std::vector<double> ticks;
  if (c.log_y) {
    for (double e = std::ceil(lo); e <= std::floor(hi) + 1e-9; e += std::max(1.0, std::floor((hi - lo) / 6))) ticks.push_back(e);
    if (ticks.size() < 2) ticks = nice_ticks(lo, hi, 4);
  } else {
    ticks = nice_ticks(lo, hi, 5);
  }
  for (double t : ticks) {
    double y = Y(t);
    s += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" class=\"grid\"/>", co(L), co(W - R), co(y), co(y));
    double step = ticks.size() > 1 ? ticks[1] - ticks[0] : std::fabs(t) + 1;
    std::string lab = c.log_y ? (std::fabs(t - std::round(t)) < 1e-9 ? fmt::format("1e{}", static_cast<int>(std::round(t)))
                                                                     : num(std::pow(10, t)))
                              : tick_label(t, step);
    s += fmt::format("<text class=\"lab\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>", co(L - 5), co(y + 4), esc(lab));
  }
  // x ticks.
  size_t every = std::max<size_t>(1, n / 10);
  for (size_t i = 0; i < n; i += every) {
    std::string lab = i < c.x_labels.size() ? c.x_labels[i] : num(c.x0 + static_cast<double>(i));
    s += fmt::format("<text class=\"lab\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>", co(X(i)), co(H - B + 16),
                     esc(clip(lab, 8)));
  }
  s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" class=\"frame\"/>", co(L), co(T), co(pw), co(ph));
  if (!c.x_label.empty())
    s += fmt::format("<text class=\"axis\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>", co(L + pw / 2), co(H - 6),
                     esc(c.x_label));
  if (!c.y_label.empty())
    s += fmt::format("<text class=\"axis\" transform=\"rotate(-90 13 {})\" x=\"13\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                     co(T + ph / 2), co(T + ph / 2), esc(clip(c.y_label, 40)));
  // Series.
  for (size_t k = 0; k < c.series.size(); ++k) {
    const auto& se = c.series[k];
    const char* col = kPalette[k % 10];
    std::string d;
    bool pen = false;
    for (size_t i = 0; i < se.y.size(); ++i) {
      double v = se.y[i];
      bool ok = std::isfinite(v) && (!c.log_y || v > 0);
      if (!ok) {
        pen = false;
        continue;
      }
      double yv = c.log_y ? std::log10(v) : v;
      d += fmt::format("{}{} {} ", pen ? "L" : "M", co(X(i)), co(Y(std::clamp(yv, lo, hi))));
      pen = true;
    }
    if (!d.empty()) s += fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.8\"/>", d, col);
    if (c.points && se.y.size() <= 120)
      for (size_t i = 0; i < se.y.size(); ++i) {
        double v = se.y[i];
        if (!std::isfinite(v) || (c.log_y && v <= 0)) continue;
        double yv = c.log_y ? std::log10(v) : v;
        std::string xl = i < c.x_labels.size() ? c.x_labels[i] : num(c.x0 + static_cast<double>(i));
        s += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"3\" fill=\"{}\"><title>{}</title></circle>", co(X(i)),
                         co(Y(std::clamp(yv, lo, hi))), col,
                         esc(se.name + " @ " + (c.x_label.empty() ? "x" : c.x_label) + " " + xl + ": " + num(v)));
      }
    // Legend (three per row).
    double lx = L + static_cast<double>(k % 3) * (pw / 3), ly = 12 + 16.0 * static_cast<double>(k / 3);
    s += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"3\"/>", co(lx), co(lx + 16),
                     co(ly - 4), co(ly - 4), col);
    s += fmt::format("<text class=\"lab\" x=\"{}\" y=\"{}\">{}</text>", co(lx + 20), co(ly), esc(clip(se.name, 30)));
  }
  s += "</svg>";
  return s;
}

void reset_figure_ids() { g_gradient_id = 0; }

}  // namespace vocablens::report_detail

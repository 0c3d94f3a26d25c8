// notebooks-export/report_svg.hpp — private to the HTML report: the inline-SVG figures (heatmap, line
// chart) and the text helpers they share with the page assembly in report_html.cpp.
//
// Not a public header (it lives beside its two .cpp files, not under include/): the report's only public
// surface is vocablens/report.hpp. Every string argument is raw text; the builders escape it themselves.
//
//   report_detail::Grid g;
//   if (report_detail::as_grid(result.arrays.at("entropy"), g)) {
//     report_detail::Heatmap h;
//     h.grid = &g;
//     h.cmap = report_detail::Cmap::Magma;
//     std::string svg = report_detail::svg_heatmap(h);   // "<svg ...>...</svg>", self-contained
//   }
#pragma once
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "vocablens/report.hpp"

namespace vocablens::report_detail {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// ---- Text helpers (all return valid UTF-8; esc() is the only one whose output is HTML-safe) ----------

/// html_escape().
std::string esc(std::string_view s);
/// A number for display: integers without decimals, otherwise 4 significant digits; "nan", "inf", "-inf".
std::string num(double v);
/// An SVG coordinate: one decimal, locale-free.
std::string co(double v);
/// Token text with whitespace made visible (␣ ↵ ⇥ ␍; the empty token shows as ∅).
std::string visible(const std::string& t);
/// The first `n` code points of `s` (made valid UTF-8), "…" appended when cut.
std::string clip(const std::string& s, size_t n);
/// Number of code points in UTF-8 text.
size_t code_points(const std::string& s);

// ---- Arrays as grids ---------------------------------------------------------------------------------

/// A dense row-major matrix of doubles, possibly a block-mean downsample of a larger one.
struct Grid {
  int64_t rows = 0, cols = 0;
  std::vector<double> v;
  int64_t row_step = 1, col_step = 1;  ///< > 1 when downsampled (block means)
  double at(int64_t i, int64_t j) const { return v[static_cast<size_t>(i * cols + j)]; }
};

/// The shape without its length-1 axes.
std::vector<int64_t> squeezed_shape(const NdArray& a);
/// 2-D view of an array: [R, C] directly, [1, R, C] squeezed, [R, C, k] slice `slice` of the last axis.
/// Returns false (g untouched) for any other shape.
bool as_grid(const NdArray& a, Grid& g, int64_t slice = -1);
/// Every element as a double, in storage order.
std::vector<double> as_vector(const NdArray& a);
/// Block means so that the grid has at most max_r x max_c cells (NaN ignored); g itself when it fits.
Grid downsample(const Grid& g, int64_t max_r, int64_t max_c);
/// Smallest and largest finite value of v; both 0 when there is none.
void finite_range(const std::vector<double>& v, double& lo, double& hi);

// ---- Figures -----------------------------------------------------------------------------------------

/// Colour maps: matplotlib's viridis, magma (dark = small, for entropies), RdBu reversed (symmetric range).
enum class Cmap { Viridis, Magma, Diverging };

struct Heatmap {
  const Grid* grid = nullptr;                              ///< required; must outlive the call
  std::vector<std::string> row_labels, col_labels;         ///< raw text; empty = indices
  std::function<std::string(int64_t, int64_t)> cell_text;  ///< raw; may be empty
  std::function<std::string(int64_t, int64_t)> tooltip;    ///< raw; may be empty
  Cmap cmap = Cmap::Viridis;
  double vmin = kNaN, vmax = kNaN;  ///< NaN: from the data (symmetric about 0 for Diverging)
  std::string value_label = "value";
  int cell_w = 14, cell_h = 14;
  std::string row_axis, col_axis;
};

/// One <svg> element: cells, row/column labels, per-cell tooltips (up to 40 000 cells), a colour bar.
/// Each call uses a fresh gradient id; reset_figure_ids() starts them again for a new page.
std::string svg_heatmap(const Heatmap& h);

struct Series {
  std::string name;
  std::vector<double> y;  ///< non-finite values (and values <= 0 on a log axis) leave a gap
};

struct LineChart {
  std::vector<Series> series;
  std::vector<std::string> x_labels;  ///< one per point (optional; indices otherwise)
  double x0 = 0;                      ///< x of the first point when there are no labels
  std::string x_label, y_label;
  bool log_y = false;
  bool points = true;                 ///< circles with tooltips (series of up to 120 points)
  double y_min = kNaN, y_max = kNaN;  ///< fixed range (NaN: from the data)
};

/// One <svg> element, 640x280 user units: grid, ticks, one path per series, a legend of three per row.
std::string svg_line_chart(const LineChart& c);

/// Restarts the gradient ids that svg_heatmap() allocates (ids must be unique within one page only).
void reset_figure_ids();

}  // namespace vocablens::report_detail

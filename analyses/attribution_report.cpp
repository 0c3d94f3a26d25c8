// Direct logit attribution in the report (a bar chart of the largest parts, the layer x head grid) and
// notebook. Its entry in the registry of result kinds (vocablens/result_kinds.hpp).
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "notebooks-export/report_blocks.hpp"
#include "vocablens/result_kinds.hpp"

namespace vocablens::kinds {
namespace {

using namespace report_detail;  // NOLINT: the report's building blocks and figures

// Horizontal bars, largest |value| first: green for parts that raise the logit (difference), red for parts
// that lower it.
std::string svg_bars(const std::vector<std::pair<std::string, double>>& parts) {
  double mx = 0;
  for (const auto& p : parts)
    if (std::isfinite(p.second)) mx = std::max(mx, std::fabs(p.second));
  if (mx == 0) mx = 1;
  const double label_w = 120, bar_w = 320, row_h = 16, W = label_w + 2 * bar_w + 70;
  const double H = row_h * static_cast<double>(parts.size()) + 10, mid = label_w + bar_w;
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + co(W) + "\" height=\"" + co(H) +
                  "\" font-family=\"sans-serif\" font-size=\"11\">";
  s += "<line x1=\"" + co(mid) + "\" y1=\"0\" x2=\"" + co(mid) + "\" y2=\"" + co(H) + "\" stroke=\"#888\"/>";
  for (size_t i = 0; i < parts.size(); ++i) {
    const double v = std::isfinite(parts[i].second) ? parts[i].second : 0.0;
    const double y = 5 + row_h * static_cast<double>(i), w = std::fabs(v) / mx * bar_w;
    const double x = v >= 0 ? mid : mid - w;
    s += "<text x=\"" + co(label_w - 6) + "\" y=\"" + co(y + row_h - 4) + "\" text-anchor=\"end\">" +
         esc(clip(parts[i].first, 18)) + "</text>";
    s += "<rect x=\"" + co(x) + "\" y=\"" + co(y + 2) + "\" width=\"" + co(w) + "\" height=\"" + co(row_h - 4) + "\" fill=\"" +
         (v >= 0 ? "#2a9d5c" : "#c0392b") + "\"><title>" + esc(parts[i].first) + ": " + esc(num(parts[i].second)) +
         "</title></rect>";
    s += "<text x=\"" + co(v >= 0 ? mid + w + 4 : mid + 4) + "\" y=\"" + co(y + row_h - 4) + "\">" + esc(num(v)) + "</text>";
  }
  return s + "</svg>";
}

void render_attribution(Section& sec) {
  if (const Table* t = sec.table({"components"})) {
    const int ni = column_index(*t, {"name"}), vi = column_index(*t, {"value"});
    if (ni >= 0 && vi >= 0) {
      std::vector<std::pair<std::string, double>> parts;
      for (const auto& row : t->rows) {
        const auto& v = row[static_cast<size_t>(vi)];
        parts.push_back({cell_string(row[static_cast<size_t>(ni)]), v.is_number() ? v.get<double>() : kNaN});
      }
      std::stable_sort(parts.begin(), parts.end(),
                       [](const auto& a, const auto& b) { return std::fabs(a.second) > std::fabs(b.second); });
      const size_t shown = std::min<size_t>(parts.size(), 30);
      parts.resize(shown);
      std::string caption = "the parts sum to the model's own value";
      if (const json* mv = find_key(sec.r.summary, {"model_value"})) caption += " " + cell_string(*mv);
      if (const json* ck = find_key(sec.r.summary, {"check"})) caption += " (|sum − model| = " + cell_string(*ck) + ")";
      sec.html += figure("Direct logit attribution: the " + std::to_string(shown) + " largest parts", svg_bars(parts), caption);
      sec.used_tables.insert("components");  // every part is in the run directory's CSV
    }
  }
  if (const NdArray* a = sec.array({"heads"})) {
    Grid g;
    if (as_grid(*a, g)) {
      std::vector<std::string> rows, cols;
      for (int64_t l = 0; l < g.rows; ++l) rows.push_back(std::to_string(l));
      for (int64_t h = 0; h < g.cols; ++h) cols.push_back("H" + std::to_string(h));
      double lo, hi;
      finite_range(g.v, lo, hi);
      const double lim = std::max(std::fabs(lo), std::fabs(hi));
      sec.html += array_heatmap(sec, "heads", g, Cmap::Diverging, "each head's direct contribution", rows, cols,
                                lim > 0 ? -lim : kNaN, lim > 0 ? lim : kNaN, "layer", "head");
      sec.use(a);
    }
  }
}

const char* kAttributionNotebook = R"PY(comp = r["tables"]["components"]
top = comp.reindex(comp["value"].abs().sort_values(ascending=False).index).head(30)
fig, axes = plt.subplots(1, 2, figsize=(15, max(4, 0.25 * len(top) + 1)))
axes[0].barh(top["name"][::-1], top["value"][::-1], color=["#2a9d5c" if v >= 0 else "#c0392b" for v in top["value"][::-1]])
axes[0].axvline(0, color="#888", lw=0.8)
axes[0].set_title(f"direct logit attribution (model {S.get('model_value', float('nan')):.4f}, "
                  f"sum of parts {S.get('sum', float('nan')):.4f})")
m = as_grid(A["heads"])
heatmap(axes[1], m, rows=[str(i) for i in range(m.shape[0])], cols=[f"H{j}" for j in range(m.shape[1])], cmap="RdBu_r")
axes[1].set_title("each head's direct contribution")
axes[1].set_xlabel("head")
axes[1].set_ylabel("layer")
fig.tight_layout()
plt.show()
show_generic(r, skip={"heads"})
)PY";

}  // namespace

void register_attribution_report(ResultKinds& k) {
  k.add({"logit_attribution",
         "Direct logit attribution",
         12,
         "Direct logit attribution",
         render_attribution,
         kAttributionNotebook,
         nullptr,
         {{"heads", "L H"}, {"mlps", "L"}}});
}

}  // namespace vocablens::kinds

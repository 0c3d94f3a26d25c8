// Two logit-lens runs compared (`vocablens compare`) in the report: both target-probability heatmaps side by
// side, then the difference heatmaps (Δ target probability, Δ rank, KL between the two lenses) and the notebook
// cell that redraws them. Its entry in the registry of result kinds (vocablens/result_kinds.hpp).
#include <cmath>
#include <string>
#include <vector>

#include "notebooks-export/report_blocks.hpp"
#include "vocablens/result_kinds.hpp"

namespace vocablens::kinds {
namespace {

using namespace report_detail;  // NOLINT: the report's building blocks and figures

struct Panel {
  const char* array;
  const char* title;
  const char* label;
  Cmap cmap;
  double vmin, vmax;
  const char* rank;  ///< array whose values are the cell text ("" none)
};

void render_compare(Section& sec) {
  const Result& r = sec.r;
  auto pa = r.arrays.find("prob_a");
  if (pa == r.arrays.end() || pa->second.shape.size() != 2) return;
  const int64_t n = pa->second.shape[0], T = pa->second.shape[1];
  std::vector<std::string> rows = string_list(find_key(r.summary, {"layers"}));
  std::vector<std::string> rows_b = string_list(find_key(r.summary, {"layers_b"}));
  std::vector<std::string> ta = string_list(find_key(r.summary, {"tokens_a"}));
  std::vector<std::string> tb = string_list(find_key(r.summary, {"tokens_b"}));
  if (static_cast<int64_t>(rows.size()) != n) rows = layer_labels(r, n);
  std::vector<std::string> cols;
  for (int64_t t = 0; t < T; ++t) {
    const std::string x = t < static_cast<int64_t>(ta.size()) ? ta[static_cast<size_t>(t)] : std::to_string(t);
    const std::string y = t < static_cast<int64_t>(tb.size()) ? tb[static_cast<size_t>(t)] : x;
    cols.push_back(x == y ? x : x + " | " + y);
  }
  auto run_name = [&](const char* key) {
    const json* j = find_key(r.summary, {key});
    std::string s = j && j->is_object() && j->contains("run") && (*j)["run"].is_string() ? (*j)["run"].get<std::string>() : key;
    return s;
  };
  const std::string A = run_name("a"), B = run_name("b");
  const bool small = n * T <= 4000;
  auto draw = [&](const Panel& p, const std::string& title) {
    auto it = r.arrays.find(p.array);
    if (it == r.arrays.end() || it->second.numel() != n * T) return std::string();
    Grid g;
    g.rows = n;
    g.cols = T;
    g.v = as_vector(it->second);
    std::vector<double> txt;
    if (*p.rank)
      if (auto rk = r.arrays.find(p.rank); rk != r.arrays.end() && rk->second.numel() == n * T) txt = as_vector(rk->second);
    Heatmap h;
    h.grid = &g;
    h.row_labels = rows;
    h.col_labels = cols;
    h.cmap = p.cmap;
    h.vmin = p.vmin;
    h.vmax = p.vmax;
    h.value_label = p.label;
    h.cell_w = small ? 44 : 12;
    h.cell_h = small ? 20 : 10;
    if (small && !txt.empty())
      h.cell_text = [&txt, T](int64_t i, int64_t j) {
        double x = txt[static_cast<size_t>(i * T + j)];
        return std::isfinite(x) && x > 0 ? "#" + num(x) : std::string();
      };
    h.tooltip = [&](int64_t i, int64_t j) {
      std::string s = "layer " + rows[static_cast<size_t>(i)];
      if (i < static_cast<int64_t>(rows_b.size()) && rows_b[static_cast<size_t>(i)] != rows[static_cast<size_t>(i)])
        s += " (B: " + rows_b[static_cast<size_t>(i)] + ")";
      s += ", position " + std::to_string(j) + " (" + visible(cols[static_cast<size_t>(j)]) + ")\n" + p.label + " " +
           num(g.v[static_cast<size_t>(i * T + j)]);
      return s;
    };
    h.row_axis = "layer";
    h.col_axis = "position (token A | token B)";
    sec.used_arrays.insert(p.array);
    return figure(title, svg_heatmap(h));
  };
  sec.html += "<div style=\"display:flex;flex-wrap:wrap;gap:1em\"><div>" +
              draw({"prob_a", "", "target probability", Cmap::Viridis, 0, 1, "rank_a"}, "A: " + A) + "</div><div>" +
              draw({"prob_b", "", "target probability", Cmap::Viridis, 0, 1, "rank_b"}, "B: " + B) + "</div></div>";
  sec.used_arrays.insert("rank_a");
  sec.used_arrays.insert("rank_b");
  sec.html += draw({"delta_prob", "", "Δ target probability (A − B)", Cmap::Diverging, -1, 1, ""}, "Δ target probability, A − B");
  sec.html += draw({"delta_rank", "", "Δ target rank (A − B)", Cmap::Diverging, kNaN, kNaN, ""}, "Δ target rank, A − B");
  if (r.arrays.count("kl_ab")) {
    sec.html += draw({"kl_ab", "", "KL(A‖B), nats", Cmap::Magma, 0, kNaN, ""}, "KL(A ‖ B) between the two lenses, nats");
    sec.html += draw({"kl_ba", "", "KL(B‖A), nats", Cmap::Magma, 0, kNaN, ""}, "KL(B ‖ A), nats");
  } else if (const json* k = find_key(r.summary, {"kl"}); k && k->is_string()) {
    sec.html += "<p>KL not shown: " + tok_html(k->get<std::string>()) + "</p>";
  }
}

const char* kCompareNotebook = R"PY(n, T = A["prob_a"].shape
rows = S.get("layers", [str(i) for i in range(n)])
cols = [a if a == b else a + " | " + b for a, b in zip(S.get("tokens_a", range(T)), S.get("tokens_b", range(T)))]
panels = [("prob_a", "A: " + S["a"]["run"], "viridis", 0, 1), ("prob_b", "B: " + S["b"]["run"], "viridis", 0, 1),
          ("delta_prob", "Δ target probability (A − B)", "RdBu_r", -1, 1)]
dr = np.nan_to_num(A["delta_rank"], nan=0.0)
m = max(1.0, float(np.abs(dr).max()))
panels.append(("delta_rank", "Δ target rank (A − B)", "RdBu_r", -m, m))
if "kl_ab" in A:
    panels += [("kl_ab", "KL(A‖B), nats", "magma", 0, None), ("kl_ba", "KL(B‖A), nats", "magma", 0, None)]
else:
    print("KL:", S.get("kl"))
fig, axes = plt.subplots(1, len(panels), figsize=(len(panels) * max(3.5, 0.45 * T + 1.5), max(2.5, 0.3 * n + 1.2)), squeeze=False)
for ax, (key, title, cmap, lo, hi) in zip(axes[0], panels):
    im = ax.imshow(A[key], aspect="auto", origin="lower", cmap=cmap, vmin=lo, vmax=hi)
    ax.set_xticks(range(T)); ax.set_xticklabels(cols, rotation=60, fontsize=7)
    ax.set_yticks(range(n)); ax.set_yticklabels(rows, fontsize=7)
    ax.set_title(title, fontsize=9)
    fig.colorbar(im, ax=ax)
plt.tight_layout(); plt.show()
show_generic(r, skip={"prob_a", "prob_b", "delta_prob", "rank_a", "rank_b", "delta_rank", "kl_ab", "kl_ba"})
)PY";

}  // namespace

void register_compare_report(ResultKinds& k) {
  k.add({"lens_compare",
         "Two logit-lens runs compared",
         16,
         "Two logit-lens runs compared",
         render_compare,
         kCompareNotebook,
         nullptr,
         {{"prob_a", "L T"},
          {"prob_b", "L T"},
          {"delta_prob", "L T"},
          {"rank_a", "L T"},
          {"rank_b", "L T"},
          {"delta_rank", "L T"},
          {"kl_ab", "L T"},
          {"kl_ba", "L T"}}});
}

}  // namespace vocablens::kinds

// Attention heads in the report (per-head score heatmaps, one per circuit kind) and notebook.
// Its entry in the registry of result kinds (vocablens/result_kinds.hpp): title, order, report figures, notebook cell.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "notebooks-export/report_blocks.hpp"
#include "notebooks-export/report_examples.hpp"
#include "vocablens/result_kinds.hpp"

namespace vocablens::kinds {
namespace {

using namespace report_detail;  // NOLINT: the report's building blocks and figures

// Attention heads: per-circuit scores (circuits table) as layer x head heatmaps, one per circuit kind, and
// each circuit's spectrum as a row labelled by layer, head and kind.
void render_heads(Section& sec) {
  const Table* c = sec.table({"circuits", "heads"});
  if (!c) return;
  int cl = column_index(*c, {"layer"}), ch = column_index(*c, {"head"}), ck = column_index(*c, {"kind", "circuit"});
  if (cl < 0 || ch < 0) return;
  std::set<int64_t> layer_set, head_set;
  std::vector<std::string> kinds;
  for (const auto& row : c->rows) {
    if (!row[static_cast<size_t>(cl)].is_number_integer() || !row[static_cast<size_t>(ch)].is_number_integer()) return;
    layer_set.insert(row[static_cast<size_t>(cl)].get<int64_t>());
    head_set.insert(row[static_cast<size_t>(ch)].get<int64_t>());
    std::string k = ck >= 0 ? cell_string(row[static_cast<size_t>(ck)]) : "";
    if (std::find(kinds.begin(), kinds.end(), k) == kinds.end()) kinds.push_back(k);
  }
  std::vector<int64_t> ls(layer_set.begin(), layer_set.end()), hs(head_set.begin(), head_set.end());
  if (ls.empty() || hs.empty()) return;
  std::vector<std::string> row_labels, col_labels;
  for (auto l : ls) row_labels.push_back(std::to_string(l));
  for (auto h : hs) col_labels.push_back(std::to_string(h));
  std::string figs;
  for (const char* metric : {"copying_score", "weight_copying_score", "score"}) {
    int cm = column_index(*c, {metric});
    if (cm < 0) continue;
    for (const auto& kind : kinds) {
      Grid g;
      g.rows = static_cast<int64_t>(ls.size());
      g.cols = static_cast<int64_t>(hs.size());
      g.v.assign(static_cast<size_t>(g.rows * g.cols), kNaN);
      bool any = false;
      for (const auto& row : c->rows) {
        if (ck >= 0 && cell_string(row[static_cast<size_t>(ck)]) != kind) continue;
        const json& v = row[static_cast<size_t>(cm)];
        if (!v.is_number()) continue;
        int64_t i = std::lower_bound(ls.begin(), ls.end(), row[static_cast<size_t>(cl)].get<int64_t>()) - ls.begin();
        int64_t j = std::lower_bound(hs.begin(), hs.end(), row[static_cast<size_t>(ch)].get<int64_t>()) - hs.begin();
        g.v[static_cast<size_t>(i * g.cols + j)] = v.get<double>();
        any = true;
      }
      if (!any) continue;
      double lo, hi;
      finite_range(g.v, lo, hi);
      bool unit = lo >= -1 && hi <= 1;
      Heatmap h;
      h.grid = &g;
      h.row_labels = row_labels;
      h.col_labels = col_labels;
      h.cmap = Cmap::Diverging;
      h.vmin = unit ? -1 : kNaN;
      h.vmax = unit ? 1 : kNaN;
      h.value_label = pretty_name(metric);
      h.cell_w = g.cols <= 24 ? 44 : 16;
      h.cell_h = g.rows <= 24 ? 22 : 12;
      h.row_axis = "layer";
      h.col_axis = "head";
      if (g.cols <= 24 && g.rows <= 24)
        h.cell_text = [&g](int64_t i, int64_t j) {
          return std::isfinite(g.at(i, j)) ? fmt::format("{:.2f}", g.at(i, j)) : std::string();
        };
      std::string title = (kind.empty() ? "" : kind + " ") + pretty_name(metric) + " per head";
      figs += "<div class=\"chartbox\">" + figure(title, svg_heatmap(h)) + "</div>";
    }
  }
  if (!figs.empty()) sec.html += "<div class=\"charts\">" + figs + "</div>";
  // Per-circuit spectra [circuits, d_head] (singular values, eigenvalues): one row per circuit, labelled by its
  // layer, head and kind (rows were labelled by circuit index), in the order of the circuits table.
  if (c->rows.size() > 0 && ck >= 0) {
    std::vector<std::string> circuit_labels;
    for (const auto& row : c->rows)
      circuit_labels.push_back(fmt::format("L{}H{}·{}", cell_string(row[static_cast<size_t>(cl)]),
                                           cell_string(row[static_cast<size_t>(ch)]), cell_string(row[static_cast<size_t>(ck)])));
    for (const char* n : {"singular_values", "eigenvalues_real", "eigenvalues_imag", "weight_singular_values",
                          "weight_eigenvalues_real", "weight_eigenvalues_imag"}) {
      const NdArray* a = sec.array({n});
      Grid g;
      if (!a || !as_grid(*a, g) || g.rows != static_cast<int64_t>(circuit_labels.size())) continue;
      std::vector<std::string> cols;
      for (int64_t j = 0; j < g.cols; ++j) cols.push_back(std::to_string(j));
      double lo, hi;
      finite_range(g.v, lo, hi);
      sec.html += array_heatmap(sec, n, g, lo < 0 && hi > 0 ? Cmap::Diverging : Cmap::Viridis, pretty_name(n), circuit_labels,
                                cols, kNaN, kNaN, "circuit (layer, head, kind)", "index (0-based)");
      sec.use(a);
    }
  }
  for (const char* n :
       {"circuit_index", "pair_ids", "pair_values", "per_token_ids", "per_token_values", "copying_score", "weight_copying_score"})
    if (sec.r.arrays.count(n)) sec.used_arrays.insert(n);
}

const char* kHeadsNotebook = R"PY(circuits = r["tables"].get("circuits")
if circuits is not None and {"layer", "head"} <= set(circuits.columns):
    kinds = list(circuits["kind"].unique()) if "kind" in circuits.columns else [None]
    for metric in [m for m in ("copying_score", "weight_copying_score") if m in circuits.columns]:
        fig, axes = plt.subplots(1, len(kinds), figsize=(5.5 * len(kinds), 4), squeeze=False)
        for ax, kind in zip(axes[0], kinds):
            sub = circuits if kind is None else circuits[circuits["kind"] == kind]
            grid = sub.pivot_table(index="layer", columns="head", values=metric, aggfunc="first")
            heatmap(ax, grid.values, list(grid.index), list(grid.columns), "RdBu_r", -1, 1)
            ax.set_xlabel("head")
            ax.set_ylabel("layer")
            ax.set_title(f"{kind or ''} {metric.replace('_', ' ')}")
        fig.tight_layout()
        plt.show()
show_generic(r, skip={"circuit_index", "pair_ids", "pair_values", "per_token_ids", "per_token_values",
                      "copying_score", "weight_copying_score"})
)PY";

// A synthetic result shaped like the analysis's own (for `vocablens report --example`).
Result heads_example(const ExampleInput&) {
  Result r;
  r.kind = "heads";
  r.settings = {{"layers", {0, 1, 2, 3}}, {"heads", json::array()}, {"kinds", {"ov", "qk"}}, {"top_k", 4}, {"inverse", "pinv"}};
  r.provenance = example_provenance("vocablens heads fixtures/gpt2-tiny --kind ov,qk -k 4 --out run");
  const int64_t L = 4, H = 4, k = 4;
  ExampleLcg rng{7};
  Table pairs{"pairs", {"layer", "head", "kind", "rank", "src_id", "src", "dst_id", "dst", "value"}, {}};
  Table circuits{"circuits", {"layer", "head", "kind", "copying_score", "weight_copying_score", "sigma_1", "frobenius"}, {}};
  std::vector<double> copy;
  for (const char* kind : {"ov", "qk"})
    for (int64_t l = 0; l < L; ++l)
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t q = 0; q < k; ++q) {
          size_t a = static_cast<size_t>((l * 5 + h * 3 + q) % kExampleVocab.size()),
                 b = static_cast<size_t>((l + h * 7 + q * 2) % kExampleVocab.size());
          pairs.rows.push_back({l, h, kind, q + 1, static_cast<int64_t>(a), kExampleVocab[a], static_cast<int64_t>(b),
                                kExampleVocab[b], 12.5 - q * 1.5 - rng.next()});
        }
        double c = rng.next() * 2 - 0.6;
        copy.push_back(c);
        circuits.rows.push_back({l, h, kind, c, c * 0.8, 10 + rng.next(), 20 + rng.next()});
      }
  r.tables.push_back(std::move(pairs));
  r.tables.push_back(std::move(circuits));
  r.arrays["copying_score"] = NdArray::f64({static_cast<int64_t>(copy.size())}, copy.data());
  r.summary = {{"vocab_size", static_cast<int64_t>(kExampleVocab.size())}, {"d_head", 16}};
  return r;
}

}  // namespace

void register_heads_report(ResultKinds& k) {
  k.add({"heads",
         "Attention heads in vocabulary space",
         4,
         "Attention heads",
         render_heads,
         kHeadsNotebook,
         heads_example,
         {{"circuit_index", "C 3"},
          {"pair_ids", "C K 2"},
          {"pair_values", "C K"},
          {"copying_score", "C"},
          {"weight_copying_score", "C"},
          {"singular_values", "C S"},
          {"eigenvalues_real", "C S"},
          {"eigenvalues_imag", "C S"},
          {"weight_singular_values", "C S"},
          {"weight_eigenvalues_real", "C S"},
          {"weight_eigenvalues_imag", "C S"},
          {"per_token_ids", "C N P"},
          {"per_token_values", "C N P"}}});
}

}  // namespace vocablens::kinds

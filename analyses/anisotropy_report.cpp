// Anisotropy in the report (cosine histogram, mean cosine after removing components) and notebook.
// Its entry in the registry of result kinds (vocablens/result_kinds.hpp): title, order, report figures, notebook cell.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "notebooks-export/report_blocks.hpp"
#include "notebooks-export/report_examples.hpp"
#include "vocablens/result_kinds.hpp"

namespace vocablens::kinds {
namespace {

using namespace report_detail;  // NOLINT: the report's building blocks and figures

void render_anisotropy(Section& sec) {
  // Histogram: "histogram"/"hist"/"counts" with "bin_edges"/"edges".
  const NdArray* h = sec.array({"cosine_histogram", "histogram", "hist", "counts"});
  const NdArray* e = sec.array({"bin_edges", "edges", "bins"});
  if (h && squeezed_shape(*h).size() == 1) {
    LineChart c;
    c.series = {{pretty_name("cosine histogram"), as_vector(*h)}};
    if (e && e->numel() == h->numel() + 1) {
      auto ev = as_vector(*e);
      for (int64_t i = 0; i < h->numel(); ++i)
        c.x_labels.push_back(num((ev[static_cast<size_t>(i)] + ev[static_cast<size_t>(i + 1)]) / 2));
      sec.use(e);
    }
    c.x_label = "cosine similarity";
    c.y_label = "count";
    sec.html += "<div class=\"charts\"><div class=\"chartbox\">" +
                figure("Distribution of pairwise cosines", svg_line_chart(c), "", false) + "</div></div>";
    sec.use(h);
  }
  // Mean cosine after removing the top principal components (rows with a numeric count).
  if (const Table* t = sec.table({"removed"})) {
    int cx = column_index(*t, {"removed_components"}), cy = column_index(*t, {"mean_cosine"});
    if (cx >= 0 && cy >= 0) {
      LineChart c;
      Series s{"mean cosine", {}};
      for (const auto& row : t->rows)
        if (row[static_cast<size_t>(cx)].is_number() && row[static_cast<size_t>(cy)].is_number()) {
          c.x_labels.push_back(num(row[static_cast<size_t>(cx)].get<double>()));
          s.y.push_back(row[static_cast<size_t>(cy)].get<double>());
        }
      if (s.y.size() >= 2) {
        c.series = {s};
        c.x_label = "top components removed";
        c.y_label = "mean cosine";
        sec.html += "<div class=\"charts\"><div class=\"chartbox\">" +
                    figure("Anisotropy after removing the top components", svg_line_chart(c), "", false) + "</div></div>";
      }
    }
  }
}

const char* kAnisotropyNotebook = R"PY(drawn = set()
h = next((A[n] for n in ("cosine_histogram", "histogram", "hist", "counts") if n in A), None)
if h is not None:
    edges = next((A[n] for n in ("bin_edges", "edges", "bins") if n in A), None)
    fig, ax = plt.subplots(figsize=(7, 3.2))
    if edges is not None and edges.size == h.size + 1:
        ax.stairs(h, edges, fill=True, alpha=0.6)
        ax.set_xlabel("cosine similarity")
    else:
        ax.plot(h)
    ax.set_title("Distribution of pairwise cosines")
    ax.grid(alpha=0.3)
    plt.show()
    drawn |= {"cosine_histogram", "histogram", "hist", "counts", "bin_edges", "edges", "bins"}
if "removed" in r["tables"]:
    df = r["tables"]["removed"]
    num = df[pd.to_numeric(df["removed_components"], errors="coerce").notna()]
    if len(num) >= 2:
        fig, ax = plt.subplots(figsize=(6, 3))
        ax.plot(pd.to_numeric(num["removed_components"]), num["mean_cosine"], marker="o")
        ax.set_xlabel("top components removed")
        ax.set_ylabel("mean cosine")
        ax.set_title("Anisotropy after removing the top components")
        ax.grid(alpha=0.3)
        plt.show()
print(json.dumps({k: v for k, v in S.items() if not isinstance(v, (list, dict))}, indent=1))
show_generic(r, skip=drawn)
)PY";

// A synthetic result shaped like the analysis's own (for `vocablens report --example`).
Result anisotropy_example(const ExampleInput&) {
  Result r;
  r.kind = "anisotropy";
  r.settings = {{"matrix", "W_E"}, {"samples", 100000}};
  r.provenance = example_provenance("vocablens anisotropy fixtures/gpt2-tiny --out run");
  const int bins = 40;
  std::vector<double> counts(bins), edges(bins + 1);
  for (int i = 0; i <= bins; ++i) edges[static_cast<size_t>(i)] = -1.0 + 2.0 * i / bins;
  for (int i = 0; i < bins; ++i) {
    double x = (edges[static_cast<size_t>(i)] + edges[static_cast<size_t>(i + 1)]) / 2 - 0.25;
    counts[static_cast<size_t>(i)] = std::round(9000 * std::exp(-x * x / 0.02));
  }
  r.arrays["cosine_histogram"] = NdArray::f64({bins}, counts.data());
  r.arrays["bin_edges"] = NdArray::f64({bins + 1}, edges.data());
  r.summary = {{"matrix", "W_E"},  {"shape", {512, 64}},       {"mean_cosine", 0.2512}, {"mean_cosine_centred", -0.002},
               {"mean_norm", 3.1}, {"mean_vector_share", 0.31}};
  Table t{"removed", {"removed_components", "mean_cosine", "rows"}, {}};
  t.rows.push_back({"raw", 0.2512, 512});
  t.rows.push_back({"centred", -0.002, 512});
  for (int i = 1; i <= 8; ++i) t.rows.push_back({i, 0.2512 * std::exp(-0.5 * i), 512});
  r.tables.push_back(std::move(t));
  return r;
}

}  // namespace

void register_anisotropy_report(ResultKinds& k) {
  k.add({"anisotropy", "Anisotropy", 7, "Anisotropy", render_anisotropy, kAnisotropyNotebook, anisotropy_example, {}});
}

}  // namespace vocablens::kinds

// Positional embeddings in the report (similarity heatmaps, spectrum, principal components, cosine by offset) and notebook.
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

void render_positions(Section& sec) {
  for (const auto& [name, a] : sec.r.arrays) {
    Grid g;
    if (!as_grid(a, g) || g.rows != g.cols || g.rows < 2) continue;
    bool cosine = name.find("cos") != std::string::npos || name.find("sim") != std::string::npos;
    double lo, hi;
    finite_range(g.v, lo, hi);
    bool signed_ = lo < 0;
    std::vector<std::string> labels;  // positions, not tokens
    for (int64_t i = 0; i < g.rows; ++i) labels.push_back(std::to_string(i));
    sec.html += array_heatmap(sec, name, g, signed_ || cosine ? Cmap::Diverging : Cmap::Viridis, pretty_name(name), labels,
                              labels, cosine ? -1.0 : kNaN, cosine ? 1.0 : kNaN, "position", "position");
    sec.used_arrays.insert(name);
  }
  spectrum_figures(sec);
  if (const NdArray* pc = sec.array({"pc_scores", "components"})) {
    Grid g;
    if (as_grid(*pc, g) && g.cols >= 1) {
      LineChart c;
      for (int64_t j = 0; j < std::min<int64_t>(6, g.cols); ++j) {
        Series s{"PC " + std::to_string(j + 1), {}};
        for (int64_t i = 0; i < g.rows; ++i) s.y.push_back(g.at(i, j));
        c.series.push_back(s);
      }
      c.x_label = "position";
      c.y_label = "score";
      c.points = g.rows <= 64;
      sec.html += "<div class=\"charts\"><div class=\"chartbox\">" +
                  figure("Positions along the top principal components", svg_line_chart(c), "", false) + "</div></div>";
      sec.use(pc);
    }
  }
  if (const NdArray* off = sec.array({"cosine_by_offset"})) {
    if (squeezed_shape(*off).size() == 1 && off->numel() > 1) {
      LineChart c;
      c.series = {{"mean cosine", as_vector(*off)}};
      c.x_label = "offset |i - j|";
      c.y_label = "mean cosine";
      c.points = off->numel() <= 64;
      sec.html += "<div class=\"charts\"><div class=\"chartbox\">" +
                  figure("Cosine by positional offset", svg_line_chart(c), "", false) + "</div></div>";
      sec.use(off);
    }
  }
}

const char* kPositionsNotebook = R"PY(drawn = set()
for name, a in A.items():
    m = as_grid(a)
    if m is None or m.shape[0] != m.shape[1] or m.shape[0] < 2:
        continue
    cosine = "cos" in name or "sim" in name
    fig, ax = plt.subplots(figsize=(6.5, 5.5))
    heatmap(ax, m, cmap="RdBu_r" if cosine or np.nanmin(m) < 0 else "viridis",
            vmin=-1 if cosine else None, vmax=1 if cosine else None)
    ax.set_title(name.replace("_", " "))
    ax.set_xlabel("position")
    ax.set_ylabel("position")
    plt.show()
    drawn.add(name)
fig, axes = plt.subplots(1, 3, figsize=(16, 3.6))
if "pc_scores" in A:
    pcs = np.asarray(A["pc_scores"])
    for c in range(min(6, pcs.shape[1])):
        axes[0].plot(pcs[:, c], label=f"PC {c + 1}")
    axes[0].set_title("Positions along the top principal components")
    axes[0].set_xlabel("position")
    axes[0].legend(fontsize=8)
    drawn.add("pc_scores")
if "cosine_by_offset" in A:
    axes[1].plot(A["cosine_by_offset"])
    axes[1].set_title("Cosine by positional offset")
    axes[1].set_xlabel("offset |i - j|")
    drawn.add("cosine_by_offset")
sv = A.get("all_singular_values", A.get("singular_values"))
if sv is not None:
    axes[2].semilogy(np.arange(sv.size), sv, label="singular values")
    if "explained_variance_ratio" in A:
        ax2 = axes[2].twinx()
        ax2.plot(np.arange(A["explained_variance_ratio"].size), np.cumsum(A["explained_variance_ratio"]),
                 color="C1", label="cumulative explained variance")
        ax2.set_ylim(0, 1.02)
    axes[2].set_title("Spectrum of the positional embedding")
    drawn |= {"all_singular_values", "singular_values", "explained_variance_ratio"}
for ax in axes:
    ax.grid(alpha=0.3)
fig.tight_layout()
plt.show()
show_generic(r, skip=drawn)
)PY";

// A synthetic result shaped like the analysis's own (for `vocablens report --example`).
Result positions_example(const ExampleInput&) {
  Result r;
  r.kind = "positions";
  r.settings = {{"matrix", "W_pos"}};
  r.provenance = example_provenance("vocablens positions fixtures/gpt2-tiny --out run");
  const int64_t P = 64;
  std::vector<float> cosv(static_cast<size_t>(P * P));
  for (int64_t i = 0; i < P; ++i)
    for (int64_t j = 0; j < P; ++j)
      cosv[static_cast<size_t>(i * P + j)] = static_cast<float>(std::cos(0.2 * static_cast<double>(i - j)) *
                                                                std::exp(-std::fabs(static_cast<double>(i - j)) / 30.0));
  r.arrays["cosine"] = NdArray::f32({P, P}, cosv.data());
  std::vector<double> by_offset(static_cast<size_t>(P)), sv(16), evr(16);
  for (int64_t d = 0; d < P; ++d)
    by_offset[static_cast<size_t>(d)] = std::cos(0.2 * static_cast<double>(d)) * std::exp(-static_cast<double>(d) / 30.0);
  double tot = 0;
  for (size_t i = 0; i < sv.size(); ++i) tot += (evr[i] = std::exp(-0.4 * static_cast<double>(i)));
  for (size_t i = 0; i < sv.size(); ++i) {
    evr[i] /= tot;
    sv[i] = 20 * std::sqrt(evr[i]);
  }
  const int64_t C = 4;
  std::vector<double> pcs(static_cast<size_t>(P * C));
  for (int64_t i = 0; i < P; ++i)
    for (int64_t c = 0; c < C; ++c)
      pcs[static_cast<size_t>(i * C + c)] = std::cos(3.14159265 * static_cast<double>((c + 1) * i) / static_cast<double>(P));
  r.arrays["cosine_by_offset"] = NdArray::f64({P}, by_offset.data());
  r.arrays["singular_values"] = NdArray::f64({16}, sv.data());
  r.arrays["explained_variance_ratio"] = NdArray::f64({16}, evr.data());
  r.arrays["pc_scores"] = NdArray::f64({P, C}, pcs.data());
  Table ct{"components", {"component", "variance_ratio", "dominant_frequency", "power_fraction"}, {}};
  for (int64_t c = 0; c < C; ++c) ct.rows.push_back({c, evr[static_cast<size_t>(c)], 0.5 * static_cast<double>(c + 1), 0.9});
  r.tables.push_back(std::move(ct));
  r.summary = {{"n_positions", P}, {"mean_adjacent_cosine", 0.95}};
  return r;
}

}  // namespace

void register_positions_report(ResultKinds& k) {
  k.add({"positions",
         "Positional embeddings",
         10,
         "Positional embeddings",
         render_positions,
         kPositionsNotebook,
         positions_example,
         {{"cosine", "P P"},
          {"cosine_by_offset", "P"},
          {"singular_values", "S"},
          {"explained_variance_ratio", "E"},
          {"pc_scores", "P C"},
          {"segment_cosine", "G G"},
          {"segment_cos_to_token_pcs", "R D"}}});
}

}  // namespace vocablens::kinds

// Hidden states projected to tokens in the report (top-1 token per layer and position) and notebook.
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

// Hidden states projected into vocabulary space ("projection"): layer x position heatmap of the top-1
// score with the top-1 token as cell text, like the logit lens.
void render_projection(Section& sec) {
  const Result& r = sec.r;
  const NdArray* sc = sec.array({"scores", "top_scores"});
  Grid top;
  if (!sc || !as_grid(*sc, top, 0)) return;
  const int64_t L = top.rows, P = top.cols;
  std::vector<std::string> layers = layer_labels(r, L);
  std::vector<int64_t> positions;
  if (const json* pj = find_key(r.settings, {"positions"}); pj && pj->is_array() && static_cast<int64_t>(pj->size()) == P)
    for (const auto& e : *pj)
      if (e.is_number_integer()) positions.push_back(e.get<int64_t>());
  if (static_cast<int64_t>(positions.size()) != P) positions.clear();
  std::vector<std::string> cols;
  for (int64_t p = 0; p < P; ++p) {
    int64_t at = positions.empty() ? p : positions[static_cast<size_t>(p)];
    if (at >= 0 && at < static_cast<int64_t>(sec.tokens.size())) cols.push_back(sec.tokens[static_cast<size_t>(at)]);
  }
  if (static_cast<int64_t>(cols.size()) != P) cols.clear();
  const Table* tk = sec.table({"top_k"});
  TopK topk = tk ? topk_from_table(*tk, layers, positions) : TopK{};
  auto cell_text = [&](int64_t i, int64_t j) -> std::string {
    auto it = topk.cells.find({i, j});
    return it != topk.cells.end() && !it->second.empty() ? it->second[0].first : "";
  };
  auto tooltip = [&](int64_t i, int64_t j) {
    std::string s = "layer " + layers[static_cast<size_t>(i)] + ", position " +
                    std::to_string(positions.empty() ? j : positions[static_cast<size_t>(j)]);
    if (!cols.empty()) s += " (input " + visible(cols[static_cast<size_t>(j)]) + ")";
    s += "\ntop-1 score " + num(top.at(i, j));
    auto it = topk.cells.find({i, j});
    if (it != topk.cells.end()) {
      s += "\ntop-" + std::to_string(it->second.size()) + ":";
      size_t rank = 1;
      for (const auto& [tok, v] : it->second) s += "\n " + std::to_string(rank++) + ". " + visible(tok) + "  " + num(v);
    }
    return s;
  };
  bool small = L * P <= 6000;
  Heatmap h;
  h.grid = &top;
  h.row_labels = layers;
  h.col_labels = cols;
  h.cmap = Cmap::Viridis;
  h.value_label = "top-1 score";
  h.cell_w = small ? 58 : 12;
  h.cell_h = small ? 22 : 10;
  if (small && !topk.empty()) h.cell_text = cell_text;
  h.tooltip = tooltip;
  h.row_axis = "layer";
  h.col_axis = "position (input token)";
  sec.html += figure("Top-1 token per layer and position", svg_heatmap(h),
                     "Cell text: the highest-scoring token (␣ is a space). Hover a cell for the top-k list.");
  sec.use(sc);
  if (const NdArray* ids = sec.array({"token_ids"})) sec.use(ids);
  if (tk && !topk.empty()) sec.used_tables.insert(tk->name);
  if (const NdArray* nr = sec.array({"norms"})) {
    Grid g;
    if (as_grid(*nr, g) && g.rows == L && g.cols == P) {
      sec.html += array_heatmap(sec, "norms", g, Cmap::Viridis, "norm of the hidden state", layers, cols, kNaN, kNaN, "layer",
                                "position");
      sec.use(nr);
    }
  }
}

const char* kProjectNotebook = R"PY(scores = as_grid(A["scores"], 0) if "scores" in A else None
drawn = {"scores", "token_ids"}
if scores is not None:
    L, P = scores.shape
    layers = layer_labels(r, L)
    positions = r["settings"].get("positions") or list(range(P))
    tokens = input_tokens(r)
    cols = [tokens[p] if p < len(tokens) else str(p) for p in positions]
    top1 = None
    if "top_k" in r["tables"]:
        df = r["tables"]["top_k"]
        first = df.sort_values("rank").groupby(["layer", "position"], sort=False).first()
        lookup = {(str(l), int(p)): tok for (l, p), tok in first["token"].items()}
        top1 = [[lookup.get((layers[i], positions[j])) for j in range(P)] for i in range(L)]
    fig, ax = plt.subplots(figsize=(min(2.5 + 0.9 * P, 40), 1.5 + 0.45 * L))
    heatmap(ax, scores, layers, cols, "viridis", text=top1)
    ax.set_xlabel("position (input token)")
    ax.set_ylabel("layer")
    ax.set_title("Top-1 token per layer and position (colour = score)")
    plt.show()
    if "norms" in A:
        fig, ax = plt.subplots(figsize=(min(2.5 + 0.9 * P, 40), 1.5 + 0.45 * L))
        heatmap(ax, as_grid(A["norms"]), layers, cols, "viridis")
        ax.set_title("Norm of the hidden state")
        plt.show()
        drawn.add("norms")
show_generic(r, skip=drawn)
)PY";

// A synthetic result shaped like the analysis's own (for `vocablens report --example`).
Result project_example(const ExampleInput& in) {
  const std::vector<std::string>& toks = in.tokens;
  Result r;
  r.kind = "projection";
  const int64_t T = static_cast<int64_t>(toks.size());
  std::vector<int64_t> layers = {0, 1, 2, 3}, positions;
  for (int64_t p = std::max<int64_t>(0, T - 4); p < T; ++p) positions.push_back(p);
  const int64_t L = static_cast<int64_t>(layers.size()), P = static_cast<int64_t>(positions.size()), k = 3;
  r.settings = {{"hook", "resid_post"}, {"layers", layers}, {"positions", positions}, {"top_k", k}, {"space", "write"}};
  r.provenance = example_provenance("vocablens project fixtures/gpt2-tiny --hook resid_post --out run");
  json input = json::array();
  for (int64_t t = 0; t < T; ++t) input.push_back({{"id", 100 + t}, {"token", toks[static_cast<size_t>(t)]}});
  r.summary["input"] = input;
  std::vector<int64_t> tid(static_cast<size_t>(L * P * k));
  std::vector<double> score(static_cast<size_t>(L * P * k)), nrm(static_cast<size_t>(L * P));
  Table t{"top_k", {"layer", "position", "input_token", "rank", "token_id", "token", "score"}, {}};
  json jl = json::array();
  for (int64_t l = 0; l < L; ++l) {
    jl.push_back({{"layer", layers[static_cast<size_t>(l)]}});
    for (int64_t p = 0; p < P; ++p) {
      nrm[static_cast<size_t>(l * P + p)] = 10 + 5.0 * static_cast<double>(l) + static_cast<double>(p);
      for (int64_t q = 0; q < k; ++q) {
        size_t at = static_cast<size_t>((l * P + p) * k + q);
        tid[at] = (l * 3 + p * 5 + q) % static_cast<int64_t>(kExampleVocab.size());
        score[at] = 8.0 + 2.0 * static_cast<double>(l) - static_cast<double>(q);
        t.rows.push_back({layers[static_cast<size_t>(l)], positions[static_cast<size_t>(p)],
                          toks[static_cast<size_t>(positions[static_cast<size_t>(p)])], q + 1, tid[at],
                          kExampleVocab[static_cast<size_t>(tid[at])], score[at]});
      }
    }
  }
  r.summary["layers"] = jl;
  r.arrays["token_ids"] = NdArray::i64({L, P, k}, tid.data());
  r.arrays["scores"] = NdArray::f64({L, P, k}, score.data());
  r.arrays["norms"] = NdArray::f64({L, P}, nrm.data());
  r.tables.push_back(std::move(t));
  return r;
}

}  // namespace

void register_project_report(ResultKinds& k) {
  k.add({"projection",
         "Hidden states projected into vocabulary space",
         2,
         "Hidden states in vocabulary space",
         render_projection,
         kProjectNotebook,
         project_example,
         {{"token_ids", "L P K"}, {"scores", "L P K"}, {"norms", "L P"}}});
  // The kind's older name, still read from earlier run directories.
  k.add({"project",
         "Projection into vocabulary space",
         3,
         "Projection",
         render_projection,
         kProjectNotebook,
         nullptr,
         {{"token_ids", "L P K"}, {"scores", "L P K"}, {"norms", "L P"}}});
}

}  // namespace vocablens::kinds

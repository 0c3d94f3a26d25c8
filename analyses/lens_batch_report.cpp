// The logit lens over many prompts in the report (each prompt's target-probability heatmap, the readout
// curves of all prompts; the tidy table is rendered generically) and notebook.
// Its entry in the registry of result kinds (vocablens/result_kinds.hpp): title, order, report figures, notebook cell.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "notebooks-export/report_blocks.hpp"
#include "vocablens/result_kinds.hpp"

namespace vocablens::kinds {
namespace {

using namespace report_detail;  // NOLINT: the report's building blocks and figures

void render_lens_batch(Section& sec) {
  const Result& r = sec.r;
  auto it = r.arrays.find("target_prob");
  if (it == r.arrays.end() || it->second.shape.size() != 3) return;
  const auto& a = it->second;
  const int64_t P = a.shape[0], n = a.shape[1], T = a.shape[2];
  std::vector<double> v = as_vector(a);
  std::vector<double> rank;
  if (auto rk = r.arrays.find("target_rank"); rk != r.arrays.end() && rk->second.numel() == P * n * T)
    rank = as_vector(rk->second);
  std::vector<std::string> layers = layer_labels(r, n);
  const json* prompts = find_key(r.summary, {"prompts"});
  const json* ptoks = find_key(r.summary, {"prompt_tokens"});
  sec.used_arrays.insert("target_prob");
  for (int64_t p = 0; p < P; ++p) {
    std::vector<std::string> toks;
    if (ptoks && ptoks->is_array() && p < static_cast<int64_t>(ptoks->size()))
      toks = string_list(&(*ptoks)[static_cast<size_t>(p)]);
    int64_t Tp = toks.empty() ? T : static_cast<int64_t>(toks.size());
    Grid g;
    g.rows = n;
    g.cols = Tp;
    for (int64_t l = 0; l < n; ++l)
      for (int64_t j = 0; j < Tp; ++j) g.v.push_back(v[static_cast<size_t>((p * n + l) * T + j)]);
    std::string title = "prompt " + std::to_string(p);
    std::string tgt;
    if (prompts && prompts->is_array() && p < static_cast<int64_t>(prompts->size())) {
      const json& pj = (*prompts)[static_cast<size_t>(p)];
      if (pj.contains("prompt") && pj["prompt"].is_string()) title += ": " + clip(pj["prompt"].get<std::string>(), 80);
      if (pj.value("explicit_target", false) && pj.contains("target") && pj["target"].is_string())
        tgt = pj["target"].get<std::string>();
    }
    Heatmap h;
    h.grid = &g;
    h.row_labels = layers;
    h.col_labels = toks;
    h.vmin = 0;
    h.vmax = 1;
    h.value_label = tgt.empty() ? "probability of the next token" : "probability of " + visible(tgt);
    const bool small = n * Tp <= 4000;
    h.cell_w = small ? 44 : 12;
    h.cell_h = small ? 20 : 10;
    if (small && !rank.empty())
      h.cell_text = [&, p](int64_t i, int64_t j) {
        double x = rank[static_cast<size_t>((p * n + i) * T + j)];
        return x > 0 ? "#" + num(x) : std::string();
      };
    h.tooltip = [&, p](int64_t i, int64_t j) {
      std::string s = "layer " + layers[static_cast<size_t>(i)] + ", position " + std::to_string(j);
      if (j < static_cast<int64_t>(toks.size())) s += " (" + visible(toks[static_cast<size_t>(j)]) + ")";
      s += "\ntarget probability " + num(v[static_cast<size_t>((p * n + i) * T + j)]);
      if (!rank.empty()) s += "\ntarget rank " + num(rank[static_cast<size_t>((p * n + i) * T + j)]);
      return s;
    };
    h.row_axis = "layer";
    h.col_axis = "position (input token)";
    sec.html += figure(title, svg_heatmap(h),
                       "Colour: probability of the target (the next input token, or the prompt's target at every "
                       "position); cell text: its rank.");
  }
  if (sec.r.arrays.count("target_rank")) sec.used_arrays.insert("target_rank");
  // Readout curves: every prompt's target probability per layer at its readout position.
  if (auto rp = r.arrays.find("readout_prob"); rp != r.arrays.end() && rp->second.numel() == P * n) {
    std::vector<double> rv = as_vector(rp->second);
    LineChart c;
    for (int64_t p = 0; p < P && p < 24; ++p) {
      Series s;
      s.name = "prompt " + std::to_string(p);
      s.y.assign(rv.begin() + p * n, rv.begin() + (p + 1) * n);
      c.series.push_back(std::move(s));
    }
    c.x_labels = layers;
    c.x_label = "layer";
    c.y_label = "target probability at the readout position";
    c.y_min = 0;
    c.y_max = 1;
    sec.html += figure("Target probability per layer (readout position of each prompt)", svg_line_chart(c));
    sec.used_arrays.insert("readout_prob");
  }
}

const char* kLensBatchNotebook = R"PY(P, n, T = A["target_prob"].shape
lens_layers = S.get("layers", [str(i) for i in range(n)])
for p in range(P):
    Tp = int(A["lengths"][p])
    toks = S["prompt_tokens"][p] if "prompt_tokens" in S else [str(j) for j in range(Tp)]
    fig, ax = plt.subplots(figsize=(max(4, 0.6 * Tp + 2), max(2.5, 0.3 * n + 1)))
    im = ax.imshow(A["target_prob"][p, :, :Tp], aspect="auto", origin="lower", vmin=0, vmax=1, cmap="viridis")
    ax.set_xticks(range(Tp)); ax.set_xticklabels(toks, rotation=60, fontsize=8)
    ax.set_yticks(range(n)); ax.set_yticklabels(lens_layers, fontsize=8)
    ax.set_title(f"prompt {p}: {S['prompts'][p]['prompt'][:60]!r}")
    fig.colorbar(im, ax=ax, label="target probability")
    plt.show()
show_generic(r, skip={"target_prob", "target_rank", "entropy", "kl_final", "tokens", "lengths"})
)PY";

}  // namespace

void register_lens_batch_report(ResultKinds& k) {
  k.add({"logit_lens_batch",
         "Logit lens over many prompts",
         15,
         "Logit lens over many prompts",
         render_lens_batch,
         kLensBatchNotebook,
         nullptr,
         {{"tokens", "P T"},
          {"lengths", "P"},
          {"target_prob", "P L T"},
          {"target_rank", "P L T"},
          {"entropy", "P L T"},
          {"kl_final", "P L T"},
          {"readout_prob", "P L"},
          {"readout_rank", "P L"}}});
}

}  // namespace vocablens::kinds

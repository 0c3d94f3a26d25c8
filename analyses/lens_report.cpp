// The logit lens in the report (layer × position heatmap of the top-1 token, per-layer curves) and notebook.
// Its entry in the registry of result kinds (vocablens/result_kinds.hpp): title, order, report figures, notebook cell.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "notebooks-export/report_blocks.hpp"
#include "notebooks-export/report_examples.hpp"
#include "vocablens/result_kinds.hpp"

namespace vocablens::kinds {
namespace {

using namespace report_detail;  // NOLINT: the report's building blocks and figures

void render_logit_lens(Section& sec) {
  const Result& r = sec.r;
  // Probability of the top-1 token: "top1_prob" [L, T] or slice 0 of "top_probs" [L, T, k].
  Grid prob, ent;
  bool have_prob = false, have_ent = false;
  if (const NdArray* a = sec.array({"top1_prob", "top1_probs", "max_prob"})) have_prob = as_grid(*a, prob);
  if (!have_prob)
    if (const NdArray* a = sec.array({"top_probs", "topk_probs", "top_k_probs"})) have_prob = as_grid(*a, prob, 0);
  if (const NdArray* a = sec.array({"entropy", "entropies"})) {
    have_ent = as_grid(*a, ent);
    if (have_ent) sec.use(a);
  }
  if (!have_prob && !have_ent) return;  // generic rendering shows whatever there is
  int64_t L = have_prob ? prob.rows : ent.rows, T = have_prob ? prob.cols : ent.cols;
  std::vector<std::string> layers = layer_labels(r, L);
  const Table* tk = sec.table({"top_k", "topk", "top_tokens"});
  TopK topk = tk ? topk_from_table(*tk, layers) : TopK{};
  auto top1 = string_grid(r, {"top1_tokens", "top1", "top_1", "top1_grid", "grid"});
  bool grid_ok = static_cast<int64_t>(top1.size()) == L &&
                 std::all_of(top1.begin(), top1.end(), [&](const auto& row) { return static_cast<int64_t>(row.size()) == T; });
  auto cell_text = [&](int64_t i, int64_t j) -> std::string {
    if (grid_ok) return top1[static_cast<size_t>(i)][static_cast<size_t>(j)];
    auto it = topk.cells.find({i, j});
    return it != topk.cells.end() && !it->second.empty() ? it->second[0].first : "";
  };
  const NdArray* target_prob = sec.array({"target_prob"});
  Grid tgt;
  bool have_tgt = target_prob && as_grid(*target_prob, tgt) && tgt.rows == L && tgt.cols == T;
  auto tooltip = [&](int64_t i, int64_t j) {
    std::string s = "layer " + layers[static_cast<size_t>(i)] + ", position " + std::to_string(j);
    if (j < static_cast<int64_t>(sec.tokens.size())) s += " (input " + visible(sec.tokens[static_cast<size_t>(j)]) + ")";
    if (j + 1 < static_cast<int64_t>(sec.tokens.size())) s += ", next " + visible(sec.tokens[static_cast<size_t>(j + 1)]);
    if (have_prob) s += "\ntop-1 probability " + num(prob.at(i, j));
    if (have_ent) s += "\nentropy " + num(ent.at(i, j)) + " nats";
    if (have_tgt && std::isfinite(tgt.at(i, j))) s += "\ntarget probability " + num(tgt.at(i, j));
    auto it = topk.cells.find({i, j});
    if (it != topk.cells.end()) {
      s += "\ntop-" + std::to_string(it->second.size()) + ":";
      size_t rank = 1;
      for (const auto& [tok, p] : it->second) s += "\n " + std::to_string(rank++) + ". " + visible(tok) + "  " + num(p);
    } else {
      std::string t = cell_text(i, j);
      if (!t.empty()) s += "\ntop-1: " + visible(t);
    }
    return s;
  };
  std::vector<std::string> cols = sec.tokens;
  if (static_cast<int64_t>(cols.size()) != T) cols.clear();
  bool small = L * T <= 6000;
  auto make = [&](const Grid& g, Cmap cm, const std::string& label, double lo, double hi) {
    Heatmap h;
    h.grid = &g;
    h.row_labels = layers;
    h.col_labels = cols;
    h.cmap = cm;
    h.vmin = lo;
    h.vmax = hi;
    h.value_label = label;
    h.cell_w = small ? 58 : 12;
    h.cell_h = small ? 22 : 10;
    if (small) h.cell_text = cell_text;
    h.tooltip = tooltip;
    h.row_axis = "layer";
    h.col_axis = "position (input token)";
    return svg_heatmap(h);
  };
  std::string note = "Cell text: the top-1 token at that layer and position (␣ is a space). Hover a cell for the top-k list.";
  if (have_prob && have_ent) {
    // A CSS-only switch between the two colourings (no script needed).
    std::string id = sec.uid + "-lens";
    sec.html += "<div class=\"switch\">";
    sec.html += fmt::format(
        "<input type=\"radio\" name=\"{0}\" id=\"{0}-p\" checked><label for=\"{0}-p\">colour: top-1 probability</label>", id);
    sec.html += fmt::format("<input type=\"radio\" name=\"{0}\" id=\"{0}-e\"><label for=\"{0}-e\">colour: entropy</label>", id);
    sec.html +=
        "<div class=\"pane pane1\">" +
        figure("Logit lens: top-1 token and its probability", make(prob, Cmap::Viridis, "top-1 probability", 0, 1), note) +
        "</div>";
    double lo, hi;
    finite_range(ent.v, lo, hi);
    sec.html += "<div class=\"pane pane2\">" +
                figure("Logit lens: entropy (nats)", make(ent, Cmap::Magma, "entropy (nats)", 0, std::max(hi, 1e-6)), note) +
                "</div>";
    sec.html += "</div>";
  } else if (have_prob) {
    sec.html += figure("Logit lens: top-1 token and its probability", make(prob, Cmap::Viridis, "top-1 probability", 0, 1), note);
  } else {
    double lo, hi;
    finite_range(ent.v, lo, hi);
    sec.html += figure("Logit lens: entropy (nats)", make(ent, Cmap::Magma, "entropy (nats)", 0, std::max(hi, 1e-6)), note);
  }
  if (const NdArray* a = sec.array({"top1_prob", "top1_probs", "max_prob"})) sec.use(a);
  if (tk) sec.used_tables.insert(tk->name);
  // Per-layer curves of every [L, T] or [L] metric.
  std::vector<std::pair<std::string, const NdArray*>> metrics;
  for (const auto& [name, a] : r.arrays) {
    if (a.dtype == "|b1") continue;
    auto s = squeezed_shape(a);
    bool per_layer_pos = s.size() == 2 && s[0] == L && s[1] == T;
    bool per_layer = s.size() == 1 && s[0] == L && L != T;
    if (name == "top_ids" || name == "top1_id" || name == "top1_ids" || name == "tokens" || name == "targets" ||
        name == "target_rank_raw")
      continue;
    if (per_layer_pos || per_layer) {
      metrics.push_back({name, &a});
      sec.used_arrays.insert(name);
    }
  }
  // The top-1 probability as a curve too, when it only exists as a slice of top_probs.
  Grid p1 = prob;
  NdArray p1arr;
  if (have_prob && !sec.array({"top1_prob", "top1_probs", "max_prob"})) {
    std::vector<float> f(p1.v.begin(), p1.v.end());
    p1arr = NdArray::f32({p1.rows, p1.cols}, f.data());
    metrics.insert(metrics.begin(), {"top1_prob", &p1arr});
    if (const NdArray* a = sec.array({"top_probs", "topk_probs", "top_k_probs"})) sec.use(a);
  }
  for (const char* n : {"top_ids", "tokens", "targets"})
    if (r.arrays.count(n)) sec.used_arrays.insert(n);
  curves_per_layer(sec, metrics, layers);
}

const char* kLensNotebook = R"PY(tokens = input_tokens(r)
prob = A["top1_prob"] if "top1_prob" in A else (as_grid(A["top_probs"], 0) if "top_probs" in A else None)
ent = as_grid(A["entropy"]) if "entropy" in A else None
base = prob if prob is not None else ent
L, T = base.shape
layers = layer_labels(r, L)
# Top-1 token per (layer, position): from the summary grid, else from the top_k table.
top1 = S.get("top1_tokens")
if isinstance(S.get("top1"), dict):
    top1 = S["top1"].get("tokens")
if top1 is None and "top_k" in r["tables"]:
    df = r["tables"]["top_k"]
    first = df.sort_values("rank").groupby(["layer", "position"], sort=False).first()
    lookup = {(str(l), int(p)): tok for (l, p), tok in first["token"].items()}
    top1 = [[lookup.get((layers[i], j), lookup.get((str(i), j))) for j in range(T)] for i in range(L)]
cols = tokens if len(tokens) == T else list(range(T))
for m, title, cmap, vmax in ((prob, "top-1 probability", "viridis", 1.0), (ent, "entropy (nats)", "magma", None)):
    if m is None:
        continue
    fig, ax = plt.subplots(figsize=(min(2.5 + 0.75 * T, 40), 1.5 + 0.45 * L))
    heatmap(ax, m, layers, cols, cmap, 0, vmax, text=top1)
    ax.set_xlabel("position (input token)")
    ax.set_ylabel("layer")
    ax.set_title(f"Logit lens: top-1 token, colour = {title}")
    plt.show()
metrics = [n for n, a in A.items() if a.dtype.kind in "fi" and np.squeeze(a).shape in ((L, T), (L,))
           and n not in ("top_ids", "tokens", "targets")]
per_layer_curves({n: np.squeeze(A[n]) for n in metrics}, metrics, layers)
if "top_k" in r["tables"]:
    display(r["tables"]["top_k"].head(30))
show_generic(r, skip=set(metrics) | {"top_probs", "top_ids", "tokens", "targets", "top1_prob", "entropy", "top_k"})
)PY";

// A synthetic result shaped like the analysis's own (for `vocablens report --example`).
Result lens_example(const ExampleInput& in) {
  const std::string& prompt = in.prompt;
  const std::vector<std::string>& toks = in.tokens;
  const int64_t L = 5, T = static_cast<int64_t>(toks.size()), k = 5, V = static_cast<int64_t>(kExampleVocab.size());
  ExampleLcg rng{42};
  Result r;
  r.kind = "logit_lens";
  r.settings = {{"prompt", prompt}, {"top_k", k}, {"unembed", "model"}, {"resid_mid", false}};
  r.provenance = example_provenance("vocablens lens fixtures/gpt2-tiny --prompt '" + prompt + "' --top-k 5 --out run --report");
  std::vector<json> layers;
  std::vector<std::string> labels = {"embed", "0", "1", "2", "3"};
  for (int64_t i = 0; i < L; ++i)
    layers.push_back({{"hook", i == 0 ? "resid_pre.0" : "resid_post." + std::to_string(i - 1)},
                      {"label", labels[static_cast<size_t>(i)]},
                      {"block", i - 1}});
  std::vector<int64_t> ids(static_cast<size_t>(T)), top_ids(static_cast<size_t>(L * T * k)),
      target_rank(static_cast<size_t>(L * T));
  std::vector<float> top_probs(static_cast<size_t>(L * T * k)), entropy(static_cast<size_t>(L * T)),
      kl(static_cast<size_t>(L * T)), ce(static_cast<size_t>(L * T)), tprob(static_cast<size_t>(L * T));
  json top1 = json::array();
  Table table{"top_k", {"layer", "hook", "position", "input_token", "rank", "token_id", "token", "prob"}, {}};
  for (int64_t t = 0; t < T; ++t) ids[static_cast<size_t>(t)] = 100 + t;
  for (int64_t l = 0; l < L; ++l) {
    json row = json::array();
    for (int64_t t = 0; t < T; ++t) {
      double conf = 0.05 + 0.9 * std::pow(static_cast<double>(l) / (L - 1), 1.5) * (0.5 + 0.5 * rng.next());
      double rest = 1 - conf;
      for (int64_t r2 = 0; r2 < k; ++r2) {
        size_t at = static_cast<size_t>((l * T + t) * k + r2);
        int64_t id = static_cast<int64_t>((t * 7 + l * 3 + r2 * 5) % V);
        if (r2 == 0 && l >= 3 && t + 1 < T) id = (t + 1) % V;
        top_ids[at] = id;
        top_probs[at] = static_cast<float>(r2 == 0 ? conf : rest * std::pow(0.5, r2));
        table.rows.push_back({labels[static_cast<size_t>(l)], layers[static_cast<size_t>(l)]["hook"], t,
                              toks[static_cast<size_t>(t)], r2 + 1, id, kExampleVocab[static_cast<size_t>(id)], top_probs[at]});
      }
      size_t at = static_cast<size_t>(l * T + t);
      row.push_back(kExampleVocab[static_cast<size_t>(top_ids[at * k])]);
      entropy[at] = static_cast<float>(std::log(static_cast<double>(V)) * (1 - conf) + 0.05);
      kl[at] = static_cast<float>(l == L - 1 ? 0.0 : 3.0 * (L - 1 - l) / L * (0.7 + 0.3 * rng.next()));
      ce[at] = t + 1 < T ? static_cast<float>(5.0 - l * 0.8 - rng.next()) : std::nanf("");
      tprob[at] = t + 1 < T ? static_cast<float>(std::exp(-static_cast<double>(ce[at]))) : std::nanf("");
      target_rank[at] = t + 1 < T ? 1 + static_cast<int64_t>((L - l) * 3 * rng.next()) : -1;
    }
    top1.push_back(row);
  }
  json tok_objs = json::array();
  for (int64_t t = 0; t < T; ++t)
    tok_objs.push_back({{"position", t},
                        {"id", ids[static_cast<size_t>(t)]},
                        {"token", toks[static_cast<size_t>(t)]},
                        {"target_id", t + 1 < T ? json(ids[static_cast<size_t>(t + 1)]) : json(nullptr)},
                        {"target", t + 1 < T ? json(toks[static_cast<size_t>(t + 1)]) : json(nullptr)}});
  json per_layer = json::array();
  for (int64_t l = 0; l < L; ++l)
    per_layer.push_back(
        {{"layer", labels[static_cast<size_t>(l)]}, {"mean_cross_entropy", 5.1 - 0.7 * l}, {"mean_entropy", 3.0 - 0.5 * l}});
  r.summary = {{"model", "fixtures/gpt2-tiny"},
               {"prompt", prompt},
               {"n_tokens", T},
               {"vocab_size", V},
               {"tokens", tok_objs},
               {"layers", layers},
               {"per_layer", per_layer},
               {"top1", {{"tokens", top1}}}};
  r.arrays["tokens"] = NdArray::i64({T}, ids.data());
  std::vector<int64_t> targets(static_cast<size_t>(T), -1);
  for (int64_t t = 0; t + 1 < T; ++t) targets[static_cast<size_t>(t)] = ids[static_cast<size_t>(t + 1)];
  r.arrays["targets"] = NdArray::i64({T}, targets.data());
  r.arrays["top_ids"] = NdArray::i64({L, T, k}, top_ids.data());
  r.arrays["top_probs"] = NdArray::f32({L, T, k}, top_probs.data());
  r.arrays["entropy"] = NdArray::f32({L, T}, entropy.data());
  r.arrays["kl_final"] = NdArray::f32({L, T}, kl.data());
  r.arrays["cross_entropy"] = NdArray::f32({L, T}, ce.data());
  r.arrays["target_prob"] = NdArray::f32({L, T}, tprob.data());
  r.arrays["target_rank"] = NdArray::i64({L, T}, target_rank.data());
  r.tables.push_back(std::move(table));
  return r;
}

}  // namespace

void register_lens_report(ResultKinds& k) {
  k.add({"logit_lens",
         "Logit lens",
         0,
         "Logit lens",
         render_logit_lens,
         kLensNotebook,
         lens_example,
         {{"tokens", "T"},
          {"targets", "T"},
          {"top_ids", "L T K"},
          {"top_probs", "L T K"},
          {"topk_probs", "L T K"},
          {"top_k_probs", "L T K"},
          {"entropy", "L T"},
          {"entropies", "L T"},
          {"top1_prob", "L T"},
          {"top1_probs", "L T"},
          {"max_prob", "L T"},
          {"kl_final", "L T"},
          {"cross_entropy", "L T"},
          {"logsumexp", "L T"},
          {"target_prob", "L T"},
          {"target_logprob", "L T"},
          {"target_rank", "L T"},
          {"log_probs", "L T V"}}});
}

}  // namespace vocablens::kinds

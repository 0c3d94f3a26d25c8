// The HTML report: one self-contained page, inline SVG drawn here, no network (see report.hpp).
//
// Layout: a header, a navigation strip, then one <section> per Result. A section starts with what was
// asked (settings, the prompt) and where it came from (provenance), then the kind's own figures, then a
// generic rendering of every array and table the kind's renderer did not use (2-D arrays as heatmaps,
// 1-D arrays as curves, tables grouped into cards when they have key columns such as layer+head).
//
// Safety: every string that came from a Result goes through html_escape(); attribute values are always
// double-quoted. The page's Content-Security-Policy allows no network fetches and only the one inline
// script whose sha256 is computed here, so even markup that slipped through could not run.
#include "vocablens/report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <set>

#include "vocablens/atomic_file.hpp"
#include "vocablens/error.hpp"
#include "vocablens/export.hpp"
#include "vocablens/sha256.hpp"
#include "report_blocks.hpp"

namespace vocablens {

std::string html_escape(std::string_view in) {
  std::string s = valid_utf8(in), o;
  o.reserve(s.size() + s.size() / 8);
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&#39;"; break;
      default:
        // C0 controls other than tab/newline/CR are not allowed in HTML text; show them as U+FFFD.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r') o += "\xEF\xBF\xBD";
        else o.push_back(c);
    }
  }
  return o;
}

namespace {

using namespace report_detail;  // NOLINT: the building blocks of report_blocks.hpp and the figures of report_svg.hpp

// ---------------------------------------------------------------------------------------------------
// One renderer per result kind (conventions: docs/results.md); render_generic shows whatever is left.

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
    sec.html += fmt::format("<input type=\"radio\" name=\"{0}\" id=\"{0}-p\" checked><label for=\"{0}-p\">colour: top-1 probability</label>", id);
    sec.html += fmt::format("<input type=\"radio\" name=\"{0}\" id=\"{0}-e\"><label for=\"{0}-e\">colour: entropy</label>", id);
    sec.html += "<div class=\"pane pane1\">" + figure("Logit lens: top-1 token and its probability", make(prob, Cmap::Viridis, "top-1 probability", 0, 1), note) + "</div>";
    double lo, hi;
    finite_range(ent.v, lo, hi);
    sec.html += "<div class=\"pane pane2\">" + figure("Logit lens: entropy (nats)", make(ent, Cmap::Magma, "entropy (nats)", 0, std::max(hi, 1e-6)), note) + "</div>";
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

void render_spectrum(Section& sec) {
  const Result& r = sec.r;
  const NdArray* sv = sec.array({"all_singular_values", "singular_values", "eigenvalues", "spectrum", "values"});
  std::string figs;
  if (sv && squeezed_shape(*sv).size() == 1) {
    LineChart c;
    c.series.push_back({"singular values", as_vector(*sv)});
    if (const NdArray* ev = sec.array({"covariance_eigenvalues"}))
      if (squeezed_shape(*ev).size() == 1) {
        std::vector<double> v = as_vector(*ev);
        for (auto& x : v) x = x > 0 ? std::sqrt(x) : kNaN;
        c.series.push_back({"√ covariance eigenvalues (centred)", v});
        sec.use(ev);
      }
    c.log_y = true;
    c.x0 = 1;
    c.x_label = "index";
    c.y_label = "value (log scale)";
    c.points = sv->numel() <= 64;
    figs += "<div class=\"chartbox\">" + figure("Singular value spectrum", svg_line_chart(c), "", false) + "</div>";
    sec.use(sv);
    if (const NdArray* k = sec.array({"singular_values"})) sec.use(k);
  }
  const NdArray* evr = sec.array({"explained_variance_ratio", "explained_variance", "energy_ratio"});
  if (evr && squeezed_shape(*evr).size() == 1) {
    std::vector<double> v = as_vector(*evr), cum;
    double s = 0;
    for (double x : v) cum.push_back(s += std::isfinite(x) ? x : 0);
    LineChart c;
    c.series = {{"explained variance ratio", v}, {"cumulative", cum}};
    c.x0 = 1;
    c.x_label = "component";
    c.y_label = "fraction of variance";
    c.y_min = 0;
    c.y_max = 1;
    c.points = v.size() <= 64;
    figs += "<div class=\"chartbox\">" + figure("Explained variance", svg_line_chart(c), "", false) + "</div>";
    sec.use(evr);
    if (const NdArray* e = sec.array({"energy_ratio"})) {
      if (e != evr && squeezed_shape(*e).size() == 1) {
        std::vector<double> ev = as_vector(*e), ecum;
        double t = 0;
        for (double x : ev) ecum.push_back(t += std::isfinite(x) ? x : 0);
        LineChart d;
        d.series = {{"σ² / ‖M‖²", ev}, {"cumulative", ecum}};
        d.x0 = 1;
        d.x_label = "singular direction";
        d.y_label = "fraction of energy";
        d.y_min = 0;
        d.y_max = 1;
        figs += "<div class=\"chartbox\">" + figure("Energy of the top singular directions (uncentred)", svg_line_chart(d), "", false) + "</div>";
        sec.use(e);
      }
    }
  }
  if (const NdArray* rn = sec.array({"row_norms", "norms"})) {
    if (squeezed_shape(*rn).size() == 1 && rn->numel() > 1) {
      // Sorted norms: a distribution curve that stays readable for 50k tokens.
      std::vector<double> v = as_vector(*rn);
      std::sort(v.begin(), v.end());
      std::vector<double> sampled;
      size_t n = v.size(), m = std::min<size_t>(n, 400);
      for (size_t i = 0; i < m; ++i) sampled.push_back(v[i * (n - 1) / std::max<size_t>(1, m - 1)]);
      LineChart c;
      c.series = {{"row norm (sorted)", sampled}};
      c.x_label = "quantile (" + std::to_string(m) + " samples of " + std::to_string(n) + " rows)";
      c.y_label = "Euclidean norm";
      c.points = false;
      for (size_t i = 0; i < m; ++i) c.x_labels.push_back(num(std::round(100.0 * i / std::max<size_t>(1, m - 1))) + "%");
      figs += "<div class=\"chartbox\">" + figure("Row norms", svg_line_chart(c), "", false) + "</div>";
      sec.use(rn);
    }
  }
  if (!figs.empty()) sec.html += "<div class=\"charts\">" + figs + "</div>";
  // Direction vectors are big and not worth a heatmap by default.
  for (const char* n : {"right_vectors", "left_vectors", "mean_row"})
    if (r.arrays.count(n)) sec.used_arrays.insert(n);
}

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

// Attention heads: per-circuit scores (circuits table) as layer x head heatmaps, one per circuit kind.
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
        h.cell_text = [&g](int64_t i, int64_t j) { return std::isfinite(g.at(i, j)) ? fmt::format("{:.2f}", g.at(i, j)) : std::string(); };
      std::string title = (kind.empty() ? "" : kind + " ") + pretty_name(metric) + " per head";
      figs += "<div class=\"chartbox\">" + figure(title, svg_heatmap(h)) + "</div>";
    }
  }
  if (!figs.empty()) sec.html += "<div class=\"charts\">" + figs + "</div>";
  for (const char* n : {"circuit_index", "pair_ids", "pair_values", "per_token_ids", "per_token_values", "copying_score",
                        "weight_copying_score"})
    if (sec.r.arrays.count(n)) sec.used_arrays.insert(n);
}

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
  render_spectrum(sec);
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

void render_anisotropy(Section& sec) {
  // Histogram: "histogram"/"hist"/"counts" with "bin_edges"/"edges".
  const NdArray* h = sec.array({"cosine_histogram", "histogram", "hist", "counts"});
  const NdArray* e = sec.array({"bin_edges", "edges", "bins"});
  if (h && squeezed_shape(*h).size() == 1) {
    LineChart c;
    c.series = {{pretty_name("cosine histogram"), as_vector(*h)}};
    if (e && e->numel() == h->numel() + 1) {
      auto ev = as_vector(*e);
      for (int64_t i = 0; i < h->numel(); ++i) c.x_labels.push_back(num((ev[static_cast<size_t>(i)] + ev[static_cast<size_t>(i + 1)]) / 2));
      sec.use(e);
    }
    c.x_label = "cosine similarity";
    c.y_label = "count";
    sec.html += "<div class=\"charts\"><div class=\"chartbox\">" + figure("Distribution of pairwise cosines", svg_line_chart(c), "", false) + "</div></div>";
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

// Arrays and tables no renderer claimed.
void render_generic(Section& sec) {
  std::string charts, maps, stats;
  auto is_ids = [](const std::string& n) {
    auto ends = [&](const char* suf) {
      size_t k = std::strlen(suf);
      return n.size() >= k && n.compare(n.size() - k, k, suf) == 0;
    };
    return ends("ids") || ends("_id") || ends("index") || n == "indices" || n == "tokens" || n == "targets" || n == "rows";
  };
  for (const auto& [name, a] : sec.r.arrays) {
    auto s = squeezed_shape(a);
    std::vector<double> v = as_vector(a);
    double lo, hi;
    finite_range(v, lo, hi);
    double sum = 0;
    int64_t n = 0;
    for (double x : v)
      if (std::isfinite(x)) {
        sum += x;
        ++n;
      }
    std::string shape;
    for (size_t i = 0; i < a.shape.size(); ++i) shape += (i ? "×" : "") + std::to_string(a.shape[i]);
    stats += fmt::format("<tr><td><code>{}</code></td><td>{}</td><td>[{}]</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td><code>{}</code></td></tr>",
                         esc(name), esc(a.dtype), esc(shape), esc(num(lo)), esc(num(hi)), esc(num(n ? sum / static_cast<double>(n) : kNaN)),
                         esc(sec.r.kind + "." + name + ".npy"));
    if (sec.used_arrays.count(name) || a.numel() == 0 || is_ids(name)) continue;
    if (s.size() == 1 && a.numel() >= 2 && a.dtype != "|b1") {
      LineChart c;
      std::vector<double> y = v;
      size_t stride = 1;
      if (y.size() > 2000) {
        stride = (y.size() + 1999) / 2000;
        std::vector<double> d;
        for (size_t i = 0; i < y.size(); i += stride) d.push_back(y[i]);
        y.swap(d);
      }
      c.series = {{pretty_name(name), y}};
      c.x_label = stride > 1 ? fmt::format("index (every {}th)", stride) : "index";
      if (stride == 1 && !sec.tokens.empty() && y.size() == sec.tokens.size()) {
        c.x_labels = sec.tokens;
        c.x_label = "position";
      }
      c.y_label = pretty_name(name);
      charts += "<div class=\"chartbox\">" + figure(pretty_name(name), svg_line_chart(c), "", false) + "</div>";
    } else if (s.size() == 2) {
      Grid g;
      if (as_grid(a, g)) maps += array_heatmap(sec, name, g, lo < 0 && hi > 0 ? Cmap::Diverging : Cmap::Viridis, pretty_name(name));
    }
  }
  if (!charts.empty()) sec.html += "<div class=\"charts\">" + charts + "</div>";
  sec.html += maps;
  for (const auto& t : sec.r.tables)
    if (!sec.used_tables.count(t.name)) render_table(sec, t);
  if (!stats.empty())
    sec.html += "<details class=\"arrays\"><summary>Arrays in this result</summary><div class=\"scroll\"><table class=\"data\"><thead><tr><th>name</th><th>dtype</th><th>shape</th><th>min</th><th>max</th><th>mean</th><th>file</th></tr></thead><tbody>" +
                stats + "</tbody></table></div></details>";
}

std::string provenance_html(const Result& r) {
  const json& p = r.provenance;
  std::string s = "<dl class=\"kv prov\">";
  auto str = [&](const char* k) -> std::string {
    auto it = p.find(k);
    return it != p.end() && it->is_string() ? it->get<std::string>() : "";
  };
  if (!str("model_path").empty()) s += "<dt>model</dt><dd><code>" + esc(str("model_path")) + "</code></dd>";
  if (auto it = p.find("model"); it != p.end() && it->is_object()) {
    const json& m = *it;
    std::string d;
    if (m.contains("architecture")) d = cell_string(m["architecture"]);
    for (const char* k : {"n_layers", "d_model", "n_heads", "d_mlp", "vocab_size", "n_ctx"})
      if (m.contains(k)) d += (d.empty() ? "" : ", ") + std::string(k) + " " + cell_string(m[k]);
    s += "<dt>architecture</dt><dd>" + esc(d) + "</dd>";
  }
  if (!str("config_sha256").empty())
    s += "<dt>config sha256</dt><dd><code title=\"" + esc(str("config_sha256")) + "\">" + esc(str("config_sha256").substr(0, 16)) +
         "…</code>" + (str("config_hashed").empty() ? "" : " <span class=\"note\">(" + esc(str("config_hashed")) + ")</span>") + "</dd>";
  if (!str("command_line").empty()) s += "<dt>command</dt><dd><code>" + esc(str("command_line")) + "</code></dd>";
  if (!str("vocablens_version").empty()) s += "<dt>vocablens</dt><dd>" + esc(str("vocablens_version")) + "</dd>";
  if (!str("created_utc").empty()) s += "<dt>created</dt><dd>" + esc(str("created_utc")) + "</dd>";
  static const std::set<std::string> shown = {"model_path", "model", "config_sha256", "config_hashed", "command_line",
                                              "vocablens_version", "created_utc", "model_path_absolute"};
  for (auto it = p.begin(); it != p.end(); ++it)
    if (!shown.count(it.key())) s += "<dt>" + esc(pretty_name(it.key())) + "</dt><dd>" + value_html(it.value()) + "</dd>";
  return s + "</dl>";
}

std::string render_section(const Result& r, const ReportOptions& opts, size_t index) {
  Section sec{r, opts, "", {}, {}, input_tokens(r), "r" + std::to_string(index)};
  std::string& h = sec.html;
  h += fmt::format("<section class=\"result\" id=\"{}\">", sec.uid);
  h += "<h2>" + esc(kind_title(r.kind)) + " <span class=\"kind\">" + esc(r.kind) + "</span></h2>";
  // What was asked.
  const json* prompt = find_key(r.settings, {"prompt", "text"});
  if (prompt && prompt->is_string()) h += "<blockquote class=\"prompt\">" + esc(prompt->get<std::string>()) + "</blockquote>";
  h += "<div class=\"meta\"><div><h4>Settings</h4>" + kv_list(r.settings, {"prompt", "text"}) +
       "</div><div><h4>Provenance</h4>" + provenance_html(r) + "</div></div>";
  if (!sec.tokens.empty()) h += token_strip(sec.tokens, "Input tokens");
  // Headline numbers and lists from the summary.
  std::set<std::string> skip = {"tokens", "token_strings", "tokens_text", "token_text", "input_tokens", "prompt",
                                "top1_tokens", "top1", "top_1", "top1_grid", "grid", "layer_labels"};
  if (!sec.tokens.empty()) skip.insert("input");
  std::string summary = kv_list(r.summary, skip);
  if (!summary.empty()) h += "<details class=\"summary\" open><summary>Summary</summary>" + summary + "</details>";

  const std::string& k = r.kind;
  if (k == "logit_lens") render_logit_lens(sec);
  else if (k == "spectrum") render_spectrum(sec);
  else if (k == "positions") render_positions(sec);
  else if (k == "projection" || k == "project") render_projection(sec);
  else if (k == "heads") render_heads(sec); else if (k == "anisotropy") render_anisotropy(sec);
  else if (k == "logit_lens_corpus") {
    std::vector<std::pair<std::string, const NdArray*>> m;
    int64_t L = -1;
    for (const auto& [name, a] : r.arrays)
      if (squeezed_shape(a).size() == 1 && a.dtype != "|b1") {
        if (L < 0) L = a.numel();
        if (a.numel() == L) {
          m.push_back({name, &a});
          sec.used_arrays.insert(name);
        }
      }
    if (L > 0) curves_per_layer(sec, m, layer_labels(r, L));
  }
  // heads, neurons, project, neighbours, knn and anything new: tables (grouped into cards when they have
  // key columns) and arrays, below.
  render_generic(sec);

  // Side files.
  std::string files;
  for (const auto& [name, a] : r.arrays) files += "<li><code>" + esc(r.kind + "." + name + ".npy") + "</code></li>";
  for (const auto& t : r.tables) files += "<li><code>" + esc(r.kind + "." + t.name + ".csv") + "</code></li>";
  h += "<details class=\"files\"><summary>Files</summary><ul><li><code>" + esc(r.kind + ".json") + "</code></li>" + files + "</ul></details>";
  h += "</section>";
  return h;
}


const char* kStyle = R"CSS(
:root{--fg:#1d2330;--muted:#5b6475;--line:#d9dee7;--bg:#fff;--soft:#f5f7fa;--accent:#2f5fb3}
*{box-sizing:border-box}
body{margin:0;font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:var(--fg);background:var(--bg)}
header{padding:16px 20px;border-bottom:1px solid var(--line);background:var(--soft)}
header h1{margin:0;font-size:22px}
header p{margin:4px 0 0;color:var(--muted);word-break:break-all}
nav{padding:8px 20px;border-bottom:1px solid var(--line);display:flex;flex-wrap:wrap;gap:6px 14px;position:sticky;top:0;background:var(--bg);z-index:2}
nav a{color:var(--accent);text-decoration:none}
main{max-width:1280px;margin:0 auto;padding:0 16px 40px}
section.result{border-bottom:1px solid var(--line);padding:8px 0 24px}
h2{font-size:20px;margin:18px 0 8px}
h3{font-size:16px;margin:18px 0 6px}
h4{margin:4px 0;font-size:13px;text-transform:uppercase;letter-spacing:.04em;color:var(--muted)}
.kind{font:12px ui-monospace,"DejaVu Sans Mono",monospace;color:var(--muted);background:var(--soft);border:1px solid var(--line);border-radius:4px;padding:1px 6px;vertical-align:middle}
.prompt{margin:8px 0;padding:8px 12px;border-left:4px solid var(--accent);background:var(--soft);white-space:pre-wrap;overflow-wrap:anywhere}
.meta{display:grid;grid-template-columns:repeat(auto-fit,minmax(280px,1fr));gap:8px 24px}
dl.kv{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:4px 0;font-size:14px}
dl.kv dt{color:var(--muted)}
dl.kv dd{margin:0;overflow-wrap:anywhere;min-width:0}
dl.kv pre{max-height:320px;overflow:auto;background:var(--soft);padding:6px;font-size:12px}
code,.tok{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:13px}
.tok{background:#eef2f8;border:1px solid #d5dcea;border-radius:3px;padding:0 3px;white-space:pre}
.tokens{display:flex;flex-wrap:wrap;gap:4px;align-items:baseline;margin:10px 0}
.tokens .ttl{color:var(--muted);font-size:13px;margin-right:4px}
.ti sub{color:var(--muted);font-size:10px;margin-right:1px}
figure{margin:10px 0}
.ftitle{font-weight:600;margin-bottom:4px}
.scroll{overflow-x:auto;max-width:100%}
.scroll.tall{max-height:480px;overflow-y:auto;border-bottom:1px solid var(--line)}
.note{color:var(--muted);font-size:13px;margin:4px 0}
svg text{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:11px;fill:#222}
svg .cell text{font-size:11px}
svg text.ondark{fill:#fff}
svg text.onlight{fill:#111}
svg text.axis{font-family:system-ui,"DejaVu Sans",sans-serif;font-size:12px;fill:#444}
svg .grid{stroke:#e4e7ec;stroke-width:1}
svg .frame{fill:none;stroke:#aab1bd;stroke-width:1}
svg.chart{width:100%;max-width:640px;height:auto;display:block}
svg .cell:hover rect{stroke:#000;stroke-width:1.5}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,420px),1fr));gap:8px 20px}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,250px),1fr));gap:10px}
.card{border:1px solid var(--line);border-radius:6px;padding:6px 8px;background:var(--bg);overflow-x:auto}
.ctitle{font-weight:600;font-size:13px;margin-bottom:4px}
table{border-collapse:collapse;font-size:13px}
table.data th,table.data td{border-bottom:1px solid var(--line);padding:3px 8px;text-align:left;vertical-align:top}
table.data th{background:var(--soft);position:sticky;top:0;cursor:pointer;white-space:nowrap}
table.mini td,table.mini th{padding:1px 6px;text-align:left}
table.mini th{color:var(--muted);font-weight:normal}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.null{color:var(--muted)}
details{margin:8px 0}
summary{cursor:pointer;color:var(--accent)}
.switch>input{margin-left:0}
.switch>label{margin-right:16px;cursor:pointer}
.switch>.pane{display:none}
.switch>input:nth-of-type(1):checked~.pane1,.switch>input:nth-of-type(2):checked~.pane2{display:block}
@media (max-width:600px){body{font-size:14px}nav{position:static}main{padding:0 8px 24px}dl.kv{grid-template-columns:1fr}dl.kv dt{margin-top:4px}}
)CSS";

// Click a column header to sort a table (numbers numerically). The only script on the page.
const char* kScript =
    "document.querySelectorAll('table.sortable').forEach(function(t){"
    "t.querySelectorAll('th').forEach(function(th,i){th.addEventListener('click',function(){"
    "var b=t.tBodies[0],rows=Array.prototype.slice.call(b.rows),asc=th.getAttribute('data-sort')!=='asc';"
    "rows.sort(function(x,y){var a=x.cells[i],c=y.cells[i];"
    "var va=a.hasAttribute('data-v')?parseFloat(a.getAttribute('data-v')):NaN,vc=c.hasAttribute('data-v')?parseFloat(c.getAttribute('data-v')):NaN;"
    "var r=(!isNaN(va)&&!isNaN(vc))?va-vc:a.textContent.localeCompare(c.textContent);return asc?r:-r;});"
    "rows.forEach(function(r){b.appendChild(r);});th.setAttribute('data-sort',asc?'asc':'desc');});});});";

std::string base64(const uint8_t* p, size_t n) {
  static const char* t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string o;
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = static_cast<uint32_t>(p[i]) << 16;
    if (i + 1 < n) v |= static_cast<uint32_t>(p[i + 1]) << 8;
    if (i + 2 < n) v |= p[i + 2];
    o.push_back(t[(v >> 18) & 63]);
    o.push_back(t[(v >> 12) & 63]);
    o.push_back(i + 1 < n ? t[(v >> 6) & 63] : '=');
    o.push_back(i + 2 < n ? t[v & 63] : '=');
  }
  return o;
}

}  // namespace

int report_order(const std::string& k) {
  static const std::vector<std::string> order = {"logit_lens", "logit_lens_corpus", "projection", "project", "heads",
                                                 "neurons", "spectrum", "anisotropy", "neighbours", "knn", "positions"};
  auto it = std::find(order.begin(), order.end(), k);
  return it == order.end() ? 1000 : static_cast<int>(it - order.begin());
}

std::string render_report_html(const std::vector<Result>& results_in, const ReportOptions& opts) {
  std::vector<const Result*> results;
  for (const auto& r : results_in) results.push_back(&r);
  std::stable_sort(results.begin(), results.end(), [](const Result* a, const Result* b) {
    int ra = report_order(a->kind), rb = report_order(b->kind);
    return ra != rb ? ra < rb : (ra == 1000 && a->kind < b->kind);
  });
  reset_figure_ids();
  Sha256 sh;
  sh.update(std::string_view(kScript));
  auto digest = sh.digest();
  std::string script_hash = base64(digest.data(), digest.size());
  std::string title = opts.title.empty() ? "vocablens report" + (opts.run_dir.empty() ? "" : " — " + opts.run_dir) : opts.title;

  std::string h;
  h += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  h += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  h += "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'sha256-" +
       script_hash + "'\">\n";
  h += "<meta name=\"generator\" content=\"vocablens " VOCABLENS_VERSION "\">\n";
  h += "<title>" + esc(title) + "</title>\n<style>" + std::string(kStyle) + "</style>\n</head>\n<body>\n";
  h += "<header><h1>" + esc(title) + "</h1><p>" +
       esc(fmt::format("{} result{} · vocablens {}", results.size(), results.size() == 1 ? "" : "s", VOCABLENS_VERSION)) +
       (opts.run_dir.empty() ? "" : " · run directory <code>" + esc(opts.run_dir) + "</code>") + "</p></header>\n";
  h += "<nav>";
  for (size_t i = 0; i < results.size(); ++i)
    h += fmt::format("<a href=\"#r{}\">{}</a>", i, esc(kind_title(results[i]->kind)));
  h += "</nav>\n<main>\n";
  if (results.empty()) h += "<p>No results.</p>";
  for (size_t i = 0; i < results.size(); ++i) h += render_section(*results[i], opts, i) + "\n";
  h += "</main>\n<script>" + std::string(kScript) + "</script>\n</body>\n</html>\n";
  return h;
}

std::string write_report(const std::vector<Result>& results, const std::string& run_dir, const std::string& out_file) {
  if (results.empty()) throw FormatError(run_dir, "no vocablens results (<kind>.json) in this directory");
  std::string path = out_file.empty() ? (run_dir.empty() || run_dir.back() == '/' ? run_dir : run_dir + "/") + "report.html" : out_file;
  ReportOptions o;
  o.run_dir = run_dir;
  write_file_atomic(path, render_report_html(results, o));
  return path;
}

std::string write_report(const std::string& run_dir, const std::string& out_file) {
  return write_report(read_run_directory(run_dir), run_dir, out_file);
}

}  // namespace vocablens

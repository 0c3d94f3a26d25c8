// The HTML building blocks of the report's sections (see report_blocks.hpp).
#include "report_blocks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

namespace vocablens::report_detail {

// ---------------------------------------------------------------------------------------------------
// Text helpers (the shared ones are in report_svg.hpp)

std::string cell_string(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "";
  if (v.is_number()) return num(v.get<double>());
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  return v.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string pretty_name(const std::string& s) {
  std::string o = s;
  std::replace(o.begin(), o.end(), '_', ' ');
  return o;
}

bool is_token_column(const std::string& c) {
  static const std::set<std::string> names = {"token", "tokens", "src",       "dst",         "src_token", "dst_token",
                                              "query", "key",    "neighbour", "neighbor",    "input",     "output",
                                              "text",  "string", "top1",      "input_token", "target",    "name"};
  if (names.count(c)) return true;
  auto ends = [&](const char* suf) {
    size_t n = std::strlen(suf);
    return c.size() > n && c.compare(c.size() - n, n, suf) == 0;
  };
  return ends("_token") || ends("_text") || ends("_str");
}

// ---------------------------------------------------------------------------------------------------
// JSON extraction helpers (tolerant of the different shapes analyses may choose)

const json* find_key(const json& obj, std::initializer_list<const char*> keys) {
  if (!obj.is_object()) return nullptr;
  for (const char* k : keys) {
    auto it = obj.find(k);
    if (it != obj.end() && !it->is_null()) return &*it;
  }
  return nullptr;
}

// A list of strings from [str...], [{text|string|token|label: str}...]; empty when it is none of these.
std::vector<std::string> string_list(const json* j) {
  std::vector<std::string> out;
  if (!j || !j->is_array()) return out;
  for (const auto& e : *j) {
    if (e.is_string()) out.push_back(e.get<std::string>());
    else if (e.is_object()) {
      const json* t = find_key(e, {"text", "string", "str", "token", "label", "display", "name"});
      if (!t || !t->is_string()) return {};
      out.push_back(t->get<std::string>());
    } else {
      return {};
    }
  }
  return out;
}

// The input token strings of a result (summary or settings), if any.
std::vector<std::string> input_tokens(const Result& r) {
  for (const json* src : {&r.summary, &r.settings}) {
    for (const char* key :
         {"token_strings", "tokens_text", "token_text", "input_tokens", "tokens", "token_str", "strings", "input"}) {
      const json* j = find_key(*src, {key});
      if (!j) continue;
      if (j->is_object()) {  // {"ids": [...], "strings"|"text": [...]}
        auto v = string_list(find_key(*j, {"strings", "text", "display", "str", "tokens"}));
        if (!v.empty()) return v;
        continue;
      }
      auto v = string_list(j);
      if (!v.empty()) return v;
    }
  }
  return {};
}

// ---------------------------------------------------------------------------------------------------
// HTML blocks

std::string figure(const std::string& title, const std::string& body, const std::string& caption, bool scroll) {
  std::string s = "<figure>";
  if (!title.empty()) s += "<figcaption class=\"ftitle\">" + esc(title) + "</figcaption>";
  s += scroll ? "<div class=\"scroll\">" + body + "</div>" : body;
  if (!caption.empty()) s += "<p class=\"note\">" + esc(caption) + "</p>";
  return s + "</figure>";
}

std::string tok_html(const std::string& t) {
  return "<code class=\"tok\" title=\"" + esc(t) + "\">" + esc(visible(t)) + "</code>";
}

namespace {

// An array of objects with the same keys and primitive (or short array) values: rows of a table; its keys.
bool uniform_records(const json& v, std::vector<std::string>& keys) {
  if (!v.is_array() || v.empty() || !v[0].is_object() || v[0].empty()) return false;
  keys.clear();
  for (auto it = v[0].begin(); it != v[0].end(); ++it) keys.push_back(it.key());
  for (const auto& row : v) {
    if (!row.is_object() || row.size() != keys.size()) return false;
    for (const auto& k : keys) {
      auto it = row.find(k);
      if (it == row.end() || !(it->is_primitive() || (it->is_array() && it->size() <= 32))) return false;
    }
  }
  return true;
}

std::string more_note(size_t shown, size_t total, const char* what) {
  return total > shown
             ? fmt::format("<p class=\"note\">first {} of {} {} (all in the result's JSON file)</p>", shown, total, what)
             : std::string();
}

// Nested summary values were shown as folded raw JSON. Objects become nested key/value lists,
// arrays of records small tables, other arrays lists, each cut to its first entries with a note; below four
// levels a value is one line of compact JSON.
std::string value_html_at(const json& v, bool token_like, int depth) {
  if (v.is_string()) return token_like ? tok_html(v.get<std::string>()) : esc(v.get<std::string>());
  if (v.is_number()) return "<span class=\"num\">" + esc(num(v.get<double>())) + "</span>";
  if (v.is_null()) return "<span class=\"null\">—</span>";
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_binary()) return "<span class=\"null\">(binary)</span>";
  if (v.empty()) return v.is_array() ? "[]" : "{}";
  if (depth >= 4) {
    std::string d = v.dump(-1, ' ', false, json::error_handler_t::replace);
    if (d.size() > 300) d = d.substr(0, 300) + "…";
    return "<code>" + esc(d) + "</code>";
  }
  if (v.is_array() && std::all_of(v.begin(), v.end(), [](const json& x) { return x.is_primitive(); })) {
    const size_t n = std::min<size_t>(v.size(), 32);
    std::string s = "[";
    for (size_t i = 0; i < n; ++i) s += (i ? ", " : "") + value_html_at(v[i], token_like, depth + 1);
    return s + (v.size() > n ? fmt::format(", … ] <span class=\"note\">({} items)</span>", v.size()) : std::string("]"));
  }
  std::vector<std::string> keys;
  if (uniform_records(v, keys) && keys.size() <= 12) {
    const size_t n = std::min<size_t>(v.size(), 50);
    std::string s = "<div class=\"scroll\"><table class=\"mini\"><thead><tr>";
    for (const auto& k : keys) s += "<th>" + esc(pretty_name(k)) + "</th>";
    s += "</tr></thead><tbody>";
    for (size_t i = 0; i < n; ++i) {
      s += "<tr>";
      for (const auto& k : keys)
        s += "<td>" + value_html_at(v[i].at(k), token_like || k.find("token") != std::string::npos || k == "text", depth + 1) +
             "</td>";
      s += "</tr>";
    }
    return s + "</tbody></table></div>" + more_note(n, v.size(), "rows");
  }
  if (v.is_object()) {
    std::string s = "<dl class=\"kv\">";
    size_t i = 0;
    for (auto it = v.begin(); it != v.end() && i < 64; ++it, ++i) {
      bool tokish = token_like || it.key().find("token") != std::string::npos;
      s += "<dt>" + esc(pretty_name(it.key())) + "</dt><dd>" + value_html_at(it.value(), tokish, depth + 1) + "</dd>";
    }
    return s + "</dl>" + more_note(i, v.size(), "keys");
  }
  const size_t n = std::min<size_t>(v.size(), 32);
  std::string s = "<ul class=\"sub\">";
  for (size_t i = 0; i < n; ++i) s += "<li>" + value_html_at(v[i], token_like, depth + 1) + "</li>";
  return s + "</ul>" + more_note(n, v.size(), "items");
}

}  // namespace

std::string value_html(const json& v, bool token_like) { return value_html_at(v, token_like, 0); }

std::string kv_list(const json& obj, const std::set<std::string>& skip) {
  if (!obj.is_object() || obj.empty()) return "";
  std::string s = "<dl class=\"kv\">";
  size_t n = 0;
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (skip.count(it.key())) continue;
    bool tokish = it.key().find("token") != std::string::npos;
    s += "<dt>" + esc(pretty_name(it.key())) + "</dt><dd>" + value_html(it.value(), tokish) + "</dd>";
    ++n;
  }
  return n ? s + "</dl>" : "";
}

std::string token_strip(const std::vector<std::string>& toks, const std::string& title) {
  std::string s = "<div class=\"tokens\"><span class=\"ttl\">" + esc(title) + "</span>";
  for (size_t i = 0; i < toks.size(); ++i) s += fmt::format("<span class=\"ti\"><sub>{}</sub>{}</span>", i, tok_html(toks[i]));
  return s + "</div>";
}

int column_index(const Table& t, std::initializer_list<const char*> names) {
  for (const char* n : names)
    for (size_t c = 0; c < t.columns.size(); ++c)
      if (t.columns[c] == n) return static_cast<int>(c);
  return -1;
}

// A sortable HTML table (first max_rows rows).
std::string html_table(const Table& t, size_t max_rows, const std::string& file_hint) {
  std::string s =
      std::string("<div class=\"scroll") + (t.rows.size() > 24 ? " tall" : "") + "\"><table class=\"data sortable\"><thead><tr>";
  for (const auto& c : t.columns) s += "<th title=\"sort\">" + esc(c) + "</th>";
  s += "</tr></thead><tbody>";
  std::vector<bool> tokcol;
  for (const auto& c : t.columns) tokcol.push_back(is_token_column(c));
  size_t shown = std::min(max_rows, t.rows.size());
  for (size_t i = 0; i < shown; ++i) {
    s += "<tr>";
    for (size_t c = 0; c < t.rows[i].size(); ++c) {
      const json& v = t.rows[i][c];
      if (v.is_number()) s += fmt::format("<td class=\"num\" data-v=\"{}\">{}</td>", esc(v.dump()), esc(num(v.get<double>())));
      else if (v.is_string() && c < tokcol.size() && tokcol[c]) s += "<td>" + tok_html(v.get<std::string>()) + "</td>";
      else s += "<td>" + esc(cell_string(v)) + "</td>";
    }
    s += "</tr>";
  }
  s += "</tbody></table></div>";
  if (shown < t.rows.size())
    s += "<p class=\"note\">" +
         esc(fmt::format("Showing {} of {} rows; all of them are in {}.", shown, t.rows.size(), file_hint)) + "</p>";
  return s;
}

// Tables with key columns (layer+head, layer+neuron, query, component, ...) as one card per key.
bool grouped_cards(Section& sec, const Table& t) {
  static const std::vector<std::vector<const char*>> keysets = {{"layer", "head", "kind"},
                                                                {"layer", "head"},
                                                                {"layer", "neuron", "vector"},
                                                                {"layer", "neuron"},
                                                                {"layer", "position"},
                                                                {"query"},
                                                                {"component", "sign"},
                                                                {"component"},
                                                                {"direction"},
                                                                {"neuron"},
                                                                {"head"},
                                                                {"source", "source_token"},
                                                                {"source"}};
  std::vector<int> key;
  for (const auto& ks : keysets) {
    std::vector<int> idx;
    for (const char* k : ks) {
      int c = column_index(t, {k});
      if (c < 0) break;
      idx.push_back(c);
    }
    if (idx.size() == ks.size()) {
      key = idx;
      break;
    }
  }
  if (key.empty() || key.size() >= t.columns.size()) return false;
  std::vector<std::string> order;
  std::map<std::string, std::vector<size_t>> groups;
  std::map<std::string, std::string> titles;
  for (size_t i = 0; i < t.rows.size(); ++i) {
    std::string k, title;
    for (int c : key) {
      k += cell_string(t.rows[i][static_cast<size_t>(c)]) + "\x1f";
      title +=
          (title.empty() ? "" : " · ") + t.columns[static_cast<size_t>(c)] + " " + cell_string(t.rows[i][static_cast<size_t>(c)]);
    }
    if (!groups.count(k)) {
      order.push_back(k);
      titles[k] = title;
    }
    groups[k].push_back(i);
  }
  if (order.size() < 2 || order.size() > 400) return false;
  size_t max_per = 0;
  for (auto& [k, v] : groups) max_per = std::max(max_per, v.size());
  if (max_per < 2) return false;  // one row per key: a plain table reads better
  const size_t max_cards = 96, max_rows = 16;
  // Columns shown in a card: not the key, and not numeric ids when the table has token strings.
  bool has_tokens = false;
  for (const auto& c : t.columns) has_tokens = has_tokens || is_token_column(c);
  std::vector<bool> show(t.columns.size(), true);
  for (size_t c = 0; c < t.columns.size(); ++c) {
    const std::string& n = t.columns[c];
    bool id = n == "id" || n == "row" || (n.size() > 3 && n.compare(n.size() - 3, 3, "_id") == 0);
    if (std::find(key.begin(), key.end(), static_cast<int>(c)) != key.end() || (has_tokens && id)) show[c] = false;
  }
  std::string s = "<div class=\"cards\">";
  for (size_t gi = 0; gi < std::min(max_cards, order.size()); ++gi) {
    const auto& k = order[gi];
    s += "<div class=\"card\"><div class=\"ctitle\">" + esc(titles[k]) + "</div><table class=\"mini\"><tr>";
    for (size_t c = 0; c < t.columns.size(); ++c)
      if (show[c]) s += "<th>" + esc(t.columns[c]) + "</th>";
    s += "</tr>";
    const auto& rows = groups[k];
    for (size_t ri = 0; ri < std::min(max_rows, rows.size()); ++ri) {
      size_t i = rows[ri];
      s += "<tr>";
      for (size_t c = 0; c < t.columns.size(); ++c) {
        if (!show[c]) continue;
        const json& v = t.rows[i][c];
        if (v.is_string() && is_token_column(t.columns[c])) s += "<td>" + tok_html(v.get<std::string>()) + "</td>";
        else if (v.is_number()) s += "<td class=\"num\">" + esc(num(v.get<double>())) + "</td>";
        else s += "<td>" + esc(cell_string(v)) + "</td>";
      }
      s += "</tr>";
    }
    s += "</table>";
    if (rows.size() > max_rows) s += "<p class=\"note\">" + esc(fmt::format("+ {} more rows", rows.size() - max_rows)) + "</p>";
    s += "</div>";
  }
  s += "</div>";
  if (order.size() > max_cards)
    s += "<p class=\"note\">" +
         esc(fmt::format("Showing {} of {} groups; all rows are in {}.{}.csv.", max_cards, order.size(), sec.r.kind, t.name)) +
         "</p>";
  sec.html += "<h3>" + esc(pretty_name(t.name)) + "</h3>" + s;
  return true;
}

void render_table(Section& sec, const Table& t) {
  sec.used_tables.insert(t.name);
  if (t.rows.empty()) {
    sec.html += "<h3>" + esc(pretty_name(t.name)) + "</h3><p class=\"note\">(empty table)</p>";
    return;
  }
  if (grouped_cards(sec, t)) return;
  sec.html +=
      "<h3>" + esc(pretty_name(t.name)) + "</h3>" + html_table(t, sec.opts.max_table_rows, sec.r.kind + "." + t.name + ".csv");
}

// Heatmap of any 2-D array, with token labels when a side matches the input length.
std::string array_heatmap(Section& sec, const std::string& name, const Grid& full, Cmap cmap, const std::string& label,
                          std::vector<std::string> row_labels, std::vector<std::string> col_labels, double vmin, double vmax,
                          const std::string& row_axis, const std::string& col_axis) {
  Grid g = downsample(full, 96, 128);
  Heatmap h;
  h.grid = &g;
  h.cmap = cmap;
  h.value_label = label;
  h.vmin = vmin;
  h.vmax = vmax;
  h.row_axis = row_axis;
  h.col_axis = col_axis;
  if (row_labels.empty() && !sec.tokens.empty() && full.rows == static_cast<int64_t>(sec.tokens.size())) row_labels = sec.tokens;
  if (col_labels.empty() && !sec.tokens.empty() && full.cols == static_cast<int64_t>(sec.tokens.size())) col_labels = sec.tokens;
  h.row_labels = row_labels;
  h.col_labels = col_labels;
  int cw = g.cols <= 16 ? 40 : g.cols <= 48 ? 16 : 8;
  int ch = g.rows <= 16 ? 24 : g.rows <= 32 ? 16 : g.rows <= 64 ? 10 : 7;
  if (!col_labels.empty() && g.col_step == 1 && g.cols <= 32) cw = 44;
  h.cell_w = cw;
  h.cell_h = ch;
  std::string caption;
  if (g.row_step > 1 || g.col_step > 1)
    caption = fmt::format("{}×{} shown as {}×{} block means ({}×{} blocks); the full array is {}.{}.npy.", full.rows, full.cols,
                          g.rows, g.cols, g.row_step, g.col_step, sec.r.kind, name);
  return figure(pretty_name(name) + fmt::format(" [{}×{}]", full.rows, full.cols), svg_heatmap(h), caption);
}

// ---------------------------------------------------------------------------------------------------
// Per-kind renderers

std::vector<std::string> layer_labels(const Result& r, int64_t n) {
  std::vector<std::string> labels;
  for (const json* j :
       {find_key(r.summary, {"layer_labels"}), find_key(r.summary, {"layers"}), find_key(r.settings, {"layers"})}) {
    if (!j || !j->is_array()) continue;
    labels.clear();
    for (const auto& e : *j) {
      if (e.is_string()) labels.push_back(e.get<std::string>());
      else if (e.is_number()) labels.push_back(num(e.get<double>()));
      else if (e.is_object()) {
        const json* l = find_key(e, {"label", "hook", "name", "layer"});
        labels.push_back(l ? cell_string(*l) : std::to_string(labels.size()));
      }
    }
    if (static_cast<int64_t>(labels.size()) == n) return labels;
  }
  // A per-layer table's "layer" column.
  for (const auto& t : r.tables) {
    int c = -1;
    for (size_t i = 0; i < t.columns.size(); ++i)
      if (t.columns[i] == "layer") c = static_cast<int>(i);
    if (c >= 0 && static_cast<int64_t>(t.rows.size()) == n) {
      labels.clear();
      for (const auto& row : t.rows) labels.push_back(cell_string(row[static_cast<size_t>(c)]));
      return labels;
    }
  }
  labels.clear();
  for (int64_t i = 0; i < n; ++i) labels.push_back(std::to_string(i));
  return labels;
}

// Top-k lists per (layer, position) from a table with layer, position, rank, token (and prob/logit).

TopK topk_from_table(const Table& t, const std::vector<std::string>& layer_names, const std::vector<int64_t>& positions) {
  TopK out;
  int cl = column_index(t, {"layer_index", "layer", "lens_layer"}), cp = column_index(t, {"position", "pos", "t"});
  int cr = column_index(t, {"rank"}), ct = column_index(t, {"token", "token_str", "text", "top_token"});
  int cv = column_index(t, {"prob", "probability", "p", "logit", "score"});
  if (cl < 0 || cp < 0 || ct < 0) return out;
  std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<double, std::pair<std::string, double>>>> tmp;
  for (size_t i = 0; i < t.rows.size(); ++i) {
    const auto& row = t.rows[i];
    const json& lj = row[static_cast<size_t>(cl)];
    int64_t li = -1;
    std::string ls = cell_string(lj);
    auto lit = std::find(layer_names.begin(), layer_names.end(), ls);
    if (lit != layer_names.end()) li = lit - layer_names.begin();
    else if (lj.is_number_integer() && lj.get<int64_t>() >= 0 && lj.get<int64_t>() < static_cast<int64_t>(layer_names.size()))
      li = lj.get<int64_t>();
    const json& pj = row[static_cast<size_t>(cp)];
    if (li < 0 || !pj.is_number()) continue;
    int64_t col = pj.get<int64_t>();
    if (!positions.empty()) {
      auto it = std::find(positions.begin(), positions.end(), col);
      if (it == positions.end()) continue;
      col = it - positions.begin();
    }
    double rank =
        cr >= 0 && row[static_cast<size_t>(cr)].is_number() ? row[static_cast<size_t>(cr)].get<double>() : static_cast<double>(i);
    double val = cv >= 0 && row[static_cast<size_t>(cv)].is_number() ? row[static_cast<size_t>(cv)].get<double>() : kNaN;
    tmp[{li, col}].push_back({rank, {cell_string(row[static_cast<size_t>(ct)]), val}});
  }
  for (auto& [k, v] : tmp) {
    std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& e : v) out.cells[k].push_back(e.second);
  }
  return out;
}

// A [L][T] grid of strings from the summary (e.g. the top-1 token at every layer and position).
std::vector<std::vector<std::string>> string_grid(const Result& r, std::initializer_list<const char*> keys) {
  std::vector<std::vector<std::string>> g;
  const json* j = find_key(r.summary, keys);
  if (j && j->is_object()) j = find_key(*j, {"tokens", "strings", "text"});
  if (!j || !j->is_array()) return g;
  for (const auto& row : *j) {
    auto v = string_list(&row);
    if (v.empty() && !(row.is_array() && row.empty())) return {};
    g.push_back(std::move(v));
  }
  return g;
}

void curves_per_layer(Section& sec, const std::vector<std::pair<std::string, const NdArray*>>& metrics,
                      const std::vector<std::string>& layers) {
  std::string figs;
  for (const auto& [name, a] : metrics) {
    Grid g;
    LineChart c;
    c.x_labels = layers;
    c.x_label = "layer";
    c.y_label = pretty_name(name);
    bool sentinel = a->dtype.size() == 3 && (a->dtype[1] == 'i');  // -1 marks "no target" in integer arrays
    if (as_grid(*a, g)) {
      if (sentinel)
        for (auto& x : g.v)
          if (x < 0) x = kNaN;
      Series mean{"mean over positions", {}}, last{"last position", {}};
      for (int64_t i = 0; i < g.rows; ++i) {
        double s = 0;
        int64_t n = 0;
        for (int64_t j = 0; j < g.cols; ++j)
          if (std::isfinite(g.at(i, j))) {
            s += g.at(i, j);
            ++n;
          }
        mean.y.push_back(n ? s / static_cast<double>(n) : kNaN);
        // The last position with a value (the last one has no next-token target for some metrics).
        double lv = kNaN;
        for (int64_t j = g.cols - 1; j >= 0; --j)
          if (std::isfinite(g.at(i, j))) {
            lv = g.at(i, j);
            break;
          }
        last.y.push_back(lv);
      }
      c.series = {mean, last};
    } else if (squeezed_shape(*a).size() <= 1) {
      std::vector<double> v = as_vector(*a);
      if (sentinel)
        for (auto& x : v)
          if (x < 0) x = kNaN;
      c.series = {{pretty_name(name), v}};
    } else {
      continue;
    }
    figs += "<div class=\"chartbox\">" + figure(pretty_name(name) + " per layer", svg_line_chart(c), "", false) + "</div>";
  }
  if (!figs.empty()) sec.html += "<h3>Per-layer curves</h3><div class=\"charts\">" + figs + "</div>";
}

void spectrum_figures(Section& sec) {
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
    c.x0 = 0;  // 0-based like the singular_values table and the arrays (the plot counted from 1)
    c.x_label = "index (0-based)";
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
    c.x0 = 0;
    c.x_label = "component (0-based)";
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
        d.x0 = 0;
        d.x_label = "singular direction (0-based)";
        d.y_label = "fraction of energy";
        d.y_min = 0;
        d.y_max = 1;
        figs += "<div class=\"chartbox\">" +
                figure("Energy of the top singular directions (uncentred)", svg_line_chart(d), "", false) + "</div>";
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

}  // namespace vocablens::report_detail

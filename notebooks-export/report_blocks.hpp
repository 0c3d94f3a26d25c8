// notebooks-export/report_blocks.hpp — private to the HTML report: the HTML building blocks that every
// kind's section is made of (figures, token strips, key/value lists, sortable tables, cards, heatmaps of
// arrays, curves per layer) and the tolerant readers of a Result's JSON they rely on.
//
// The page is report_html.cpp; each kind's own figures are drawn by its slice (analyses/<slice>_report.cpp,
// registered in vocablens/result_kinds.hpp); the SVG figures are in report_svg.hpp. Every string argument
// is raw text: the builders escape it.
//
//   report_detail::Section sec{result, opts};
//   sec.html += report_detail::kv_list(result.settings);
//   for (const auto& t : result.tables) report_detail::render_table(sec, t);
#pragma once
#include <cstdint>
#include <initializer_list>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "report_svg.hpp"
#include "vocablens/report.hpp"
#include "vocablens/result_kinds.hpp"

namespace vocablens::report_detail {

using json = nlohmann::json;

/// One result's section while it is being built: what it has used (the rest is rendered generically).
struct Section {
  const Result& r;
  const ReportOptions& opts;
  std::string html;
  std::set<std::string> used_arrays, used_tables;
  std::vector<std::string> tokens;  ///< input token strings, when the result has them
  std::string uid;                  ///< unique id prefix of this section

  const NdArray* array(std::initializer_list<const char*> names) {
    for (const char* n : names) {
      auto it = r.arrays.find(n);
      if (it != r.arrays.end()) return &it->second;
    }
    return nullptr;
  }
  const Table* table(std::initializer_list<const char*> names) const {
    for (const char* n : names)
      for (const auto& t : r.tables)
        if (t.name == n) return &t;
    return nullptr;
  }
  void use(const NdArray* a) {
    for (const auto& [n, x] : r.arrays)
      if (&x == a) used_arrays.insert(n);
  }
};

/// Top-k tokens per (layer, position) read from a lens table (topk_from_table).
struct TopK {
  std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<std::string, double>>> cells;  ///< ordered by rank
  bool empty() const { return cells.empty(); }
};

std::string cell_string(const json& v);

std::string pretty_name(const std::string& s);

bool is_token_column(const std::string& c);

const json* find_key(const json& obj, std::initializer_list<const char*> keys);

// A list of strings from [str...], [{text|string|token|label: str}...]; empty when it is none of these.
std::vector<std::string> string_list(const json* j);

// The input token strings of a result (summary or settings), if any.
std::vector<std::string> input_tokens(const Result& r);

std::string figure(const std::string& title, const std::string& body, const std::string& caption = "", bool scroll = true);

std::string tok_html(const std::string& t);

std::string value_html(const json& v, bool token_like = false);

std::string kv_list(const json& obj, const std::set<std::string>& skip = {});

std::string token_strip(const std::vector<std::string>& toks, const std::string& title);

int column_index(const Table& t, std::initializer_list<const char*> names);

// A sortable HTML table (first max_rows rows).
std::string html_table(const Table& t, size_t max_rows, const std::string& file_hint);

// Tables with key columns (layer+head, layer+neuron, query, component, ...) as one card per key.
bool grouped_cards(Section& sec, const Table& t);

void render_table(Section& sec, const Table& t);

// Heatmap of any 2-D array, with token labels when a side matches the input length.
std::string array_heatmap(Section& sec, const std::string& name, const Grid& full, Cmap cmap, const std::string& label,
                          std::vector<std::string> row_labels = {}, std::vector<std::string> col_labels = {}, double vmin = kNaN,
                          double vmax = kNaN, const std::string& row_axis = "", const std::string& col_axis = "");

std::vector<std::string> layer_labels(const Result& r, int64_t n);

TopK topk_from_table(const Table& t, const std::vector<std::string>& layer_names, const std::vector<int64_t>& positions = {});

// A [L][T] grid of strings from the summary (e.g. the top-1 token at every layer and position).
std::vector<std::vector<std::string>> string_grid(const Result& r, std::initializer_list<const char*> keys);

void curves_per_layer(Section& sec, const std::vector<std::pair<std::string, const NdArray*>>& metrics,
                      const std::vector<std::string>& layers);

// The figures of a spectrum (spectrum and positions kinds): singular values (with √ covariance eigenvalues),
// explained variance, energy of the top directions, sorted row norms; direction vectors marked as used.
void spectrum_figures(Section& sec);

}  // namespace vocablens::report_detail

// vocablens/report.hpp — a run directory as one self-contained HTML page (inline SVG, no network).
//
// One section per Result: the figures its kind's slice registered (vocablens/result_kinds.hpp), then a
// generic rendering (summary, tables, array overview) of everything else, so a new analysis shows up
// without changes here. The conventions each renderer reads
// (array and table names per kind) are documented in docs/results.md. Every piece of text that came
// from a model or a prompt is HTML-escaped; the page runs one small inline script (hover/tooltips and
// table filtering) and loads nothing.
//
//   auto results = vocablens::read_run_directory("runs/eiffel");
//   std::string html = vocablens::render_report_html(results, {"runs/eiffel"});
//   std::string path = vocablens::write_report("runs/eiffel");   // runs/eiffel/report.html
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "vocablens/result.hpp"
#include "vocablens/result_kinds.hpp"

namespace vocablens {

struct ReportOptions {
  std::string title;            ///< page title; "vocablens report" plus the run directory when empty
  std::string run_dir;          ///< shown in the header and used for links to side files
  size_t max_table_rows = 200;  ///< rows shown per table (the CSV side file has them all)
};

/// The whole HTML document for `results` (in the order given).
std::string render_report_html(const std::vector<Result>& results, const ReportOptions& opts = {});

/// Reads `run_dir` (read_run_directory), renders it and writes the page atomically to `out_file`
/// (default <run_dir>/report.html). Returns the path written. Throws FormatError when the directory
/// holds no results or cannot be written.
std::string write_report(const std::string& run_dir, const std::string& out_file = "");

/// Same, for results already in memory.
std::string write_report(const std::vector<Result>& results, const std::string& run_dir, const std::string& out_file = "");

/// Escapes & < > " ' for HTML text and attribute values; invalid UTF-8 becomes U+FFFD.
std::string html_escape(std::string_view s);

/// `s` with every invalid UTF-8 sequence replaced by U+FFFD (token strings of byte-level BPE can be
/// partial characters).
std::string valid_utf8(std::string_view s);

/// The default prompt of example_results(): markup and quotes, which the report must show as text.
inline constexpr const char* kExamplePrompt = "The \"Eiffel\" Tower <script>alert(1)</script> is in 'Paris'";

/// Synthetic results of every kind the report knows (logit_lens, projection, heads, neurons, spectrum,
/// anisotropy, neighbours, knn, positions) plus one unknown kind, shaped like the analyses' to_result()
/// output. For tests and `vocablens report --example DIR`.
std::vector<Result> example_results(const std::string& prompt = kExamplePrompt);

/// Reads element `i` (C order) of a numeric array as double (any dtype read_npy accepts).
double ndarray_value(const NdArray& a, int64_t i);

}  // namespace vocablens

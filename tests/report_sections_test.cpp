// The report's sections on what the analyses really produce: the Summary lays nested
// values out instead of folding raw JSON; the heads' per-circuit spectra label their rows by layer, head and
// kind (not by circuit index); the singular-value plot counts from 0 like the singular_values table.
#include <catch2/catch.hpp>

#include <string>

#include "../notebooks-export/report_blocks.hpp"
#include "fixtures.hpp"
#include "real_results.hpp"
#include "vocablens/heads.hpp"
#include "vocablens/report.hpp"
#include "vocablens/spectrum.hpp"

namespace {

// The HTML of one result's section in a page of its own.
std::string section_of(const vocablens::Result& r) {
  vocablens::ReportOptions opts;
  return vocablens::render_report_html({r}, opts);
}

// The <details class="summary"> block of a page ("" when there is none).
std::string summary_block(const std::string& html) {
  size_t a = html.find("<details class=\"summary\"><summary>Summary</summary>");
  if (a == std::string::npos) return "";
  // Nested <details> (folded JSON) would end early; find the matching close by depth.
  int depth = 0;
  for (size_t i = a; i < html.size(); ++i) {
    if (html.compare(i, 8, "<details") == 0) ++depth;
    if (html.compare(i, 10, "</details>") == 0 && --depth == 0) return html.substr(a, i + 10 - a);
  }
  return html.substr(a);
}

}  // namespace

TEST_CASE("report: the Summary of every real result lays nested values out, never as folded raw JSON", "[report][fixtures]") {
  std::string dir = vl_test::fixture("gpt2-tiny");
  if (dir.empty()) return;
  int nested = 0;
  for (const auto& r : vl_test::real_results(dir)) {
    INFO("kind " << r.kind);
    std::string s = summary_block(section_of(r));
    CHECK(s.find("<pre>") == std::string::npos);
    for (auto it = r.summary.begin(); r.summary.is_object() && it != r.summary.end(); ++it)
      nested += it->is_structured() && !it->empty();
  }
  CHECK(nested >= 5);  // the summaries do hold nested objects and lists, so the check above means something
  // A nested object becomes a key/value list, a list of records a table: the values are there as text.
  vocablens::Result r;
  r.kind = "some_analysis";
  r.summary = {{"by_layer", {{"embed", 0.25}, {"0", 0.5}}},
               {"rows", {{{"id", 7}, {"token", " Paris"}}, {{"id", 9}, {"token", " <b>"}}}}};
  std::string s = summary_block(section_of(r));
  CHECK(s.find("<pre>") == std::string::npos);
  CHECK(s.find("<dt>embed</dt><dd><span class=\"num\">0.25</span></dd>") != std::string::npos);
  CHECK(s.find("<table class=\"mini\">") != std::string::npos);
  CHECK(s.find("&lt;b&gt;") != std::string::npos);
  CHECK(s.find("<b>") == std::string::npos);
}

TEST_CASE("report: the heads' per-circuit spectra label rows by layer, head and kind", "[report][heads][fixtures]") {
  std::string dir = vl_test::fixture("gpt2-tiny");
  if (dir.empty()) return;
  vocablens::init_runtime();
  auto m = vocablens::load_model(dir);
  auto tok = vocablens::load_tokenizer_for(dir);
  vocablens::HeadsOptions ho;
  ho.layers = {1};
  ho.heads = {0, 1};
  ho.top_k = 3;
  ho.pinv.use_cache = false;
  auto r = vocablens::analyze_heads(m, ho, tok.get()).to_result(tok.get());
  REQUIRE(r.arrays.count("eigenvalues_real"));
  REQUIRE(r.arrays.at("eigenvalues_real").shape[0] == 4);  // 2 heads x (ov, qk)
  std::string html = section_of(r);
  // The eigenvalue heatmap exists once, and its rows are the circuits by name (e.g. "L1H0·ov", TransformerLens style).
  size_t fig = html.find("eigenvalues real [4×");
  REQUIRE(fig != std::string::npos);
  std::string after = html.substr(fig, html.find("</figure>", fig) - fig);
  for (const char* label : {"L1H0·ov", "L1H1·ov", "L1H0·qk", "L1H1·qk"}) {
    INFO(label);
    CHECK(after.find(label) != std::string::npos);
  }
  CHECK(after.find("circuit (layer, head, kind)") != std::string::npos);
}

TEST_CASE("report: the singular-value plot counts from 0, like the singular_values table", "[report][spectrum][fixtures]") {
  std::string dir = vl_test::fixture("gpt2-tiny");
  if (dir.empty()) return;
  vocablens::init_runtime();
  auto m = vocablens::load_model(dir);
  vocablens::SpectrumOptions so;
  so.k = 8;
  so.full_spectrum = false;  // the plot is of the top-8 singular values, the table's rows
  auto r = vocablens::matrix_spectrum(vocablens::model_matrix(m, "W_E"), so, "W_E", "token").to_result(nullptr);
  const vocablens::Table* t = nullptr;
  for (const auto& x : r.tables)
    if (x.name == "singular_values") t = &x;
  REQUIRE(t);
  REQUIRE(t->columns.at(0) == "component");
  REQUIRE(t->rows.at(0).at(0) == 0);  // the table's first component
  const double sigma0 = t->rows.at(0).at(1).get<double>();
  std::string html = section_of(r);
  // Each point's hover text names its x; the largest singular value sits at index 0, as in the table.
  std::string point = "singular values @ index (0-based) 0: " + vocablens::report_detail::num(sigma0);
  CHECK(html.find(point) != std::string::npos);
  CHECK(html.find("singular values @ index (0-based) 8:") == std::string::npos);
}

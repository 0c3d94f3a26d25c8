// The registry of result kinds, on what the analyses really produce on a fixture model (not hand-made
// JSON): every kind an analysis writes is registered, each kind's own report figures draw from the arrays and
// tables the analysis really names (renaming one breaks this test), and the whole page and notebook hold one
// section per result under the registered titles, in the registered order.
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "../notebooks-export/report_blocks.hpp"
#include "fixtures.hpp"
#include "real_results.hpp"
#include "vocablens/notebook.hpp"
#include "vocablens/report.hpp"
#include "vocablens/result_kinds.hpp"

namespace {

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + what.size())) ++n;
  return n;
}

}  // namespace

TEST_CASE("the registry: unique names, plain names, every example of its own kind", "[kinds]") {
  const auto all = vocablens::result_kinds().all();
  REQUIRE(all.size() >= 10);
  std::set<std::string> names;
  int prev = -1;
  for (const auto* k : all) {
    INFO(k->name);
    CHECK(names.insert(k->name).second);
    CHECK(k->name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_-") == std::string::npos);
    CHECK(!k->title.empty());
    CHECK(k->order >= prev);
    prev = k->order;
    CHECK(vocablens::report_order(k->name) == k->order);
    CHECK(vocablens::kind_title(k->name) == k->title);
    if (k->example) CHECK(k->example({"a prompt", {"a", " prompt"}}).kind == k->name);
  }
  CHECK(vocablens::result_kinds().find("no_such_kind") == nullptr);
  CHECK(vocablens::report_order("no_such_kind") == 1000);
  CHECK(vocablens::kind_title("no_such_kind") == "No such kind");
  vocablens::ResultKinds mine;
  mine.add({"x", "X", 0, "", nullptr, "", nullptr, {}});
  CHECK_THROWS_AS(mine.add({"x", "X again", 1, "", nullptr, "", nullptr, {}}), std::logic_error);
}

TEST_CASE("every kind the analyses produce is registered and its figures draw from the real output", "[kinds][fixtures]") {
  std::string dir = vl_test::fixture("gpt2-tiny");
  if (dir.empty()) return;
  const auto results = vl_test::real_results(dir);
  REQUIRE(!results.empty());  // which kinds must be there: the registry's, checked below

  std::set<std::string> produced;
  for (const auto& r : results) {
    INFO("kind " << r.kind);
    REQUIRE(produced.insert(r.kind).second);
    const vocablens::ResultKind* k = vocablens::result_kinds().find(r.kind);
    REQUIRE(k != nullptr);
    if (!k->report) continue;
    // The kind's own renderer on the real result: it must find what it reads (arrays or tables by the names
    // the analysis writes) and draw a figure from it.
    vocablens::ReportOptions opts;
    vocablens::report_detail::Section sec{r, opts, "", {}, {}, vocablens::report_detail::input_tokens(r), "t"};
    k->report(sec);
    CHECK(sec.html.find("<svg") != std::string::npos);
    // A kind with arrays draws from some of them (anisotropy has only its "removed" table, which it charts and
    // leaves to the generic table too).
    if (!r.arrays.empty()) CHECK(sec.used_arrays.size() + sec.used_tables.size() > 0);
  }
  // Every kind with an example (one per slice; aliases have none) is produced by a real analysis above, so
  // a new slice that registers a kind is rendered here from its real output too.
  for (const auto* k : vocablens::result_kinds().all())
    if (k->example) {
      INFO("registered kind " << k->name << " is not produced by real_results()");
      CHECK(produced.count(k->name) == 1);
    }

  vocablens::ReportOptions opts;
  opts.run_dir = "runs/real";
  const std::string html = vocablens::render_report_html(results, opts);
  CHECK(count(html, "<section class=\"result\"") == results.size());
  size_t last = 0;
  for (const auto* k : vocablens::result_kinds().all()) {
    if (!produced.count(k->name)) continue;
    INFO(k->name);
    const size_t at = html.find("<h2>" + vocablens::html_escape(k->title) + " <span class=\"kind\">" + k->name + "</span></h2>");
    REQUIRE(at != std::string::npos);
    CHECK(at > last);  // the registered reading order
    last = at;
  }
  // The prompt's markup stays text.
  CHECK(count(html, "<script") == 1);
  CHECK(html.find("&lt;b&gt;is&lt;/b&gt;") != std::string::npos);

  // The notebook: one markdown + code cell per result, each code cell loading its own kind.
  const auto nb = nlohmann::json::parse(vocablens::render_notebook(results, "real"));
  REQUIRE(nb["cells"].size() == 2 + 2 * results.size());
  for (const auto& r : results) {
    INFO(r.kind);
    bool found = false;
    for (const auto& c : nb["cells"]) {
      std::string src;
      for (const auto& l : c["source"]) src += l.get<std::string>();
      found = found || (c["cell_type"] == "code" && src.rfind("r = load_result(\"" + r.kind + "\")", 0) == 0);
    }
    CHECK(found);
  }
}

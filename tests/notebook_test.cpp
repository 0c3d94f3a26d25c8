// The Jupyter notebook of a run: valid nbformat 4 (checked with python3-nbformat), code cells free of
// result data, and, where jupyter nbconvert and a Python kernel with numpy/pandas/matplotlib are
// installed, it executes from top to bottom without an error. The executed notebook is kept under
// <build>/artifacts/notebook_test/ ("ARTIFACT: ..." lines).
#include <sys/stat.h>

#include <iostream>
#include <set>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "fixtures.hpp"
#include "real_results.hpp"
#include "vocablens/detail/atomic_file.hpp"
#include "vocablens/export.hpp"
#include "vocablens/lens_corpus.hpp"
#include "vocablens/model.hpp"
#include "vocablens/notebook.hpp"
#include "vocablens/report.hpp"

using json = nlohmann::json;
using vocablens::NdArray;
using vocablens::Result;

namespace {

using vl_test::file_exists;


std::string python() { return file_exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3"; }

std::string shell_quote(const std::string& s) {
  std::string o = "'";
  for (char c : s) o += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return o + "'";
}

std::string joined_source(const json& cell) {
  std::string s;
  for (const auto& l : cell["source"]) s += l.get<std::string>();
  return s;
}

// The kind name of the corpus lens, as that analysis writes it (on a two-line text with gpt2-tiny).
std::string corpus_kind() {
  static const std::string kind = [] {
    std::string dir = vl_test::fixture("gpt2-tiny");
    REQUIRE(!dir.empty());
    vocablens::init_runtime();
    auto m = vocablens::load_model(dir);
    auto tok = vocablens::load_tokenizer_for(dir);
    std::string path = vl_test::temp_dir("nb-corpus") + "/c.txt";
    vl_test::write_file(path, "The Eiffel Tower is in Paris.\nIt is made of iron.\n");
    return vocablens::logit_lens_corpus(m, *tok, path).to_result().kind;
  }();
  return kind;
}

// Results with data in every corner: the examples plus tiny and empty ones.
std::vector<Result> notebook_results() {
  auto rs = vocablens::example_results();
  Result empty;
  empty.kind = "empty_kind";
  rs.push_back(empty);
  Result lens_min;  // a corpus lens with two per-layer curves only (no top-k table, no top-1 grid)
  lens_min.kind = corpus_kind();
  std::vector<double> ce = {5.0, 4.0, 3.2, 2.9};
  lens_min.arrays["mean_cross_entropy"] = NdArray::f64({4}, ce.data());
  lens_min.arrays["bits_per_byte"] = NdArray::f64({4}, ce.data());
  lens_min.summary = {{"layers", {"embed", "0", "1", "2"}}};
  rs.push_back(lens_min);
  return rs;
}

bool validate_with_nbformat(const std::string& path, std::string& out) {
  int rc = vl_test::run_command(python() + " -c 'import sys, nbformat; nb = nbformat.read(sys.argv[1], as_version=nbformat.NO_CONVERT); "
                                           "nbformat.validate(nb); assert nb.nbformat == 4; print(\"valid\", nb.nbformat, nb.nbformat_minor, len(nb.cells))' " +
                                    shell_quote(path),
                                out);
  return rc == 0;
}

}  // namespace

// Executes a notebook with jupyter nbconvert (in its own directory); returns the number of images it drew,
// or -1 when Jupyter is not available (after a loud SKIPPED line).
int execute_notebook(const std::string& path) {
  std::string out;
  bool have_jupyter = vl_test::run_command("jupyter nbconvert --version", out) == 0 &&
                      vl_test::run_command(python() + " -c 'import ipykernel, numpy, pandas, matplotlib'", out) == 0;
  if (!have_jupyter) {
    vl_test::require(false, "jupyter nbconvert / ipykernel / pandas / matplotlib not installed; notebooks validated but not executed");
    return -1;
  }
  std::string home = vl_test::temp_dir("jupyter-home");
  std::string env = "MPLCONFIGDIR=" + shell_quote(home) + " IPYTHONDIR=" + shell_quote(home + "/ipython") +
                    " JUPYTER_RUNTIME_DIR=" + shell_quote(home + "/runtime") + " JUPYTER_DATA_DIR=" + shell_quote(home + "/data") +
                    " JUPYTER_PLATFORM_DIRS=1 PYDEVD_DISABLE_FILE_VALIDATION=1 ";
  std::string executed = path.substr(0, path.size() - 6) + ".executed.ipynb";
  ::unlink(executed.c_str());
  std::string dir = path.substr(0, path.rfind('/'));
  int rc = vl_test::run_command("cd " + shell_quote(dir) + " && " + env +
                                    "timeout 600 jupyter nbconvert --to notebook --execute --ExecutePreprocessor.timeout=300 "
                                    "--ExecutePreprocessor.kernel_name=python3 --output " +
                                    shell_quote(executed) + " " + shell_quote(path),
                                out);
  INFO(out);
  REQUIRE(rc == 0);
  REQUIRE(file_exists(executed));
  std::cout << "ARTIFACT: executed notebook " << executed << "\n";
  json ex = json::parse(vl_test::read_file(executed));
  int images = 0;
  for (const auto& c : ex["cells"]) {
    if (c["cell_type"] != "code") continue;
    CHECK(!c["execution_count"].is_null());
    for (const auto& o : c["outputs"]) {
      CHECK(o["output_type"] != "error");
      if (o.contains("data") && o["data"].contains("image/png")) ++images;
      if (o["output_type"] == "stream" && o["name"] == "stderr") {
        std::string text;
        if (o["text"].is_array())
          for (const auto& l : o["text"]) text += l.get<std::string>();
        else
          text = o["text"].get<std::string>();
        INFO("stderr of a cell: " << text);
        CHECK(text.find("Error") == std::string::npos);
        CHECK(text.find("Warning") == std::string::npos);
      }
    }
  }
  CHECK(validate_with_nbformat(executed, out));
  return images;
}

TEST_CASE("the notebook is nbformat 4 with one section per result and no data in code cells") {
  auto results = notebook_results();
  json nb = json::parse(vocablens::render_notebook(results, "test <run>"));
  CHECK(nb["nbformat"] == 4);
  CHECK(nb["nbformat_minor"] == 5);
  CHECK(nb["metadata"]["kernelspec"]["name"] == "python3");
  const auto& cells = nb["cells"];
  REQUIRE(cells.size() == 2 + 2 * results.size());
  CHECK(cells[0]["cell_type"] == "markdown");
  CHECK(joined_source(cells[0]).find("test &lt;run&gt;") != std::string::npos);
  CHECK(cells[1]["cell_type"] == "code");
  CHECK(joined_source(cells[1]).find("def load_result(kind):") != std::string::npos);
  std::set<std::string> ids;
  for (const auto& c : cells) {
    ids.insert(c["id"].get<std::string>());
    if (c["cell_type"] == "code") {
      std::string src = joined_source(c);
      // The prompt and tokens are data: they never become code.
      CHECK(src.find("Eiffel") == std::string::npos);
      CHECK(src.find("alert(1)") == std::string::npos);
      CHECK(c["outputs"].empty());
      CHECK(c["execution_count"].is_null());
    } else {
      std::string src = joined_source(c);
      CHECK(src.find("<script>") == std::string::npos);
    }
  }
  CHECK(ids.size() == cells.size());  // unique cell ids
  // Known kinds first, in the report's order.
  CHECK(joined_source(cells[3]).find("load_result(\"logit_lens\")") != std::string::npos);
  bool prompt_shown = false;
  for (const auto& c : cells)
    if (joined_source(c).find("&lt;script&gt;alert(1)&lt;/script&gt;") != std::string::npos) prompt_shown = true;
  CHECK(prompt_shown);
  // Deterministic: the same results give the same bytes.
  CHECK(vocablens::render_notebook(results, "x") == vocablens::render_notebook(results, "x"));
}

TEST_CASE("every generated notebook validates with nbformat and executes where Jupyter is installed") {
  std::string art = std::string(VOCABLENS_BINARY_DIR) + "/artifacts/notebook_test";
  std::string run = art + "/run";
  vocablens::ensure_directory(run);
  auto results = notebook_results();
  for (const auto& r : results) vocablens::write_result(r, run);
  auto back = vocablens::read_run_directory(run);
  REQUIRE(back.size() == results.size());
  std::string nb = vocablens::write_notebook(back, run);
  CHECK(nb == run + "/vocablens.ipynb");
  // A one-result notebook too (the smallest case).
  std::string small_dir = art + "/small";
  vocablens::ensure_directory(small_dir);
  vocablens::write_result(results.front(), small_dir);
  std::string small = vocablens::write_notebook(vocablens::read_run_directory(small_dir), small_dir);

  std::string out;
  if (vl_test::run_command(python() + " -c 'import nbformat'", out) != 0) {
    vl_test::require(false, "python3-nbformat not installed; notebooks not validated");
    return;
  }
  for (const auto& path : {nb, small}) {
    INFO(path);
    bool ok = validate_with_nbformat(path, out);
    INFO(out);
    CHECK(ok);
  }

  // Execution needs jupyter nbconvert, a python3 kernel (ipykernel) and the libraries the cells import.
  int images = execute_notebook(nb);
  if (images < 0) return;
  CHECK(images >= 10);  // lens heatmaps + curves, projection, heads, spectrum, anisotropy, positions, ...
  CHECK(execute_notebook(small) >= 2);
}

TEST_CASE("the notebook of a fixture run (vocablens lens/spectrum --out --report) validates and executes") {
  std::string cli = vl_test::cli_path();
  if (cli.empty() || !file_exists(cli)) {
    vl_test::require(false, "vocablens CLI not built; fixture-run notebook not exercised");
    return;
  }
  std::string model = vl_test::fixture("gpt2-tiny");
  if (model.empty()) return;
  std::string run = std::string(VOCABLENS_BINARY_DIR) + "/artifacts/notebook_test/fixture-run";
  std::string out;
  vl_test::run_command("rm -rf " + shell_quote(run), out);
  for (std::string c : {"spectrum " + shell_quote(model) + " --k 8 --out " + shell_quote(run),
                        "lens " + shell_quote(model) + " --prompt 'The \"Eiffel\" Tower is in' --top-k 5 --out " + shell_quote(run) + " --report"}) {
    int rc = vl_test::run_command(shell_quote(cli) + " " + c, out);
    INFO("vocablens " << c << "\n" << out.substr(0, 3000));
    REQUIRE(rc == 0);
  }
  std::string nb = run + "/vocablens.ipynb";
  REQUIRE(file_exists(nb));
  json j = json::parse(vl_test::read_file(nb));
  CHECK(j["cells"].size() == 6);  // intro, helpers, and two cells for each of the two results
  if (vl_test::run_command(python() + " -c 'import nbformat'", out) != 0) {
    vl_test::require(false, "python3-nbformat not installed; notebooks not validated");
    return;
  }
  CHECK(validate_with_nbformat(nb, out));
  int images = execute_notebook(nb);
  if (images >= 0) CHECK(images >= 4);
}

TEST_CASE("the notebook of what every analysis really produces validates and executes", "[fixtures]") {
  std::string model = vl_test::fixture("gpt2-tiny");
  if (model.empty()) return;
  std::string run = std::string(VOCABLENS_BINARY_DIR) + "/artifacts/notebook_test/real-results";
  std::string out;
  vl_test::run_command("rm -rf " + shell_quote(run), out);
  vocablens::ensure_directory(run);
  const auto results = vl_test::real_results(model);
  for (const auto& r : results) vocablens::write_result(r, run);
  std::string nb = vocablens::write_notebook(vocablens::read_run_directory(run), run);
  json j = json::parse(vl_test::read_file(nb));
  CHECK(j["cells"].size() == 2 + 2 * results.size());
  if (vl_test::run_command(python() + " -c 'import nbformat'", out) != 0) {
    vl_test::require(false, "python3-nbformat not installed; notebooks not validated");
    return;
  }
  CHECK(validate_with_nbformat(nb, out));
  // Every kind's cell reads the arrays and tables its analysis really writes (a renamed one is a KeyError).
  int images = execute_notebook(nb);
  if (images >= 0) CHECK(images >= 10);
}

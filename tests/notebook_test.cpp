// The Jupyter notebook of a run: valid nbformat 4 (checked with python3-nbformat), code cells free of
// result data, and, where nbclient (Jupyter's executor) and a Python kernel with numpy/pandas/matplotlib
// are installed, it executes from top to bottom without an error. The executed notebooks are kept under
// <build>/artifacts/notebook_test/*/vocablens.nbconvert.ipynb ("ARTIFACT: ..." lines).
#include <sys/stat.h>

#include <filesystem>
#include <iostream>
#include <set>
#include <vector>
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

// Whether python3 has nbformat / Jupyter can execute a notebook: probed only after the validation or the
// execution failed, to tell a missing tool (vl_test::require) from a broken notebook (each probe starts
// Python, the second jupyter and a Python with pandas and matplotlib: ~2 s of CPU that a passing run skips).
bool have_nbformat() {
  static const bool have = [] {
    std::string out;
    return vl_test::run_command(python() + " -c 'import nbformat'", out) == 0;
  }();
  return have;
}

bool have_jupyter() {
  static const bool have = [] {
    std::string out;
    return vl_test::run_command(python() + " -c 'import nbclient, ipykernel, numpy, pandas, matplotlib'", out) == 0;
  }();
  return have;
}

// nbformat.validate on every notebook in `paths`, in one Python process; returns those that are not valid
// nbformat 4 (`out` says why; `rc`, when given, gets the validator's exit status: not 0 when it did not run).
std::vector<std::string> invalid_notebooks(const std::vector<std::string>& paths, std::string& out, int* rc = nullptr) {
  std::string cmd =
      python() +
      " -c 'import sys, nbformat\n"
      "for p in sys.argv[1:]:\n"
      "    try:\n"
      "        nb = nbformat.read(p, as_version=nbformat.NO_CONVERT); nbformat.validate(nb); assert nb.nbformat == 4\n"
      "        print(\"valid\", nb.nbformat, nb.nbformat_minor, len(nb.cells), p)\n"
      "    except Exception as e:\n"
      "        print(\"INVALID\", repr(e), p)\n'";
  for (const auto& p : paths) cmd += " " + shell_quote(p);
  std::vector<std::string> bad;
  const int status = vl_test::run_command(cmd, out);
  if (rc) *rc = status;
  if (status != 0) return paths;
  for (const auto& p : paths) {
    // A line "valid 4 <minor> <cells> <path>" for this path.
    bool ok = false;
    for (size_t at = out.find("valid 4 "); at != std::string::npos; at = out.find("valid 4 ", at + 1)) {
      if (at > 0 && out[at - 1] != '\n') continue;  // not "INVALID"
      size_t eol = out.find('\n', at);
      std::string line = out.substr(at, eol == std::string::npos ? std::string::npos : eol - at);
      if (line.size() >= p.size() + 1 && line.compare(line.size() - p.size() - 1, std::string::npos, " " + p) == 0) ok = true;
    }
    if (!ok) bad.push_back(p);
  }
  return bad;
}

// A notebook to validate and (unless `execute` is false) execute: the fewest images it must draw, and the
// fewest some of its code cells must draw (the code cell with exactly that source).
struct ToExecute {
  std::string path;
  int min_images;
  std::vector<std::pair<std::string, int>> cell_min_images = {};
  bool execute = true;
};

// The notebooks of the test: made (with the checks of their making) by the functions below, validated and
// executed together by the last test case, so that Jupyter and its kernel start once (each notebook in its own
// directory, its namespace emptied before it).

// Every generated notebook: the example results, and a one-result notebook (the smallest case).
std::vector<ToExecute> generated_notebooks() {
  std::string art = std::string(VOCABLENS_BINARY_DIR) + "/artifacts/notebook_test";
  std::string run = art + "/run";
  vocablens::ensure_directory(run);
  auto results = notebook_results();
  for (const auto& r : results) vocablens::write_result(r, run);
  auto back = vocablens::read_run_directory(run);
  REQUIRE(back.size() == results.size());
  std::string nb = vocablens::write_notebook(back, run);
  CHECK(nb == run + "/vocablens.ipynb");
  std::string small_dir = art + "/small";
  std::filesystem::remove_all(small_dir);  // only this run's files: each is compared with the run's below
  vocablens::ensure_directory(small_dir);
  vocablens::write_result(results.front(), small_dir);
  std::string small = vocablens::write_notebook(vocablens::read_run_directory(small_dir), small_dir);
  // The one-result notebook is validated but not executed: its code cells are the run notebook's (the same
  // helpers, the same cell of the same kind) and the files they read are byte for byte the run's, so the run
  // notebook executes exactly what it would (a kernel start, the imports and three figures: ~3 s of CPU).
  // Checked here, so that the two cannot drift apart unnoticed; its two images are checked on that cell.
  const json run_nb = json::parse(vl_test::read_file(nb)), small_nb = json::parse(vl_test::read_file(small));
  std::set<std::string> run_code;
  for (const auto& c : run_nb["cells"])
    if (c["cell_type"] == "code") run_code.insert(joined_source(c));
  std::string small_cell;
  for (const auto& c : small_nb["cells"]) {
    if (c["cell_type"] != "code") continue;
    INFO("code cell of the one-result notebook:\n" << joined_source(c));
    CHECK(run_code.count(joined_source(c)) == 1);
    small_cell = joined_source(c);
  }
  for (const auto& e : std::filesystem::directory_iterator(small_dir)) {
    const std::string f = e.path().filename().string();
    if (e.path().extension() == ".ipynb") continue;
    INFO("data file of the one-result notebook: " << f);
    REQUIRE(file_exists(run + "/" + f));
    CHECK(vl_test::read_file(small_dir + "/" + f) == vl_test::read_file(run + "/" + f));
  }
  REQUIRE(small_cell.find("load_result(\"" + results.front().kind + "\")") != std::string::npos);
  // lens heatmaps + curves, projection, heads, spectrum, anisotropy, positions, ...
  return {{nb, 10, {{small_cell, 2}}}, {small, 2, {}, false}};
}

// The notebook of a fixture run (vocablens spectrum, then lens --out --report into the same directory).
std::vector<ToExecute> fixture_run_notebook() {
  std::string cli = vl_test::cli_path();
  if (cli.empty() || !file_exists(cli)) {
    vl_test::require(false, "vocablens CLI not built; fixture-run notebook not exercised");
    return {};
  }
  std::string model = vl_test::fixture("gpt2-tiny");
  REQUIRE(!model.empty());
  std::string run = std::string(VOCABLENS_BINARY_DIR) + "/artifacts/notebook_test/fixture-run";
  std::string out;
  vl_test::run_command("rm -rf " + shell_quote(run), out);
  for (std::string c : {"spectrum " + shell_quote(model) + " --k 8 --out " + shell_quote(run),
                        "lens " + shell_quote(model) + " --prompt 'The \"Eiffel\" Tower is in' --top-k 5 --out " +
                            shell_quote(run) + " --report"}) {
    int rc = vl_test::run_command(shell_quote(cli) + " " + c, out);
    INFO("vocablens " << c << "\n" << out.substr(0, 3000));
    REQUIRE(rc == 0);
  }
  std::string nb = run + "/vocablens.ipynb";
  REQUIRE(file_exists(nb));
  json j = json::parse(vl_test::read_file(nb));
  CHECK(j["cells"].size() == 6);  // intro, helpers, and two cells for each of the two results
  // Validated, not executed: its two results' cells are those of the real-results notebook (the same kinds of the
  // same model, written by the same write_result), which executes them — a kernel and ~3 s of CPU saved.
  return {{nb, 4, {}, false}};
}

// The notebook of what every analysis really produces: every kind's cell reads the arrays and tables its
// analysis really writes (a renamed one is a KeyError when executed).
std::vector<ToExecute> real_results_notebook() {
  std::string model = vl_test::fixture("gpt2-tiny");
  REQUIRE(!model.empty());
  std::string run = std::string(VOCABLENS_BINARY_DIR) + "/artifacts/notebook_test/real-results";
  std::string out;
  vl_test::run_command("rm -rf " + shell_quote(run), out);
  vocablens::ensure_directory(run);
  const auto results = vl_test::real_results(model);
  for (const auto& r : results) vocablens::write_result(r, run);
  std::string nb = vocablens::write_notebook(vocablens::read_run_directory(run), run);
  json j = json::parse(vl_test::read_file(nb));
  CHECK(j["cells"].size() == 2 + 2 * results.size());
  return {{nb, 10}};
}

// Executes the notebooks in one Python process with nbclient, the executor `jupyter nbconvert --execute` runs
// (without nbconvert's own start-up, ~0.6 s of CPU: its exporters are not needed), one after another in one
// kernel, each after `%reset -f` and a change into its own directory (an empty namespace, as in a kernel of its
// own; the kernel's start and the imports of pandas and matplotlib paid once), written beside it as
// <name>.nbconvert.ipynb, and checks every code cell of each:
// executed, no error output, no Error or
// Warning on its stderr, at least `min_images` images drawn (and `cell_min_images` by those cells), and the
// executed notebook valid nbformat 4. Those with `execute` false are skipped (the caller says why).
void execute_notebooks(const std::vector<ToExecute>& all) {
  std::vector<ToExecute> notebooks;
  for (const auto& n : all)
    if (n.execute) notebooks.push_back(n);
  std::string home = vl_test::temp_dir("jupyter-home");
  std::string env = "MPLCONFIGDIR=" + shell_quote(home) + " IPYTHONDIR=" + shell_quote(home + "/ipython") +
                    " JUPYTER_RUNTIME_DIR=" + shell_quote(home + "/runtime") +
                    " JUPYTER_DATA_DIR=" + shell_quote(home + "/data") +
                    " JUPYTER_PLATFORM_DIRS=1 PYDEVD_DISABLE_FILE_VALIDATION=1 ";
  std::string inputs;
  std::vector<std::string> executed;
  for (const auto& n : notebooks) {
    executed.push_back(n.path.substr(0, n.path.size() - 6) + ".nbconvert.ipynb");
    ::unlink(executed.back().c_str());
    inputs += " " + shell_quote(n.path);
  }
  std::string out;
  // Each notebook runs in its own directory (as nbconvert's kernel does); a cell's error raises
  // (CellExecutionError: exit 1, the traceback in `out`), as with nbconvert.
  int rc = vl_test::run_command(env + "timeout 600 " + python() +
                                    " -c 'import os, sys, nbformat\n"
                                    "from nbclient import NotebookClient\n"
                                    "paths, nbs, starts = sys.argv[1:], [], []\n"
                                    "combined = nbformat.v4.new_notebook()\n"
                                    "for p in paths:\n"
                                    "    nbs.append(nbformat.read(p, as_version=4))\n"
                                    "    d = os.path.abspath(os.path.dirname(p))\n"
                                    "    combined.cells.append(nbformat.v4.new_code_cell(\n"
                                    "        \"%reset -f\\nimport os\\nos.chdir(\" + repr(d) + \")\\ndel os\"))\n"
                                    "    starts.append(len(combined.cells))\n"
                                    "    combined.cells.extend(nbs[-1].cells)\n"
                                    "NotebookClient(combined, timeout=300, kernel_name=\"python3\",\n"
                                    "               resources={\"metadata\": {\"path\": os.path.dirname(paths[0])}}).execute()\n"
                                    "for p, nb, a in zip(paths, nbs, starts):\n"
                                    "    nb.cells = combined.cells[a:a + len(nb.cells)]\n"
                                    "    nbformat.write(nb, p[:-6] + \".nbconvert.ipynb\")\n"
                                    "    print(\"executed\", p)\n'" +
                                    inputs,
                                out);
  INFO(out);
  // Execution needs nbclient, a python3 kernel (ipykernel) and the libraries the cells import: probed
  // only when it failed, so that a missing tool is reported as such (and a broken notebook as a failure).
  if (rc != 0 && !have_jupyter()) {
    vl_test::require(false, "nbclient / ipykernel / pandas / matplotlib not installed; notebooks validated but not executed");
    return;
  }
  REQUIRE(rc == 0);
  for (size_t i = 0; i < notebooks.size(); ++i) {
    INFO("executed notebook " << executed[i]);
    REQUIRE(file_exists(executed[i]));
    std::cout << "ARTIFACT: executed notebook " << executed[i] << "\n";
    json ex = json::parse(vl_test::read_file(executed[i]));
    int images = 0;
    std::vector<int> cell_images(notebooks[i].cell_min_images.size(), -1);  // -1: no such cell
    for (const auto& c : ex["cells"]) {
      if (c["cell_type"] != "code") continue;
      CHECK(!c["execution_count"].is_null());
      int here = 0;
      for (const auto& o : c["outputs"]) {
        CHECK(o["output_type"] != "error");
        if (o.contains("data") && o["data"].contains("image/png")) ++images, ++here;
        if (o["output_type"] == "stream" && o["name"] == "stderr") {
          std::string text;
          if (o["text"].is_array())
            for (const auto& l : o["text"]) text += l.get<std::string>();
          else text = o["text"].get<std::string>();
          INFO("stderr of a cell: " << text);
          CHECK(text.find("Error") == std::string::npos);
          CHECK(text.find("Warning") == std::string::npos);
        }
      }
      for (size_t k = 0; k < cell_images.size(); ++k)
        if (joined_source(c) == notebooks[i].cell_min_images[k].first) cell_images[k] = here;
    }
    CHECK(images >= notebooks[i].min_images);
    for (size_t k = 0; k < cell_images.size(); ++k) {
      INFO("code cell:\n" << notebooks[i].cell_min_images[k].first);
      CHECK(cell_images[k] >= notebooks[i].cell_min_images[k].second);
    }
  }
  std::string vout;
  const auto bad = invalid_notebooks(executed, vout);
  INFO(vout);
  CHECK(bad.empty());
}

}  // namespace

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

TEST_CASE("every notebook (generated, of a fixture run, of what every analysis produces) validates and executes", "[fixtures]") {
  std::vector<ToExecute> notebooks = generated_notebooks();
  for (auto& n : fixture_run_notebook()) notebooks.push_back(n);
  for (auto& n : real_results_notebook()) notebooks.push_back(n);

  std::vector<std::string> paths;
  for (const auto& n : notebooks) paths.push_back(n.path);
  std::string out;
  int rc = 0;
  const auto bad = invalid_notebooks(paths, out, &rc);
  if (rc != 0 && !have_nbformat()) {  // probed only when the validator could not run
    vl_test::require(false, "python3-nbformat not installed; notebooks not validated");
    return;
  }
  INFO(out);
  CHECK(bad.empty());
  execute_notebooks(notebooks);
}

// The HTML report: every known kind renders, untrusted text stays text, the page loads nothing, and
// headless Chromium draws it (non-blank screenshot, no console messages). The screenshots are kept under
// <build>/artifacts/report_test/ (printed as "ARTIFACT: ..." lines) for CI to collect.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <iostream>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "fixtures.hpp"
#include "vocablens/detail/atomic_file.hpp"
#include "vocablens/error.hpp"
#include "vocablens/export.hpp"
#include "vocablens/report.hpp"
#include "vocablens/result_kinds.hpp"
#include "vocablens/detail/sha256.hpp"

using vocablens::NdArray;
using vocablens::Result;
using vocablens::Table;

namespace {

using vl_test::file_exists;

size_t count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

std::string python() { return file_exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3"; }

std::string chromium() {
  if (const char* c = std::getenv("VOCABLENS_CHROMIUM")) return c;
  for (const char* p : {"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"})
    if (file_exists(p)) return p;
  return "";
}

std::string artifacts_dir() {
  std::string d = std::string(VOCABLENS_BINARY_DIR) + "/artifacts/report_test";
  vocablens::ensure_directory(d);
  return d;
}

std::string shell_quote(const std::string& s) {
  std::string o = "'";
  for (char c : s) o += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return o + "'";
}

// Tokens and settings that try every way out of HTML text and attributes.
const std::vector<std::string> kHostile = {"\"><img src=x onerror=alert(2)>",
                                           "</textarea><b>x</b>",
                                           "' onmouseover='alert(3)",
                                           "<!-- c -->",
                                           "]]>",
                                           "&amp;",
                                           std::string("bad\xff\xfeutf8"),
                                           "`${x}`",
                                           "<svg onload=alert(4)>"};

Result hostile_result() {
  Result r;
  r.kind = "hostile";
  r.settings = {{"prompt", "<script>alert(1)</script> \"quoted\" 'single'"}, {"tokens", kHostile}};
  r.summary = {{"tokens", kHostile}, {"note", "</section><script>alert(5)</script>"}};
  r.provenance = {{"model_path", "<img src=y>"}, {"command_line", "vocablens x --prompt '\"<b>'"}};
  std::vector<float> m(kHostile.size() * 3, 0.5f);
  r.arrays["grid"] = NdArray::f32({static_cast<int64_t>(kHostile.size()), 3}, m.data());
  r.arrays["curve"] = NdArray::f32({static_cast<int64_t>(kHostile.size())}, m.data());
  Table t{"pairs", {"layer", "head", "src_token", "dst_token", "score"}, {}};
  for (size_t i = 0; i < kHostile.size(); ++i)
    t.rows.push_back({static_cast<int64_t>(i % 2), 0, kHostile[i], kHostile[(i + 1) % kHostile.size()], 1.0});
  Table u{"markup", {"<i>col</i>", "token"}, {{"<u>cell</u>", "\"quoted\""}}};
  r.tables.push_back(t);
  r.tables.push_back(u);
  return r;
}

// A small HTML tokenizer for pages whose attribute values are always double-quoted: collects tag and
// attribute names (lowercase). Skips the raw text of <style> and <script>. False on malformed markup.
bool scan_tags(const std::string& h, std::set<std::string>& tags, std::set<std::string>& attrs) {
  size_t i = 0, n = h.size();
  auto lower = [](std::string s) {
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  while ((i = h.find('<', i)) != std::string::npos) {
    ++i;
    if (i < n && h[i] == '/') {  // closing tag
      size_t e = h.find('>', i);
      if (e == std::string::npos) return false;
      i = e + 1;
      continue;
    }
    size_t s = i;
    while (i < n && (std::isalnum(static_cast<unsigned char>(h[i])) || h[i] == '!' || h[i] == '-')) ++i;
    std::string tag = lower(h.substr(s, i - s));
    if (tag.empty()) return false;  // a bare '<' in text would have been escaped
    tags.insert(tag);
    while (i < n && h[i] != '>') {
      if (std::isspace(static_cast<unsigned char>(h[i])) || h[i] == '/') {
        ++i;
        continue;
      }
      size_t a = i;
      while (i < n && !std::isspace(static_cast<unsigned char>(h[i])) && h[i] != '=' && h[i] != '>' && h[i] != '/') ++i;
      std::string name = lower(h.substr(a, i - a));
      if (tag != "!doctype") attrs.insert(name);
      if (i < n && h[i] == '=') {
        ++i;
        if (i >= n || h[i] != '"') return false;
        size_t e = h.find('"', i + 1);
        if (e == std::string::npos) return false;
        i = e + 1;
      }
    }
    if (i >= n) return false;
    ++i;
    if (tag == "style" || tag == "script") {
      size_t e = h.find("</" + tag, i);
      if (e == std::string::npos) return false;
      i = e;
    }
  }
  return true;
}

struct ChromeRun {
  int rc = -1;
  std::string log;
  std::vector<std::string> console;  ///< console messages the page produced
};

// Runs headless Chromium on `url`: a screenshot (when png is set) and/or a DOM dump (into dom, when given; one
// run does both: each Chromium start costs ~2 s of CPU). Console messages are read from Chromium's own log on
// stderr (--enable-logging=stderr), one "CONSOLE" line each.
ChromeRun run_chromium(const std::string& url, const std::string& png, const std::string& window, std::string* dom = nullptr) {
  ChromeRun cr;
  std::string profile = vl_test::temp_dir("chromium-profile");
  std::string errfile = profile + "/stderr.txt";
  std::string cmd = "(timeout 120 " + shell_quote(chromium()) +
                    " --headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update"
                    " --no-first-run --disable-dev-shm-usage --hide-scrollbars --mute-audio"
                    " --user-data-dir=" +
                    shell_quote(profile) + " --window-size=" + window + " --enable-logging=stderr --v=0 " +
                    (dom ? " --dump-dom" : "") + (png.empty() ? std::string() : " --screenshot=" + shell_quote(png)) + " " +
                    shell_quote(url) + " 2>" + shell_quote(errfile) + ")";
  std::string out;
  cr.rc = vl_test::run_command(cmd, out);
  if (dom) *dom = out;
  cr.log = file_exists(errfile) ? vl_test::read_file(errfile) : "";
  std::regex console_line(R"(CONSOLE[^\]]*\]\s*(.*))");
  size_t start = 0;
  while (start < cr.log.size()) {
    size_t nl = cr.log.find('\n', start);
    std::string line = cr.log.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    std::smatch m;
    if (std::regex_search(line, m, console_line)) cr.console.push_back(m[1]);
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  return cr;
}

// Fraction of pixels that are not (nearly) white, via PIL when present; -1 when it cannot be measured.
double ink_fraction(const std::string& png) {
  std::string out;
  int rc = vl_test::run_command(
      // min(R, G, B) < 235 per pixel, counted by PIL's own histogram of the channel-wise minimum (a Python
      // loop over the 2.5 M pixels took ~0.8 s of CPU per screenshot).
      python() +
          " -c 'import sys; from PIL import Image, ImageChops as C; im = Image.open(sys.argv[1]).convert(\"RGB\"); "
          "r, g, b = im.split(); h = C.darker(C.darker(r, g), b).histogram(); print(sum(h[:235]) / (im.width * im.height))' " +
          shell_quote(png),
      out);
  if (rc != 0) return -1;
  return std::atof(out.c_str());
}

}  // namespace

TEST_CASE("every known kind gets its section and untrusted text stays text") {
  auto results = vocablens::example_results();
  results.push_back(hostile_result());
  vocablens::ReportOptions opts;
  opts.run_dir = "runs/<b>dir</b>";
  std::string html = vocablens::render_report_html(results, opts);

  // One section for every kind that has an example (each slice's own, vocablens/result_kinds.hpp), plus the
  // unknown and the hostile one.
  std::vector<std::string> kinds = {"mystery_analysis", "hostile"};
  for (const auto* k : vocablens::result_kinds().all())
    if (k->example) kinds.push_back(k->name);
  REQUIRE(kinds.size() > 2);  // the registry's kinds with an example, each checked below
  for (const auto& kind : kinds) {
    INFO(kind);
    CHECK(count(html, std::string("<span class=\"kind\">") + kind + "</span>") == 1);
  }
  // Figures: the lens heatmap with top-1 tokens as cell text, curves, spectrum plots, tables, cards.
  CHECK(html.find("Logit lens: top-1 token and its probability") != std::string::npos);
  CHECK(html.find("Logit lens: entropy (nats)") != std::string::npos);
  CHECK(html.find("Per-layer curves") != std::string::npos);
  CHECK(html.find("Singular value spectrum") != std::string::npos);
  CHECK(html.find("Explained variance") != std::string::npos);
  CHECK(html.find("Distribution of pairwise cosines") != std::string::npos);
  CHECK(html.find("cosine [64×64]") != std::string::npos);
  CHECK(html.find("layer 0 · head 1 · kind ov") != std::string::npos);          // head top-pair cards
  CHECK(html.find("ov copying score per head") != std::string::npos);           // layer x head heatmap
  CHECK(html.find("layer 2 · neuron 17 · vector value") != std::string::npos);  // neuron cards
  CHECK(html.find("component 0 · sign +") != std::string::npos);                // spectrum loadings
  CHECK(html.find("source 0 · source_token  the") != std::string::npos);        // knn edges, raw key text
  CHECK(html.find("Top-1 token per layer and position") != std::string::npos);  // projection
  CHECK(html.find("Positions along the top principal components") != std::string::npos);
  CHECK(html.find("Anisotropy after removing the top components") != std::string::npos);
  CHECK(count(html, "<svg") >= 15);
  // The hover text of a lens cell lists the top-k.
  CHECK(html.find("top-5:\n 1. ") != std::string::npos);

  // The prompt shows up as text, never as markup: one <script> element (ours), escaped everywhere else.
  CHECK(count(html, "<script") == 1);
  CHECK(html.find("&lt;script&gt;alert(1)&lt;/script&gt;") != std::string::npos);
  CHECK(html.find("&quot;Eiffel&quot;") != std::string::npos);
  CHECK(html.find("\"Eiffel\"") == std::string::npos);
  CHECK(html.find("&#39;Paris&#39;") != std::string::npos);
  for (const char* bad : {"<img", "<b>", "<i>", "<u>", "<textarea", "<svg onload", "<!-- c -->", "</section><script"}) {
    INFO(bad);
    CHECK(html.find(bad) == std::string::npos);
  }
  // Every tag on the page is one the report writes, and none carries an event handler or a src
  // attribute (data may contain those words, escaped, as text).
  std::set<std::string> tags, attrs;
  REQUIRE(scan_tags(html, tags, attrs));
  const std::set<std::string> allowed = {"!doctype",   "html",    "head",
                                         "meta",       "title",   "style",
                                         "body",       "header",  "h1",
                                         "h2",         "h3",      "h4",
                                         "p",          "nav",     "a",
                                         "main",       "section", "span",
                                         "blockquote", "div",     "dl",
                                         "dt",         "dd",      "details",
                                         "summary",    "pre",     "code",
                                         "sub",        "figure",  "figcaption",
                                         "svg",        "g",       "rect",
                                         "text",       "line",    "path",
                                         "circle",     "defs",    "lineargradient",
                                         "stop",       "table",   "thead",
                                         "tbody",      "tr",      "th",
                                         "td",         "input",   "label",
                                         "ul",         "li",      "script"};
  for (const auto& t : tags) {
    INFO("tag <" << t << ">");
    CHECK(allowed.count(t) == 1);
  }
  for (const auto& a : attrs) {
    INFO("attribute " << a);
    CHECK(a.rfind("on", 0) != 0);
    CHECK(a != "src");
  }
  CHECK(html.find("onmouseover=&#39;alert(3)") != std::string::npos);
  CHECK(html.find("&lt;img src=x onerror=alert(2)&gt;") != std::string::npos);
  CHECK(html.find("bad\xEF\xBF\xBD\xEF\xBF\xBDutf8") != std::string::npos);  // invalid UTF-8 -> U+FFFD
  CHECK(vocablens::valid_utf8(html) == html);

  // Self-contained: no fetches (the only URL is the SVG namespace), a CSP that forbids them anyway.
  std::regex url(R"(https?://[^"'\s<>]*)");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), url); it != std::sregex_iterator(); ++it)
    CHECK(it->str() == "http://www.w3.org/2000/svg");
  for (const char* fetch : {"<link", "@import", "url(http", "<iframe", "<object", "<embed"}) {
    INFO(fetch);
    CHECK(html.find(fetch) == std::string::npos);
  }
  std::regex href(R"re(href="([^"]*)")re");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), href); it != std::sregex_iterator(); ++it)
    CHECK((*it)[1].str().rfind("#r", 0) == 0);
  CHECK(html.find("default-src 'none'") != std::string::npos);
  CHECK(html.find("script-src 'sha256-") != std::string::npos);

  CHECK(vocablens::html_escape("<a href=\"x\">'&'</a>") == "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
}

TEST_CASE("write_report reads a run directory and writes report.html atomically") {
  auto dir = vl_test::temp_dir("report") + "/run";
  CHECK_THROWS_AS(vocablens::write_report(dir), vocablens::FormatError);  // no such directory
  vocablens::ensure_directory(dir);
  CHECK_THROWS_AS(vocablens::write_report(dir), vocablens::FormatError);  // no results
  const auto examples = vocablens::example_results();
  for (const auto& r : examples) vocablens::write_result(r, dir);
  std::string path = vocablens::write_report(dir);
  CHECK(path == dir + "/report.html");
  std::string html = vl_test::read_file(path);
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(html.find("</html>") != std::string::npos);
  CHECK(count(html, "<section class=\"result\"") == examples.size());  // one section per result written
}

TEST_CASE("the report renders in headless Chromium: not blank, no console errors") {
  std::string chrome = chromium();
  if (chrome.empty()) {
    vl_test::require(false, "chromium not installed (apt-get install chromium); the report was not rendered in a browser");
    return;
  }
  std::string art = artifacts_dir();
  std::string run = art + "/run";
  vocablens::ensure_directory(run);
  auto results = vocablens::example_results();
  results.push_back(hostile_result());
  for (const auto& r : results) vocablens::write_result(r, run);
  std::string page = vocablens::write_report(run);
  REQUIRE(page.front() == '/');

  // Control: the console check must see a page's console output at all, or it proves nothing.
  std::string control = art + "/console-control.html";
  vl_test::write_file(
      control, "<!DOCTYPE html><html><body><p>control</p><script>console.error('control-error-42');</script></body></html>");
  ChromeRun c0 = run_chromium("file://" + control, art + "/console-control.png", "400,300");
  INFO(c0.log.substr(0, 4000));
  REQUIRE(c0.rc == 0);
  bool seen = std::any_of(c0.console.begin(), c0.console.end(),
                          [](const std::string& l) { return l.find("control-error-42") != std::string::npos; });
  REQUIRE(seen);

  struct Shot {
    const char* name;
    const char* window;
  };
  std::string dom;  // the DOM after parsing, dumped by the wide screenshot's run
  for (Shot s : {Shot{"report-wide.png", "1280,2000"}, Shot{"report-narrow.png", "420,2000"}}) {
    std::string png = art + "/" + s.name;
    ::unlink(png.c_str());
    const bool wide = std::string(s.window) == "1280,2000";
    ChromeRun cr = run_chromium("file://" + page, png, s.window, wide ? &dom : nullptr);
    INFO("chromium log (first 4000 bytes):\n" << cr.log.substr(0, 4000));
    CHECK(cr.rc == 0);
    REQUIRE(file_exists(png));
    std::cout << "ARTIFACT: report screenshot " << png << "\n";
    for (const auto& line : cr.console) {
      INFO("console: " << line);
      CHECK(false);  // the page logs nothing: any message (error, CSP violation, warning) is a failure
    }
    std::string bytes = vl_test::read_file(png);
    CHECK(bytes.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0);
    // A blank 1280x2000 page compresses to a few kilobytes; the report's heatmaps and text do not.
    CHECK(bytes.size() > 40000);
    double ink = ink_fraction(png);
    if (ink < 0) {
      vl_test::require(false, "python3-pil not installed; screenshot checked by size only");
    } else {
      INFO("non-white fraction " << ink);
      CHECK(ink > 0.05);
    }
  }

  // The DOM after parsing (that run's exit status and console were checked above): the prompt is a text node,
  // the only script element is ours.
  CHECK(
      dom.find(
          "<blockquote class=\"prompt\">The \"Eiffel\" Tower &lt;script&gt;alert(1)&lt;/script&gt; is in 'Paris'</blockquote>") !=
      std::string::npos);
  CHECK(count(dom, "<script") == 1);
  CHECK(dom.find("<img") == std::string::npos);
  CHECK(dom.find("<textarea") == std::string::npos);
}

TEST_CASE("vocablens report CLI") {
  std::string cli = vl_test::cli_path();
  if (cli.empty() || !file_exists(cli)) {
    vl_test::require(false, "vocablens CLI not built; `vocablens report` not exercised");
    return;
  }
  auto base = vl_test::temp_dir("report-cli");
  std::string out;
  int rc = vl_test::run_command(shell_quote(cli) + " report " + shell_quote(base + "/ex") + " --example", out);
  INFO(out);
  CHECK(rc == 0);
  CHECK(file_exists(base + "/ex/report.html"));
  CHECK(file_exists(base + "/ex/vocablens.ipynb"));
  CHECK(file_exists(base + "/ex/logit_lens.json"));
  CHECK(out.find("report:   " + base + "/ex/report.html") != std::string::npos);

  rc = vl_test::run_command(
      shell_quote(cli) + " report " + shell_quote(base + "/ex") + " --out " + shell_quote(base + "/r.html") + " --no-notebook",
      out);
  CHECK(rc == 0);
  CHECK(file_exists(base + "/r.html"));

  vocablens::ensure_directory(base + "/empty");
  rc = vl_test::run_command(shell_quote(cli) + " report " + shell_quote(base + "/empty"), out);
  CHECK(rc == 1);
  CHECK(out.find("no vocablens results") != std::string::npos);
  rc = vl_test::run_command(shell_quote(cli) + " report " + shell_quote(base + "/missing"), out);
  CHECK(rc == 1);
  CHECK(out.find("no such directory") != std::string::npos);

  // A hostile result directory: a summary nested 10^5 deep used to crash the command (stack
  // overflow in the JSON copy). Now one line naming the file, exit 1, and no report.html left behind.
  vocablens::ensure_directory(base + "/deep");
  std::string deep = R"({"format": "vocablens.result", "format_version": 1, "kind": "k", "settings": {},
      "provenance": {}, "arrays": {}, "tables": [], "summary": {"x": )" +
                     std::string(100000, '[') + std::string(100000, ']') + "}}";
  vocablens::write_file_atomic(base + "/deep/k.json", deep);
  rc = vl_test::run_command(shell_quote(cli) + " report " + shell_quote(base + "/deep"), out);
  CHECK(rc == 1);
  CHECK(out == "vocablens: error: " + base + "/deep/k.json: JSON nested deeper than 256 levels\n");
  CHECK(!file_exists(base + "/deep/report.html"));
}

TEST_CASE("fixture runs: analysis commands with --out/--report, the report in Chromium, every file checked") {
  std::string cli = vl_test::cli_path();
  if (cli.empty() || !file_exists(cli)) {
    vl_test::require(false, "vocablens CLI not built; fixture runs not exercised");
    return;
  }
  std::string model = vl_test::fixture("gpt2-tiny");
  if (model.empty()) return;
  std::string art = artifacts_dir();
  std::string run = art + "/fixture-run";
  std::string out;
  vl_test::run_command("rm -rf " + shell_quote(run), out);
  const std::string prompt = "The \"Eiffel\" Tower <script>alert(1)</script> is in 'Paris'";
  const std::string m = shell_quote(model), o = " --out " + shell_quote(run);
  const std::vector<std::string> commands = {
      "lens " + m + " --prompt " + shell_quote(prompt) + " --top-k 5" + o + " --report",
      "project " + m + " --prompt " + shell_quote(prompt) + " --top-k 3" + o,
      "heads " + m + " --layer 0 --head 0-1 --inverse embed --top-k 8" + o,
      "neurons " + m + " --layer 1 --neurons 0-5 --top-k 5" + o,
      "spectrum " + m + " --k 8" + o,
      "positions " + m + o,
      "neighbours " + m + " ' Paris' --k 5" + o,
  };
  for (const auto& c : commands) {
    int rc = vl_test::run_command(shell_quote(cli) + " " + c, out);
    INFO("vocablens " << c << "\n" << out.substr(0, 3000));
    CHECK(rc == 0);
  }
  // --report on the lens command already wrote both; `vocablens report` rewrites them with every result.
  CHECK(file_exists(run + "/report.html"));
  CHECK(file_exists(run + "/vocablens.ipynb"));
  int rc = vl_test::run_command(shell_quote(cli) + " report " + shell_quote(run), out);
  INFO(out);
  REQUIRE(rc == 0);
  auto results = vocablens::read_run_directory(run);
  CHECK(results.size() == commands.size());
  std::string html = vl_test::read_file(run + "/report.html");
  CHECK(count(html, "<script") == 1);
  CHECK(html.find("&lt;script&gt;alert(1)&lt;/script&gt;") != std::string::npos);
  for (const auto& r : results) {
    INFO(r.kind);
    CHECK(html.find("<span class=\"kind\">" + r.kind + "</span>") != std::string::npos);
    // Provenance: what fill_provenance() records.
    CHECK(r.provenance.value("config_sha256", "").size() == 64);
    CHECK(r.provenance.value("vocablens_version", "") == VOCABLENS_VERSION);
    CHECK(r.provenance.value("command_line", "").find("vocablens") != std::string::npos);
    CHECK(r.provenance.value("model_path", "").find("gpt2-tiny") != std::string::npos);
  }

  // Every .npy loads in numpy with the bytes, dtype and shape we read; every JSON validates. numpy and
  // jsonschema are probed only when the script failed (a missing module is reported as such, not as a bad run).
  std::string script = art + "/check_run.py";
  vl_test::write_file(script, R"PY(
import glob, hashlib, json, os, sys, numpy as np, jsonschema
run, schema = sys.argv[1], json.load(open(sys.argv[2]))
v = jsonschema.Draft7Validator(schema)
out = {"npy": {}, "errors": []}
for p in sorted(glob.glob(os.path.join(run, "*.json"))):
    doc = json.load(open(p))
    out["errors"] += [f"{os.path.basename(p)}: {list(e.path)} {e.message}" for e in v.iter_errors(doc)]
    for name, e in doc["arrays"].items():
        a = np.load(os.path.join(run, e["file"]), allow_pickle=False)
        ok = list(a.shape) == e["shape"] and a.dtype.str.replace("=", "<") == e["dtype"]
        out["npy"][e["file"]] = {"sha256": hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest(), "ok": ok}
print(json.dumps(out))
)PY");
  rc = vl_test::run_command(python() + " " + shell_quote(script) + " " + shell_quote(run) + " " +
                                shell_quote(std::string(VOCABLENS_SOURCE_DIR) + "/docs/schema/result.schema.json"),
                            out);
  std::string probe;
  if (rc != 0 && vl_test::run_command(python() + " -c 'import numpy, jsonschema'", probe) != 0) {
    vl_test::require(false, "python3-numpy / python3-jsonschema missing; fixture run files not checked in Python");
  } else {
    INFO(out.substr(0, 4000));
    REQUIRE(rc == 0);
    auto j = nlohmann::json::parse(out);
    CHECK(j["errors"].empty());
    size_t n = 0;
    for (const auto& r : results)
      for (const auto& [name, a] : r.arrays) {
        std::string file = r.kind + "." + name + ".npy";
        INFO(file);
        REQUIRE(j["npy"].contains(file));
        CHECK(j["npy"][file]["ok"] == true);
        CHECK(j["npy"][file]["sha256"] ==
              vocablens::sha256_hex(std::string_view(reinterpret_cast<const char*>(a.bytes.data()), a.bytes.size())));
        ++n;
      }
    CHECK(n >= 20);
  }

  if (chromium().empty()) {
    vl_test::require(false, "chromium not installed; fixture report not rendered");
    return;
  }
  std::string png = art + "/fixture-report.png";
  ::unlink(png.c_str());
  std::string dom;  // dumped by the same run
  ChromeRun cr = run_chromium("file://" + run + "/report.html", png, "1280,2400", &dom);
  INFO(cr.log.substr(0, 4000));
  CHECK(cr.rc == 0);
  REQUIRE(file_exists(png));
  std::cout << "ARTIFACT: fixture report screenshot " << png << "\n";
  for (const auto& line : cr.console) {
    INFO("console: " << line);
    CHECK(false);
  }
  CHECK(vl_test::read_file(png).size() > 40000);
  double ink = ink_fraction(png);
  if (ink >= 0) CHECK(ink > 0.05);
  CHECK(count(dom, "<script") == 1);
  CHECK(dom.find("&lt;script&gt;alert(1)&lt;/script&gt;") != std::string::npos);
}

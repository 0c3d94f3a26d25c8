// The HTML report: one self-contained page, inline SVG drawn here, no network (see report.hpp).
//
// Layout: a header, a navigation strip, then one <section> per Result. The first-screen rule: a section
// starts with the question (the prompt) and the picture — the kind's own figures (drawn by the kind's slice,
// analyses/<slice>_report.cpp, found in the registry vocablens/result_kinds.hpp), then a generic rendering
// of every array and table the kind's renderer did not use (2-D arrays as heatmaps, 1-D arrays as curves,
// tables grouped into cards when they have key columns such as layer+head) — then the input tokens, and
// the raw material folded (<details> closed): the summary, the settings and the provenance, the files.
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

#include "vocablens/detail/atomic_file.hpp"
#include "vocablens/error.hpp"
#include "vocablens/export.hpp"
#include "vocablens/result_kinds.hpp"
#include "vocablens/detail/sha256.hpp"
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
    stats += fmt::format(
        "<tr><td><code>{}</code></td><td>{}</td><td>[{}]</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td "
        "class=\"num\">{}</td><td><code>{}</code></td></tr>",
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
      if (as_grid(a, g))
        maps += array_heatmap(sec, name, g, lo < 0 && hi > 0 ? Cmap::Diverging : Cmap::Viridis, pretty_name(name));
    }
  }
  if (!charts.empty()) sec.html += "<div class=\"charts\">" + charts + "</div>";
  sec.html += maps;
  for (const auto& t : sec.r.tables)
    if (!sec.used_tables.count(t.name)) render_table(sec, t);
  if (!stats.empty())
    sec.html +=
        "<details class=\"arrays\"><summary>Arrays in this result</summary><div class=\"scroll\"><table "
        "class=\"data\"><thead><tr><th>name</th><th>dtype</th><th>shape</th><th>min</th><th>max</th><th>mean</th><th>file</th></"
        "tr></thead><tbody>" +
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
    s += "<dt>config sha256</dt><dd><code title=\"" + esc(str("config_sha256")) + "\">" +
         esc(str("config_sha256").substr(0, 16)) + "…</code>" +
         (str("config_hashed").empty() ? "" : " <span class=\"note\">(" + esc(str("config_hashed")) + ")</span>") + "</dd>";
  if (!str("command_line").empty()) s += "<dt>command</dt><dd><code>" + esc(str("command_line")) + "</code></dd>";
  if (!str("vocablens_version").empty()) s += "<dt>vocablens</dt><dd>" + esc(str("vocablens_version")) + "</dd>";
  if (!str("created_utc").empty()) s += "<dt>created</dt><dd>" + esc(str("created_utc")) + "</dd>";
  static const std::set<std::string> shown = {
      "model_path",        "model",       "config_sha256",      "config_hashed", "command_line",
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
  // The first-screen rule: the question (the prompt) and the picture (the kind's figures) first; the raw
  // material (summary, settings, provenance) after them and folded, so that a long summary never pushes
  // the heatmap below the first screen.
  const json* prompt = find_key(r.settings, {"prompt", "text"});
  if (prompt && prompt->is_string()) h += "<blockquote class=\"prompt\">" + esc(prompt->get<std::string>()) + "</blockquote>";

  // The kind's own figures (registered by its slice, vocablens/result_kinds.hpp); then every array and table
  // they did not use, generically (grouped into cards when tables have key columns).
  if (const ResultKind* kind = result_kinds().find(r.kind); kind && kind->report) kind->report(sec);
  render_generic(sec);

  // The input tokens (short, and what the figures' columns are), then the folded raw material.
  if (!sec.tokens.empty()) h += token_strip(sec.tokens, "Input tokens");
  std::set<std::string> skip = {"tokens",      "token_strings", "tokens_text", "token_text", "input_tokens", "prompt",
                                "top1_tokens", "top1",          "top_1",       "top1_grid",  "grid",         "layer_labels"};
  if (!sec.tokens.empty()) skip.insert("input");
  std::string summary = kv_list(r.summary, skip);
  if (!summary.empty()) h += "<details class=\"summary\"><summary>Summary</summary>" + summary + "</details>";
  h += "<details class=\"meta\"><summary>Settings and provenance</summary><div class=\"meta\"><div><h4>Settings</h4>" +
       kv_list(r.settings, {"prompt", "text"}) + "</div><div><h4>Provenance</h4>" + provenance_html(r) + "</div></div></details>";

  // Side files.
  std::string files;
  for (const auto& [name, a] : r.arrays) files += "<li><code>" + esc(r.kind + "." + name + ".npy") + "</code></li>";
  for (const auto& t : r.tables) files += "<li><code>" + esc(r.kind + "." + t.name + ".csv") + "</code></li>";
  h += "<details class=\"files\"><summary>Files</summary><ul><li><code>" + esc(r.kind + ".json") + "</code></li>" + files +
       "</ul></details>";
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
div.meta{display:grid;grid-template-columns:repeat(auto-fit,minmax(280px,1fr));gap:8px 24px}
dl.kv{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:4px 0;font-size:14px}
dl.kv dt{color:var(--muted)}
dl.kv dd{margin:0;overflow-wrap:anywhere;min-width:0}
dl.kv pre{max-height:320px;overflow:auto;background:var(--soft);padding:6px;font-size:12px}
dl.kv dl.kv{margin:0}
ul.sub{margin:0;padding-left:18px}
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
    "var "
    "va=a.hasAttribute('data-v')?parseFloat(a.getAttribute('data-v')):NaN,vc=c.hasAttribute('data-v')?parseFloat(c.getAttribute('"
    "data-v')):NaN;"
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
  h += "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
       "script-src 'sha256-" +
       script_hash + "'\">\n";
  h += "<meta name=\"generator\" content=\"vocablens " VOCABLENS_VERSION "\">\n";
  h += "<title>" + esc(title) + "</title>\n<style>" + std::string(kStyle) + "</style>\n</head>\n<body>\n";
  h += "<header><h1>" + esc(title) + "</h1><p>" +
       esc(fmt::format("{} result{} · vocablens {}", results.size(), results.size() == 1 ? "" : "s", VOCABLENS_VERSION)) +
       (opts.run_dir.empty() ? "" : " · run directory <code>" + esc(opts.run_dir) + "</code>") + "</p></header>\n";
  h += "<nav>";
  for (size_t i = 0; i < results.size(); ++i) h += fmt::format("<a href=\"#r{}\">{}</a>", i, esc(kind_title(results[i]->kind)));
  h += "</nav>\n<main>\n";
  if (results.empty()) h += "<p>No results.</p>";
  for (size_t i = 0; i < results.size(); ++i) h += render_section(*results[i], opts, i) + "\n";
  h += "</main>\n<script>" + std::string(kScript) + "</script>\n</body>\n</html>\n";
  return h;
}

std::string write_report(const std::vector<Result>& results, const std::string& run_dir, const std::string& out_file) {
  if (results.empty()) throw FormatError(run_dir, "no vocablens results (<kind>.json) in this directory");
  std::string path =
      out_file.empty() ? (run_dir.empty() || run_dir.back() == '/' ? run_dir : run_dir + "/") + "report.html" : out_file;
  ReportOptions o;
  o.run_dir = run_dir;
  write_file_atomic(path, render_report_html(results, o));
  return path;
}

std::string write_report(const std::string& run_dir, const std::string& out_file) {
  return write_report(read_run_directory(run_dir), run_dir, out_file);
}

}  // namespace vocablens

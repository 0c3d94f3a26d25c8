// The Jupyter notebook of a run directory (nbformat 4.5): cells that reload the exported files with
// numpy/pandas and redraw the report's figures with matplotlib (see notebook.hpp).
//
// Code cells never contain data from a result (prompts, tokens): they only name the result's kind, which
// is restricted to [A-Za-z0-9_-]. Markdown cells show settings inside escaped <pre> blocks.
#include "vocablens/notebook.hpp"

#include <algorithm>
#include <set>

#include "vocablens/detail/atomic_file.hpp"
#include "vocablens/error.hpp"
#include "vocablens/report.hpp"
#include "vocablens/result_kinds.hpp"
#include "vocablens/detail/sha256.hpp"

namespace vocablens {
namespace {

using json = nlohmann::json;

// nbformat stores sources as lists of lines, each ending in "\n" except the last.
json source_lines(const std::string& text) {
  json lines = json::array();
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) {
      lines.push_back(text.substr(start));
      break;
    }
    lines.push_back(text.substr(start, nl - start + 1));
    start = nl + 1;
  }
  return lines;
}

// Cell ids (nbformat 4.5): deterministic, from the notebook's content.
std::string cell_id(size_t index, const std::string& text) {
  return sha256_hex(std::to_string(index) + "\n" + text).substr(0, 16);
}

json markdown(size_t index, const std::string& text) {
  return {{"cell_type", "markdown"}, {"id", cell_id(index, text)}, {"metadata", json::object()}, {"source", source_lines(text)}};
}

json code(size_t index, const std::string& text) {
  return {{"cell_type", "code"},        {"id", cell_id(index, text)}, {"metadata", json::object()},
          {"execution_count", nullptr}, {"outputs", json::array()},   {"source", source_lines(text)}};
}

// Text for a markdown cell, shown literally: HTML-escaped inside <pre> (Jupyter renders HTML blocks as is).
std::string md_pre(const std::string& text) { return "<pre>" + html_escape(text) + "</pre>"; }

// Markdown-escaped inline text (for short values such as the model path).
std::string md_inline(const std::string& s) {
  std::string o;
  for (char c : valid_utf8(s)) {
    if (std::string("\\`*_{}[]()#+-.!|~").find(c) != std::string::npos) o.push_back('\\');
    o.push_back(c);
  }
  return html_escape(o);
}

const char* kPrelude = R"PY(# Helpers shared by the cells below. The notebook sits in the run directory; set VOCABLENS_RUN to
# read another one.
%matplotlib inline
import json, os, pathlib
import numpy as np
import pandas as pd
import matplotlib.pyplot as plt

RUN = pathlib.Path(os.environ.get("VOCABLENS_RUN", ".")).resolve()
pd.set_option("display.max_rows", 60)


def load_result(kind):
    """<kind>.json with its arrays (numpy) and tables (pandas) loaded from the side files."""
    meta = json.loads((RUN / f"{kind}.json").read_text(encoding="utf-8"))
    arrays = {name: np.load(RUN / e["file"], allow_pickle=False)
              for name, e in meta["arrays"].items() if "file" in e}
    tables = {}
    for t in meta["tables"]:
        if "file" not in t:
            continue
        types = dict(zip(t["columns"], t["column_types"]))
        text = [c for c, ty in types.items() if ty in ("string", "mixed")]
        tables[t["name"]] = pd.read_csv(RUN / t["file"], dtype={c: str for c in text}, keep_default_na=False,
                                        na_values={c: ["", "nan"] for c in types if c not in text})
    return {"kind": meta["kind"], "settings": meta["settings"], "provenance": meta["provenance"],
            "summary": meta["summary"], "arrays": arrays, "tables": tables}


def visible(tok):
    """Token text with whitespace made visible, safe for matplotlib labels ($ is not mathtext)."""
    tok = "" if tok is None else str(tok)
    if tok == "":
        return "\u2205"
    tok = tok.replace(" ", "\u2423").replace("\n", "\u21b5").replace("\t", "\u21e5").replace("\r", "\u240d")
    return tok.replace("$", r"\$")


def _strings(v):
    if not isinstance(v, list):
        return None
    out = []
    for e in v:
        if isinstance(e, str):
            out.append(e)
        elif isinstance(e, dict):
            s = next((e[k] for k in ("text", "string", "str", "token", "label", "display", "name") if k in e), None)
            if not isinstance(s, str):
                return None
            out.append(s)
        else:
            return None
    return out


def input_tokens(r):
    """The input token strings of a result, if it has them."""
    for src in (r["summary"], r["settings"]):
        for key in ("token_strings", "tokens_text", "token_text", "input_tokens", "tokens", "token_str", "strings"):
            v = src.get(key)
            if isinstance(v, dict):
                v = next((v[k] for k in ("strings", "text", "display", "str", "tokens") if k in v), None)
            s = _strings(v)
            if s:
                return s
    return []


def layer_labels(r, n):
    for key in ("layer_labels", "layers"):
        v = r["summary"].get(key)
        if isinstance(v, list) and len(v) == n:
            return [str(e.get("label", e.get("hook", i))) if isinstance(e, dict) else str(e) for i, e in enumerate(v)]
    return [str(i) for i in range(n)]


def as_grid(a, slice_last=None):
    """A 2-D view: [R, C], [1, R, C] squeezed, or slice `slice_last` of the last axis of [R, C, k]."""
    a = np.asarray(a)
    while a.ndim > 2 and a.shape[0] == 1:
        a = a[0]
    if a.ndim == 3 and slice_last is not None:
        a = a[..., slice_last]
    return a if a.ndim == 2 else None


def heatmap(ax, m, rows=None, cols=None, cmap="viridis", vmin=None, vmax=None, text=None, max_label=10):
    m = np.asarray(m, dtype=float)
    if cmap == "RdBu_r" and vmin is None:
        lim = np.nanmax(np.abs(m)) if np.isfinite(m).any() else 1.0
        vmin, vmax = -lim, lim
    im = ax.imshow(m, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest")
    if rows is not None and len(rows) == m.shape[0] and m.shape[0] <= 64:
        ax.set_yticks(range(m.shape[0]))
        ax.set_yticklabels([visible(x)[:max_label] for x in rows])
    if cols is not None and len(cols) == m.shape[1] and m.shape[1] <= 64:
        ax.set_xticks(range(m.shape[1]))
        ax.set_xticklabels([visible(x)[:max_label] for x in cols], rotation=60, ha="right")
    if text is not None and m.size <= 1500:
        lo, hi = im.get_clim()
        for i in range(m.shape[0]):
            for j in range(m.shape[1]):
                t = text[i][j]
                if t is None:
                    continue
                dark = np.isfinite(m[i, j]) and (m[i, j] - lo) / ((hi - lo) or 1) < 0.55
                ax.text(j, i, visible(t)[:8], ha="center", va="center", fontsize=7,
                        color="white" if dark else "black")
    plt.colorbar(im, ax=ax, fraction=0.03, pad=0.02)
    return im


def per_layer_curves(arrays, names, labels):
    names = list(names)
    if not names:
        return
    cols = min(3, len(names))
    rows = (len(names) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.2 * rows), squeeze=False)
    for ax, name in zip(axes.flat, names):
        a = np.asarray(arrays[name], dtype=float)
        if np.asarray(arrays[name]).dtype.kind in "iu":
            a = np.where(a < 0, np.nan, a)  # -1 marks "no target"
        if a.ndim == 2:
            ax.plot(np.nanmean(a, axis=1), marker="o", label="mean over positions")
            last = [row[np.isfinite(row)][-1] if np.isfinite(row).any() else np.nan for row in a]
            ax.plot(last, marker="o", label="last position")
            ax.legend(fontsize=8)
        else:
            ax.plot(a, marker="o")
        ax.set_title(name.replace("_", " "))
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, rotation=45)
        ax.set_xlabel("layer")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(names):]:
        ax.set_visible(False)
    fig.tight_layout()
    plt.show()


KEY_SETS = [("layer", "head", "kind"), ("layer", "head"), ("layer", "neuron", "vector"), ("layer", "neuron"),
            ("layer", "position"), ("query",), ("component", "sign"), ("component",), ("direction",), ("neuron",),
            ("head",), ("source", "source_token"), ("source",)]


def show_table(name, df, max_groups=12):
    """A table, grouped by its key columns (layer+head, query, ...) when it has them."""
    print(f"{name}: {len(df)} rows")
    keys = next((list(k) for k in KEY_SETS if all(c in df.columns for c in k)), None)
    groups = df.groupby(keys[0] if keys and len(keys) == 1 else keys, sort=False) if keys and len(keys) < len(df.columns) else None
    if groups is not None and 1 < groups.ngroups <= 400 and groups.size().max() > 1:
        for i, (key, g) in enumerate(groups):
            if i == max_groups:
                print(f"... {groups.ngroups - max_groups} more groups")
                break
            print(", ".join(f"{k} {v}" for k, v in zip(keys, key if isinstance(key, tuple) else (key,))))
            display(g.drop(columns=keys).reset_index(drop=True))
    else:
        display(df.head(40))


def show_generic(r, skip=()):
    """Every array and table not drawn above: curves for 1-D, heatmaps for 2-D, shapes otherwise."""
    tokens = input_tokens(r)
    for name, a in r["arrays"].items():
        if name in skip:
            continue
        s = np.squeeze(a)
        print(f"{name}: dtype {a.dtype}, shape {a.shape}")
        if s.ndim == 1 and s.size > 1 and a.dtype.kind in "iuf":
            fig, ax = plt.subplots(figsize=(7, 2.8))
            ax.plot(s)
            ax.set_title(name)
            ax.grid(alpha=0.3)
            plt.show()
        elif s.ndim == 2 and a.dtype.kind in "iuf":
            fig, ax = plt.subplots(figsize=(7, 4.5))
            lo, hi = np.nanmin(s), np.nanmax(s)
            heatmap(ax, s, tokens if len(tokens) == s.shape[0] else None, tokens if len(tokens) == s.shape[1] else None,
                    "RdBu_r" if lo < 0 < hi else "viridis")
            ax.set_title(name)
            plt.show()
    for name, df in r["tables"].items():
        if name not in skip:
            show_table(name, df)
)PY";

// The cell that reloads one result and redraws it: the kind's own code (registered by its slice,
// vocablens/result_kinds.hpp), or tables grouped by their keys and arrays drawn by shape.
std::string kind_code(const std::string& kind) {
  std::string load = "r = load_result(\"" + kind + "\")\nA, S = r[\"arrays\"], r[\"summary\"]\n";
  const ResultKind* k = result_kinds().find(kind);
  return load + (k && !k->notebook_code.empty() ? k->notebook_code : std::string("show_generic(r)\n"));
}

std::string notebook_title(const std::string& kind) {
  const ResultKind* k = result_kinds().find(kind);
  return k && !k->notebook_title.empty() ? k->notebook_title : kind;
}

}  // namespace

std::string render_notebook(const std::vector<Result>& results_in, const std::string& title) {
  std::vector<Result> results = results_in;
  std::stable_sort(results.begin(), results.end(), [](const Result& a, const Result& b) {
    int ra = report_order(a.kind), rb = report_order(b.kind);
    return ra != rb ? ra < rb : (ra == 1000 && a.kind < b.kind);
  });
  json cells = json::array();
  auto add_md = [&](const std::string& t) { cells.push_back(markdown(cells.size(), t)); };
  auto add_code = [&](const std::string& t) { cells.push_back(code(cells.size(), t)); };

  std::string intro = "# " + md_inline(title) + "\n\n";
  intro += "Written by vocablens " VOCABLENS_VERSION
           ". Each section reloads one result from this run directory "
           "(`<kind>.json`, `<kind>.<array>.npy`, `<kind>.<table>.csv`) and redraws the figures of `report.html`.\n\n";
  for (const auto& r : results) intro += "- " + md_inline(notebook_title(r.kind)) + " (`" + r.kind + "`)\n";
  add_md(intro);
  add_code(kPrelude);
  for (const auto& r : results) {
    // Kinds name files; write_result refuses anything else, but a hand-made JSON could carry one.
    bool safe = !r.kind.empty();
    for (char c : r.kind)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) safe = false;
    if (!safe) throw FormatError(r.kind, "result kind is not a plain name; cannot write a notebook cell for it");
    std::string md = "## " + md_inline(notebook_title(r.kind)) + " (`" + r.kind + "`)\n\n";
    const auto& s = r.settings;
    if (s.is_object() && s.contains("prompt") && s["prompt"].is_string())
      md += "Prompt:\n\n" + md_pre(s["prompt"].get<std::string>()) + "\n\n";
    if (s.is_object() && !s.empty())
      md += "Settings:\n\n" + md_pre(s.dump(1, ' ', false, json::error_handler_t::replace)) + "\n\n";
    const auto& p = r.provenance;
    if (p.is_object() && p.contains("command_line") && p["command_line"].is_string())
      md += "Command:\n\n" + md_pre(p["command_line"].get<std::string>()) + "\n";
    add_md(md);
    add_code(kind_code(r.kind));
  }
  json nb = {{"nbformat", 4},
             {"nbformat_minor", 5},
             {"metadata",
              {{"kernelspec", {{"display_name", "Python 3"}, {"language", "python"}, {"name", "python3"}}},
               {"language_info", {{"name", "python"}, {"file_extension", ".py"}, {"mimetype", "text/x-python"}}},
               {"vocablens",
                {{"version", VOCABLENS_VERSION},
                 {"kinds",
                  [&] {
                    json k = json::array();
                    for (const auto& r : results) k.push_back(r.kind);
                    return k;
                  }()}}}}},
             {"cells", cells}};
  return nb.dump(1, ' ', false, json::error_handler_t::replace) + "\n";
}

std::string write_notebook(const std::vector<Result>& results, const std::string& run_dir, const std::string& out_file) {
  if (results.empty()) throw FormatError(run_dir, "no vocablens results (<kind>.json) in this directory");
  std::string path =
      out_file.empty() ? (run_dir.empty() || run_dir.back() == '/' ? run_dir : run_dir + "/") + "vocablens.ipynb" : out_file;
  std::string title = "vocablens run";
  if (!run_dir.empty()) title += ": " + run_dir;
  write_file_atomic(path, render_notebook(results, title));
  return path;
}

}  // namespace vocablens

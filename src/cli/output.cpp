// The output flags every analysis command shares (see output.hpp).
#include "cli/output.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "vocablens/error.hpp"
#include "vocablens/export.hpp"
#include "vocablens/model.hpp"
#include "vocablens/notebook.hpp"
#include "vocablens/report.hpp"
#include "vocablens/provenance.hpp"
#include "vocablens/timings.hpp"

namespace vocablens::cli {
namespace fs = std::filesystem;
namespace {

std::string shell_quote(const std::string& a) {
  if (!a.empty() &&
      a.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-+=./:,@%") == std::string::npos)
    return a;
  std::string o = "'";
  for (char c : a) {
    if (c == '\'') o += "'\\''";
    else o.push_back(c);
  }
  return o + "'";
}

// The command line from the arguments when main() did not set it.
std::string quoted_command_line() {
  std::string out;
  for (const std::string& a : arguments()) {
    if (!out.empty()) out.push_back(' ');
    out += shell_quote(a);
  }
  return out;
}

}  // namespace

std::string& command_line() {
  static std::string line;
  return line;
}

std::vector<std::string>& arguments() {
  static std::vector<std::string> args;
  return args;
}

void add_output_options(CLI::App& sub, OutputOptions& o) {
  // An empty --out ("" from an unset shell variable) used to mean "no --out": the run printed and wrote nothing.
  sub.add_option_function<std::string>(
         "--out",
         [&o](const std::string& dir) {
           if (dir.empty()) throw CLI::ValidationError("--out", "is empty: give the run directory to write");
           o.out_dir = dir;
         },
         "Write the run directory DIR (JSON + .npy + CSV)")
      ->type_name("DIR");
  sub.add_option("--format", o.format,
                 "table (human-readable, default), json (to stdout), csv (tables to stdout), npy (needs --out)")
      ->check(CLI::IsMember({"table", "json", "csv", "npy"}))
      ->type_name("F");
  sub.add_flag("--report", o.report, "Also write DIR/report.html and DIR/vocablens.ipynb (needs --out)");
  // A callback, not CLI11's "--no-color{false}" / "!--no-color" spelling, which --help printed as is.
  sub.add_flag_callback(
      "--no-color", [&o] { o.color = false; }, "No colour in tables (also when NO_COLOR is set or stdout is not a terminal)");
  sub.add_flag("--force", o.force,
               "Replace a result of the same kind already in DIR (default: refuse, so that a second run never "
               "silently replaces the first; other kinds in DIR are kept)");
}

void fill_provenance(Result& r, const Model& m) {
  if (command_line().empty()) command_line() = quoted_command_line();
  vocablens::fill_provenance(r, m, command_line());  // vocablens/provenance.hpp (shared with the Python module)
}

bool use_color(const OutputOptions& o) {
  if (!o.color) return false;
  if (std::getenv("NO_COLOR") && *std::getenv("NO_COLOR")) return false;
  const char* term = std::getenv("TERM");
  if (term && std::string(term) == "dumb") return false;
  return ::isatty(STDOUT_FILENO) == 1;
}

void emit(const Result& r, const OutputOptions& o, const std::function<void()>& print_table) {
  timings::Phase phase("write");
  const std::string& f = o.format;
  if (f != "table" && f != "json" && f != "csv" && f != "npy")
    throw UsageError("--format must be table, json, csv or npy (got '" + f + "')");
  if (f == "npy" && o.out_dir.empty()) throw UsageError("--format npy needs --out DIR");
  if (o.report && o.out_dir.empty()) throw UsageError("--report needs --out DIR");
  if (f == "csv" && r.tables.empty())
    throw UsageError("this result has no tables; use --format json, or --out DIR for its arrays");

  // Refuse before printing anything when --out already holds this kind (write_result checks again).
  if (!o.out_dir.empty() && !o.force && fs::exists(fs::path(o.out_dir) / (r.kind + ".json")))
    throw FormatError((fs::path(o.out_dir) / (r.kind + ".json")).string(),
                      "a '" + r.kind +
                          "' result is already there; vocablens does not replace a run silently: pass "
                          "--force to replace it, or choose another --out");
  // Validate and render what goes to stdout before writing anything.
  std::string stdout_text;
  if (f == "json") {
    stdout_text = result_to_json(r, /*inline_arrays=*/true);
  } else if (f == "csv") {
    for (size_t i = 0; i < r.tables.size(); ++i) {
      if (r.tables.size() > 1) stdout_text += (i ? "\n" : "") + std::string("# ") + r.kind + "." + r.tables[i].name + "\n";
      stdout_text += table_to_csv(r.tables[i]);
    }
  }

  // Messages go to stderr when stdout carries data.
  std::FILE* msg = (f == "json" || f == "csv") ? stderr : stdout;
  if (f == "table" && print_table) print_table();
  if (!stdout_text.empty()) {
    std::fwrite(stdout_text.data(), 1, stdout_text.size(), stdout);
    std::fflush(stdout);
  }
  if (!o.out_dir.empty()) {
    ExportFormats formats;
    formats.replace = o.force;  // Never replace a previous run silently
    auto files = write_result(r, o.out_dir, formats);
    fmt::print(msg, "wrote {} file{} to {}/ ({}.json)\n", files.size(), files.size() == 1 ? "" : "s", o.out_dir, r.kind);
    if (o.report) {
      // This result from memory (not re-read through its JSON/CSV files), beside the others the directory holds.
      auto results = read_run_directory(o.out_dir, r.kind);
      results.push_back(r);
      std::string html = write_report(results, o.out_dir);
      std::string nb = write_notebook(results, o.out_dir);
      fmt::print(msg, "report:   {}\nnotebook: {}\n", html, nb);
    }
  }
  std::fflush(msg);
}

}  // namespace vocablens::cli

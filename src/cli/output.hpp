// src/cli/output.hpp — the output flags every analysis command shares, and where its Result goes.
//
//   --out DIR        write the run directory (JSON + .npy + CSV, see vocablens/export.hpp)
//   --format F       table (default: human-readable on the terminal), json (to stdout), csv (to stdout),
//                    npy (needs --out)
//   --report         also write DIR/report.html (needs --out)
//
//   auto out = std::make_shared<vocablens::cli::OutputOptions>();
//   vocablens::cli::add_output_options(sub, *out);
//   ...
//   vocablens::cli::emit(result, *out, [&] { print_my_table(result); });
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "vocablens/result.hpp"

namespace vocablens {
class Model;
}

namespace vocablens::cli {

struct OutputOptions {
  std::string out_dir;
  std::string format = "table";
  bool report = false;
  bool color = true;   ///< colour in tables when stdout is a terminal (--no-color turns it off)
  bool force = false;  ///< --force: replace a result of the same kind already in --out (default: refuse)
};

void add_output_options(CLI::App& sub, OutputOptions& o);

/// Fills r.provenance: model path, config hash (sha256 of config.json or of the llama2.c header),
/// vocablens version, the command line, UTC time.
void fill_provenance(Result& r, const Model& m);

/// Sends a Result where the flags say: prints the table (via `print_table`) or JSON/CSV to stdout, and
/// writes the run directory when --out is given (then prints where). Throws FormatError / UsageError.
void emit(const Result& r, const OutputOptions& o, const std::function<void()>& print_table);

/// A Result's array as typed values, row-major (nullptr when absent): what a printer reads back from the Result.
template <class T>
const T* array_values(const Result& r, const char* name) {
  auto it = r.arrays.find(name);
  return it == r.arrays.end() ? nullptr : reinterpret_cast<const T*>(it->second.bytes.data());
}

/// True when stdout is a terminal and colour was not disabled.
bool use_color(const OutputOptions& o);

/// The command line as typed (set by main()).
std::string& command_line();

/// The process's arguments, argv[0] first, as run_main() received them: what the provenance's command line is
/// made of (not /proc/self/cmdline, which is another program's in the test suite's fork server).
std::vector<std::string>& arguments();

}  // namespace vocablens::cli

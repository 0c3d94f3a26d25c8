// vocablens/export.hpp — how a Result leaves the program: a run directory of JSON + .npy + CSV files.
//
// Layout of a run directory (every file written atomically; a run directory may hold several results):
//   <dir>/<kind>.json            settings, provenance, summary, and a manifest of the side files
//   <dir>/<kind>.<array>.npy     one per Result::arrays entry (numpy.load opens it unchanged)
//   <dir>/<kind>.<table>.csv     one per Result::tables entry (RFC 4180, header row, UTF-8)
// The JSON validates against docs/schema/result.schema.json.
//
//   vocablens::ExportFormats f;              // all on by default
//   auto files = vocablens::write_result(result, "runs/eiffel", f);
#pragma once
#include <string>
#include <vector>

#include "vocablens/result.hpp"

namespace vocablens {

struct ExportFormats {
  bool json = true;
  bool npy = true;
  bool csv = true;
  /// When the directory already holds a result of the same kind: replace it (true) or refuse with a
  /// FormatError naming <kind>.json (false: the CLI's default, --force replaces).
  bool replace = true;
};

/// Writes `r` into `dir` (created if needed). Returns the paths written. Throws FormatError naming the
/// directory or file when it cannot be written; files already complete stay, no partial file is left.
/// The directory is locked while writing (a concurrent writer gets a FormatError); a result of the same
/// kind already there is replaced only with formats.replace (its old files removed first); <kind>.json is
/// written last and lists every side file's size and SHA-256 ("files"), which read_run_directory verifies.
std::vector<std::string> write_result(const Result& r, const std::string& dir, const ExportFormats& formats = {});

/// The self-describing JSON document of `r` (what <kind>.json holds), without writing anything.
/// Arrays appear in the manifest by file name, dtype and shape; `inline_arrays` also embeds arrays of at
/// most `inline_limit` elements as nested lists (for printing to stdout).
std::string result_to_json(const Result& r, bool inline_arrays = false, size_t inline_limit = 100000);

/// RFC 4180 CSV text of a table.
std::string table_to_csv(const Table& t);

/// Reads back a run directory's results (every <kind>.json but `except_kind`'s), arrays loaded from their
/// .npy files. Used by `vocablens report`. Throws FormatError on malformed files, and on a mixed or partial
/// directory: a side file whose size or SHA-256 differs from its manifest's "files", one that is missing, or
/// "<kind>.<name>.npy|csv" files without their <kind>.json (an interrupted write).
std::vector<Result> read_run_directory(const std::string& dir, const std::string& except_kind = "");

}  // namespace vocablens

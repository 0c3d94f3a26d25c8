// notebooks-export/csv.hpp — the CSV of a run directory's tables (RFC 4180, CRLF), written and read back.
//
// Writing: numbers and booleans unquoted, null empty, strings always quoted (so that a token "42" or "" stays
// a string when read back); NaN / ±Inf as nan / inf / -inf. Reading: every field with whether it was quoted,
// and csv_value() turns it back into the JSON value of the column's type. Private to notebooks-export.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace vocablens::detail {

struct CsvField {
  std::string text;
  bool quoted = false;
};

std::string csv_quote(const std::string& s);
std::string csv_cell(const nlohmann::json& v);
/// Rows of fields; throws FormatError(path, ...) on an unterminated quote or a stray character.
std::vector<std::vector<CsvField>> parse_csv(const std::string& s, const std::string& path);
/// The value a field stands for in a column of `type` ("string", "number", "integer", ...).
nlohmann::json csv_value(const CsvField& f, const std::string& type);

}  // namespace vocablens::detail

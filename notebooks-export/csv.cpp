// CSV as the run directory writes and reads it (see csv.hpp), and table_to_csv (export.hpp).
#include "csv.hpp"

#include <cmath>
#include <limits>

#include "vocablens/error.hpp"
#include "vocablens/export.hpp"
#include "vocablens/report.hpp"

namespace vocablens {
namespace detail {

std::string csv_quote(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"') o += "\"\"";
    else o.push_back(c);
  }
  o.push_back('"');
  return o;
}

// Numbers and booleans unquoted, null empty, strings always quoted (so that a token "42" or "" stays a
// string when read back, and spaces at either end are visible).
std::string csv_cell(const nlohmann::json& v) {
  if (v.is_null()) return "";
  if (v.is_string()) return csv_quote(valid_utf8(v.get_ref<const std::string&>()));
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (std::isnan(d)) return "nan";
    if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
    return v.dump();
  }
  if (v.is_number()) return v.dump();
  // Arrays/objects are not scalars; keep them as their JSON text.
  return csv_quote(v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

std::vector<std::vector<CsvField>> parse_csv(const std::string& s, const std::string& path) {
  std::vector<std::vector<CsvField>> rows;
  std::vector<CsvField> row;
  CsvField f;
  size_t i = 0, n = s.size();
  bool field_started = false;
  auto end_field = [&] {
    row.push_back(std::move(f));
    f = CsvField{};
    field_started = false;
  };
  auto end_row = [&] {
    end_field();
    rows.push_back(std::move(row));
    row.clear();
  };
  while (i < n) {
    char c = s[i];
    if (!field_started && c == '"') {
      f.quoted = true;
      field_started = true;
      ++i;
      while (true) {
        if (i >= n) throw FormatError(path, "unterminated quoted CSV field");
        if (s[i] == '"') {
          if (i + 1 < n && s[i + 1] == '"') {
            f.text.push_back('"');
            i += 2;
          } else {
            ++i;
            break;
          }
        } else {
          f.text.push_back(s[i++]);
        }
      }
      if (i < n && s[i] != ',' && s[i] != '\r' && s[i] != '\n') throw FormatError(path, "CSV: text after a closing quote");
      continue;
    }
    if (c == ',') {
      end_field();
      field_started = false;
      ++i;
      // a trailing comma means one more (empty) field
      if (i >= n || s[i] == '\n' || s[i] == '\r') field_started = true;
      continue;
    }
    if (c == '\r' || c == '\n') {
      end_row();
      if (c == '\r' && i + 1 < n && s[i + 1] == '\n') ++i;
      ++i;
      continue;
    }
    field_started = true;
    f.text.push_back(c);
    ++i;
  }
  if (field_started || !row.empty() || !f.text.empty()) end_row();
  return rows;
}

nlohmann::json csv_value(const CsvField& f, const std::string& type) {
  if (f.quoted) return f.text;
  if (f.text.empty()) return nullptr;
  if (type == "string") return f.text;
  if (f.text == "true") return true;
  if (f.text == "false") return false;
  if (f.text == "nan") return std::numeric_limits<double>::quiet_NaN();
  if (f.text == "inf") return std::numeric_limits<double>::infinity();
  if (f.text == "-inf") return -std::numeric_limits<double>::infinity();
  try {
    auto v = nlohmann::json::parse(f.text);
    if (v.is_number()) {
      if (type == "number" && v.is_number_integer()) return v.get<double>();
      return v;
    }
  } catch (const nlohmann::json::exception&) {}
  return f.text;
}

}  // namespace detail

std::string table_to_csv(const Table& t) {
  std::string o;
  for (size_t c = 0; c < t.columns.size(); ++c) {
    if (c) o.push_back(',');
    o += detail::csv_quote(valid_utf8(t.columns[c]));
  }
  o += "\r\n";
  for (const auto& row : t.rows) {
    for (size_t c = 0; c < row.size(); ++c) {
      if (c) o.push_back(',');
      o += detail::csv_cell(row[c]);
    }
    o += "\r\n";
  }
  return o;
}

}  // namespace vocablens

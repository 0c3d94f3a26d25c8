// A Result as a run directory: <kind>.json (manifest) + <kind>.<array>.npy + <kind>.<table>.csv.
#include "vocablens/export.hpp"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>

#include "vocablens/detail/atomic_file.hpp"
#include "util/json_depth.hpp"
#include "util/regular_file.hpp"
#include "vocablens/error.hpp"
#include "vocablens/npy.hpp"
#include "vocablens/report.hpp"
#include "vocablens/result_kinds.hpp"
#include "csv.hpp"
#include "run_directory.hpp"

namespace vocablens {
namespace {

using detail::csv_value;
using detail::CsvField;
using detail::parse_csv;

using ojson = nlohmann::ordered_json;
constexpr const char* kFormat = "vocablens.result";
constexpr int kFormatVersion = 1;

std::string dump(const ojson& j, int indent = 2) { return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace); }

// Kinds, array and table names become file names: keep them to a safe alphabet.
void check_name(const std::string& what, const std::string& name, bool allow_dot) {
  bool ok = !name.empty() && name.size() <= 120 && name[0] != '.' && name[0] != '-';
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || (allow_dot && c == '.'))) ok = false;
  if (!ok)
    throw UsageError(what + " '" + name + "' cannot be used in a file name (letters, digits, '_', '-'" +
                     (allow_dot ? ", '.'" : "") + " only)");
}

std::string join_path(const std::string& dir, const std::string& file) {
  if (dir.empty()) return file;
  return dir.back() == '/' ? dir + file : dir + "/" + file;
}

float half_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while (!(mant & 0x400));
      mant &= 0x3ff;
      bits = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | (mant << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

template <class T>
T load(const NdArray& a, int64_t i) {
  T v;
  std::memcpy(&v, a.bytes.data() + static_cast<size_t>(i) * sizeof(T), sizeof(T));
  return v;
}

// One element as JSON: integers stay integers, floats are doubles (NaN/inf -> null in JSON).
ojson element_json(const NdArray& a, int64_t i) {
  const std::string& d = a.dtype;
  if (d == "<i8") return load<int64_t>(a, i);
  if (d == "<i4") return load<int32_t>(a, i);
  if (d == "<i2") return load<int16_t>(a, i);
  if (d == "|i1") return load<int8_t>(a, i);
  if (d == "<u8") return load<uint64_t>(a, i);
  if (d == "<u4") return load<uint32_t>(a, i);
  if (d == "<u2") return load<uint16_t>(a, i);
  if (d == "|u1") return load<uint8_t>(a, i);
  if (d == "|b1") return load<uint8_t>(a, i) != 0;
  double v = ndarray_value(a, i);
  if (!std::isfinite(v)) return nullptr;
  return v;
}

ojson nested(const NdArray& a, size_t dim, int64_t& idx) {
  if (dim == a.shape.size()) return element_json(a, idx++);
  ojson arr = ojson::array();
  for (int64_t k = 0; k < a.shape[dim]; ++k) arr.push_back(nested(a, dim + 1, idx));
  return arr;
}

void check_array(const std::string& kind, const std::string& name, const NdArray& a) {
  size_t item = npy_itemsize(a.dtype);
  for (auto s : a.shape)
    if (s < 0) throw UsageError(kind + " array '" + name + "' has a negative dimension");
  if (a.bytes.size() != static_cast<size_t>(a.numel()) * item)
    throw UsageError(kind + " array '" + name + "': " + std::to_string(a.bytes.size()) +
                     " bytes do not match its shape and dtype " + a.dtype);
}

// The column's cell type for the manifest: "integer", "number", "string", "boolean", "mixed", or "null".
std::string column_type(const Table& t, size_t c) {
  std::string type = "null";
  for (const auto& row : t.rows) {
    if (c >= row.size() || row[c].is_null()) continue;
    const auto& v = row[c];
    std::string ty = v.is_boolean()          ? "boolean"
                     : v.is_number_integer() ? "integer"
                     : v.is_number()         ? "number"
                     : v.is_string()         ? "string"
                                             : "mixed";
    if (type == "null") type = ty;
    else if (type != ty) {
      if ((type == "integer" && ty == "number") || (type == "number" && ty == "integer")) type = "number";
      else type = "mixed";
    }
  }
  return type;
}

ojson manifest(const Result& r, const ExportFormats* written, bool inline_arrays, size_t inline_limit) {
  ojson j;
  j["format"] = kFormat;
  j["format_version"] = kFormatVersion;
  j["kind"] = r.kind;
  j["settings"] = ojson::parse(r.settings.is_null() ? std::string("{}")
                                                    : r.settings.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  ojson prov = ojson::parse(r.provenance.is_null() ? std::string("{}")
                                                   : r.provenance.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  if (!prov.is_object()) throw UsageError(r.kind + ": provenance must be a JSON object");
  if (!prov.contains("vocablens_version")) prov["vocablens_version"] = VOCABLENS_VERSION;
  j["provenance"] = prov;
  j["summary"] = ojson::parse(r.summary.is_null() ? std::string("{}")
                                                  : r.summary.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  if (!j["settings"].is_object()) throw UsageError(r.kind + ": settings must be a JSON object");
  if (!j["summary"].is_object()) throw UsageError(r.kind + ": summary must be a JSON object");
  ojson arrays = ojson::object();
  for (const auto& [name, a] : r.arrays) {
    ojson e;
    if (!written || written->npy) e["file"] = r.kind + "." + name + ".npy";
    e["dtype"] = a.dtype;
    e["shape"] = a.shape;
    if (inline_arrays && static_cast<size_t>(a.numel()) <= inline_limit) {
      int64_t idx = 0;
      e["data"] = nested(a, 0, idx);
    }
    arrays[name] = e;
  }
  j["arrays"] = arrays;
  ojson tables = ojson::array();
  for (const auto& t : r.tables) {
    ojson e;
    e["name"] = t.name;
    if (!written || written->csv) e["file"] = r.kind + "." + t.name + ".csv";
    e["columns"] = t.columns;
    ojson types = ojson::array();
    for (size_t c = 0; c < t.columns.size(); ++c) types.push_back(column_type(t, c));
    e["column_types"] = types;
    e["n_rows"] = t.rows.size();
    if (inline_arrays && t.rows.size() * std::max<size_t>(1, t.columns.size()) <= inline_limit) {
      ojson rows = ojson::array();
      for (const auto& row : t.rows)
        rows.push_back(ojson::parse(nlohmann::json(row).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
      e["rows"] = rows;
    }
    tables.push_back(e);
  }
  j["tables"] = tables;
  return j;
}

void validate(const Result& r) {
  check_name("result kind", r.kind, false);
  for (const auto& [name, a] : r.arrays) {
    check_name(r.kind + " array name", name, true);
    check_array(r.kind, name, a);
  }
  std::vector<std::string> seen;
  for (const auto& t : r.tables) {
    check_name(r.kind + " table name", t.name, true);
    if (std::find(seen.begin(), seen.end(), t.name) != seen.end())
      throw UsageError(r.kind + ": two tables named '" + t.name + "'");
    if (r.arrays.count(t.name)) {
      // not a file clash (.npy vs .csv) but confusing in the manifest; allowed.
    }
    seen.push_back(t.name);
    for (size_t i = 0; i < t.rows.size(); ++i)
      if (t.rows[i].size() != t.columns.size())
        throw UsageError(r.kind + " table '" + t.name + "' row " + std::to_string(i) + " has " +
                         std::to_string(t.rows[i].size()) + " cells for " + std::to_string(t.columns.size()) + " columns");
  }
}

std::string read_text(const std::string& path) {
  // Regular files only (a FIFO hung `report`), result files at most 1 GB.
  return detail::read_regular_file(path, uint64_t{1} << 30, "result files");
}

Result result_from_json(const nlohmann::json& j, const std::string& dir, const std::string& path) {
  Result r;
  auto need = [&](const char* key, auto pred, const char* what) -> const nlohmann::json& {
    if (!j.contains(key) || !pred(j.at(key))) throw FormatError(path, std::string("'") + key + "' must be " + what);
    return j.at(key);
  };
  auto is_obj = [](const nlohmann::json& v) { return v.is_object(); };
  auto is_str = [](const nlohmann::json& v) { return v.is_string(); };
  auto is_arr = [](const nlohmann::json& v) { return v.is_array(); };
  r.kind = need("kind", is_str, "a string").get<std::string>();
  try {
    check_name("kind", r.kind, false);
  } catch (const UsageError& e) { throw FormatError(path, e.what()); }
  r.settings = need("settings", is_obj, "an object");
  r.provenance = need("provenance", is_obj, "an object");
  r.summary = need("summary", is_obj, "an object");
  for (const auto& [name, e] : need("arrays", is_obj, "an object").items()) {
    if (!e.is_object()) throw FormatError(path, "array '" + name + "' entry must be an object");
    if (e.contains("file")) {
      if (!e["file"].is_string()) throw FormatError(path, "array '" + name + "': 'file' must be a string");
      std::string file = e["file"].get<std::string>();
      if (file.find('/') != std::string::npos || file.rfind("..", 0) == 0)
        throw FormatError(path, "array '" + name + "': file '" + file + "' is outside the run directory");
      std::string fp = join_path(dir, file);
      NdArray a = read_npy(fp);
      if (e.contains("shape") && e["shape"].is_array() && e["shape"].get<std::vector<int64_t>>() != a.shape)
        throw FormatError(fp, "shape disagrees with " + path);
      r.arrays[name] = std::move(a);
    } else if (e.contains("data") && e.contains("dtype") && e.contains("shape")) {
      // inline-only array (printed JSON saved by hand): rebuild it as float64/int64.
      NdArray a;
      a.shape = e["shape"].get<std::vector<int64_t>>();
      std::vector<nlohmann::json> flat;
      std::function<void(const nlohmann::json&)> walk = [&](const nlohmann::json& v) {
        if (v.is_array())
          for (const auto& x : v) walk(x);
        else flat.push_back(v);
      };
      walk(e["data"]);
      // Found by fuzz_results: the shape decides how many elements are copied, so it must agree
      // with the data before anything is built from it — {"shape": [6], "data": [1, 2]} read past the data.
      int64_t numel = 1;
      for (int64_t d : a.shape) {
        if (d < 0) throw FormatError(path, "array '" + name + "': negative dimension in its shape");
        if (__builtin_mul_overflow(numel, d, &numel)) throw FormatError(path, "array '" + name + "': shape too large");
      }
      if (static_cast<uint64_t>(numel) != flat.size()) throw FormatError(path, "array '" + name + "': data disagrees with shape");
      bool ints = std::all_of(flat.begin(), flat.end(), [](const nlohmann::json& v) { return v.is_number_integer(); });
      if (ints) {
        std::vector<int64_t> v;
        for (auto& x : flat) v.push_back(x.get<int64_t>());
        a = NdArray::i64(a.shape, v.data());
      } else {
        std::vector<double> v;
        for (auto& x : flat) v.push_back(x.is_number() ? x.get<double>() : std::numeric_limits<double>::quiet_NaN());
        a = NdArray::f64(a.shape, v.data());
      }
      r.arrays[name] = std::move(a);
    }
  }
  for (const auto& e : need("tables", is_arr, "an array")) {
    if (!e.is_object() || !e.contains("name") || !e["name"].is_string() || !e.contains("columns") || !e["columns"].is_array())
      throw FormatError(path, "table entries need 'name' and 'columns'");
    Table t;
    t.name = e["name"].get<std::string>();
    t.columns = e["columns"].get<std::vector<std::string>>();
    std::vector<std::string> types(t.columns.size(), "mixed");
    if (e.contains("column_types") && e["column_types"].is_array() && e["column_types"].size() == t.columns.size())
      types = e["column_types"].get<std::vector<std::string>>();
    if (e.contains("file") && e["file"].is_string()) {
      std::string file = e["file"].get<std::string>();
      if (file.find('/') != std::string::npos || file.rfind("..", 0) == 0)
        throw FormatError(path, "table '" + t.name + "': file '" + file + "' is outside the run directory");
      std::string fp = join_path(dir, file);
      auto rows = parse_csv(read_text(fp), fp);
      if (rows.empty()) throw FormatError(fp, "CSV has no header row");
      if (rows[0].size() != t.columns.size()) throw FormatError(fp, "CSV header disagrees with " + path);
      for (size_t i = 1; i < rows.size(); ++i) {
        if (rows[i].size() == 1 && rows[i][0].text.empty() && !rows[i][0].quoted && t.columns.size() != 1) continue;
        if (rows[i].size() != t.columns.size())
          throw FormatError(fp, "row " + std::to_string(i) + " has " + std::to_string(rows[i].size()) + " fields, header has " +
                                    std::to_string(t.columns.size()));
        std::vector<nlohmann::json> row;
        for (size_t c = 0; c < rows[i].size(); ++c) row.push_back(csv_value(rows[i][c], types[c]));
        t.rows.push_back(std::move(row));
      }
    } else if (e.contains("rows") && e["rows"].is_array()) {
      for (const auto& row : e["rows"]) {
        t.rows.push_back(row.get<std::vector<nlohmann::json>>());
        if (t.rows.back().size() != t.columns.size())
          throw FormatError(path, "table '" + t.name + "': row " + std::to_string(t.rows.size()) + " has " +
                                      std::to_string(t.rows.back().size()) + " cells, " + std::to_string(t.columns.size()) +
                                      " columns");
      }
    }
    r.tables.push_back(std::move(t));
  }
  return r;
}

}  // namespace

// ---- helpers shared with the report and notebook writers (declared in report.hpp) ----

std::string valid_utf8(std::string_view s) {
  std::string o;
  o.reserve(s.size());
  size_t i = 0, n = s.size();
  static const char kRepl[] = "\xEF\xBF\xBD";
  while (i < n) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      o.push_back(static_cast<char>(c));
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      o += kRepl;
      ++i;
      continue;
    }
    bool ok = i + len <= n;
    for (size_t k = 1; ok && k < len; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) ok = false;
      else cp = (cp << 6) | (cc & 0x3F);
    }
    if (ok) {
      if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
          (cp >= 0xD800 && cp <= 0xDFFF))
        ok = false;
    }
    if (!ok) {
      o += kRepl;
      ++i;
      continue;
    }
    o.append(s.data() + i, len);
    i += len;
  }
  return o;
}

double ndarray_value(const NdArray& a, int64_t i) {
  const std::string& d = a.dtype;
  if (d == "<f4") return load<float>(a, i);
  if (d == "<f8") return load<double>(a, i);
  if (d == "<f2") return half_to_float(load<uint16_t>(a, i));
  if (d == "<i8") return static_cast<double>(load<int64_t>(a, i));
  if (d == "<i4") return load<int32_t>(a, i);
  if (d == "<i2") return load<int16_t>(a, i);
  if (d == "|i1") return load<int8_t>(a, i);
  if (d == "<u8") return static_cast<double>(load<uint64_t>(a, i));
  if (d == "<u4") return load<uint32_t>(a, i);
  if (d == "<u2") return load<uint16_t>(a, i);
  if (d == "|u1" || d == "|b1") return load<uint8_t>(a, i);
  throw UsageError("unsupported npy dtype '" + d + "'");
}

// ---- export.hpp ----

std::string result_to_json(const Result& r, bool inline_arrays, size_t inline_limit) {
  validate(r);
  return dump(manifest(r, nullptr, inline_arrays, inline_limit)) + "\n";
}

std::vector<std::string> write_result(const Result& r, const std::string& dir, const ExportFormats& formats) {
  validate(r);
  ensure_directory(dir);
  // One writer at a time, an existing result replaced only when asked, and its old manifest
  // removed before anything else (run_directory.hpp).
  detail::RunDirLock lock(dir);
  detail::prepare_result_slot(dir, r.kind, formats.replace);
  std::vector<std::string> written;
  ojson files = ojson::object();
  // Side files first, the manifest last (with their sizes and SHA-256): a reader that sees <kind>.json
  // sees complete side files, and can tell when they are not the ones it was written with.
  auto side = [&](const std::string& name, const std::string& bytes) {
    std::string p = join_path(dir, name);
    write_file_atomic(p, bytes);
    files[name] = detail::file_record(bytes);
    written.push_back(p);
  };
  if (formats.npy)
    for (const auto& [name, a] : r.arrays) side(r.kind + "." + name + ".npy", encode_npy(a));
  if (formats.csv)
    for (const auto& t : r.tables) side(r.kind + "." + t.name + ".csv", table_to_csv(t));
  if (formats.json) {
    std::string p = join_path(dir, r.kind + ".json");
    ojson m = manifest(r, &formats, false, 0);
    m["files"] = files;
    write_file_atomic(p, dump(m) + "\n");
    written.push_back(p);
  }
  return written;
}

std::vector<Result> read_run_directory(const std::string& dir, const std::string& except_kind) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) throw FormatError(dir, "no such directory");
  if (!S_ISDIR(st.st_mode)) throw FormatError(dir, "not a directory");
  DIR* d = ::opendir(dir.c_str());
  if (!d) throw FormatError(dir, std::string("cannot list: ") + std::strerror(errno));
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n.size() > 5 && n.compare(n.size() - 5, 5, ".json") == 0 && n.find(".tmp-") == std::string::npos) names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  std::vector<Result> out;
  for (const auto& n : names) {
    if (!except_kind.empty() && n == except_kind + ".json") continue;
    std::string path = join_path(dir, n);
    nlohmann::json j;
    try {
      std::string text = read_text(path);
      detail::check_json_depth(text, path);  // copies and dump() of the result recurse per level
      j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for 1e999 (fuzz_results)
      throw FormatError(path, std::string("not valid JSON: ") + e.what());
    }
    // Other JSON files (not vocablens results) may live beside the results.
    if (!j.is_object() || !j.contains("format") || j["format"] != kFormat) continue;
    if (!j.contains("format_version") || !j["format_version"].is_number_integer())
      throw FormatError(path, "'format_version' must be an integer");
    if (j["format_version"].get<int>() > kFormatVersion)
      throw FormatError(path, "written by a newer vocablens (format_version " + j["format_version"].dump() + ")");
    try {
      detail::verify_result_files(j, dir, path);  // Mixed or partial directories are reported
      out.push_back(result_from_json(j, dir, path));
      detail::check_result_shapes(out.back(), path);  // the figures index one array by another's sizes
    } catch (const nlohmann::json::exception& e) { throw FormatError(path, std::string("malformed result: ") + e.what()); }
  }
  std::set<std::string> kinds = {except_kind};  // (run_directory.hpp includes <set>)
  for (const auto& n : names) kinds.insert(n.substr(0, n.size() - 5));
  detail::check_no_orphans(dir, kinds);
  return out;
}

}  // namespace vocablens

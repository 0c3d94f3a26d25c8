// Run directories: .npy round trips (also through numpy), CSV quoting, atomic writes, the JSON manifest
// and its schema (docs/schema/result.schema.json), sha256.
#include <sys/stat.h>
#include <unistd.h>
#include <dirent.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "fixtures.hpp"
#include "vocablens/error.hpp"
#include "vocablens/export.hpp"
#include "vocablens/npy.hpp"
#include "vocablens/report.hpp"
#include "vocablens/detail/sha256.hpp"

using vocablens::NdArray;
using vocablens::Result;
using vocablens::Table;
using json = nlohmann::json;

namespace {

using vl_test::file_exists;

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") out.push_back(n);
    }
    ::closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Debian's python3 (with python3-numpy, python3-jsonschema); a pyenv shim on PATH may lack them.
std::string python() { return file_exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3"; }

using vl_test::python_has;

std::string source_dir() { return VOCABLENS_SOURCE_DIR; }

// Every dtype the exporter supports, with awkward values (NaN, inf, -0, extremes).
Result sample_result() {
  Result r;
  r.kind = "sample";
  r.settings = {{"prompt", "The \"Eiffel\" <Tower>, in Paris"}, {"top_k", 5}};
  r.provenance = {{"model_path", "fixtures/gpt2-tiny"},
                  {"config_sha256", std::string(64, 'a')},
                  {"vocablens_version", VOCABLENS_VERSION},
                  {"command_line", "vocablens sample --prompt 'x'"},
                  {"created_utc", "2024-01-02T03:04:05Z"}};
  r.summary = {{"tokens", {"The", " \"Eiffel\"", " <Tower>", ",", " in", " Paris"}}, {"layers", 3}};
  std::vector<float> f32(3 * 6);
  for (size_t i = 0; i < f32.size(); ++i) f32[i] = static_cast<float>(std::sin(0.37 * i) * std::pow(10.0, (int)i % 7 - 3));
  f32[1] = std::numeric_limits<float>::quiet_NaN();
  f32[2] = std::numeric_limits<float>::infinity();
  f32[3] = -0.0f;
  f32[4] = std::numeric_limits<float>::denorm_min();
  f32[5] = std::numeric_limits<float>::max();
  r.arrays["entropy"] = NdArray::f32({3, 6}, f32.data());
  std::vector<double> f64 = {1.0 / 3.0, -2.5e-300, 1e300, 0.1, -0.0, 42};
  r.arrays["f64"] = NdArray::f64({2, 3}, f64.data());
  std::vector<int64_t> i64 = {std::numeric_limits<int64_t>::min(), -1, 0, 1, std::numeric_limits<int64_t>::max()};
  r.arrays["ids"] = NdArray::i64({5}, i64.data());
  std::vector<int32_t> i32 = {-7, 50256, 2147483647, -2147483647 - 1};
  r.arrays["i32"] = NdArray::i32({2, 1, 2}, i32.data());
  std::vector<uint8_t> u8 = {0, 1, 255};
  r.arrays["u8"] = NdArray::make("|u1", {3}, u8.data());
  std::vector<uint8_t> b1 = {1, 0, 1, 1};
  r.arrays["mask"] = NdArray::make("|b1", {2, 2}, b1.data());
  std::vector<uint16_t> f16 = {0x3c00, 0xc000, 0x7bff, 0x0001, 0x7c00};  // 1, -2, 65504, 2^-24, inf
  r.arrays["half"] = NdArray::make("<f2", {5}, f16.data());
  float scalar = 2.5f;
  r.arrays["scalar"] = NdArray::f32({}, &scalar);
  r.arrays["empty"] = NdArray::f32({0, 4}, nullptr);
  Table t{"top_k", {"layer", "token", "prob", "note", "flag"}, {}};
  t.rows.push_back({0, "plain", 0.5, nullptr, true});
  t.rows.push_back({1, "comma, inside", 1e-30, "", false});
  t.rows.push_back({2, "quote \" inside", -0.125, "line\nbreak", true});
  t.rows.push_back({3, " leading space", 3, "crlf\r\nhere", false});
  t.rows.push_back({4, "42", std::numeric_limits<double>::quiet_NaN(), "<script>alert(1)</script>", nullptr});
  t.rows.push_back({5, "\xc3\xa9t\xc3\xa9 \xe2\x96\x81", std::numeric_limits<double>::infinity(), "'single'", true});
  r.tables.push_back(t);
  r.tables.push_back({"empty_table", {"a", "b"}, {}});
  return r;
}

bool same_bits_or_both_nan(double a, double b) {
  if (std::isnan(a) && std::isnan(b)) return true;
  return a == b && std::signbit(a) == std::signbit(b);
}

bool cells_equal(const json& a, const json& b) {
  if (a.is_number() && b.is_number()) return same_bits_or_both_nan(a.get<double>(), b.get<double>());
  return a == b;
}

}  // namespace

TEST_CASE("sha256 matches the FIPS 180-4 test vectors") {
  using vocablens::sha256_hex;
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  std::string million(1000000, 'a');
  CHECK(sha256_hex(million) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // Incremental updates in odd chunk sizes agree with one-shot hashing.
  vocablens::Sha256 h;
  for (size_t i = 0; i < million.size();) {
    size_t n = std::min<size_t>(1 + (i % 131), million.size() - i);
    h.update(million.data() + i, n);
    i += n;
  }
  CHECK(h.hex_digest() == sha256_hex(million));
  auto dir = vl_test::temp_dir("sha");
  vl_test::write_file(dir + "/f.bin", "abcdefgh");
  CHECK(vocablens::sha256_file_hex(dir + "/f.bin", 3) == sha256_hex("abc"));
  CHECK(vocablens::sha256_file_hex(dir + "/f.bin") == sha256_hex("abcdefgh"));
  CHECK_THROWS_AS(vocablens::sha256_file_hex(dir + "/missing"), vocablens::FormatError);
}

TEST_CASE("write_result writes JSON + npy + CSV and reads back identical") {
  auto dir = vl_test::temp_dir("export") + "/run";
  Result r = sample_result();
  auto files = vocablens::write_result(r, dir);
  CHECK(files.size() == r.arrays.size() + r.tables.size() + 1);
  for (const auto& f : files) CHECK(file_exists(f));
  CHECK(file_exists(dir + "/sample.json"));
  CHECK(file_exists(dir + "/sample.entropy.npy"));
  CHECK(file_exists(dir + "/sample.top_k.csv"));
  for (const auto& n : list_dir(dir)) CHECK(n.find(".tmp-") == std::string::npos);

  // Every array loads with the same dtype, shape and bytes.
  for (const auto& [name, a] : r.arrays) {
    NdArray b = vocablens::read_npy(dir + "/sample." + name + ".npy");
    INFO(name);
    CHECK(b.dtype == a.dtype);
    CHECK(b.shape == a.shape);
    CHECK(b.bytes == a.bytes);
  }

  auto back = vocablens::read_run_directory(dir);
  REQUIRE(back.size() == 1);
  const Result& q = back[0];
  CHECK(q.kind == r.kind);
  CHECK(q.settings == r.settings);
  CHECK(q.summary == r.summary);
  CHECK(q.provenance == r.provenance);
  REQUIRE(q.arrays.size() == r.arrays.size());
  for (const auto& [name, a] : r.arrays) CHECK(q.arrays.at(name).bytes == a.bytes);
  REQUIRE(q.tables.size() == r.tables.size());
  for (size_t t = 0; t < r.tables.size(); ++t) {
    CHECK(q.tables[t].name == r.tables[t].name);
    CHECK(q.tables[t].columns == r.tables[t].columns);
    REQUIRE(q.tables[t].rows.size() == r.tables[t].rows.size());
    for (size_t i = 0; i < r.tables[t].rows.size(); ++i)
      for (size_t c = 0; c < r.tables[t].columns.size(); ++c) {
        INFO("table " << r.tables[t].name << " row " << i << " col " << c << ": " << r.tables[t].rows[i][c].dump() << " vs "
                      << q.tables[t].rows[i][c].dump());
        CHECK(cells_equal(q.tables[t].rows[i][c], r.tables[t].rows[i][c]));
      }
  }
}

TEST_CASE("CSV is RFC 4180: strings quoted, quotes doubled, CRLF rows") {
  Table t{"t", {"id", "text", "x"}, {}};
  t.rows.push_back({1, "a,b", 0.5});
  t.rows.push_back({2, "say \"hi\"", nullptr});
  t.rows.push_back({3, "two\nlines", true});
  t.rows.push_back({4, "", std::numeric_limits<double>::quiet_NaN()});
  std::string csv = vocablens::table_to_csv(t);
  CHECK(csv ==
        "\"id\",\"text\",\"x\"\r\n"
        "1,\"a,b\",0.5\r\n"
        "2,\"say \"\"hi\"\"\",\r\n"
        "3,\"two\nlines\",true\r\n"
        "4,\"\",nan\r\n");
  // Invalid UTF-8 (a partial byte-level BPE token) becomes U+FFFD rather than breaking readers.
  Table u{"u", {"tok"}, {{std::string("\xe2\x96")}}};
  CHECK(vocablens::table_to_csv(u) == "\"tok\"\r\n\"\xEF\xBF\xBD\xEF\xBF\xBD\"\r\n");

  // Python's csv module reads the same cells.
  if (!file_exists(python()) && python() != "python3") return;
  auto dir = vl_test::temp_dir("csv");
  vl_test::write_file(dir + "/t.csv", csv);
  std::string out;
  int rc = vl_test::run_command(
      python() + " -c 'import csv,json,sys; print(json.dumps(list(csv.reader(open(sys.argv[1], newline=\"\")))))' " + dir +
          "/t.csv",
      out);
  REQUIRE(rc == 0);
  json rows = json::parse(out);
  CHECK(rows ==
        json::parse(R"([["id","text","x"],["1","a,b","0.5"],["2","say \"hi\"",""],["3","two\nlines","true"],["4","","nan"]])"));
}

TEST_CASE("every .npy loads in numpy with identical values") {
  if (!python_has("numpy")) {
    vl_test::require(false, "python3 with numpy not found; .npy files not checked against numpy");
    return;
  }
  auto dir = vl_test::temp_dir("numpy") + "/run";
  Result r = sample_result();
  vocablens::write_result(r, dir);
  // numpy prints dtype, shape and the values as float64 hex (exact) / ints; C++ compares bit for bit.
  std::string script = dir + "/../check.py";
  vl_test::write_file(script, R"PY(
import json, sys, numpy as np
out = {}
for name in sys.argv[2:]:
    a = np.load(sys.argv[1] + "/sample." + name + ".npy", allow_pickle=False)
    if a.dtype.kind == "f":
        vals = [float(v).hex() for v in a.astype(np.float64).ravel()]
    elif a.dtype.kind == "b":
        vals = [bool(v) for v in a.ravel()]
    else:
        vals = [int(v) for v in a.ravel()]
    out[name] = {"dtype": a.dtype.str, "shape": list(a.shape), "values": vals, "c": bool(a.flags.c_contiguous)}
print(json.dumps(out))
)PY");
  std::string names;
  for (const auto& kv : r.arrays) names += " " + kv.first;
  std::string out;
  int rc = vl_test::run_command(python() + " " + script + " " + dir + names, out);
  INFO(out);
  REQUIRE(rc == 0);
  json got = json::parse(out);
  for (const auto& [name, a] : r.arrays) {
    INFO("array " << name);
    const json& g = got.at(name);
    CHECK(g["dtype"] == a.dtype);
    CHECK(g["shape"].get<std::vector<int64_t>>() == a.shape);
    REQUIRE(g["values"].size() == static_cast<size_t>(a.numel()));
    for (int64_t i = 0; i < a.numel(); ++i) {
      const json& v = g["values"][static_cast<size_t>(i)];
      if (a.dtype == "<i8") {
        int64_t x;
        std::memcpy(&x, a.bytes.data() + 8 * i, 8);
        CHECK(v.get<int64_t>() == x);
      } else if (a.dtype[1] == 'f') {
        double want = vocablens::ndarray_value(a, i);
        double have = std::strtod(v.get<std::string>().c_str(), nullptr);
        INFO("element " << i << " numpy " << v << " want " << want);
        CHECK(same_bits_or_both_nan(have, want));
      } else if (a.dtype == "|b1") {
        CHECK(v.get<bool>() == (a.bytes[static_cast<size_t>(i)] != 0));
      } else {
        CHECK(v.get<double>() == vocablens::ndarray_value(a, i));
      }
    }
  }

  // And the other way: arrays numpy writes (C and Fortran order) read back with the same values.
  vl_test::write_file(script, R"PY(
import sys, numpy as np
d = sys.argv[1]
np.save(d + "/c.npy", np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 7)
np.save(d + "/f.npy", np.asfortranarray(np.arange(24, dtype=np.int64).reshape(2, 3, 4)))
)PY");
  REQUIRE(vl_test::run_command(python() + " " + script + " " + dir, out) == 0);
  NdArray c = vocablens::read_npy(dir + "/c.npy");
  REQUIRE(c.shape == std::vector<int64_t>{2, 3, 4});
  for (int i = 0; i < 24; ++i) CHECK(vocablens::ndarray_value(c, i) == static_cast<double>(static_cast<float>(i) / 7.0f));
  NdArray f = vocablens::read_npy(dir + "/f.npy");
  for (int i = 0; i < 24; ++i) CHECK(vocablens::ndarray_value(f, i) == i);
}

TEST_CASE("the JSON manifest describes every side file and validates against docs/schema") {
  Result r = sample_result();
  json j = json::parse(vocablens::result_to_json(r));
  CHECK(j["format"] == "vocablens.result");
  CHECK(j["format_version"] == 1);
  CHECK(j["kind"] == "sample");
  CHECK(j["arrays"]["entropy"]["file"] == "sample.entropy.npy");
  CHECK(j["arrays"]["entropy"]["dtype"] == "<f4");
  CHECK(j["arrays"]["entropy"]["shape"] == json::array({3, 6}));
  CHECK_FALSE(j["arrays"]["entropy"].contains("data"));
  CHECK(j["tables"][0]["file"] == "sample.top_k.csv");
  CHECK(j["tables"][0]["n_rows"] == 6);
  CHECK(j["tables"][0]["column_types"] == json::array({"integer", "string", "number", "string", "boolean"}));
  CHECK(j["provenance"]["vocablens_version"] == VOCABLENS_VERSION);

  json inl = json::parse(vocablens::result_to_json(r, true));
  CHECK(inl["arrays"]["ids"]["data"] ==
        json::array({std::numeric_limits<int64_t>::min(), -1, 0, 1, std::numeric_limits<int64_t>::max()}));
  CHECK(inl["arrays"]["entropy"]["data"][0][1].is_null());  // NaN
  CHECK(inl["arrays"]["mask"]["data"] == json::parse("[[true,false],[true,true]]"));
  CHECK(inl["arrays"]["scalar"]["data"] == 2.5);
  CHECK(inl["tables"][0]["rows"].size() == 6);
  json limited = json::parse(vocablens::result_to_json(r, true, 4));
  CHECK_FALSE(limited["arrays"]["entropy"].contains("data"));
  CHECK(limited["arrays"]["u8"].contains("data"));

  // Provenance gets the version even when an analysis forgot it.
  Result bare;
  bare.kind = "bare";
  CHECK(json::parse(vocablens::result_to_json(bare))["provenance"]["vocablens_version"] == VOCABLENS_VERSION);

  // Names that would escape the directory are refused.
  Result bad = bare;
  bad.kind = "../evil";
  CHECK_THROWS_AS(vocablens::result_to_json(bad), vocablens::UsageError);
  bad = bare;
  bad.arrays["a/b"] = NdArray::f32({0}, nullptr);
  CHECK_THROWS_AS(vocablens::result_to_json(bad), vocablens::UsageError);
  bad = bare;
  bad.tables.push_back({"t", {"a", "b"}, {{1}}});
  CHECK_THROWS_AS(vocablens::result_to_json(bad), vocablens::UsageError);
  bad = bare;
  bad.arrays["x"] = NdArray{"<f4", {2, 2}, std::vector<uint8_t>(12)};
  CHECK_THROWS_AS(vocablens::result_to_json(bad), vocablens::UsageError);

  if (!python_has("jsonschema")) {
    vl_test::require(false, "python3-jsonschema not installed; JSON not validated against docs/schema/result.schema.json");
    return;
  }
  auto dir = vl_test::temp_dir("schema") + "/run";
  vocablens::write_result(r, dir);
  vocablens::write_result(bare, dir);
  vl_test::write_file(dir + "/../printed.json", vocablens::result_to_json(r, true));
  std::string script = dir + "/../validate.py";
  vl_test::write_file(script, R"PY(
import json, sys, jsonschema
schema = json.load(open(sys.argv[1]))
jsonschema.Draft7Validator.check_schema(schema)
v = jsonschema.Draft7Validator(schema)
bad = 0
for p in sys.argv[2:]:
    errs = list(v.iter_errors(json.load(open(p))))
    for e in errs:
        print(p, "->", list(e.path), e.message)
    bad += len(errs)
# a broken document must fail
doc = json.load(open(sys.argv[2])); doc["format_version"] = "1"; del doc["arrays"]
assert list(v.iter_errors(doc)), "schema accepted a broken document"
print("validated", len(sys.argv) - 2, "documents")
sys.exit(1 if bad else 0)
)PY");
  std::string out;
  int rc = vl_test::run_command(python() + " " + script + " " + source_dir() + "/docs/schema/result.schema.json " + dir +
                                    "/sample.json " + dir + "/bare.json " + dir + "/../printed.json",
                                out);
  INFO(out);
  CHECK(rc == 0);
}

TEST_CASE("read_run_directory skips foreign JSON and rejects malformed results") {
  auto dir = vl_test::temp_dir("readrun");
  Result r = sample_result();
  vocablens::write_result(r, dir);
  vl_test::write_file(dir + "/other.json", R"({"not": "a result"})");
  CHECK(vocablens::read_run_directory(dir).size() == 1);
  vl_test::write_file(dir + "/broken.json", "{\"format\": \"vocablens.result\", ");
  CHECK_THROWS_AS(vocablens::read_run_directory(dir), vocablens::FormatError);
  ::unlink((dir + "/broken.json").c_str());
  vl_test::write_file(dir + "/escape.json",
                      R"({"format":"vocablens.result","format_version":1,"kind":"escape","settings":{},"provenance":{},)"
                      R"("summary":{},"arrays":{"x":{"file":"../../etc/passwd","dtype":"<f4","shape":[1]}},"tables":[]})");
  CHECK_THROWS_AS(vocablens::read_run_directory(dir), vocablens::FormatError);
  ::unlink((dir + "/escape.json").c_str());
  ::unlink((dir + "/sample.entropy.npy").c_str());
  try {
    vocablens::read_run_directory(dir);
    FAIL("missing .npy not reported");
  } catch (const vocablens::FormatError& e) { CHECK(std::string(e.what()).find("sample.entropy.npy") != std::string::npos); }
  CHECK_THROWS_AS(vocablens::read_run_directory(dir + "/nope"), vocablens::FormatError);
}

TEST_CASE("a write that fails leaves no partial file") {
  Result r = sample_result();
  auto base = vl_test::temp_dir("atomic");

  // 1. The run directory cannot be created (a regular file is in the way).
  vl_test::write_file(base + "/blocker", "x");
  try {
    vocablens::write_result(r, base + "/blocker/run");
    FAIL("no error");
  } catch (const vocablens::FormatError& e) { CHECK(std::string(e.what()).find(base + "/blocker") != std::string::npos); }

  // 2. The final rename of the manifest fails (a directory sits where <kind>.json goes): the side files
  //    written before are complete, the manifest is absent, no temporary file is left.
  std::string dir = base + "/run";
  ::mkdir(dir.c_str(), 0755);
  ::mkdir((dir + "/sample.json").c_str(), 0755);
  vl_test::write_file(dir + "/sample.json/keep", "x");
  try {
    vocablens::write_result(r, dir);
    FAIL("no error");
  } catch (const vocablens::FormatError& e) { CHECK(std::string(e.what()).find("sample.json") != std::string::npos); }
  for (const auto& n : list_dir(dir)) {
    INFO(n);
    CHECK(n.find(".tmp-") == std::string::npos);
  }
  CHECK(vocablens::read_npy(dir + "/sample.entropy.npy").bytes == r.arrays.at("entropy").bytes);

  // 3. A directory without write permission (only meaningful when not root: root writes anyway).
  if (::geteuid() != 0) {
    std::string ro = base + "/ro";
    ::mkdir(ro.c_str(), 0555);
    CHECK_THROWS_AS(vocablens::write_result(r, ro), vocablens::FormatError);
    CHECK(list_dir(ro).empty());
    ::chmod(ro.c_str(), 0755);
  } else {
    // As root, /proc/self is a directory nobody can create files in.
    CHECK_THROWS_AS(vocablens::write_result(r, "/proc/self"), vocablens::FormatError);
  }
}

// vocablens/result.hpp — what every analysis returns, and what the exporters write (plain data, no LibTorch).
//
// An analysis fills one Result: small structured content goes to `summary` (JSON), big numbers to
// `arrays` (.npy side files), row-shaped data to `tables` (CSV side files). Analyses never format
// output themselves; notebooks-export/ turns a Result into files (see vocablens/export.hpp).
//
//   vocablens::Result r;
//   r.kind = "my_analysis";    // registered once by its slice (vocablens/result_kinds.hpp)
//   r.settings = {{"top_k", 10}, {"prompt", prompt}};
//   r.arrays["entropy"] = vocablens::NdArray::f32({n_layers, T}, entropy_ptr);
//   r.tables.push_back({"top_k", {"layer", "position", "rank", "token_id", "token", "prob"}, rows});
#pragma once
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace vocablens {

/// A C-order little-endian array as numpy sees it. dtype is a numpy descr string:
/// "<f4", "<f8", "<i4", "<i8", "|u1", "|b1".
struct NdArray {
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;  ///< product(shape) * itemsize bytes

  int64_t numel() const {
    int64_t n = 1;
    for (auto s : shape) n *= s;
    return n;
  }
  template <class T>
  static NdArray make(const char* dtype, std::vector<int64_t> shape, const T* data) {
    NdArray a{dtype, std::move(shape), {}};
    a.bytes.resize(static_cast<size_t>(a.numel()) * sizeof(T));
    if (!a.bytes.empty()) std::memcpy(a.bytes.data(), data, a.bytes.size());
    return a;
  }
  static NdArray f32(std::vector<int64_t> shape, const float* d) { return make("<f4", std::move(shape), d); }
  static NdArray f64(std::vector<int64_t> shape, const double* d) { return make("<f8", std::move(shape), d); }
  static NdArray i64(std::vector<int64_t> shape, const int64_t* d) { return make("<i8", std::move(shape), d); }
  static NdArray i32(std::vector<int64_t> shape, const int32_t* d) { return make("<i4", std::move(shape), d); }
};

/// A table with named columns; cells are JSON scalars (number, string, bool, null). Written as CSV.
struct Table {
  std::string name;
  std::vector<std::string> columns;
  std::vector<std::vector<nlohmann::json>> rows;
};

struct Result {
  std::string kind;                                      ///< names the analysis and its files; see vocablens/result_kinds.hpp
  nlohmann::json settings = nlohmann::json::object();    ///< what was asked (flags, prompt, k, ...)
  nlohmann::json provenance = nlohmann::json::object();  ///< model path, config hash, version, command line
  nlohmann::json summary = nlohmann::json::object();     ///< small structured content, token strings
  std::map<std::string, NdArray> arrays;                 ///< name -> array (written as <kind>.<name>.npy)
  std::vector<Table> tables;                             ///< written as <kind>.<table>.csv
};

}  // namespace vocablens

// tests/support/npy_tensor.hpp — load a fixture .npy, or a raw reference file (llama.cpp's float32 dumps, id lists),
// as an at::Tensor (tests that link LibTorch only).
#pragma once
#include <ATen/ATen.h>

#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "vocablens/npy.hpp"

namespace vl_test {

inline at::Tensor load_npy_tensor(const std::string& path) {
  vocablens::NdArray a = vocablens::read_npy(path);
  at::ScalarType t = a.dtype == "<f4"   ? at::kFloat
                     : a.dtype == "<f8" ? at::kDouble
                     : a.dtype == "<i8" ? at::kLong
                     : a.dtype == "<i4" ? at::kInt
                                        : at::kByte;
  auto out = at::empty(a.shape, at::TensorOptions().dtype(t));
  std::memcpy(out.data_ptr(), a.bytes.data(), a.bytes.size());
  return out;
}

/// Whitespace-separated integers (a reference's token ids, e.g. ids.txt beside llama.cpp's logits).
inline std::vector<int64_t> read_ids_txt(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw std::runtime_error(path + ": cannot open");
  std::vector<int64_t> ids;
  int64_t x;
  while (f >> x) ids.push_back(x);
  return ids;
}

/// Raw little-endian float32 values of `shape` (one entry may be -1: inferred from the file's size), as
/// tests/llama_ref/lcpp_logits writes them. Throws when the size does not fit the shape.
inline at::Tensor read_f32_raw(const std::string& path, std::vector<int64_t> shape) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error(path + ": cannot open");
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) infer = static_cast<int64_t>(i);
    else known *= shape[i];
  }
  const int64_t n = static_cast<int64_t>(bytes.size() / 4);
  if (infer >= 0 && known > 0) shape[static_cast<size_t>(infer)] = n / known;
  int64_t want = 1;
  for (int64_t d : shape) want *= d;
  if (bytes.size() % 4 != 0 || want != n)
    throw std::runtime_error(path + ": " + std::to_string(bytes.size()) + " bytes do not hold the expected float32 shape");
  at::Tensor t = at::empty(shape, at::kFloat);
  std::memcpy(t.data_ptr<float>(), bytes.data(), bytes.size());
  return t;
}

}  // namespace vl_test

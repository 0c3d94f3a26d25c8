// tests/support/npy_tensor.hpp — load a fixture .npy as an at::Tensor (tests that link LibTorch only).
#pragma once
#include <ATen/ATen.h>

#include <cstring>

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

inline double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

}  // namespace vl_test

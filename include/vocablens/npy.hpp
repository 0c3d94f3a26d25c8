// vocablens/npy.hpp — NumPy .npy files (format 1.0/2.0/3.0), so numpy.load opens our arrays unchanged.
//
//   auto a = vocablens::read_npy("reference/seq0_hello_logits.npy");   // a.dtype == "<f4", a.shape {4, 50257}
//   vocablens::write_npy("out/entropy.npy", vocablens::NdArray::f32({13, 10}, data));
#pragma once
#include <string>
#include <vector>

#include "vocablens/result.hpp"

namespace vocablens {

/// Reads a .npy file. Accepts little-endian or byte-free dtypes (<f4 <f8 <i4 <i8 <u4 <u8 |u1 |i1 |b1 <f2),
/// C order (Fortran order is transposed into C order on read). Throws FormatError(path, ...) on a bad magic,
/// header, dtype, or a data size that disagrees with the shape.
NdArray read_npy(const std::string& path);

/// Encodes an array as .npy (format 1.0 unless the header needs 2.0), header padded to 64 bytes.
std::string encode_npy(const NdArray& a);

/// Writes an array as .npy atomically (see atomic_file.hpp).
void write_npy(const std::string& path, const NdArray& a);

/// The .npy header (magic, version, padded dict) for `dtype` and `shape`: what encode_npy puts before the data.
std::string npy_header(const std::string& dtype, const std::vector<int64_t>& shape);

/// Writes `nbytes` of C-order data as .npy atomically, streamed from `data` without a copy (big arrays,
/// e.g. the E⁺ cache). The caller vouches that nbytes matches dtype and shape.
void write_npy(const std::string& path, const std::string& dtype, const std::vector<int64_t>& shape, const void* data,
               size_t nbytes);

/// Size in bytes of one element of a numpy descr ("<f4" -> 4); throws UsageError on an unknown descr.
size_t npy_itemsize(const std::string& dtype);

}  // namespace vocablens

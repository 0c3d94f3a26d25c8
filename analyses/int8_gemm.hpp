// int8_gemm.hpp — exact int8 × int8 → int32 matrix products (oneDNN), for screening passes.
//
// C [M, N] = A [M, K] · Bᵀ, A row-major int8 [M, K], B row-major int8 [N, K] (one row per output column), C
// row-major int32. Every entry is the exact integer sum: |a·b| ≤ 127·128 per product, so K ≤ 65 000 keeps
// every partial sum (including oneDNN's +128 shift of a signed source and its compensation) inside int32.
//
//   if (vocablens::detail::int8_gemm_available()) vocablens::detail::int8_gemm(A, B, C, M, K, N);
//
// Available only when the build found oneDNN (libdnnl, the library LibTorch already loads) and oneDNN picks a
// kernel with exact 32-bit accumulation on this CPU (AVX-512 VNNI or AMX: vpdpbusd / tdpbssd). Older int8
// kernels (vpmaddubsw) saturate 16-bit pairs and are refused. Threads: oneDNN's OpenMP runtime (the
// process's OMP setting); called from inside an OpenMP parallel region it runs on the calling thread alone, and
// several threads may call it at once (each has its own stream and scratchpad).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace vocablens::detail {

/// True when int8_gemm runs here with exact int32 accumulation (see above); the kernel's name in `kernel`.
bool int8_gemm_available(std::string* kernel = nullptr);

/// C = A · Bᵀ (shapes above). Throws std::runtime_error when unavailable or oneDNN fails.
void int8_gemm(const int8_t* A, const int8_t* B, int32_t* C, int64_t M, int64_t K, int64_t N);

/// B [N, K] (as above) reordered once into the layout oneDNN's kernel reads for products of `M` rows, so that
/// many products with the same B skip that reordering (and the s8·s8 compensation it computes) per call.
/// `B` need not outlive it. Products of another number of rows use the same packed copy when their kernel reads
/// the same layout (it depends on K and N), else a per-call copy back to the plain layout.
class Int8PackedB {
 public:
  Int8PackedB(const int8_t* B, int64_t K, int64_t N, int64_t M);
  int64_t K, N, M;
  std::vector<uint8_t> packed;  // oneDNN's layout for (M, K, N), with its s8·s8 compensation
};

/// C [M', N] = A [M', K] · Bᵀ with a packed B (any M').
void int8_gemm(const int8_t* A, const Int8PackedB& W, int32_t* C, int64_t M);

}  // namespace vocablens::detail

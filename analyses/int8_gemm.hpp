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

namespace vocablens::detail {

/// True when int8_gemm runs here with exact int32 accumulation (see above); the kernel's name in `kernel`.
bool int8_gemm_available(std::string* kernel = nullptr);

/// C = A · Bᵀ (shapes above). Throws std::runtime_error when unavailable or oneDNN fails.
void int8_gemm(const int8_t* A, const int8_t* B, int32_t* C, int64_t M, int64_t K, int64_t N);

}  // namespace vocablens::detail

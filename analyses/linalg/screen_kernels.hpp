// The two screens' kernels of topk_stream (analyses/linalg/topk_stream.cpp), chosen at run time by CPU:
// - the BLAS screen's scan of a written tile (scan_ge: AVX-512 / AVX2 / scalar);
// - the fused screen: a register-blocked float32 product whose kScreenRows x kScreenCols result blocks are
//   compared with the rows' thresholds while still in registers. The BLAS screen writes each [256, 1024] tile
//   to memory and reads it back to scan it; at a rank of 64 that traffic costs as much as the multiplications.
// Private to the library; the contract is vocablens/linalg/topk_stream.hpp's.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>

namespace vocablens {
namespace detail {

/// Writes the indices j < n with p[j] >= t to out (NaN never passes); returns their count.
using ScanFn = int64_t (*)(const float* p, int64_t n, float t, int32_t* out);
extern const ScanFn scan_ge;

constexpr int64_t kScreenRows = 8, kScreenCols = 32;

/// B [r, m] (float32, contiguous) in panels of kScreenCols columns: panel q holds B[k, kScreenCols q + c] at
/// [q][k][c], zeros past the last column.
at::Tensor pack_col_panels(const at::Tensor& Bs);

/// Rows [0, rows) of A (row-major, r columns; rows <= kScreenRows) as [k][kScreenRows], zeros past `rows`.
void pack_row_block(const float* A, int64_t r, int64_t rows, float* out);

/// One kScreenRows x kScreenCols block of packed A times one panel of B: bit c of masks[i] is set when row i's
/// float32 value at column c is >= tf[i] and bit c of colmask is set. Returns whether any bit is set; then
/// vals holds the block's values ([kScreenRows][kScreenCols]). The sum runs over k in order with fused
/// multiply-adds: a float32 summation order like any other, so the stream's error bound covers it.
/// Only where fused_screen_available().
bool screen_block(const float* ap, const float* bp, int64_t r, const float* tf, uint32_t colmask, uint32_t* masks, float* vals);

/// Whether this CPU runs screen_block (AVX-512F).
bool fused_screen_available();

}  // namespace detail
}  // namespace vocablens

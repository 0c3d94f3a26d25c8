// The screens' kernels (see screen_kernels.hpp).
#include "screen_kernels.hpp"

#include <ATen/ATen.h>
#include <immintrin.h>

#include <algorithm>

namespace vocablens {
namespace detail {

namespace {
constexpr int64_t kMR = kScreenRows, kNR = kScreenCols;

// ---- the vectorised filter pass: indices j with p[j] >= t (NaN never passes) ----

int64_t scan_ge_scalar(const float* p, int64_t n, float t, int32_t* out) {
  int64_t c = 0;
  int64_t j = 0;
  for (; j + 32 <= n; j += 32) {
    int any = 0;
    for (int q = 0; q < 32; ++q) any |= (p[j + q] >= t);
    if (!any) continue;
    for (int q = 0; q < 32; ++q)
      if (p[j + q] >= t) out[c++] = static_cast<int32_t>(j + q);
  }
  for (; j < n; ++j)
    if (p[j] >= t) out[c++] = static_cast<int32_t>(j);
  return c;
}

__attribute__((target("avx2"))) int64_t scan_ge_avx2(const float* p, int64_t n, float t, int32_t* out) {
  const __m256 tv = _mm256_set1_ps(t);
  int64_t c = 0;
  int64_t j = 0;
  for (; j + 32 <= n; j += 32) {
    unsigned m0 = static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(p + j), tv, _CMP_GE_OQ)));
    unsigned m1 = static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(p + j + 8), tv, _CMP_GE_OQ)));
    unsigned m2 = static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(p + j + 16), tv, _CMP_GE_OQ)));
    unsigned m3 = static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(p + j + 24), tv, _CMP_GE_OQ)));
    unsigned m = m0 | (m1 << 8) | (m2 << 16) | (m3 << 24);
    while (m) {
      out[c++] = static_cast<int32_t>(j + __builtin_ctz(m));
      m &= m - 1;
    }
  }
  for (; j < n; ++j)
    if (p[j] >= t) out[c++] = static_cast<int32_t>(j);
  return c;
}

__attribute__((target("avx512f"))) int64_t scan_ge_avx512(const float* p, int64_t n, float t, int32_t* out) {
  const __m512 tv = _mm512_set1_ps(t);
  int64_t c = 0;
  int64_t j = 0;
  for (; j + 64 <= n; j += 64) {
    uint64_t m0 = _mm512_cmp_ps_mask(_mm512_loadu_ps(p + j), tv, _CMP_GE_OQ);
    uint64_t m1 = _mm512_cmp_ps_mask(_mm512_loadu_ps(p + j + 16), tv, _CMP_GE_OQ);
    uint64_t m2 = _mm512_cmp_ps_mask(_mm512_loadu_ps(p + j + 32), tv, _CMP_GE_OQ);
    uint64_t m3 = _mm512_cmp_ps_mask(_mm512_loadu_ps(p + j + 48), tv, _CMP_GE_OQ);
    uint64_t m = m0 | (m1 << 16) | (m2 << 32) | (m3 << 48);
    while (m) {
      out[c++] = static_cast<int32_t>(j + __builtin_ctzll(m));
      m &= m - 1;
    }
  }
  for (; j < n; ++j)
    if (p[j] >= t) out[c++] = static_cast<int32_t>(j);
  return c;
}

ScanFn pick_scan() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return scan_ge_avx512;
  if (__builtin_cpu_supports("avx2")) return scan_ge_avx2;
  return scan_ge_scalar;
}
}  // namespace

const ScanFn scan_ge = pick_scan();

// B's columns in panels of kNR: panel q holds B[k, kNR q + c] at [q][k][c], zeros past the last column.
at::Tensor pack_col_panels(const at::Tensor& Bs) {
  const int64_t r = Bs.size(0), m = Bs.size(1), np = (m + kNR - 1) / kNR;
  at::Tensor P = at::zeros({np, r, kNR}, at::kFloat);
  float* d = P.data_ptr<float>();
  const float* s = Bs.data_ptr<float>();
  for (int64_t q = 0; q < np; ++q) {
    const int64_t c0 = q * kNR, w = std::min(kNR, m - c0);
    for (int64_t k = 0; k < r; ++k) std::copy(s + k * m + c0, s + k * m + c0 + w, d + (q * r + k) * kNR);
  }
  return P;
}

// Rows [0, rows) of A (row-major, r columns) as [k][kMR], zeros for rows past `rows`.
void pack_row_block(const float* A, int64_t r, int64_t rows, float* out) {
  for (int64_t k = 0; k < r; ++k)
    for (int64_t i = 0; i < kMR; ++i) out[k * kMR + i] = i < rows ? A[i * r + k] : 0.0f;
}

// One kMR x kNR block: bit c of masks[i] is set when row i's float32 value at column c is >= tf[i] and bit c
// of colmask is set. Returns whether any bit is set; then vals holds the block's values ([kMR][kNR]).
// The sum runs over k in order with fused multiply-adds: a float32 summation order like any other, so the
// stream's error bound (prepare()) covers it.
__attribute__((target("avx512f"))) bool screen_block(const float* ap, const float* bp, int64_t r, const float* tf,
                                                     uint32_t colmask, uint32_t* masks, float* vals) {
  __m512 lo0 = _mm512_setzero_ps(), hi0 = lo0, lo1 = lo0, hi1 = lo0, lo2 = lo0, hi2 = lo0, lo3 = lo0, hi3 = lo0;
  __m512 lo4 = lo0, hi4 = lo0, lo5 = lo0, hi5 = lo0, lo6 = lo0, hi6 = lo0, lo7 = lo0, hi7 = lo0;
  for (int64_t k = 0; k < r; ++k) {
    const __m512 b0 = _mm512_loadu_ps(bp + k * kNR), b1 = _mm512_loadu_ps(bp + k * kNR + 16);
    const float* a = ap + k * kMR;
    __m512 x = _mm512_set1_ps(a[0]);
    lo0 = _mm512_fmadd_ps(x, b0, lo0), hi0 = _mm512_fmadd_ps(x, b1, hi0);
    x = _mm512_set1_ps(a[1]);
    lo1 = _mm512_fmadd_ps(x, b0, lo1), hi1 = _mm512_fmadd_ps(x, b1, hi1);
    x = _mm512_set1_ps(a[2]);
    lo2 = _mm512_fmadd_ps(x, b0, lo2), hi2 = _mm512_fmadd_ps(x, b1, hi2);
    x = _mm512_set1_ps(a[3]);
    lo3 = _mm512_fmadd_ps(x, b0, lo3), hi3 = _mm512_fmadd_ps(x, b1, hi3);
    x = _mm512_set1_ps(a[4]);
    lo4 = _mm512_fmadd_ps(x, b0, lo4), hi4 = _mm512_fmadd_ps(x, b1, hi4);
    x = _mm512_set1_ps(a[5]);
    lo5 = _mm512_fmadd_ps(x, b0, lo5), hi5 = _mm512_fmadd_ps(x, b1, hi5);
    x = _mm512_set1_ps(a[6]);
    lo6 = _mm512_fmadd_ps(x, b0, lo6), hi6 = _mm512_fmadd_ps(x, b1, hi6);
    x = _mm512_set1_ps(a[7]);
    lo7 = _mm512_fmadd_ps(x, b0, lo7), hi7 = _mm512_fmadd_ps(x, b1, hi7);
  }
  const __m512 lo[kMR] = {lo0, lo1, lo2, lo3, lo4, lo5, lo6, lo7};
  const __m512 hi[kMR] = {hi0, hi1, hi2, hi3, hi4, hi5, hi6, hi7};
  uint32_t any = 0;
  for (int64_t i = 0; i < kMR; ++i) {
    const __m512 t = _mm512_set1_ps(tf[i]);
    const uint32_t m = static_cast<uint32_t>(_mm512_cmp_ps_mask(lo[i], t, _CMP_GE_OQ)) |
                       (static_cast<uint32_t>(_mm512_cmp_ps_mask(hi[i], t, _CMP_GE_OQ)) << 16);
    masks[i] = m & colmask;
    any |= masks[i];
  }
  if (any)
    for (int64_t i = 0; i < kMR; ++i) {
      _mm512_storeu_ps(vals + i * kNR, lo[i]);
      _mm512_storeu_ps(vals + i * kNR + 16, hi[i]);
    }
  return any != 0;
}

bool fused_screen_available() {
  __builtin_cpu_init();
  static const bool ok = __builtin_cpu_supports("avx512f");
  return ok;
}

}  // namespace detail
}  // namespace vocablens

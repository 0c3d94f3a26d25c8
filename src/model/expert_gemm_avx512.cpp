// The kernel of expert_gemm.hpp for AVX-512F: 16 activation rows per register, weight values broadcast from their
// stored rows. Everything after the pragma is compiled for that instruction set; the headers come before it, so no
// inline function another file could share is built with it (expert_gemm.cpp calls this file only on CPUs that
// have it).
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() and warn about it (a known false positive).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "model/expert_gemm_kernel.hpp"

#pragma GCC push_options
#pragma GCC target("avx2,fma,avx512f")

namespace vocablens::detail {
namespace {

// A tile of N weight rows x 16 A activation rows: N x A accumulators (at most 6 x 4 = 24 of the 32 registers, with
// A for the activations and one for the broadcast), each summed over k in order with one FMA per term.
template <int A, int N>
void tile(const float* const* wr, int64_t K, const float* xT, int64_t ldx, float* yT, int64_t ldy) {
  __m512 acc[N][A];
#pragma GCC unroll 6
  for (int j = 0; j < N; ++j)
#pragma GCC unroll 4
    for (int a = 0; a < A; ++a) acc[j][a] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    __m512 xv[A];
#pragma GCC unroll 4
    for (int a = 0; a < A; ++a) xv[a] = _mm512_loadu_ps(xT + k * ldx + 16 * a);
#pragma GCC unroll 6
    for (int j = 0; j < N; ++j) {
      const __m512 b = _mm512_set1_ps(wr[j][k]);
#pragma GCC unroll 4
      for (int a = 0; a < A; ++a) acc[j][a] = _mm512_fmadd_ps(xv[a], b, acc[j][a]);
    }
  }
#pragma GCC unroll 6
  for (int j = 0; j < N; ++j)
#pragma GCC unroll 4
    for (int a = 0; a < A; ++a) _mm512_storeu_ps(yT + j * ldy + 16 * a, acc[j][a]);
}

template <int A>
void tile_n(int n, const float* const* wr, int64_t K, const float* xT, int64_t ldx, float* yT, int64_t ldy) {
  switch (n) {
    case 6: return tile<A, 6>(wr, K, xT, ldx, yT, ldy);
    case 5: return tile<A, 5>(wr, K, xT, ldx, yT, ldy);
    case 4: return tile<A, 4>(wr, K, xT, ldx, yT, ldy);
    case 3: return tile<A, 3>(wr, K, xT, ldx, yT, ldy);
    case 2: return tile<A, 2>(wr, K, xT, ldx, yT, ldy);
    default: return tile<A, 1>(wr, K, xT, ldx, yT, ldy);
  }
}

}  // namespace

void expert_gemm_rows_avx512(const ExpertGemmArgs& g, int64_t o0, int64_t o1) {
  // Blocks of 64 activation rows outermost: a block of the operand ([K, 64] floats, 128 KB at K 512, 448 KB at
  // 1792) stays in L2 while every weight row streams past it once.
  for (int64_t t0 = 0; t0 < g.ldx; t0 += 64) {
    const int a = static_cast<int>(std::min<int64_t>(4, (g.ldx - t0) / 16));
    for (int64_t o = o0; o < o1; o += 6) {
      const int n = static_cast<int>(std::min<int64_t>(6, o1 - o));
      const float* wr[6];
      for (int j = 0; j < n; ++j) wr[j] = g.w + (o + j) * g.ldw;
      float* y = g.yT + o * g.ldx + t0;
      const float* x = g.xT + t0;
      switch (a) {
        case 4: tile_n<4>(n, wr, g.K, x, g.ldx, y, g.ldx); break;
        case 3: tile_n<3>(n, wr, g.K, x, g.ldx, y, g.ldx); break;
        case 2: tile_n<2>(n, wr, g.K, x, g.ldx, y, g.ldx); break;
        default: tile_n<1>(n, wr, g.K, x, g.ldx, y, g.ldx); break;
      }
    }
  }
}

}  // namespace vocablens::detail

#pragma GCC pop_options

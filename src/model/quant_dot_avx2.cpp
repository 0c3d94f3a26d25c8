// The int8 kernels of quant_dot.hpp for AVX2 + FMA (Haswell and later, Zen). Everything after the pragma is compiled for that
// instruction set; the headers come before it, so no inline function another file could share is built with it
// (the dispatch in quant_dot.cpp calls this file only on CPUs that have it).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "model/quant_dot.hpp"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace vocablens {
namespace qdot {
namespace {

#include "model/quant_dot_avx.inc"
#include "model/quant_dot_algo.inc"

}  // namespace

void dot_rows_avx2(const DotArgs& a) { dot_rows_blocked(a); }

namespace {

// The largest |x| of n values (n a multiple of 8), and whether any is NaN or infinite.
float block_max_abs(const float* x, int n, bool& finite) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  __m256 vmax = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
  for (int i = 0; i < n / 8; ++i) {
    const __m256 a = _mm256_and_ps(_mm256_loadu_ps(x + 8 * i), abs_mask);
    vmax = _mm256_max_ps(vmax, a);
    bad = _mm256_or_ps(bad, _mm256_cmp_ps(a, _mm256_set1_ps(__builtin_inff()), _CMP_NLT_UQ));  // infinity or NaN
  }
  finite = _mm256_movemask_ps(bad) == 0;
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  return _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
}

// 32 values times s, rounded to nearest (ties to even), capped at 127 (the cap only Q8_K's), as bytes in order.
void round_32(const float* x, float s, int8_t* q, bool cap127) {
  const __m256 vs = _mm256_set1_ps(s), cap = _mm256_set1_ps(127.f);
  __m256i v[4];
  for (int k = 0; k < 4; ++k) {
    __m256 r = _mm256_round_ps(_mm256_mul_ps(vs, _mm256_loadu_ps(x + 8 * k)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    if (cap127) r = _mm256_min_ps(r, cap);
    v[k] = _mm256_cvtps_epi32(r);
  }
  const __m256i b8 = _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), _mm256_permutevar8x32_epi32(b8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}

}  // namespace

// quantize_row()'s Q8_0 rows (quant_dot.cpp, quantize_q8_0): d = max|x| / 127 rounded to fp16 (vcvtps2ph, ties to
// even), q = round(x · (127 / max|x|)), ties to even; NaN or infinity: a NaN scale and zeros.
void quantize_q8_0_avx2(const float* x, int64_t cols, uint8_t* dst) {
  const int64_t nb = cols / 32, d_bytes = (4 * nb + 63) / 64 * 64;
  std::memset(dst, 0, static_cast<size_t>(d_bytes + (cols + 32 + 63) / 64 * 64));  // the kernels read the padding
  float* d = reinterpret_cast<float*>(dst);
  int8_t* qs = reinterpret_cast<int8_t*>(dst + d_bytes);
  for (int64_t b = 0; b < nb; ++b, x += 32, qs += 32) {
    bool finite;
    const float amax = block_max_abs(x, 32, finite);
    if (!finite) {
      d[b] = __builtin_nanf("");
      continue;
    }
    d[b] = _cvtsh_ss(_cvtss_sh(amax / 127.f, _MM_FROUND_TO_NEAREST_INT));
    round_32(x, amax != 0.f ? 127.f / amax : 0.f, qs, false);
  }
}

// quantize_row()'s Q8_K rows (quant_dot.cpp, quantize_q8_k) 8 values at a time, the same bytes: the same largest
// magnitude (the first value that has it gives the sign), the same product iscale · x rounded once, ties to even
// (vroundps), capped at 127; a block holding NaN or infinity gets a NaN scale and zeros.
void quantize_q8_k_avx2(const float* x, int64_t cols, uint8_t* dst) {
  const int64_t nb = cols / 256, d_bytes = (4 * nb + 63) / 64 * 64;
  float* d = reinterpret_cast<float*>(dst);
  int16_t* bsums = reinterpret_cast<int16_t*>(dst + d_bytes);
  int8_t* qs = reinterpret_cast<int8_t*>(dst + d_bytes + (32 * nb + 63) / 64 * 64);
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  for (int64_t b = 0; b < nb; ++b, x += 256, qs += 256, bsums += 16) {
    bool finite;
    const float amax = block_max_abs(x, 256, finite);
    if (!finite || amax == 0.f) {
      d[b] = finite ? 0.f : __builtin_nanf("");
      std::memset(qs, 0, 256);
      std::memset(bsums, 0, 32);
      continue;
    }
    int j = 0;
    for (int i = 0; i < 32; ++i) {
      const int hit = _mm256_movemask_ps(
          _mm256_cmp_ps(_mm256_and_ps(_mm256_loadu_ps(x + 8 * i), abs_mask), _mm256_set1_ps(amax), _CMP_EQ_OQ));
      if (hit) {
        j = 8 * i + __builtin_ctz(static_cast<unsigned>(hit));
        break;
      }
    }
    const float iscale = -127.f / x[j];
    for (int i = 0; i < 8; ++i) round_32(x + 32 * i, iscale, qs + 32 * i, true);
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += qs[16 * g + i];
      bsums[g] = static_cast<int16_t>(sum);
    }
    d[b] = 1 / iscale;
  }
}

}  // namespace qdot
}  // namespace vocablens

#pragma GCC pop_options

// The logit lens's fused per-row kernels (see lens.hpp, lens_detail): top-k, max, log-sum-exp, entropy and the
// target's log-probability of one row of logits in a few passes over V, AVX2 where the CPU has it.
#include "vocablens/detail/lens_engine.hpp"

#include <ATen/Parallel.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <limits>

namespace vocablens {
namespace lens_detail {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// ---------------------------------------------------------------------------------------------------
// top-k of one row: a small array sorted by value descending; ties keep the lower id first (ids arrive
// in increasing order and an equal value never displaces an earlier one).

struct TopK {
  int64_t k = 0;
  int64_t n = 0;
  float* vals = nullptr;
  int64_t* ids = nullptr;
  float threshold() const {
    if (k == 0) return std::numeric_limits<float>::infinity();
    return n < k ? kNegInf : vals[k - 1];
  }
  // Callers push only when n < k or v > threshold().
  void push(float v, int64_t id) {
    int64_t pos = n < k ? n++ : k - 1;
    while (pos > 0 && vals[pos - 1] < v) {
      vals[pos] = vals[pos - 1];
      ids[pos] = ids[pos - 1];
      --pos;
    }
    vals[pos] = v;
    ids[pos] = id;
  }
};

// ---------------------------------------------------------------------------------------------------
// Scalar kernels (portable reference; also used for the tails of the vector kernels).

// Pass A: max, top-k, count of logits > zt, sum pf*z.
void pass_a_scalar(const float* z, int64_t begin, int64_t end, float zt, const float* pf, TopK& top, float& mx, int64_t& greater,
                   double& dot) {
  for (int64_t j = begin; j < end; ++j) {
    float v = z[j];
    if (v > mx) mx = v;
    if (v > zt) ++greater;
    if (pf) dot += static_cast<double>(pf[j]) * static_cast<double>(v);
    if (top.n < top.k || v > top.threshold()) top.push(v, j);
  }
}

// Pass B: s = sum exp(z - m), s1 = sum exp(z - m) (z - m).
void pass_b_scalar(const float* z, int64_t begin, int64_t end, float m, double& s, double& s1) {
  for (int64_t j = begin; j < end; ++j) {
    double d = static_cast<double>(z[j]) - m;
    double e = std::exp(d);
    s += e;
    s1 += e * d;
  }
}

// z[j] <- exp(z[j] - lse)
void pass_c_scalar(float* z, int64_t begin, int64_t end, double lse) {
  for (int64_t j = begin; j < end; ++j) z[j] = static_cast<float>(std::exp(static_cast<double>(z[j]) - lse));
}

// ---------------------------------------------------------------------------------------------------
// AVX2 + FMA kernels (8 floats per step; sums in double lanes).

#if defined(__x86_64__) || defined(__i386__)
#define VL_LENS_HAVE_AVX2 1

__attribute__((target("avx2,fma"))) static inline __m256 exp256(__m256 x) {
  // Cephes-style expf: exp(x) = 2^n * exp(r), r = x - n ln2 in [-ln2/2, ln2/2]; relative error ~2e-7.
  // Inputs here are <= 0 (logit - max); clamp below to the smallest normal result.
  const __m256 lo = _mm256_set1_ps(-87.33654f), hi = _mm256_set1_ps(88.0f);
  x = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
  __m256 fx =
      _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 y = _mm256_set1_ps(1.9875691500E-4f);
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507E-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073E-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894E-2f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459E-1f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201E-1f));
  __m256 r2 = _mm256_mul_ps(r, r);
  y = _mm256_fmadd_ps(y, r2, r);
  y = _mm256_add_ps(y, _mm256_set1_ps(1.0f));
  __m256i n = _mm256_cvtps_epi32(fx);
  n = _mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(n));
}

__attribute__((target("avx2,fma"))) static inline __m256d add_f32x8_to_f64(__m256d acc, __m256 v) {
  acc = _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
  return _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

__attribute__((target("avx2,fma"))) static inline double hsum_pd(__m256d v) {
  alignas(32) double t[4];
  _mm256_store_pd(t, v);
  return (t[0] + t[1]) + (t[2] + t[3]);
}

__attribute__((target("avx2,fma"))) static inline float hmax_ps(__m256 v) {
  alignas(32) float t[8];
  _mm256_store_ps(t, v);
  float m = t[0];
  for (int i = 1; i < 8; ++i) m = t[i] > m ? t[i] : m;
  return m;
}

__attribute__((target("avx2,fma"))) void pass_a_avx2(const float* z, int64_t V, float zt, const float* pf, TopK& top, float& mx,
                                                     int64_t& greater, double& dot) {
  const int64_t V8 = V & ~int64_t{7};
  __m256 vmax = _mm256_set1_ps(kNegInf);
  const __m256 vzt = _mm256_set1_ps(zt);
  __m256i cnt = _mm256_setzero_si256();
  __m256d d0 = _mm256_setzero_pd(), d1 = _mm256_setzero_pd();
  __m256 vthr = _mm256_set1_ps(top.threshold());
  bool filling = top.n < top.k;
  // Counts per lane stay below 2^31 for any V < 2^34.
  for (int64_t j = 0; j < V8; j += 8) {
    __m256 v = _mm256_loadu_ps(z + j);
    vmax = _mm256_max_ps(vmax, v);
    cnt = _mm256_sub_epi32(cnt, _mm256_castps_si256(_mm256_cmp_ps(v, vzt, _CMP_GT_OQ)));
    if (pf) {
      __m256 p = _mm256_mul_ps(_mm256_loadu_ps(pf + j), v);
      d0 = _mm256_add_pd(d0, _mm256_cvtps_pd(_mm256_castps256_ps128(p)));
      d1 = _mm256_add_pd(d1, _mm256_cvtps_pd(_mm256_extractf128_ps(p, 1)));
    }
    int mask = filling ? 0xff : _mm256_movemask_ps(_mm256_cmp_ps(v, vthr, _CMP_GT_OQ));
    if (mask) {
      for (int b = 0; b < 8; ++b)
        if (mask & (1 << b)) {
          float x = z[j + b];
          if (top.n < top.k || x > top.threshold()) top.push(x, j + b);
        }
      filling = top.n < top.k;
      vthr = _mm256_set1_ps(top.threshold());
    }
  }
  alignas(32) int32_t c[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(c), cnt);
  for (int i = 0; i < 8; ++i) greater += c[i];
  float m = hmax_ps(vmax);
  if (m > mx) mx = m;
  dot += hsum_pd(_mm256_add_pd(d0, d1));
  pass_a_scalar(z, V8, V, zt, pf, top, mx, greater, dot);
}

__attribute__((target("avx2,fma"))) void pass_b_avx2(const float* z, int64_t V, float m, double& s, double& s1) {
  const int64_t V8 = V & ~int64_t{7};
  const __m256 vm = _mm256_set1_ps(m);
  __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
  // Partial sums in float over short runs (<= 32 steps), then into double: keeps the exp pass cheap
  // while the relative error of the totals stays ~1e-7.
  int64_t j = 0;
  while (j < V8) {
    int64_t stop = std::min(V8, j + 256);
    __m256 fs = _mm256_setzero_ps(), fs1 = _mm256_setzero_ps();
    for (; j < stop; j += 8) {
      __m256 d = _mm256_sub_ps(_mm256_loadu_ps(z + j), vm);
      __m256 e = exp256(d);
      fs = _mm256_add_ps(fs, e);
      fs1 = _mm256_fmadd_ps(e, d, fs1);
    }
    a0 = add_f32x8_to_f64(a0, fs);
    a1 = add_f32x8_to_f64(a1, fs1);
  }
  s += hsum_pd(a0);
  s1 += hsum_pd(a1);
  pass_b_scalar(z, V8, V, m, s, s1);
}

__attribute__((target("avx2,fma"))) void pass_c_avx2(float* z, int64_t V, double lse) {
  const int64_t V8 = V & ~int64_t{7};
  // exp(z - lse) = exp((z - m) - log s): subtract in float after splitting lse to keep precision.
  const float hi = static_cast<float>(lse);
  const float lo = static_cast<float>(lse - static_cast<double>(hi));
  const __m256 vhi = _mm256_set1_ps(hi), vlo = _mm256_set1_ps(lo);
  for (int64_t j = 0; j < V8; j += 8) {
    __m256 d = _mm256_sub_ps(_mm256_sub_ps(_mm256_loadu_ps(z + j), vhi), vlo);
    _mm256_storeu_ps(z + j, exp256(d));
  }
  pass_c_scalar(z, V8, V, lse);
}

bool cpu_has_avx2() {
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return ok;
}
#else
bool cpu_has_avx2() { return false; }
#endif

// ---------------------------------------------------------------------------------------------------

void row_stats(float* z, int64_t V, const RowRequest& q, RowOut& o, bool scalar) {
  TopK top;
  top.k = q.k;
  top.vals = o.top_vals;
  top.ids = o.top_ids;
  const float zt = q.target >= 0 ? z[q.target] : std::numeric_limits<float>::quiet_NaN();
  float mx = kNegInf;
  int64_t greater = 0;
  double dot = 0, s = 0, s1 = 0;
#ifdef VL_LENS_HAVE_AVX2
  const bool vec = !scalar && cpu_has_avx2();
#else
  const bool vec = false;
#endif
  if (vec) {
#ifdef VL_LENS_HAVE_AVX2
    pass_a_avx2(z, V, zt, q.pf, top, mx, greater, dot);
    pass_b_avx2(z, V, mx, s, s1);
#endif
  } else {
    pass_a_scalar(z, 0, V, zt, q.pf, top, mx, greater, dot);
    pass_b_scalar(z, 0, V, mx, s, s1);
  }
  if (std::isnan(s1) || !std::isfinite(mx) || !std::isfinite(s)) {
    // A NaN or infinite logit (possible only under --allow-nonfinite) makes every statistic of the
    // row NaN. The passes skip NaN in comparisons (max, top-k, rank) and the AVX2 exp maps it to a finite
    // value, so without this the row showed a plausible top-1, rank 1 and a finite cross-entropy.
    o.max = kNaN;
    o.lse = o.entropy = o.dot_pf = std::numeric_limits<double>::quiet_NaN();
    o.z_target = zt;
    o.z_next = q.next >= 0 ? z[q.next] : kNaN;
    o.target_greater = -1;  // no rank
    for (int64_t j = 0; j < q.k; ++j) {
      o.top_vals[j] = kNaN;
      o.top_ids[j] = -1;
    }
    o.top_n = 0;
    o.nonfinite = true;
    if (q.write_probs)
      for (int64_t i = 0; i < V; ++i) z[i] = kNaN;
    return;
  }
  const double lse = static_cast<double>(mx) + std::log(s);
  o.max = mx;
  o.lse = lse;
  o.entropy = std::log(s) - s1 / s;
  o.dot_pf = dot;
  o.z_target = zt;
  o.target_greater = greater;
  o.z_next = q.next >= 0 ? z[q.next] : kNaN;
  o.top_n = top.n;
  if (q.write_probs) {
#ifdef VL_LENS_HAVE_AVX2
    if (vec) pass_c_avx2(z, V, lse);
    else
#endif
      pass_c_scalar(z, 0, V, lse);
  }
}

}  // namespace lens_detail
}  // namespace vocablens

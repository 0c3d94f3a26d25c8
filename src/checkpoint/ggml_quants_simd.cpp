// AVX-512 decoders of ggml blocks (see ggml_quants_simd.hpp for what they guarantee). Each block format is
// read by byte offset exactly as the scalar decoders in ggml_quants.cpp read it; 16 values at a time go
// through integer unpacking, one exact int -> float conversion, and the scalar code's float multiply and
// add/subtract, in its order (this file is compiled with -ffp-contract=off). Per-block scalars (fp16 scales,
// 6-bit sub-block scales times the super-block scale) are computed by the same scalar expressions.
#include "checkpoint/ggml_quants_simd.hpp"

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() and warn about it (a known false positive).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <type_traits>

namespace vocablens {
namespace ggml_simd {
namespace {

// One target for every decoder, AVX512-BF16 included, so that the instruction-rounding instantiations can inline
// store16_insn. The only AVX512-BF16 instruction in this file is the explicit vcvtneps2bf16 intrinsic below (this
// file has no __bf16 arithmetic the compiler could lower to it), so the float32 and integer-rounding
// instantiations run on any AVX-512F/BW CPU; the dispatch (level()) uses the others only where the CPU has it.
#define VL_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,f16c,avx512bf16")))

// ---- output: float32 as is, bfloat16 rounded to nearest even (NaN -> 0x7FC0, as c10::BFloat16).
// Two ways to round, chosen per CPU (the decoders are compiled once for each, see `Out` below):
//  - integer arithmetic: u + 0x7FFF + (bit 16 of u), shifted; right for every float;
//  - vcvtneps2bf16 (AVX512-BF16): one instruction, round to nearest even, but denormal inputs become zero. No
//    decoder below produces a float32 denormal: every value is 0 or at least 2^-24 in magnitude, because fp16
//    scales and mins are multiples of 2^-24 (the smallest fp16 subnormal), their products with the small
//    integers of a block are exact (at most 11 + 6 + 8 significant bits) or rounded to such multiples, and a
//    rounded sum of two multiples of 2^-24 is again 0 or >= 2^-24 — far above float32's denormals (< 2^-126).
//    Only the F32 element type can hold denormals, and it is converted with integer arithmetic.
// NaN: vcvtneps2bf16 keeps the sign and payload; both ways then put c10's 0x7FC0 in NaN lanes.
// The decoders are templates over the destination: float, or one of these two-byte wrappers of a bf16 pattern
// naming the rounding and whether NaN lanes need c10's pattern: a block whose fp16 scales are finite decodes to
// finite values only (scales times small integers, at most ~1.3e8), so its lanes skip that fix.
template <bool Nan>
struct Bf16Int {
  uint16_t bits;
};
template <bool Nan>
struct Bf16Insn {
  uint16_t bits;
};
template <typename Out>
struct Clean {
  using type = Out;
};
template <bool Nan>
struct Clean<Bf16Int<Nan>> {
  using type = Bf16Int<false>;
};
template <bool Nan>
struct Clean<Bf16Insn<Nan>> {
  using type = Bf16Insn<false>;
};
VL_AVX512 inline void store16(float* d, __m512 v) { _mm512_storeu_ps(d, v); }
template <bool Nan = true>
VL_AVX512 inline void store16_int(uint16_t* d, __m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF))), 16);
  if (Nan) r = _mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), _mm512_set1_epi32(0x7FC0));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(d), _mm512_cvtepi32_epi16(r));
}
template <bool Nan>
VL_AVX512 inline void store16_insn(uint16_t* d, __m512 v) {
  __m256i r = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v));
  if (Nan) r = _mm256_mask_mov_epi16(r, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), _mm256_set1_epi16(0x7FC0));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(d), r);
}
template <bool Nan>
VL_AVX512 inline void store16(Bf16Int<Nan>* d, __m512 v) {
  store16_int<Nan>(reinterpret_cast<uint16_t*>(d), v);
}
template <bool Nan>
VL_AVX512 inline void store16(Bf16Insn<Nan>* d, __m512 v) {
  store16_insn<Nan>(reinterpret_cast<uint16_t*>(d), v);
}

VL_AVX512 inline float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);  // exact; NaN made quiet, as the scalar fp16_to_fp32
}
// 16 bytes -> 16 int32 lanes
VL_AVX512 inline __m512i u8x16(const uint8_t* p) {
  return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
VL_AVX512 inline __m512i i8x16(const uint8_t* p) {
  return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
VL_AVX512 inline __m512 f(__m512i v) { return _mm512_cvtepi32_ps(v); }
VL_AVX512 inline __m512i lo4(__m512i v) { return _mm512_and_si512(v, _mm512_set1_epi32(0xF)); }
VL_AVX512 inline __m512i hi4(__m512i v) { return _mm512_srli_epi32(v, 4); }
VL_AVX512 inline __m512i sub_i(__m512i v, int k) { return _mm512_sub_epi32(v, _mm512_set1_epi32(k)); }

// ---- 32-value blocks (scalar: x * d, or x * d + m)
template <typename Out>
VL_AVX512 void q4_0(const uint8_t* b, Out* y) {
  const __m512 d = _mm512_set1_ps(half_at(b));
  const __m512i q = u8x16(b + 2);
  store16(y, _mm512_mul_ps(f(sub_i(lo4(q), 8)), d));
  store16(y + 16, _mm512_mul_ps(f(sub_i(hi4(q), 8)), d));
}
template <typename Out>
VL_AVX512 void q4_1(const uint8_t* b, Out* y) {
  const __m512 d = _mm512_set1_ps(half_at(b)), m = _mm512_set1_ps(half_at(b + 2));
  const __m512i q = u8x16(b + 4);
  store16(y, _mm512_add_ps(_mm512_mul_ps(f(lo4(q)), d), m));
  store16(y + 16, _mm512_add_ps(_mm512_mul_ps(f(hi4(q)), d), m));
}
// The fifth bit of value j is bit j of qh: a lane mask.
template <typename Out>
VL_AVX512 void q5_0(const uint8_t* b, Out* y) {
  const __m512 d = _mm512_set1_ps(half_at(b));
  uint32_t qh;
  std::memcpy(&qh, b + 2, 4);
  const __m512i q = u8x16(b + 6), h = _mm512_set1_epi32(16);
  const __m512i x0 = _mm512_mask_or_epi32(lo4(q), static_cast<__mmask16>(qh), lo4(q), h);
  const __m512i x1 = _mm512_mask_or_epi32(hi4(q), static_cast<__mmask16>(qh >> 16), hi4(q), h);
  store16(y, _mm512_mul_ps(f(sub_i(x0, 16)), d));
  store16(y + 16, _mm512_mul_ps(f(sub_i(x1, 16)), d));
}
template <typename Out>
VL_AVX512 void q5_1(const uint8_t* b, Out* y) {
  const __m512 d = _mm512_set1_ps(half_at(b)), m = _mm512_set1_ps(half_at(b + 2));
  uint32_t qh;
  std::memcpy(&qh, b + 4, 4);
  const __m512i q = u8x16(b + 8), h = _mm512_set1_epi32(16);
  const __m512i x0 = _mm512_mask_or_epi32(lo4(q), static_cast<__mmask16>(qh), lo4(q), h);
  const __m512i x1 = _mm512_mask_or_epi32(hi4(q), static_cast<__mmask16>(qh >> 16), hi4(q), h);
  store16(y, _mm512_add_ps(_mm512_mul_ps(f(x0), d), m));
  store16(y + 16, _mm512_add_ps(_mm512_mul_ps(f(x1), d), m));
}
template <typename Out>
VL_AVX512 void q8_0(const uint8_t* b, Out* y) {
  const __m512 d = _mm512_set1_ps(half_at(b));
  store16(y, _mm512_mul_ps(f(i8x16(b + 2)), d));
  store16(y + 16, _mm512_mul_ps(f(i8x16(b + 18)), d));
}

// ---- 256-value super-blocks
// Q4_K: 8 sub-blocks of 32, value = d·sc · q - dmin·m (scalar: d1 * q - m1).
template <typename Out>
VL_AVX512 void q4_k(const uint8_t* b, Out* y) {
  const float d = half_at(b), mn = half_at(b + 2);
  const uint8_t* s = b + 4;
  const uint8_t* q = b + 16;
  for (int is = 0; is < 8; is += 2, q += 32, y += 64) {
    uint8_t sc, m;
    scale_min_k4(is, s, sc, m);
    const __m512 d1 = _mm512_set1_ps(d * sc), m1 = _mm512_set1_ps(mn * m);
    scale_min_k4(is + 1, s, sc, m);
    const __m512 d2 = _mm512_set1_ps(d * sc), m2 = _mm512_set1_ps(mn * m);
    const __m512i a = u8x16(q), c = u8x16(q + 16);
    store16(y, _mm512_sub_ps(_mm512_mul_ps(d1, f(lo4(a))), m1));
    store16(y + 16, _mm512_sub_ps(_mm512_mul_ps(d1, f(lo4(c))), m1));
    store16(y + 32, _mm512_sub_ps(_mm512_mul_ps(d2, f(hi4(a))), m2));
    store16(y + 48, _mm512_sub_ps(_mm512_mul_ps(d2, f(hi4(c))), m2));
  }
}
// Q5_K: as Q4_K with a fifth bit per value from qh (bit `bit` for the low nibbles, bit + 1 for the high).
template <typename Out>
VL_AVX512 void q5_k(const uint8_t* b, Out* y) {
  const float d = half_at(b), mn = half_at(b + 2);
  const uint8_t* s = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* ql = b + 48;
  const __m512i one = _mm512_set1_epi32(1);
  for (int is = 0, bit = 0; is < 8; is += 2, bit += 2, ql += 32, y += 64) {
    uint8_t sc, m;
    scale_min_k4(is, s, sc, m);
    const __m512 d1 = _mm512_set1_ps(d * sc), m1 = _mm512_set1_ps(mn * m);
    scale_min_k4(is + 1, s, sc, m);
    const __m512 d2 = _mm512_set1_ps(d * sc), m2 = _mm512_set1_ps(mn * m);
    for (int h = 0; h < 2; ++h) {
      const __m512i a = u8x16(ql + 16 * h), hb = u8x16(qh + 16 * h);
      const __m512i b0 = _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(hb, bit), one), 4);
      const __m512i b1 = _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(hb, bit + 1), one), 4);
      store16(y + 16 * h, _mm512_sub_ps(_mm512_mul_ps(d1, f(_mm512_add_epi32(lo4(a), b0))), m1));
      store16(y + 32 + 16 * h, _mm512_sub_ps(_mm512_mul_ps(d2, f(_mm512_add_epi32(hi4(a), b1))), m2));
    }
  }
}
// Q6_K: two halves of 128; value = (d * sc) * q with q = 4 low bits | 2 high bits << 4, minus 32.
template <typename Out>
VL_AVX512 void q6_k(const uint8_t* b, Out* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = half_at(b + 208);
  const __m512i three = _mm512_set1_epi32(3);
  for (int n = 0; n < 256; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
    for (int h = 0; h < 2; ++h) {  // l = 16h .. 16h + 15, sub-block scale index is = h
      const __m512i A = u8x16(ql + 16 * h), B = u8x16(ql + 32 + 16 * h), H = u8x16(qh + 16 * h);
      const __m512i q1 = sub_i(_mm512_or_si512(lo4(A), _mm512_slli_epi32(_mm512_and_si512(H, three), 4)), 32);
      const __m512i q2 =
          sub_i(_mm512_or_si512(lo4(B), _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(H, 2), three), 4)), 32);
      const __m512i q3 =
          sub_i(_mm512_or_si512(hi4(A), _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(H, 4), three), 4)), 32);
      const __m512i q4 =
          sub_i(_mm512_or_si512(hi4(B), _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(H, 6), three), 4)), 32);
      store16(y + 16 * h, _mm512_mul_ps(_mm512_set1_ps(d * sc[h]), f(q1)));
      store16(y + 32 + 16 * h, _mm512_mul_ps(_mm512_set1_ps(d * sc[h + 2]), f(q2)));
      store16(y + 64 + 16 * h, _mm512_mul_ps(_mm512_set1_ps(d * sc[h + 4]), f(q3)));
      store16(y + 96 + 16 * h, _mm512_mul_ps(_mm512_set1_ps(d * sc[h + 6]), f(q4)));
    }
  }
}

// ---- plain element types; the tail (n % 16) through the same conversions one value at a time
template <typename Out>
VL_AVX512 void f16_run(const uint8_t* p, Out* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) store16(y + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2 * i))));
  if (i < n) {
    alignas(64) float tmp[16] = {};
    const __mmask16 k = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_store_ps(tmp, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, p + 2 * i)));
    alignas(64) Out out[16];
    store16(out, _mm512_load_ps(tmp));
    std::memcpy(y + i, out, static_cast<size_t>(n - i) * sizeof(Out));
  }
}
VL_AVX512 inline __m512 bf16x16(const uint8_t* p) {
  return _mm512_castsi512_ps(
      _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16));
}
VL_AVX512 void bf16_run(const uint8_t* p, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, bf16x16(p + 2 * i));
  for (; i < n; ++i) {
    const uint32_t bits = static_cast<uint32_t>(p[2 * i] | (p[2 * i + 1] << 8)) << 16;
    std::memcpy(y + i, &bits, 4);
  }
}
// Exact already; through float32 anyway so that NaNs become 0x7FC0 as everywhere else.
VL_AVX512 void bf16_to_bf16_run(const uint8_t* p, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) store16_int(y + i, bf16x16(p + 2 * i));  // bf16 denormals: not the instruction
  for (; i < n; ++i) {
    const uint32_t bits = static_cast<uint32_t>(p[2 * i] | (p[2 * i + 1] << 8)) << 16;
    float v;
    std::memcpy(&v, &bits, 4);
    y[i] = float_to_bf16_rne(v);
  }
}
VL_AVX512 void f32_to_bf16_run(const uint8_t* p, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) store16_int(y + i, _mm512_loadu_ps(reinterpret_cast<const float*>(p + 4 * i)));
  for (; i < n; ++i) {
    float v;
    std::memcpy(&v, p + 4 * i, 4);
    y[i] = float_to_bf16_rne(v);
  }
}

// Whole blocks of one type, the block decoder inlined. S0 / S1: byte offsets of the block's fp16 scales (-1: none).
inline bool finite_half(const uint8_t* p) { return (p[1] & 0x7C) != 0x7C; }  // exponent not all ones
#define VL_BLOCK_RUN(fn, V, B, S0, S1)                                                                                   \
  template <typename Out>                                                                                                \
  VL_AVX512 void fn##_run(const uint8_t* s, Out* y, int64_t nb) {                                                        \
    using C = typename Clean<Out>::type;                                                                                 \
    for (int64_t i = 0; i < nb; ++i, s += B, y += V) {                                                                   \
      if constexpr (std::is_same_v<C, Out>) fn<Out>(s, y);                                                               \
      else if (finite_half(s + S0) && (S1 < 0 || finite_half(s + (S1 < 0 ? 0 : S1)))) fn<C>(s, reinterpret_cast<C*>(y)); \
      else fn<Out>(s, y);                                                                                                \
    }                                                                                                                    \
  }
VL_BLOCK_RUN(q4_0, 32, 18, 0, -1)
VL_BLOCK_RUN(q4_1, 32, 20, 0, 2)
VL_BLOCK_RUN(q5_0, 32, 22, 0, -1)
VL_BLOCK_RUN(q5_1, 32, 24, 0, 2)
VL_BLOCK_RUN(q8_0, 32, 34, 0, -1)
VL_BLOCK_RUN(q4_k, 256, 144, 0, 2)
VL_BLOCK_RUN(q5_k, 256, 176, 0, 2)
VL_BLOCK_RUN(q6_k, 256, 210, 208, -1)
#undef VL_BLOCK_RUN

bool has_block_decoder(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::Q8_0:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K: return true;
    default: return false;
  }
}

template <typename Out>
bool run_blocks(GgmlType type, const uint8_t* src, Out* dst, int64_t n) {
  switch (type) {
    case GgmlType::Q4_0: q4_0_run(src, dst, n / 32); return true;
    case GgmlType::Q4_1: q4_1_run(src, dst, n / 32); return true;
    case GgmlType::Q5_0: q5_0_run(src, dst, n / 32); return true;
    case GgmlType::Q5_1: q5_1_run(src, dst, n / 32); return true;
    case GgmlType::Q8_0: q8_0_run(src, dst, n / 32); return true;
    case GgmlType::Q4_K: q4_k_run(src, dst, n / 256); return true;
    case GgmlType::Q5_K: q5_k_run(src, dst, n / 256); return true;
    case GgmlType::Q6_K: q6_k_run(src, dst, n / 256); return true;
    default: return false;
  }
}

Level detect() {
  __builtin_cpu_init();
  if (!(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("f16c")))
    return Level::Scalar;
  return __builtin_cpu_supports("avx512bf16") ? Level::Avx512Bf16 : Level::Avx512;
}
std::atomic<int> g_level{-1};

}  // namespace

Level detected_level() {
  static const Level l = detect();
  return l;
}
Level level() {
  const int l = g_level.load(std::memory_order_relaxed);
  return l < 0 ? detected_level() : static_cast<Level>(l);
}
void set_level(Level l) { g_level = static_cast<int>(std::min(l, detected_level())); }

bool vectorized(GgmlType type) {
  if (level() == Level::Scalar) return false;
  return type == GgmlType::F32 || type == GgmlType::F16 || type == GgmlType::BF16 || has_block_decoder(type);
}

bool decode_f32(GgmlType type, const uint8_t* src, float* dst, int64_t n) {
  if (level() == Level::Scalar) return false;
  switch (type) {
    case GgmlType::F32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); return true;
    case GgmlType::F16: f16_run(src, dst, n); return true;
    case GgmlType::BF16: bf16_run(src, dst, n); return true;
    default: return run_blocks(type, src, dst, n);
  }
}

bool decode_bf16(GgmlType type, const uint8_t* src, uint16_t* dst, int64_t n) {
  const Level l = level();
  if (l == Level::Scalar) return false;
  switch (type) {
    case GgmlType::F32: f32_to_bf16_run(src, dst, n); return true;
    case GgmlType::BF16: bf16_to_bf16_run(src, dst, n); return true;
    case GgmlType::F16:
      if (l == Level::Avx512Bf16) f16_run(src, reinterpret_cast<Bf16Insn<true>*>(dst), n);
      else f16_run(src, reinterpret_cast<Bf16Int<true>*>(dst), n);
      return true;
    default:
      return l == Level::Avx512Bf16 ? run_blocks(type, src, reinterpret_cast<Bf16Insn<true>*>(dst), n)
                                    : run_blocks(type, src, reinterpret_cast<Bf16Int<true>*>(dst), n);
  }
}

}  // namespace ggml_simd
}  // namespace vocablens

// The int8 kernels of quant_dot.hpp for AVX-512 VNNI (Ice Lake, Zen 4 and later), vpdpbusd / vpdpwssd on 512-bit registers. Everything after the pragma is compiled for that
// instruction set; the headers come before it, so no inline function another file could share is built with it
// (the dispatch in quant_dot.cpp calls this file only on CPUs that have it).
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() and warn about it (a known false positive).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "model/quant_dot.hpp"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")
#define QDOT_VNNI 1

namespace vocablens {
namespace qdot {
namespace {

#include "model/quant_dot_avx.inc"
#include "model/quant_dot_algo.inc"

// Q4_K and Q5_K weights in tiles of 16 rows (one zmm lane per weight row): each sub-block's dot of 32 values is 8
// vpdpbusd of 4 bytes per lane against 4 activation bytes broadcast, complete in its lane, so its scale is one
// vpmulld for 16 rows (the row-major kernel spends a vpdpwssd per 64 values on it).
// Per super-block and row the same two integers as q45_k (isum, msum) and the same two fmas: the same bits.
// Measured (bench_qdot, Zen 4, 128 activation rows): Q4_K 149 int8 multiply-adds per ns against 75 row-major.
// A tile is unpacked (nibbles to bytes, 16 rows interleaved by 4 bytes) into a per-thread buffer and serves every
// group of activation rows; the model's weights stay in their stored blocks.
struct K4Tile {                     // per super-block
  alignas(64) uint8_t q[8][8][64];  // [sub-block][4-value group][row · 4 + byte]
  alignas(64) int32_t sc[8][16];    // 6-bit scale of each row's sub-block
  alignas(64) int32_t mn[8][16];    // V::pattern(min): the min in both int16 halves, against a pair of bsums
  alignas(64) float d[16], ndmin[16];
};

// One 32-value block against 16 weight rows of a tile, 4 values per lane at a time: s[t] += q[g] · (activation row
// t's 4 bytes at qs + at + 4g, broadcast) for g = 0..7, each row's products summed in its lane. Weights unsigned
// (the k-quants' 0..31 / 0..63) are vpdpbusd's unsigned operand; signed ones (the Q8_0 family) take the activations
// as unsigned instead (a + 128, shift_act).
template <int NT, bool kUnsignedWeights>
inline void dot_block16(__m512i* s, const uint8_t (*q)[64], const ActRow* a, int64_t at) {
#pragma GCC unroll 8
  for (int g = 0; g < 8; ++g) {
    const __m512i w = _mm512_load_si512(q[g]);
    for (int t = 0; t < NT; ++t) {
      int32_t a4;
      std::memcpy(&a4, a[t].qs + at + 4 * g, 4);
      const __m512i x = _mm512_set1_epi32(a4);
      s[t] = kUnsignedWeights ? _mm512_dpbusd_epi32(s[t], w, x) : _mm512_dpbusd_epi32(s[t], x, w);
    }
  }
}

// An 8 x 8 transpose of int32: r[i] holds row i; afterwards r[c] holds column c.
inline void transpose8x8(__m256i* r) {
  __m256i t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  for (int h = 0; h < 2; ++h) {  // rows 0-3, then 4-7: u[4h + c] holds columns c and c + 4 of those rows
    u[4 * h + 0] = _mm256_unpacklo_epi64(t[4 * h], t[4 * h + 2]);
    u[4 * h + 1] = _mm256_unpackhi_epi64(t[4 * h], t[4 * h + 2]);
    u[4 * h + 2] = _mm256_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
    u[4 * h + 3] = _mm256_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
  }
  for (int c = 0; c < 4; ++c) {
    r[c] = _mm256_permute2x128_si256(u[c], u[4 + c], 0x20);
    r[c + 4] = _mm256_permute2x128_si256(u[c], u[4 + c], 0x31);
  }
}

// A tile's super-blocks: the 16 rows' sub-blocks unpacked as k_weights does, each sub-block's 16 x 8 groups of 4
// bytes transposed (two 8 x 8 transposes of int32) into the tile's [group][row] order; scales decoded per row.
template <bool Five>
void tile_k4(const uint8_t* w, int64_t row_bytes, int64_t nsb, K4Tile* tile) {
  for (int64_t sb = 0; sb < nsb; ++sb) {
    K4Tile& t = tile[sb];
    const uint8_t* sb0 = w + (Five ? 176 : 144) * sb;  // row 0's super-block (row r's: + r * row_bytes)
    for (int r = 0; r < 16; ++r) {
      // The scalars prep_k decodes, straight into the tile's layout (through a KPrep: 15 % slower at one
      // activation row, where decoding is most of the work).
      const uint8_t* b = sb0 + r * row_bytes;
      t.d[r] = half_value(b);
      t.ndmin[r] = -half_value(b + 2);
      for (int j = 0; j < 8; ++j) {
        uint8_t sc, m;
        k4_scale_min(j, b + 4, sc, m);
        t.sc[j][r] = sc;
        t.mn[j][r] = V::pattern(m);
      }
    }
    for (int k = 0; k < 4; ++k) {  // sub-blocks 2k and 2k + 1
      __m256i lo[16], hi[16];
      for (int r = 0; r < 16; ++r) {
        const uint8_t* b = sb0 + r * row_bytes;
        typename V::B lh[2];
        k_weights<Five>(b, Five ? V::load(b + 16) : V::bzero(), k, lh);
        lo[r] = lh[0], hi[r] = lh[1];
      }
      transpose8x8(lo), transpose8x8(lo + 8), transpose8x8(hi), transpose8x8(hi + 8);
      for (int g = 0; g < 8; ++g) {
        _mm256_store_si256(reinterpret_cast<__m256i*>(t.q[2 * k][g]), lo[g]);
        _mm256_store_si256(reinterpret_cast<__m256i*>(t.q[2 * k][g] + 32), lo[8 + g]);
        _mm256_store_si256(reinterpret_cast<__m256i*>(t.q[2 * k + 1][g]), hi[g]);
        _mm256_store_si256(reinterpret_cast<__m256i*>(t.q[2 * k + 1][g] + 32), hi[8 + g]);
      }
    }
  }
}

template <int NT>
void tiled_k4(const K4Tile* tile, int64_t nsb, const ActRow* a, float* y, int64_t ldy) {
  __m512 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const K4Tile& k = tile[sb];
    __m512i isum[NT], msum[NT];
    for (int t = 0; t < NT; ++t) isum[t] = msum[t] = _mm512_setzero_si512();
    for (int j = 0; j < 8; ++j) {
      __m512i s[NT];
      for (int t = 0; t < NT; ++t) s[t] = _mm512_setzero_si512();
      dot_block16<NT, true>(s, k.q[j], a, 256 * sb + 32 * j);
      const __m512i sc = _mm512_load_si512(k.sc[j]), mn = _mm512_load_si512(k.mn[j]);
      for (int t = 0; t < NT; ++t) {
        int32_t bs2;  // the sub-block's two bsums of 16, as two int16
        std::memcpy(&bs2, a[t].bsums + 16 * sb + 2 * j, 4);
        isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(s[t], sc));
        msum[t] = _mm512_dpwssd_epi32(msum[t], mn, _mm512_set1_epi32(bs2));
      }
    }
    const __m512 d = _mm512_load_ps(k.d), ndmin = _mm512_load_ps(k.ndmin);
    for (int t = 0; t < NT; ++t) {
      const __m512 da = _mm512_set1_ps(a[t].d[sb]);
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_mul_ps(da, d), acc[t]);
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(msum[t]), _mm512_mul_ps(da, ndmin), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) _mm512_storeu_ps(y + t * ldy, acc[t]);
}

// Q8_0, Q4_0 and Q5_0 weights in tiles of 16 rows, as the k-quants' (one zmm lane per weight row): each block's
// 32-value dot is 8 vpdpbusd of the activations' 4 bytes broadcast (as unsigned a + 128, shift_act) against the
// rows' 4 signed weights, from a start of -128 · (the row's sum of 32 weights), so the lane ends at the exact
// integer dot; then one fma per block for 16 rows: the same integers and fmas as q8_family, the same bits.
struct Q8Tile {                  // per block of 32 values
  alignas(64) uint8_t q[8][64];  // [4-value group][row · 4 + byte]: the rows' signed weights
  alignas(64) int32_t bias[16];  // -128 · (sum of the row's 32 weights)
  alignas(64) float d[16];       // the rows' scales
};

template <GgmlType T>
void tile_q8(const uint8_t* w, int64_t row_bytes, int64_t nb, Q8Tile* tile) {
  constexpr int64_t kBlockBytes = T == GgmlType::Q8_0 ? 34 : T == GgmlType::Q4_0 ? 18 : 22;
  const __m512i ones = _mm512_set1_epi8(1);
  for (int64_t b = 0; b < nb; ++b) {
    Q8Tile& t = tile[b];
    const uint8_t* s0 = w + kBlockBytes * b;  // row 0's block (row r's: + r * row_bytes); its fp16 scale first
    V::halves8(s0, row_bytes, t.d);
    V::halves8(s0 + 8 * row_bytes, row_bytes, t.d + 8);
    __m256i q[16];
    for (int r = 0; r < 16; ++r) q[r] = q8_block<T>(w + r * row_bytes, b);
    transpose8x8(q), transpose8x8(q + 8);
    __m512i sum = _mm512_setzero_si512();
    for (int g = 0; g < 8; ++g) {
      const __m512i v = V::join(q[g], q[8 + g]);
      _mm512_store_si512(t.q[g], v);
      sum = _mm512_dpbusd_epi32(sum, ones, v);
    }
    _mm512_store_si512(t.bias, _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(sum, 7)));
  }
}

// `a`: activation rows shifted by 128 (shift_act).
template <int NT>
void tiled_q8(const Q8Tile* tile, int64_t nb, const ActRow* a, float* y, int64_t ldy) {
  __m512 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const Q8Tile& k = tile[b];
    const __m512i bias = _mm512_load_si512(k.bias);
    __m512i s[NT];
    for (int t = 0; t < NT; ++t) s[t] = bias;
    dot_block16<NT, false>(s, k.q, a, 32 * b);
    const __m512 d = _mm512_load_ps(k.d);
    for (int t = 0; t < NT; ++t)
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[t]), _mm512_mul_ps(_mm512_set1_ps(a[t].d[b]), d), acc[t]);
  }
  for (int t = 0; t < NT; ++t) _mm512_storeu_ps(y + t * ldy, acc[t]);
}

// The tiles' activations: a copy of the rows with every quantized byte xor 0x80 (a + 128 as unsigned, the operand
// vpdpbusd takes unsigned), scales as they were. ntok · act_stride bytes, made once per call, against ntok · rows ·
// cols multiply-adds.
const uint8_t* shift_act(const DotArgs& g) {
  static thread_local Buf buf;
  const size_t bytes = static_cast<size_t>(g.ntok * g.act_stride);
  unsigned char* dst = buf.get(bytes);
  std::memcpy(dst, g.act, bytes);
  const int64_t qs_at = reinterpret_cast<const uint8_t*>(act_row_at(g.type, g.act, g.cols).qs) - g.act;
  for (int64_t t = 0; t < g.ntok; ++t)
    for (int64_t j = qs_at; j < g.act_stride; ++j) dst[t * g.act_stride + j] ^= 0x80;
  return dst;
}

// Products in tiles of 16 rows, whatever the number of activation rows (bench_qdot, Zen 4, 128 activation rows:
// Q4_K 149 and Q8_0 155 int8 multiply-adds per ns against 75 and 65 row-major; as fast at one row); the rows left
// over (rows % 16) through dot_rows_blocked, on the activations as they came. K: the weight type's tile kernel.
template <typename K>
void dot_rows_tiled(const DotArgs& g) {
  using Tile = typename K::Tile;
  const int64_t n = g.cols / K::kValues, tiles = g.rows / 16;
  static thread_local Buf buf;
  Tile* tile = reinterpret_cast<Tile*>(buf.get(static_cast<size_t>(n) * sizeof(Tile)));
  const uint8_t* act = K::activations(g);
  constexpr int NT = 4;
  for (int64_t ti = 0; ti < tiles; ++ti) {
    K::unpack(g.w + 16 * ti * g.row_bytes, g.row_bytes, n, tile);
    for (int64_t t0 = 0; t0 < g.ntok; t0 += NT) {
      const int nt = static_cast<int>(std::min<int64_t>(NT, g.ntok - t0));
      ActRow a[NT];
      for (int i = 0; i < nt; ++i) a[i] = act_row_at(g.type, act + (t0 + i) * g.act_stride, g.cols);
      float* y = g.y + t0 * g.ldy + 16 * ti;
      if (nt == NT) K::template multiply<NT>(tile, n, a, y, g.ldy);
      else
        for (int i = 0; i < nt; ++i) K::template multiply<1>(tile, n, a + i, y + i * g.ldy, g.ldy);
    }
  }
  if (tiles * 16 < g.rows) {
    DotArgs rest = g;
    rest.w = g.w + tiles * 16 * g.row_bytes;
    rest.rows = g.rows - tiles * 16;
    rest.y = g.y + tiles * 16;
    dot_rows_blocked(rest);
  }
}

template <bool Five>
struct K4Kernel {
  using Tile = K4Tile;
  static constexpr int64_t kValues = 256;
  static const uint8_t* activations(const DotArgs& g) { return g.act; }
  static void unpack(const uint8_t* w, int64_t row_bytes, int64_t n, Tile* t) { tile_k4<Five>(w, row_bytes, n, t); }
  template <int NT>
  static void multiply(const Tile* t, int64_t n, const ActRow* a, float* y, int64_t ldy) {
    tiled_k4<NT>(t, n, a, y, ldy);
  }
};

template <GgmlType T>
struct Q8Kernel {
  using Tile = Q8Tile;
  static constexpr int64_t kValues = 32;
  static const uint8_t* activations(const DotArgs& g) { return shift_act(g); }
  static void unpack(const uint8_t* w, int64_t row_bytes, int64_t n, Tile* t) { tile_q8<T>(w, row_bytes, n, t); }
  template <int NT>
  static void multiply(const Tile* t, int64_t n, const ActRow* a, float* y, int64_t ldy) {
    tiled_q8<NT>(t, n, a, y, ldy);
  }
};

}  // namespace

void dot_rows_avx512(const DotArgs& a) {
  if (a.rows >= 16) {
    if (a.type == GgmlType::Q4_K) return dot_rows_tiled<K4Kernel<false>>(a);
    if (a.type == GgmlType::Q5_K) return dot_rows_tiled<K4Kernel<true>>(a);
    if (a.type == GgmlType::Q8_0) return dot_rows_tiled<Q8Kernel<GgmlType::Q8_0>>(a);
    if (a.type == GgmlType::Q4_0) return dot_rows_tiled<Q8Kernel<GgmlType::Q4_0>>(a);
    if (a.type == GgmlType::Q5_0) return dot_rows_tiled<Q8Kernel<GgmlType::Q5_0>>(a);
  }
  dot_rows_blocked(a);
}

}  // namespace qdot
}  // namespace vocablens

#pragma GCC pop_options

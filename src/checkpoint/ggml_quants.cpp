// Dequantization of ggml's block formats, written from the format description (ggml-common.h block
// structs; gguf-py quants.py). Each block is read by byte offset (no packed structs), and each value is
// computed with the same float operations in the same order as libggml, so results agree bit for bit
// (this file is compiled with -ffp-contract=off: a fused multiply-add would round differently).
#include <algorithm>
#include <cstring>
#include <limits>

#include "checkpoint/ggml_quants_simd.hpp"
#include "vocablens/error.hpp"
#include "vocablens/gguf.hpp"

namespace vocablens {
namespace {

constexpr int64_t QK_K = 256;

float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
  if (exp == 0x1f) bits = sign | 0x7f800000u | (mant << 13) | (mant ? 0x400000u : 0);  // inf; nan made quiet (as F16C)
  else if (exp != 0) bits = sign | ((exp + 112) << 23) | (mant << 13);                 // normal: rebias 15 -> 127
  else if (mant == 0) bits = sign;                                                     // +-0
  else {                                                                               // subnormal: normalise
    int e = -1;
    do {
      mant <<= 1;
      ++e;
    } while ((mant & 0x400) == 0);
    bits = sign | (static_cast<uint32_t>(112 - e) << 23) | ((mant & 0x3ff) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return fp16_to_fp32(h);
}
float bf16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// ---- 32-value blocks
void q4_0(const uint8_t* b, float* y) {  // d f16, qs[16]
  const float d = half_at(b);
  for (int j = 0; j < 16; ++j) {
    const int x0 = (b[2 + j] & 0x0F) - 8, x1 = (b[2 + j] >> 4) - 8;
    y[j] = x0 * d;
    y[j + 16] = x1 * d;
  }
}
// MXFP4 (OCP microscaling FP4): an E8M0 scale byte e, then 16 bytes of 4-bit E2M1 codes (values j and j + 16 in
// the low and high nibbles of byte j). ggml stores the E2M1 values doubled (kvalues_mxfp4) and halves the scale:
// 2^(e - 128), a subnormal float for e < 2. e = 0xFF is NaN in E8M0 (libggml's row validation refuses such a
// block); it decodes to NaN here, so that the loaders' finiteness check refuses it in one line.
void mxfp4(const uint8_t* b, float* y) {
  static constexpr int8_t kv[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
  const uint8_t e = b[0];
  float d = std::numeric_limits<float>::quiet_NaN();
  if (e != 0xFF) {
    const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
    std::memcpy(&d, &bits, 4);
  }
  for (int j = 0; j < 16; ++j) {
    y[j] = kv[b[1 + j] & 0x0F] * d;
    y[j + 16] = kv[b[1 + j] >> 4] * d;
  }
}
void q4_1(const uint8_t* b, float* y) {  // d, m f16, qs[16]
  const float d = half_at(b), m = half_at(b + 2);
  for (int j = 0; j < 16; ++j) {
    const int x0 = b[4 + j] & 0x0F, x1 = b[4 + j] >> 4;
    y[j] = x0 * d + m;
    y[j + 16] = x1 * d + m;
  }
}
void q5_0(const uint8_t* b, float* y) {  // d f16, qh u32, qs[16]
  const float d = half_at(b);
  uint32_t qh;
  std::memcpy(&qh, b + 2, 4);
  for (int j = 0; j < 16; ++j) {
    const int hi0 = ((qh >> j) & 1) << 4, hi1 = ((qh >> (j + 16)) & 1) << 4;
    const int x0 = ((b[6 + j] & 0x0F) | hi0) - 16, x1 = ((b[6 + j] >> 4) | hi1) - 16;
    y[j] = x0 * d;
    y[j + 16] = x1 * d;
  }
}
void q5_1(const uint8_t* b, float* y) {  // d, m f16, qh u32, qs[16]
  const float d = half_at(b), m = half_at(b + 2);
  uint32_t qh;
  std::memcpy(&qh, b + 4, 4);
  for (int j = 0; j < 16; ++j) {
    const int hi0 = ((qh >> j) & 1) << 4, hi1 = ((qh >> (j + 16)) & 1) << 4;
    const int x0 = (b[8 + j] & 0x0F) | hi0, x1 = (b[8 + j] >> 4) | hi1;
    y[j] = x0 * d + m;
    y[j + 16] = x1 * d + m;
  }
}
void q8_0(const uint8_t* b, float* y) {  // d f16, qs int8[32]
  const float d = half_at(b);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<int8_t>(b[2 + j]) * d;
}

// ---- 256-value super-blocks
void q2_k(const uint8_t* b, float* y) {  // scales[16], qs[64], d, dmin
  const uint8_t* sc = b;
  const uint8_t* q = b + 16;
  const float d = half_at(b + 80), mn = half_at(b + 82);
  int is = 0;
  for (int n = 0; n < QK_K; n += 128) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (int half = 0; half < 2; ++half) {
        const uint8_t s = sc[is++];
        const float dl = d * (s & 0xF), ml = mn * (s >> 4);
        for (int l = 0; l < 16; ++l) *y++ = dl * ((q[l + 16 * half] >> shift) & 3) - ml;
      }
    }
    q += 32;
  }
}
void q3_k(const uint8_t* b, float* y) {  // hmask[32], qs[64], scales[12], d
  const uint8_t* hm = b;
  const uint8_t* q = b + 32;
  const uint8_t* s12 = b + 96;
  const float d_all = half_at(b + 108);
  // 16 six-bit scales: low 4 bits from bytes 0..7 (low then high nibbles), high 2 bits from bytes 8..11.
  int8_t scales[16];
  for (int i = 0; i < 16; ++i) {
    const int lo = i < 8 ? (s12[i] & 0xF) : (s12[i - 8] >> 4);
    const int hi = (s12[8 + (i % 4)] >> (2 * (i / 4))) & 3;
    scales[i] = static_cast<int8_t>(lo | (hi << 4));
  }
  int is = 0;
  uint8_t m = 1;
  for (int n = 0; n < QK_K; n += 128) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (int half = 0; half < 2; ++half) {
        const float dl = d_all * (scales[is++] - 32);
        for (int l = 0; l < 16; ++l) {
          const int k = l + 16 * half;
          *y++ = dl * (((q[k] >> shift) & 3) - ((hm[k] & m) ? 0 : 4));
        }
      }
      m <<= 1;
    }
    q += 32;
  }
}
void q4_k(const uint8_t* b, float* y) {  // d, dmin, scales[12], qs[128]
  const float d = half_at(b), mn = half_at(b + 2);
  const uint8_t* s = b + 4;
  const uint8_t* q = b + 16;
  for (int is = 0; is < 8; is += 2) {
    uint8_t sc, m;
    scale_min_k4(is, s, sc, m);
    const float d1 = d * sc, m1 = mn * m;
    scale_min_k4(is + 1, s, sc, m);
    const float d2 = d * sc, m2 = mn * m;
    for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
    q += 32;
  }
}
void q5_k(const uint8_t* b, float* y) {  // d, dmin, scales[12], qh[32], qs[128]
  const float d = half_at(b), mn = half_at(b + 2);
  const uint8_t* s = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* ql = b + 48;
  for (int is = 0, bit = 0; is < 8; is += 2, bit += 2) {
    uint8_t sc, m;
    scale_min_k4(is, s, sc, m);
    const float d1 = d * sc, m1 = mn * m;
    scale_min_k4(is + 1, s, sc, m);
    const float d2 = d * sc, m2 = mn * m;
    for (int l = 0; l < 32; ++l) *y++ = d1 * ((ql[l] & 0xF) + (((qh[l] >> bit) & 1) << 4)) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * ((ql[l] >> 4) + (((qh[l] >> (bit + 1)) & 1) << 4)) - m2;
    ql += 32;
  }
}
void q6_k(const uint8_t* b, float* y) {  // ql[128], qh[64], scales int8[16], d
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = half_at(b + 208);
  for (int n = 0; n < QK_K; n += 128) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * sc[is] * q1;
      y[l + 32] = d * sc[is + 2] * q2;
      y[l + 64] = d * sc[is + 4] * q3;
      y[l + 96] = d * sc[is + 6] * q4;
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

struct Layout {
  GgmlType type;
  int64_t values;
  size_t bytes;
  void (*block)(const uint8_t*, float*);
};
constexpr Layout kLayouts[] = {
    {GgmlType::F32, 1, 4, nullptr},   {GgmlType::F16, 1, 2, nullptr},   {GgmlType::BF16, 1, 2, nullptr},
    {GgmlType::Q4_0, 32, 18, q4_0},   {GgmlType::Q4_1, 32, 20, q4_1},   {GgmlType::Q5_0, 32, 22, q5_0},
    {GgmlType::Q5_1, 32, 24, q5_1},   {GgmlType::Q8_0, 32, 34, q8_0},   {GgmlType::Q2_K, 256, 84, q2_k},
    {GgmlType::Q3_K, 256, 110, q3_k}, {GgmlType::Q4_K, 256, 144, q4_k}, {GgmlType::Q5_K, 256, 176, q5_k},
    {GgmlType::Q6_K, 256, 210, q6_k}, {GgmlType::MXFP4, 32, 17, mxfp4},
};
const Layout* layout(GgmlType t) {
  for (auto& l : kLayouts)
    if (l.type == t) return &l;
  return nullptr;
}

}  // namespace

bool ggml_block_layout(GgmlType type, int64_t& block_values, size_t& block_bytes) {
  const Layout* l = layout(type);
  if (!l) return false;
  block_values = l->values;
  block_bytes = l->bytes;
  return true;
}

bool ggml_can_dequantize(GgmlType type) { return layout(type) != nullptr; }

namespace {

const Layout& checked_layout(GgmlType type, int64_t n) {
  const Layout* l = layout(type);
  if (!l) throw UsageError("cannot dequantize ggml type " + ggml_type_name(static_cast<uint32_t>(type)));
  if (n % l->values != 0)
    throw UsageError("dequantize_row: " + std::to_string(n) + " values is not a whole number of " +
                     ggml_type_name(static_cast<uint32_t>(type)) + " blocks");
  return *l;
}

void scalar_unchecked(const Layout& l, const uint8_t* p, float* dst, int64_t n) {
  switch (l.type) {
    case GgmlType::F32: std::memcpy(dst, p, static_cast<size_t>(n) * 4); return;
    case GgmlType::F16:
      for (int64_t i = 0; i < n; ++i) dst[i] = half_at(p + 2 * i);
      return;
    case GgmlType::BF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_at(p + 2 * i);
      return;
    default: break;
  }
  for (int64_t b = 0; b < n / l.values; ++b) l.block(p + static_cast<size_t>(b) * l.bytes, dst + b * l.values);
}

// Through float32 in pieces of a few blocks (on the stack), then rounded.
void bf16_scalar_unchecked(const Layout& l, const uint8_t* p, uint16_t* dst, int64_t n) {
  float tmp[1024];
  const int64_t step = 1024 / l.values * l.values;
  for (int64_t i = 0; i < n; i += step) {
    const int64_t m = std::min(step, n - i);
    scalar_unchecked(l, p + static_cast<size_t>(i / l.values) * l.bytes, tmp, m);
    for (int64_t j = 0; j < m; ++j) dst[i + j] = float_to_bf16_rne(tmp[j]);
  }
}

}  // namespace

void dequantize_row_scalar(GgmlType type, const void* src, float* dst, int64_t n) {
  scalar_unchecked(checked_layout(type, n), static_cast<const uint8_t*>(src), dst, n);
}

void dequantize_row(GgmlType type, const void* src, float* dst, int64_t n) {
  const Layout& l = checked_layout(type, n);
  const uint8_t* p = static_cast<const uint8_t*>(src);
  if (!ggml_simd::decode_f32(type, p, dst, n)) scalar_unchecked(l, p, dst, n);
}

void dequantize_row_bf16_scalar(GgmlType type, const void* src, uint16_t* dst, int64_t n) {
  bf16_scalar_unchecked(checked_layout(type, n), static_cast<const uint8_t*>(src), dst, n);
}

void dequantize_row_bf16(GgmlType type, const void* src, uint16_t* dst, int64_t n) {
  const Layout& l = checked_layout(type, n);
  const uint8_t* p = static_cast<const uint8_t*>(src);
  if (!ggml_simd::decode_bf16(type, p, dst, n)) bf16_scalar_unchecked(l, p, dst, n);
}

}  // namespace vocablens

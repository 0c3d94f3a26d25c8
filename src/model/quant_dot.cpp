// int8 compute (quant_dot.hpp): the activation quantizers, the scalar kernel and the run-time dispatch.
// Compiled with -ffp-contract=off: the rounding of x · id must not be fused into anything.
#include "model/quant_dot.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <new>
#include <string>

#include "checkpoint/ggml_quants_simd.hpp"

namespace vocablens {
namespace qdot {
namespace {

// 8 lanes as plain arrays; the same integer lanes and the same single-rounding fma as the vector policies.
struct V {
  struct B {
    uint8_t v[32];
  };
  struct I {
    int32_t v[8];
  };
  struct F {
    float v[8];
  };
  struct P {  // 16 int16
    int32_t v[16];
  };
  static B load(const uint8_t* p) {
    B b;
    std::memcpy(b.v, p, 32);
    return b;
  }
  static B nibbles16(const uint8_t* p) {
    B b;
    for (int j = 0; j < 16; ++j) b.v[j] = p[j] & 0xF, b.v[j + 16] = p[j] >> 4;
    return b;
  }
  static B bits32(uint32_t qh) {
    B b;
    for (int j = 0; j < 32; ++j) b.v[j] = static_cast<uint8_t>(((qh >> j) & 1) << 4);
    return b;
  }
  static B lo4(B q) {
    for (auto& x : q.v) x &= 0xF;
    return q;
  }
  static B hi4(B q) {
    for (auto& x : q.v) x >>= 4;
    return q;
  }
  static B or_(B a, B b) {
    for (int j = 0; j < 32; ++j) a.v[j] |= b.v[j];
    return a;
  }
  static B sub8(B a, int k) {
    for (auto& x : a.v) x = static_cast<uint8_t>(x - k);
    return a;
  }
  static B bit_at(B h, int s) {
    for (auto& x : h.v) x = static_cast<uint8_t>(((x >> s) & 1) << 4);
    return h;
  }
  static B two_bits_at(B h, int s) {
    for (auto& x : h.v) x = static_cast<uint8_t>(((x >> s) & 3) << 4);
    return h;
  }
  static constexpr bool kHalf8 = false;
  static void halves8(const uint8_t*, int64_t, float*);
  static I zero() { return I{}; }
  static I add(I a, I b) {
    for (int l = 0; l < 8; ++l) a.v[l] += b.v[l];
    return a;
  }
  static I sub(I a, I b) {
    for (int l = 0; l < 8; ++l) a.v[l] -= b.v[l];
    return a;
  }
  static I shl5(I a) {
    for (auto& x : a.v) x *= 32;
    return a;
  }
  static int32_t pattern(int s) { return s; }
  static I bcast(int32_t p) { return bcast2(p, p); }
  static I bcast2(int32_t p0, int32_t p1) {
    I s;
    for (int l = 0; l < 8; ++l) s.v[l] = l < 4 ? p0 : p1;
    return s;
  }
  static B abs8(B w) { return w; }  // dot_signed reads the signed bytes itself
  static I dot_scaled(B w, const int8_t* a, I s) {
    I r;
    for (int l = 0; l < 8; ++l) {
      int32_t sum = 0;
      for (int k = 4 * l; k < 4 * l + 4; ++k) sum += static_cast<int32_t>(w.v[k]) * a[k];
      r.v[l] = sum * s.v[l];
    }
    return r;
  }
  static I dot_signed(B w, B, const int8_t* a) {
    I r;
    for (int l = 0; l < 8; ++l) {
      int32_t sum = 0;
      for (int k = 4 * l; k < 4 * l + 4; ++k) sum += static_cast<int32_t>(static_cast<int8_t>(w.v[k])) * a[k];
      r.v[l] = sum;
    }
    return r;
  }
  static P load16(const int16_t* p) {
    P r;
    for (int j = 0; j < 16; ++j) r.v[j] = p[j];
    return r;
  }
  static I madd16(const int16_t* p, const P& pat) {
    I r;
    for (int l = 0; l < 8; ++l) r.v[l] = p[2 * l] * pat.v[2 * l] + p[2 * l + 1] * pat.v[2 * l + 1];
    return r;
  }
  // No 512-bit products: the declarations below only satisfy the (discarded) wide branches.
  static constexpr bool kWide = false;
  using W = I;
  static W wzero();
  static W wadd(W, W);
  static W join(B, B);
  static W wbcast2(int32_t, int32_t);
  static W wbcast4(const int32_t*);
  static W wdot_scaled(W, const int8_t*, W);
  static W wdot_scaled_acc(W, W, const int8_t*, W);
  static I fold(W);
  static B bzero() { return B{}; }
  static F fadd(F a, F b) {
    for (int l = 0; l < 8; ++l) a.v[l] += b.v[l];
    return a;
  }
  static F fzero() { return F{}; }
  static void tot2(I a, I b, int32_t& ta, int32_t& tb) {
    ta = tb = 0;
    for (int l = 0; l < 8; ++l) ta += a.v[l], tb += b.v[l];
  }
  static void kstage4(float* acc, const I* isum, const I* msum, const float* da, float d, float ndmin) {
    for (int t = 0; t < 4; ++t) {
      int32_t si = 0, sm = 0;
      for (int l = 0; l < 8; ++l) si += isum[t].v[l], sm += msum[t].v[l];
      acc[t] = std::fmaf(static_cast<float>(si), da[t] * d, acc[t]);
      acc[t] = std::fmaf(static_cast<float>(sm), da[t] * ndmin, acc[t]);
    }
  }
  struct F4 {
    float v[4];
  };
  static F4 f4zero() { return F4{}; }
  static void f4store(float* p, F4 a) { std::memcpy(p, a.v, sizeof a.v); }
  static F4 q8stage4(F4 acc, const I* v, const float* s) {
    for (int t = 0; t < 4; ++t) {
      int32_t tot = 0;
      for (int l = 0; l < 8; ++l) tot += v[t].v[l];
      acc.v[t] = std::fmaf(static_cast<float>(tot), s[t], acc.v[t]);
    }
    return acc;
  }
  static F fma(I v, float d, F acc) {
    for (int l = 0; l < 8; ++l) acc.v[l] = std::fmaf(static_cast<float>(v.v[l]), d, acc.v[l]);
    return acc;
  }
  static float hsum(F a) {
    const float s0 = a.v[0] + a.v[4], s1 = a.v[1] + a.v[5], s2 = a.v[2] + a.v[6], s3 = a.v[3] + a.v[7];
    return (s0 + s2) + (s1 + s3);
  }
};

#include "model/quant_dot_algo.inc"

bool is_k(GgmlType t) { return t == GgmlType::Q4_K || t == GgmlType::Q5_K || t == GgmlType::Q6_K; }
int64_t up64(int64_t n) { return (n + 63) / 64 * 64; }

// float32 -> fp16 bits, round to nearest even (what F16C's vcvtps2ph does in llama.cpp's quantizer). Only
// non-negative finite scales reach it.
uint16_t half_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  x &= 0x7FFFFFFF;
  if (x > 0x7F800000) return sign | 0x7E00;
  if (x < 0x00800000) return sign;  // float32 subnormal: far below fp16's smallest
  const int e = static_cast<int>(x >> 23) - 127;
  const uint32_t m = (x & 0x7FFFFF) | 0x800000;
  if (e > 15) return sign | 0x7C00;
  int shift = 13;
  uint32_t base = 0;
  if (e >= -14) base = static_cast<uint32_t>(e + 15) << 10;
  else shift += -14 - e;
  if (shift > 24) return sign;  // below half of the smallest subnormal
  uint32_t r = (m >> shift) & (e >= -14 ? 0x3FF : 0xFFFFFFFF);
  const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
  uint32_t h = base + r;
  if (rem > half || (rem == half && (h & 1))) ++h;  // a carry into the exponent is the right result
  return static_cast<uint16_t>(sign | std::min<uint32_t>(h, 0x7C00));
}

float half_to_float(uint16_t h) {
  uint8_t b[2];
  std::memcpy(b, &h, 2);
  return half_value(b);
}

// Round to nearest, ties to even, for |v| < 2^22: adding 1.5 · 2^23 leaves no fraction bits, so the addition
// itself rounds (the default rounding mode, never fused or reassociated here). llama.cpp's nearest_int is this sum;
// its _mm256_round_ps gives the same. Inline arithmetic, unlike a call to nearbyint on the x86-64 baseline.
inline float round_even(float v) { return (v + 12582912.f) - 12582912.f; }

// The largest |x| of a block, or NaN when the block holds NaN or infinity.
float block_max_abs(const float* x, int n) {
  float m = 0;
  for (int j = 0; j < n; ++j) {
    if (!std::isfinite(x[j])) return NAN;
    m = std::max(m, std::fabs(x[j]));
  }
  return m;
}

void quantize_q8_0(const float* x, int64_t cols, uint8_t* dst) {
  const int64_t nb = cols / 32;
  std::memset(dst, 0, static_cast<size_t>(act_row_bytes(GgmlType::Q8_0, cols)));  // the kernels read the padding
  float* d = reinterpret_cast<float*>(dst);
  int8_t* qs = reinterpret_cast<int8_t*>(dst + up64(4 * nb));
  for (int64_t b = 0; b < nb; ++b, x += 32, qs += 32) {
    const float amax = block_max_abs(x, 32);
    if (std::isnan(amax)) {
      d[b] = NAN;
      std::memset(qs, 0, 32);
      continue;
    }
    d[b] = half_to_float(half_bits(amax / 127.f));
    const float id = amax != 0.f ? 127.f / amax : 0.f;
    for (int j = 0; j < 32; ++j) qs[j] = static_cast<int8_t>(round_even(x[j] * id));
  }
}

int64_t act_bytes_k(int64_t cols) {
  const int64_t nb = cols / 256;
  return up64(4 * nb) + up64(32 * nb) + up64(cols);
}

void quantize_q8_k(const float* x, int64_t cols, uint8_t* dst) {
  const int64_t nb = cols / 256;
  float* d = reinterpret_cast<float*>(dst);
  int16_t* bsums = reinterpret_cast<int16_t*>(dst + up64(4 * nb));
  int8_t* qs = reinterpret_cast<int8_t*>(dst + up64(4 * nb) + up64(32 * nb));
  for (int64_t b = 0; b < nb; ++b, x += 256, qs += 256, bsums += 16) {
    float amax = 0, max = 0;
    bool finite = true;
    for (int j = 0; j < 256; ++j) {
      const float ax = std::fabs(x[j]);
      finite = finite && std::isfinite(x[j]);
      if (ax > amax) amax = ax, max = x[j];  // the first value of the largest magnitude, with its sign
    }
    if (!finite || amax == 0.f) {
      d[b] = finite ? 0.f : NAN;
      std::memset(qs, 0, 256);
      std::memset(bsums, 0, 32);
      continue;
    }
    const float iscale = -127.f / max;
    for (int j = 0; j < 256; ++j) qs[j] = static_cast<int8_t>(std::min(127.f, round_even(iscale * x[j])));
    for (int j = 0; j < 16; ++j) {
      int s = 0;
      for (int i = 0; i < 16; ++i) s += qs[16 * j + i];
      bsums[j] = static_cast<int16_t>(s);
    }
    d[b] = 1 / iscale;
  }
}

Kernel parse_env() {
  const char* e = std::getenv("VOCABLENS_KERNELS");
  if (!e || !*e) return Kernel::Avx512Vnni;
  const std::string s = e;
  if (s == "scalar") return Kernel::Scalar;
  if (s == "avx2") return Kernel::Avx2;
  if (s == "avx512" || s == "avx512-vnni") return Kernel::Avx512Vnni;
  std::cerr << "vocablens: VOCABLENS_KERNELS=" << s << " is not scalar, avx2 or avx512; using the CPU's best\n";
  return Kernel::Avx512Vnni;
}

std::atomic<int>& chosen() {
  static std::atomic<int> k{[] {
    const Kernel want = parse_env();
    // Below AVX-512 the exact path's AVX-512 dequantizers go too: the process runs as on such a CPU.
    if (want != Kernel::Avx512Vnni) ggml_simd::set_level(ggml_simd::Level::Scalar);
    return static_cast<int>(std::min(want, detected_kernel()));
  }()};
  return k;
}

}  // namespace

Kernel detected_kernel() {
  static const Kernel k = [] {
    __builtin_cpu_init();
    // F16C too: the vector kernels decode fp16 scales and round the Q8_0 activation scale with it.
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    const bool vnni = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vnni");
    return vnni ? Kernel::Avx512Vnni : avx2 ? Kernel::Avx2 : Kernel::Scalar;
  }();
  return k;
}

Kernel active_kernel() { return static_cast<Kernel>(chosen().load()); }
void set_kernel(Kernel k) { chosen() = static_cast<int>(std::min(k, detected_kernel())); }

const char* kernel_name(Kernel k) {
  switch (k) {
    case Kernel::Scalar: return "scalar";
    case Kernel::Avx2: return "avx2";
    case Kernel::Avx512Vnni: return "avx512-vnni";
  }
  return "?";
}

bool supported(GgmlType t) { return t == GgmlType::Q8_0 || t == GgmlType::Q4_0 || t == GgmlType::Q5_0 || is_k(t); }

int64_t act_row_bytes(GgmlType t, int64_t cols) {
  if (is_k(t)) return act_bytes_k(cols);
  return up64(4 * (cols / 32)) + up64(cols + 32);  // the last block's pair may be read (times zero weights)
}

void quantize_row(GgmlType t, const float* x, int64_t cols, uint8_t* dst) {
  const bool vec = active_kernel() >= Kernel::Avx2;
  if (is_k(t)) vec ? quantize_q8_k_avx2(x, cols, dst) : quantize_q8_k(x, cols, dst);
  else vec ? quantize_q8_0_avx2(x, cols, dst) : quantize_q8_0(x, cols, dst);
}

void dot_rows_scalar(const DotArgs& a) { dot_rows_blocked(a); }

void dot_rows_with(Kernel k, const DotArgs& a) {
  switch (std::min(k, detected_kernel())) {
    case Kernel::Avx512Vnni: return dot_rows_avx512(a);
    case Kernel::Avx2: return dot_rows_avx2(a);
    case Kernel::Scalar: return dot_rows_scalar(a);
  }
}

void dot_rows(const DotArgs& a) { dot_rows_with(active_kernel(), a); }

}  // namespace qdot
}  // namespace vocablens

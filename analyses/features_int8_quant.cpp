// The int8 quantisation of the feature screen (features_int8_quant.hpp says what and why apart from the pass):
// rounding to int8, W_U's columns in their stored dtype, and W_U quantised and packed once per pass.
#include "features_int8_quant.hpp"
#include "util/parallel.hpp"

#include <ATen/Parallel.h>
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstring>

namespace vocablens {
namespace detail {
namespace int8_screen {

namespace {

// BF16 -> float32 (exact: the 16 bits become the high half).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
__attribute__((target("avx512f"))) void bf16_to_float_avx512(const uint16_t* b, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i)));
    _mm512_storeu_si512(out + i, _mm512_slli_epi32(w, 16));
  }
  for (; i < n; ++i) {
    const uint32_t u = static_cast<uint32_t>(b[i]) << 16;
    std::memcpy(out + i, &u, 4);
  }
}
#pragma GCC diagnostic pop
const bool bf16_avx512 = [] {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") != 0;
}();

}  // namespace

Quantized quantize(const float* v, int64_t n, int8_t* q) {
  float mx = 0;
  for (int64_t i = 0; i < n; ++i) mx = std::max(mx, std::fabs(v[i]));
  if (!(mx <= std::numeric_limits<float>::max()))  // ±inf (NaN shows in the norm below): the caller gives up
    return {1.0f, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::quiet_NaN(), mx};
  // (below 1e-30 the scale would be subnormal: scale 1 rounds everything to 0, and e = v keeps the bound exact)
  const float sc = mx >= 1e-30f ? mx / 127.0f : 1.0f, inv = 1.0f / sc;
  double nn[8] = {0, 0, 0, 0, 0, 0, 0, 0}, ee[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  auto one = [&](int64_t i, int l) {
    // round to nearest even by the 1.5·2^23 trick (|v·inv| <= 127·(1 + 2^-23)); clamped for safety
    float t = (v[i] * inv + 12582912.0f) - 12582912.0f;
    t = std::min(127.0f, std::max(-127.0f, t));
    q[i] = static_cast<int8_t>(t);
    const double e = static_cast<double>(v[i]) - static_cast<double>(sc) * static_cast<double>(t);
    nn[l] += static_cast<double>(v[i]) * static_cast<double>(v[i]);
    ee[l] += e * e;
  };
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) one(i + l, l);
  for (; i < n; ++i) one(i, 0);
  double N2 = 0, E2 = 0;
  for (int l = 0; l < 8; ++l) {
    N2 += nn[l];
    E2 += ee[l];
  }
  return {sc, std::sqrt(N2), std::sqrt(E2), mx};
}

const float* Columns::column(int64_t c, float* buf) const {
  if (dt == at::kFloat) {
    const float* b = P.data_ptr<float>() + c * s1;
    if (s0 == 1) return b;
    for (int64_t i = 0; i < r; ++i) buf[i] = b[i * s0];
  } else if (dt == at::kBFloat16) {
    const uint16_t* b = reinterpret_cast<const uint16_t*>(P.data_ptr<at::BFloat16>()) + c * s1;
    if (s0 == 1 && bf16_avx512) {
      bf16_to_float_avx512(b, buf, r);
      return buf;
    }
    for (int64_t i = 0; i < r; ++i) {
      const uint32_t u = static_cast<uint32_t>(b[i * s0]) << 16;
      std::memcpy(buf + i, &u, 4);
    }
  } else {
    const at::Half* b = P.data_ptr<at::Half>() + c * s1;
    for (int64_t i = 0; i < r; ++i) buf[i] = static_cast<float>(b[i * s0]);
  }
  return buf;
}

bool quantize_unembedding(const Model& m, const std::vector<int64_t>& col_id, int64_t colblk, int64_t rows_per_block,
                          QuantizedUnembedding& out) {
  Columns& P = out.P;
  P.P = m.weights().W_U;  // [r, V] in its stored dtype (a transposed view of W_E when tied)
  if (!col_id.empty()) P.P = P.P.index_select(1, at::tensor(col_id, at::kLong));
  P.r = P.P.size(0);
  P.s0 = P.P.stride(0);
  P.s1 = P.P.stride(1);
  P.dt = P.P.scalar_type();
  const int64_t r = P.r, Vc = out.Vc = P.P.size(1);
  // Quantise the columns once, read in the stored dtype (never a float32 copy of all of W_U).
  std::vector<int8_t> Bq(static_cast<size_t>(Vc * r));
  std::vector<float>& sB = out.sB;
  std::vector<double>& pn = out.pn;
  std::vector<float>&Pf = out.Pf, &Ef = out.Ef;  // ‖p‖, ‖e_p‖ rounded up
  sB.assign(static_cast<size_t>(Vc), 0.0f);
  pn.assign(static_cast<size_t>(Vc), 0.0);
  Pf.assign(static_cast<size_t>(Vc), 0.0f);
  Ef.assign(static_cast<size_t>(Vc), 0.0f);
  bool ok = true;
  auto keep = [&](int64_t c, const Quantized& qz) {
    sB[static_cast<size_t>(c)] = qz.scale;
    pn[static_cast<size_t>(c)] = qz.norm;
    Pf[static_cast<size_t>(c)] = float_at_least(qz.norm * (1 + 1e-6));
    Ef[static_cast<size_t>(c)] = float_at_least(qz.err * (1 + 1e-6));
  };
  // (beyond 1e30 the screened values and bounds could overflow float32: the float32 screen takes over)
  auto fits = [](const Quantized& qz) { return std::isfinite(qz.norm) && qz.maxabs <= 1e30f; };
  if (P.s0 == 1) {  // columns contiguous in memory (tied W_U = W_Eᵀ): read one at a time, in the stored dtype
    std::atomic<bool> good{true};
    detail::parallel_for(0, Vc, 256, [&](int64_t b, int64_t e) {
      std::vector<float> buf(static_cast<size_t>(r));
      for (int64_t v = b; v < e; ++v) {
        auto qz = quantize(P.column(v, buf.data()), r, Bq.data() + v * r);
        if (!fits(qz)) good = false;
        keep(v, qz);
      }
    });
    ok = good;
  } else {  // strided columns: blocks of 4096 transposed to float32 first
    for (int64_t c0 = 0; c0 < Vc && ok; c0 += 4096) {
      const int64_t cb = std::min<int64_t>(4096, Vc - c0);
      at::Tensor blk = P.P.narrow(1, c0, cb).t().to(at::kFloat).contiguous();  // [cb, r]
      const float* bd = blk.data_ptr<float>();
      std::atomic<bool> good{true};
      detail::parallel_for(0, cb, 64, [&](int64_t b, int64_t e) {
        for (int64_t v = b; v < e; ++v) {
          auto qz = quantize(bd + v * r, r, Bq.data() + (c0 + v) * r);
          if (!fits(qz)) good = false;
          keep(c0 + v, qz);
        }
      });
      ok = good;
    }
  }
  if (!ok) return false;
  // The int8 columns in tiles of colblk, each reordered once into the layout oneDNN's kernel reads for products
  // of rows_per_block rows; the plain copy is released as soon as they are packed.
  out.Wt.clear();
  for (int64_t j0 = 0; j0 < Vc; j0 += colblk)
    out.Wt.emplace_back(Bq.data() + j0 * r, r, std::min(colblk, Vc - j0), rows_per_block);
  return true;
}

}  // namespace int8_screen
}  // namespace detail
}  // namespace vocablens

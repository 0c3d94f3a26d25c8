// The bfloat16 GEMM: LibTorch's where oneDNN runs it, a widened float32 SGEMM elsewhere (bf16_gemm.hpp).
#include "model/bf16_gemm.hpp"

#include <ATen/ATen.h>
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "checkpoint/ggml_quants_simd.hpp"
#include "model/f32_gemm.hpp"
#include "util/parallel.hpp"

namespace vocablens::detail {
namespace {

std::atomic<int> g_choice{static_cast<int>(Bf16Gemm::Auto)};

void round_scalar(float* p, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; ++i) {
    const uint32_t bits = static_cast<uint32_t>(float_to_bf16_rne(p[i])) << 16;
    std::memcpy(p + i, &bits, 4);
  }
}

// float_to_bf16_rne eight at a time: bits + 0x7FFF + (bit 16), upper half kept; NaN -> 0x7FC0 (c10's rule).
__attribute__((target("avx2"))) void round_avx2(float* p, int64_t b, int64_t e) {
  const __m256i bias = _mm256_set1_epi32(0x7FFF), one = _mm256_set1_epi32(1);
  const __m256i hi = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u)), qnan = _mm256_set1_epi32(0x7FC00000);
  int64_t i = b;
  for (; i + 8 <= e; i += 8) {
    const __m256 x = _mm256_loadu_ps(p + i);
    const __m256i u = _mm256_castps_si256(x);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
    __m256i r = _mm256_and_si256(_mm256_add_epi32(_mm256_add_epi32(u, bias), lsb), hi);
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    r = _mm256_blendv_epi8(r, qnan, nan);
    _mm256_storeu_ps(p + i, _mm256_castsi256_ps(r));
  }
  round_scalar(p, i, e);
}

}  // namespace

bool bf16_gemm_libtorch() {
  switch (static_cast<Bf16Gemm>(g_choice.load())) {
    case Bf16Gemm::LibTorch: return true;
    case Bf16Gemm::Float32: return false;
    default: return bf16_gemm_native();
  }
}

void round_to_bf16(float* p, int64_t n) {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  parallel_for(0, n, int64_t{1} << 16, [p](int64_t b, int64_t e) {
    if (avx2) round_avx2(p, b, e);
    else round_scalar(p, b, e);
  });
}

void set_bf16_gemm(Bf16Gemm g) { g_choice = static_cast<int>(g); }

bool bf16_gemm_native() {
  // LibTorch 1.13's condition for oneDNN's bf16 matmul (mkldnn_bf16_device_check), read off the CPU the same way.
  static const bool native =
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  return native;
}

bool bf16_gemm_onednn_size(int64_t N, int64_t K, int64_t M) {
  // LibTorch 1.13's checksize() in use_mkldnn_bf16_matmul: only a product of more than 16^3 goes to oneDNN.
  return N * K * M > 16 * 16 * 16;
}

void mm_bf16_out(at::Tensor& out, const at::Tensor& a, const at::Tensor& b) {
  const bool forced = static_cast<Bf16Gemm>(g_choice.load()) == Bf16Gemm::LibTorch;
  if (bf16_gemm_libtorch() && (forced || bf16_gemm_onednn_size(a.size(0), a.size(1), b.size(1)))) {
    at::mm_out(out, a, b);
    return;
  }
  const at::Tensor af = a.to(at::kFloat);
  const int64_t K = b.size(0), M = b.size(1);
  const int64_t block = std::max<int64_t>(1, std::min<int64_t>(M, kBf16WidenValues / std::max<int64_t>(K, 1)));
  for (int64_t j0 = 0; j0 < M; j0 += block) {
    const int64_t n = std::min(block, M - j0);
    // copy_ rounds the float32 sums to nearest-even bfloat16, as oneDNN writes its bf16 output.
    // (mm_f32: the float32 GEMM of weight_matmul's tiles, so that their emulated bfloat16 products agree.)
    out.narrow(1, j0, n).copy_(mm_f32(af, b.narrow(1, j0, n).to(at::kFloat), at::Tensor()));
  }
}

at::Tensor mm_bf16(const at::Tensor& a, const at::Tensor& b) {
  at::Tensor out = at::empty({a.size(0), b.size(1)}, a.options().dtype(at::kBFloat16));
  mm_bf16_out(out, a, b);
  return out;
}

}  // namespace vocablens::detail

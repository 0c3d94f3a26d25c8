// One core's arithmetic ceilings, measured rather than read off a datasheet: how many floating-point (or
// integer) operations per second one thread can issue in each compute dtype a forward pass may use, and what
// LibTorch's dense GEMM reaches of that ceiling at the forward's shapes. A speed goal of the form "N tokens per
// CPU second" on a model of F operations per token needs N·F operations per second; when that exceeds the
// ceiling of the compute dtype, no kernel in that dtype can meet it (bench/run_speed_ceiling.sh does the sums).
//
//   ninja -C build bench_peak && build/bench_peak            # one JSON line on stdout, a table on stderr
//
// Kernels (register-only loops, 12 independent accumulators so that latency never limits the issue rate), the
// widest the CPU has:
//   float32    vfmadd231ps zmm (AVX-512F) or ymm (AVX2/FMA): 16 or 8 multiply-adds per instruction
//   bf16       vdpbf16ps zmm (AVX512-BF16): 32 bf16 products summed into 16 float32; none without AVX512-BF16
//              (then LibTorch's bf16 GEMM converts to float32 and runs at or under the float32 peak)
//   int8       vpdpbusd zmm (AVX512-VNNI): 64 u8·s8 products summed into 16 int32; on AVX2 the sequence
//              llama.cpp uses there: vpmaddubsw (32 u8·s8 products, pairs summed to int16) + vpmaddwd + vpaddd
// An operation is a multiply or an add (a multiply-add is 2), for floats and integers alike.
// Shapes of the GEMMs: M tokens (default 128) × K 2048 × N 5632, one thread, float32 and bf16 operands.
// CPU seconds of the process (bench_clock.hpp), best of 5.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <immintrin.h>

#include <cstdio>
#include <cstdlib>

#include "bench_clock.hpp"

namespace {

constexpr int kAcc = 12;
constexpr long kIters = 20'000'000;
volatile float g_sink_f = 0.f;
volatile int g_sink_i = 0;

__attribute__((target("avx512f"))) void fp32_fma(long iters) {
  __m512 acc[kAcc];
  for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_set1_ps(1e-3f * static_cast<float>(i));
  const __m512 a = _mm512_set1_ps(1.0000001f + g_sink_f), b = _mm512_set1_ps(1e-7f + g_sink_f);
  for (long it = 0; it < iters; ++it)
    for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_fmadd_ps(a, b, acc[i]);
  __m512 s = acc[0];
  for (int i = 1; i < kAcc; ++i) s = _mm512_add_ps(s, acc[i]);
  alignas(64) float out[16];
  _mm512_store_ps(out, s);  // (not _mm512_reduce_add_ps: GCC 12 warns inside its own header)
  g_sink_f = out[0] + out[15];
}

__attribute__((target("avx2,fma"))) void fp32_fma_ymm(long iters) {
  __m256 acc[kAcc];
  for (int i = 0; i < kAcc; ++i) acc[i] = _mm256_set1_ps(1e-3f * static_cast<float>(i));
  const __m256 a = _mm256_set1_ps(1.0000001f + g_sink_f), b = _mm256_set1_ps(1e-7f + g_sink_f);
  for (long it = 0; it < iters; ++it)
    for (int i = 0; i < kAcc; ++i) acc[i] = _mm256_fmadd_ps(a, b, acc[i]);
  __m256 s = acc[0];
  for (int i = 1; i < kAcc; ++i) s = _mm256_add_ps(s, acc[i]);
  alignas(32) float out[8];
  _mm256_store_ps(out, s);
  g_sink_f = out[0] + out[7];
}

__attribute__((target("avx512f,avx512bf16"))) void bf16_dot(long iters) {
  __m512 acc[kAcc];
  for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_set1_ps(1e-3f * static_cast<float>(i));
  const __m512 fa = _mm512_set1_ps(1e-4f + g_sink_f), fb = _mm512_set1_ps(1e-3f + g_sink_f);
  const __m512bh a = _mm512_cvtne2ps_pbh(fa, fa), b = _mm512_cvtne2ps_pbh(fb, fb);
  for (long it = 0; it < iters; ++it)
    for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
  __m512 s = acc[0];
  for (int i = 1; i < kAcc; ++i) s = _mm512_add_ps(s, acc[i]);
  alignas(64) float out[16];
  _mm512_store_ps(out, s);
  g_sink_f = out[0] + out[15];
}

__attribute__((target("avx512f,avx512vnni"))) void int8_dot(long iters) {
  __m512i acc[kAcc];
  for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_set1_epi32(i);
  const __m512i a = _mm512_set1_epi8(static_cast<char>(3 + g_sink_i)), b = _mm512_set1_epi8(static_cast<char>(-2 + g_sink_i));
  for (long it = 0; it < iters; ++it)
    for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
  __m512i s = acc[0];
  for (int i = 1; i < kAcc; ++i) s = _mm512_add_epi32(s, acc[i]);
  alignas(64) int out[16];
  _mm512_store_si512(out, s);
  g_sink_i = out[0] + out[15];
}

__attribute__((target("avx2"))) void int8_dot_ymm(long iters) {
  __m256i acc[kAcc];
  for (int i = 0; i < kAcc; ++i) acc[i] = _mm256_set1_epi32(i);
  const __m256i a = _mm256_set1_epi8(static_cast<char>(3 + g_sink_i)), b = _mm256_set1_epi8(static_cast<char>(-2 + g_sink_i));
  const __m256i ones = _mm256_set1_epi16(1);
  for (long it = 0; it < iters; ++it)
    for (int i = 0; i < kAcc; ++i) acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), ones));
  __m256i s = acc[0];
  for (int i = 1; i < kAcc; ++i) s = _mm256_add_epi32(s, acc[i]);
  alignas(32) int out[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(out), s);
  g_sink_i = out[0] + out[7];
}

/// Operations per second of `kernel`, `ops_per_instr` per instruction, best of 5.
double rate(void (*kernel)(long), double ops_per_instr) {
  kernel(kIters / 20);  // warm the core's clock and the code
  const double s = vl_bench::best_of(5, [&] { kernel(kIters); });
  return ops_per_instr * kAcc * static_cast<double>(kIters) / s;
}

double gemm_rate(at::ScalarType dtype, int64_t m, int64_t k, int64_t n) {
  const at::Tensor a = at::randn({m, k}).to(dtype), b = at::randn({k, n}).to(dtype);
  at::Tensor c = at::mm(a, b);
  const double s = vl_bench::best_of(5, [&] { c = at::mm(a, b); });
  return 2.0 * static_cast<double>(m) * static_cast<double>(k) * static_cast<double>(n) / s;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t m = argc > 1 ? std::atoll(argv[1]) : 128;
  at::set_num_threads(1);
  const bool has_bf16 = __builtin_cpu_supports("avx512bf16");
  const bool has_vnni = __builtin_cpu_supports("avx512vnni");
  const bool has_512 = __builtin_cpu_supports("avx512f");
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    std::fprintf(stderr, "bench_peak: this CPU has neither AVX-512F nor AVX2 with FMA; the kernels here need one\n");
    return 2;
  }
  const double fp32 = has_512 ? rate(fp32_fma, 32.0) : rate(fp32_fma_ymm, 16.0);
  const double bf16 = has_bf16 ? rate(bf16_dot, 64.0) : 0.0;
  // The AVX2 sequence: 32 products and 16 pair sums (vpmaddubsw), 8 more sums (vpmaddwd), 8 accumulations.
  const double int8 = has_vnni ? rate(int8_dot, 128.0) : rate(int8_dot_ymm, 64.0);
  const double sgemm = gemm_rate(at::kFloat, m, 2048, 5632);
  const double bgemm = gemm_rate(at::kBFloat16, m, 2048, 5632);
  std::fprintf(stderr, "one thread, G operations per CPU second (best of 5)\n");
  std::fprintf(stderr, "  float32 FMA peak          %7.1f (%s)\n", fp32 / 1e9, has_512 ? "zmm" : "ymm");
  std::fprintf(stderr, "  bf16 dot-product peak     %7.1f%s\n", bf16 / 1e9, has_bf16 ? "" : " (no AVX512-BF16)");
  std::fprintf(stderr, "  int8 dot-product peak     %7.1f (%s)\n", int8 / 1e9,
               has_vnni ? "vpdpbusd zmm" : "AVX2 vpmaddubsw + vpmaddwd + vpaddd");
  std::fprintf(stderr, "  LibTorch SGEMM %lldx2048x5632      %7.1f (%.0f %% of the float32 peak)\n", static_cast<long long>(m),
               sgemm / 1e9, 100.0 * sgemm / fp32);
  std::fprintf(stderr, "  LibTorch bf16 GEMM %lldx2048x5632  %7.1f (%.0f %% of the bf16 peak)\n", static_cast<long long>(m),
               bgemm / 1e9, bf16 > 0 ? 100.0 * bgemm / bf16 : 0.0);
  std::printf(
      "{\"fp32_fma_gflops\": %.2f, \"bf16_dot_gflops\": %.2f, \"int8_dot_gops\": %.2f, \"sgemm_gflops\": %.2f, "
      "\"bf16_gemm_gflops\": %.2f, \"gemm_m\": %lld, \"avx512\": %s}\n",
      fp32 / 1e9, bf16 / 1e9, int8 / 1e9, sgemm / 1e9, bgemm / 1e9, static_cast<long long>(m), has_512 ? "true" : "false");
  return 0;
}

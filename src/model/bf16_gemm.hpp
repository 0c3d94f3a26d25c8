// bf16_gemm.hpp (internal) — the bfloat16 matrix products of `--dtype bfloat16`, at the CPU's speed on any CPU.
//
// LibTorch 1.13 hands a bfloat16 GEMM to oneDNN only on CPUs with AVX-512 (avx512bw/vl/dq, its
// mkldnn_bf16_device_check). Elsewhere — AVX2 CPUs such as AMD Zen 2/3 and Intel's client parts — its fallback is
// a scalar loop, ~45× slower than the float32 SGEMM (a 128-token forward of a 0.27 B-parameter model: 44 s instead
// of 1 s), and with a row-major right operand it accumulates in bfloat16 (relative error 0.1 on 2048-long dot
// products, against 0.0025 for float32 accumulation). On such CPUs the product is computed the way oneDNN defines
// it: the bfloat16 operands widened to float32 (exact), products and sums in float32 by the SGEMM, the result
// rounded to bfloat16 (nearest-even). Where oneDNN runs, LibTorch's at::mm is used as before.
//
//   at::Tensor c = vocablens::detail::mm_bf16(a, b);   // a [N, K], b [K, M], both bfloat16 -> [N, M] bfloat16
//   vocablens::detail::mm_bf16_out(part, a, b);        // into an existing bfloat16 [N, M] tensor
//
// Guarantee on both paths: each output is bf16(Σ_k a·b accumulated in float32); the two may differ in the last
// bit where the float32 sums' order differs. The float32 path widens b in column blocks of ≤ 4 M values (16 MB),
// so a [d, V] unembedding is never copied whole.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace vocablens::detail {

enum class Bf16Gemm {
  Auto,      ///< LibTorch's (oneDNN) where the CPU has AVX-512, the float32 SGEMM elsewhere (the default)
  LibTorch,  ///< always at::mm on the bfloat16 operands
  Float32,   ///< always the widened float32 SGEMM
};
/// Values of b widened to float32 at a time by the float32 path (whole columns; 16 MB).
constexpr int64_t kBf16WidenValues = int64_t{1} << 22;
/// Process-wide choice (tests and benchmarks compare the two paths; nothing else sets it).
void set_bf16_gemm(Bf16Gemm g);
/// Whether Auto runs LibTorch's bfloat16 GEMM on this CPU.
bool bf16_gemm_native();
/// Whether mm_bf16 runs LibTorch's GEMM now (the switch, or Auto resolved on this CPU). When it does not, a
/// caller holding float32 operands may run the same arithmetic itself: round them to bfloat16 precision in
/// float32 (round_to_bf16), multiply in float32, round the products (weight_matmul's tiles do this).
bool bf16_gemm_libtorch();
/// Whether LibTorch hands an [N, K] x [K, M] bfloat16 product to oneDNN where the CPU allows it: only above 16^3
/// multiply-adds. Smaller ones run its scalar loop (bfloat16 accumulation for a row-major b), so Auto takes the
/// float32 path for them on every CPU.
bool bf16_gemm_onednn_size(int64_t N, int64_t K, int64_t M);
/// Each of n float32 values rounded to the nearest bfloat16 (ties to even; NaN stays NaN), kept as float32.
void round_to_bf16(float* p, int64_t n);

void mm_bf16_out(at::Tensor& out, const at::Tensor& a, const at::Tensor& b);
at::Tensor mm_bf16(const at::Tensor& a, const at::Tensor& b);

}  // namespace vocablens::detail

// f32_gemm.hpp (internal) — the float32 matrix products of the exact path, by oneDNN's matmul where it has a JIT
// kernel for them.
//
// The exact path's weight products (x · W, W the model's float32 weight or a decoded tile of a stored one) would
// otherwise run on LibTorch's at::mm, i.e. the system SGEMM (Debian's OpenBLAS 0.3.21). On an AVX-512 CPU oneDNN's
// brgemm kernel runs them 7-27 % faster at 128-512 rows and 2-3x at one row, reading a transposed weight in place
// (bench/bench_f32_gemm.cpp, one core of an AMD Zen 4, 128 × [2048 → 5632]: 104 against 82 GFLOP/s); its AVX2
// "gemm:jit" kernel was ahead too where measured (on that CPU held to AVX2; docs/benchmarks.md, "Speed against
// llama.cpp").
//
//   if (!vocablens::detail::f32_gemm(A, lda, B, sbk, sbn, bias, C, ldc, M, K, N)) { /* the caller's own GEMM */ }
//
// C[m, n] = Σ_k A[m·lda + k] · B[k·sbk + n·sbn] (+ bias[n]), every sum in float32 (the order of the terms is
// oneDNN's: results differ from another SGEMM's in the last bits, as two BLAS builds do). NaN and Inf propagate
// as in any IEEE product. Runs only with a JIT kernel (its name says brg or jit): where oneDNN would fall back
// to its reference loops, or the build has no oneDNN, or VOCABLENS_F32_GEMM=blas is set in the environment, it
// returns false without writing and the caller runs its own SGEMM. Threads: oneDNN's OpenMP runtime (the
// process's setting); inside an OpenMP parallel region it runs on the calling thread alone; several threads may
// call it at once (each has its own stream and scratchpad). No gradient flows through it: callers that record
// autograd use at::mm.
#pragma once
#include <cstdint>
#include <string>

namespace at {
class Tensor;
}

namespace vocablens::detail {

/// Whether f32_gemm runs products here; oneDNN's kernel for a representative shape in `kernel` ("" without one).
bool f32_gemm_available(std::string* kernel = nullptr);

/// C = A · B (+ bias) as above: A [M, K] with unit column stride, B [K, N] with strides (sbk, sbn), C [M, N]
/// with unit column stride; bias may be null. False (nothing written) when oneDNN does not run it here.
bool f32_gemm(const float* A, int64_t lda, const float* B, int64_t sbk, int64_t sbn, const float* bias, float* C, int64_t ldc,
              int64_t M, int64_t K, int64_t N);

/// x [N, K] · w [K, M] (+ b [M]) for float32 tensors of any strides: f32_gemm where it runs and no gradient is
/// being recorded through the operands, else at::addmm / at::mm (defined in src/model/weight.cpp).
at::Tensor mm_f32(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b);
/// dst [N, M] = x [N, K] · w [K, M], float32, into an existing tensor (a block of columns of a wider one too):
/// f32_gemm where it runs, else at::mm_out. No gradient. weight_matmul's decoded and reference tiles, the lens's
/// projections and the bfloat16 GEMM's float32 path all multiply here or through mm_f32, so that products of the
/// same shapes and layouts give the same bits on every path.
void mm_f32_out(at::Tensor& dst, const at::Tensor& x, const at::Tensor& w);

}  // namespace vocablens::detail

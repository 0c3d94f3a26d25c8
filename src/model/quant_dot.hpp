// quant_dot.hpp (internal) — int8 compute: activations quantized per block as llama.cpp quantizes them, integer
// dot products with the weight's stored ggml blocks (`--compute int8`, vocablens/weight.hpp).
//
// Concept. llama.cpp's CPU backend multiplies a quantized weight by first quantizing each activation row into the
// weight type's "vec_dot type" — Q8_0 (blocks of 32, fp16 scale) for Q4_0 / Q5_0 / Q8_0, Q8_K (blocks of 256,
// float scale, 16 sums of 16) for the k-quants — and then summing integer products block by block, each block's
// integer sum scaled by the product of the two scales. This file does the same arithmetic:
//   - quantize_row(): one activation row, rounded as llama.cpp rounds on x86 (Q8_0: d = max|x| / 127 stored as fp16,
//     q = round-half-even(x * (127 / max|x|)); Q8_K: iscale = -127 / (the value of largest magnitude, first one),
//     q = min(127, round-half-even(iscale * x)), d = 1 / iscale, bsums = sums of 16 q's). The integers are exactly
//     llama.cpp's; a row holding NaN or infinity gets a NaN scale, so its products are NaN (never garbage).
//   - dot_rows(): y[t, r] = sum over blocks of (integer dot of weight row r's block with activation t's block) ·
//     (weight scale · activation scale), k-quants with their sub-block scales and mins. Integer parts are exact;
//     the float accumulation runs in 8 lanes (one per 4 consecutive values of a 32-value block) with fused
//     multiply-adds and a fixed reduction tree at the end — Q4_K / Q5_K in one float per output, two fmas per
//     super-block of its exact integers — identically in every kernel, so the scalar, AVX2 and AVX-512 VNNI
//     kernels give the same bits (tests/quant_dot_test.cpp). llama.cpp's own kernels order their
//     float sums differently, so products agree with it to float rounding, not bit for bit.
// Kernels: scalar (any CPU), AVX2+FMA (maddubs/madd), AVX-512 VNNI (vpdpbusd / vpdpwssd, 512-bit), chosen at run
// time from the CPU; VOCABLENS_KERNELS=scalar|avx2|avx512 (or set_kernel) forces a lower one — never a higher one
// than the CPU has. "scalar" and "avx2" also turn off the AVX-512 dequantizers of the exact path, so the whole
// process runs as on a CPU without AVX-512.
//
// Shapes. A weight is `rows` stored rows of `cols` values (whole blocks), row_bytes apart; activations are `ntok`
// rows of act_row_bytes(type, cols) bytes made by quantize_row(); y[t * ldy + r] receives the product.
//
//   std::vector<uint8_t> a(N * qdot::act_row_bytes(type, in));
//   for (int64_t t = 0; t < N; ++t) qdot::quantize_row(type, x + t * in, in, a.data() + t * qdot::act_row_bytes(type, in));
//   qdot::dot_rows({type, w, row_bytes, out, a.data(), qdot::act_row_bytes(type, in), N, in, y, out});  // y [N, out]
#pragma once
#include <cstdint>
#include <string>

#include "vocablens/gguf.hpp"

namespace vocablens {
namespace qdot {

enum class Kernel { Scalar = 0, Avx2 = 1, Avx512Vnni = 2 };
/// The best kernel this CPU runs.
Kernel detected_kernel();
/// The kernel in use: detected_kernel(), lowered by VOCABLENS_KERNELS (read once) or set_kernel().
Kernel active_kernel();
/// Use at most `k` (clamped to detected_kernel()); process-wide, for tests and benchmarks.
void set_kernel(Kernel k);
/// "scalar", "avx2", "avx512-vnni".
const char* kernel_name(Kernel k);

/// True for the weight types with an int8 kernel: Q4_0, Q5_0, Q8_0 (Q8_0 activations), Q4_K, Q5_K, Q6_K (Q8_K).
bool supported(GgmlType weight_type);
/// Bytes of one quantized activation row of `cols` values for weights of `weight_type` (a multiple of 64).
int64_t act_row_bytes(GgmlType weight_type, int64_t cols);
/// Quantizes x[0, cols) (whole blocks) into dst, act_row_bytes(weight_type, cols) bytes, as described above.
void quantize_row(GgmlType weight_type, const float* x, int64_t cols, uint8_t* dst);

struct DotArgs {
  GgmlType type;
  const uint8_t* w;   ///< first weight row
  int64_t row_bytes;  ///< bytes between weight rows
  int64_t rows;
  const uint8_t* act;  ///< first activation row (quantize_row's output)
  int64_t act_stride;  ///< bytes between activation rows (act_row_bytes)
  int64_t ntok;
  int64_t cols;  ///< values per row (the inner dimension)
  float* y;      ///< y[t * ldy + r]
  int64_t ldy;
};
/// The products above on the calling thread, with active_kernel().
void dot_rows(const DotArgs& a);
/// One kernel explicitly (tests); `k` must not exceed detected_kernel().
void dot_rows_with(Kernel k, const DotArgs& a);

// The kernels, one translation unit each (src/model/quant_dot_*.cpp), all from src/model/quant_dot_algo.inc.
void dot_rows_scalar(const DotArgs& a);
void dot_rows_avx2(const DotArgs& a);
void dot_rows_avx512(const DotArgs& a);
/// quantize_row()'s rows with AVX2 (the same bytes); quantize_row() uses them where the active kernel allows.
void quantize_q8_0_avx2(const float* x, int64_t cols, uint8_t* dst);
void quantize_q8_k_avx2(const float* x, int64_t cols, uint8_t* dst);

}  // namespace qdot
}  // namespace vocablens

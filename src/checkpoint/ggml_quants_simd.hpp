// ggml_quants_simd.hpp (internal) — ggml blocks decoded with AVX-512, to float32 or straight to bfloat16.
//
// The runner multiplies a quantized weight one tile of rows at a time (src/model/weight.cpp): each tile is
// decoded into the GEMM's own operand dtype and multiplied. These decoders make that decode cheap next to
// the GEMM, and they change no number:
//   - float32: every value is computed by the same float operations, in the same order, as the scalar
//     dequantize_row (and so as libggml): int -> float conversions, then one multiply, then one subtract or
//     add where the format has a min/offset. The file is compiled with -ffp-contract=off, so no multiply and
//     add are fused (an FMA would round once instead of twice);
//   - bfloat16: round-to-nearest-even of that exact float32 value, NaN -> 0x7FC0: c10::BFloat16's rule, so a
//     bf16 tile equals `.to(at::kBFloat16)` of the float32 one bit for bit, except that LibTorch's vectorised
//     conversion writes NaN as 0xFFFF (its scalar one, 0x7FC0): a NaN stays a NaN (GGUF weights with NaN
//     are refused at load anyway). Rounded with integer operations, or with vcvtneps2bf16 where the CPU has
//     AVX512-BF16 and no denormal can occur (the .cpp says why none does).
// tests/gguf_quants_test.cpp checks both against the scalar decoders on every block of random buffers
// (non-finite and extreme fp16 scales included) and against libggml; tests/weight_tiles_test.cpp checks the
// runner's products against the float32-decode-then-convert path they replace.
//
//   std::vector<uint16_t> tile(rows * cols);
//   for (int64_t r = 0; r < rows; ++r)   // cols: whole blocks of `type`
//     vocablens::dequantize_row_bf16(type, data + r * row_bytes, tile.data() + r * cols, cols);
//
// Vectorised: F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K (others, and CPUs without
// AVX-512F/BW, run the scalar code, which gives the same values).
#pragma once
#include <cstdint>

#include "vocablens/gguf.hpp"

namespace vocablens {

/// dequantize_row() without the vector decoders: libggml's operations one value at a time (the reference
/// the vector decoders are tested against).
void dequantize_row_scalar(GgmlType type, const void* src, float* dst, int64_t n);

/// n values (whole blocks) of `type` as bfloat16 bit patterns: round-to-nearest-even of the float32 values
/// dequantize_row() gives (NaN -> 0x7FC0), as c10::BFloat16 rounds. Throws UsageError as dequantize_row.
void dequantize_row_bf16(GgmlType type, const void* src, uint16_t* dst, int64_t n);
/// The same, through the scalar decoders (tests).
void dequantize_row_bf16_scalar(GgmlType type, const void* src, uint16_t* dst, int64_t n);

/// c10::BFloat16's rounding of one float: round to nearest even, any NaN -> 0x7FC0.
inline uint16_t float_to_bf16_rne(float f) {
  uint32_t u;
  __builtin_memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7FC0;
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

/// The 6-bit scale and min of sub-block j from the 12 packed bytes of a Q4_K / Q5_K super-block (both decoders).
inline void scale_min_k4(int j, const uint8_t* q, uint8_t& d, uint8_t& m) {
  if (j < 4) {
    d = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

namespace ggml_simd {

/// Which decoders run: scalar; AVX-512 (F, BW, VL, DQ and F16C) rounding to bfloat16 with integer arithmetic;
/// or AVX-512 rounding with the AVX512-BF16 instruction (same results, see the .cpp).
enum class Level { Scalar = 0, Avx512 = 1, Avx512Bf16 = 2 };
/// What this CPU supports.
Level detected_level();
/// What runs now: detected_level(), or what set_level() chose.
Level level();
/// For tests and benchmarks: run at most level `l` (never above detected_level()). Process-wide.
void set_level(Level l);
/// Whether `type` has a vector decoder and level() is not Scalar.
bool vectorized(GgmlType type);
/// The vector decoders at level(): n values (whole blocks; any n for F16/BF16/F32); false, with dst
/// untouched, when !vectorized(type). No argument checks (dequantize_row / dequantize_row_bf16 make them).
bool decode_f32(GgmlType type, const uint8_t* src, float* dst, int64_t n);
bool decode_bf16(GgmlType type, const uint8_t* src, uint16_t* dst, int64_t n);

}  // namespace ggml_simd
}  // namespace vocablens

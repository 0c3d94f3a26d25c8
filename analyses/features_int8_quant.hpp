// The int8 quantisation behind the screen of the feature logit weights (docs/features.md, "How the screen stays
// exact"): rounding a vector to int8 with its scale and residual norm, reading W_U's columns in their stored
// dtype, and W_U quantised once per pass and packed into oneDNN's tiles. Private to the library.
//
// Apart from the screened pass (analyses/features_int8.cpp) because it is the part that only prepares numbers:
// nothing here knows of thresholds, candidates or top-k lists; the pass reads what quantize_unembedding leaves
// and quantises its decoder rows with the same quantize().
//
//   detail::int8_screen::QuantizedUnembedding U;
//   if (!detail::int8_screen::quantize_unembedding(model, col_id, 1024, rows_per_block, U)) use_float32_screen();
//   Quantized qx = quantize(x, r, xq);   // x = qx.scale·xq + e_x, ‖x‖ = qx.norm, ‖e_x‖ = qx.err
//
// Shapes: W_U [r, V] (r = d_model); with `col_id` only those columns, Vc of them; a column's int8 copy is [r].
// Guarantees: every bound input is from the values actually used (float64 norms of the float32 column and of its
// rounding residual); BF16 / F16 columns convert to float32 exactly, as materialize_weight does.
#pragma once
#include <ATen/core/Tensor.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "int8_gemm.hpp"
#include "vocablens/model.hpp"

namespace vocablens {
namespace detail {
namespace int8_screen {

/// The smallest float >= x (x finite or infinite).
inline float float_at_least(double x) {
  float f = static_cast<float>(x);
  if (static_cast<double>(f) < x) f = std::nextafter(f, std::numeric_limits<float>::infinity());
  return f;
}

/// v [n] rounded to int8 with scale max|v|/127 (1 for a zero vector): the scale, ‖v‖ and the residual's norm
/// ‖v − scale·q‖ (float64, from the values actually used).
struct Quantized {
  float scale;
  double norm, err;
  float maxabs;  // (NaN compares false in the max: non-finite input shows in norm)
};
/// Writes q [n]; a vector with ±inf or NaN comes back with norm NaN (the caller gives up).
Quantized quantize(const float* v, int64_t n, int8_t* q);

/// Column c of the unembedding P [r, Vc] as float32 (a pointer into P when its columns are contiguous float32,
/// else converted into buf [r]): the same values materialize_weight gives (BF16/F16 → float32 is exact).
struct Columns {
  at::Tensor P;
  int64_t r = 0, s0 = 0, s1 = 0;
  at::ScalarType dt = at::kFloat;
  const float* column(int64_t c, float* buf) const;
};

/// W_U's allowed columns, quantised: per column its scale, norms and the int8 copy packed in tiles.
struct QuantizedUnembedding {
  Columns P;                    ///< W_U [r, Vc] in its stored dtype (a transposed view of W_E when tied)
  int64_t Vc = 0;               ///< columns (tokens) screened
  std::vector<float> sB;        ///< [Vc] the column's scale s_p
  std::vector<double> pn;       ///< [Vc] ‖p‖ (float64)
  std::vector<float> Pf, Ef;    ///< [Vc] ‖p‖ and ‖e_p‖ rounded up (times 1 + 1e-6) to float32
  std::vector<Int8PackedB> Wt;  ///< the int8 columns in tiles of `colblk`, packed for products of
                                ///< `rows_per_block` rows (int8_gemm.hpp)
};

/// Quantises W_U's columns (`col_id`, or all when empty) once, read in the stored dtype (never a float32 copy
/// of all of W_U), then packs them. Returns false, with `out` unusable, when a column is non-finite or beyond
/// 1e30 (the screened values and bounds could overflow float32): the caller then screens in float32.
bool quantize_unembedding(const Model& m, const std::vector<int64_t>& col_id, int64_t colblk, int64_t rows_per_block,
                          QuantizedUnembedding& out);

}  // namespace int8_screen
}  // namespace detail
}  // namespace vocablens

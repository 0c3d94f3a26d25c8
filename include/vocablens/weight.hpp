// vocablens/weight.hpp — weight matrices kept in their stored dtype, and how the runner multiplies them.
//
// A model's matrices are at::Tensors in one of three representations, all views of the mapped checkpoint
// where the file allowed (never a whole-model float32 copy):
//   - float32: used as is;
//   - float16 / bfloat16 (safetensors F16/BF16, GGUF F16/BF16): dense tensors of that dtype;
//   - packed: ggml quantized blocks (GGUF Q8_0, Q4_K, ...), an at::Tensor of dtype uint8 whose *logical*
//     shape is the matrix's ([in, out] or [V, d]) and whose one non-zero stride steps from one stored row
//     of blocks to the next (the other stride is 0). Views that select whole rows (narrow, select, index
//     along the row dimension, t()) remain valid packed weights; element access on one is meaningless.
// The runner multiplies through weight_matmul(), which upcasts or dequantizes one tile of rows at a time
// (or runs a bfloat16 GEMM, see ComputeDtype); analyses that need a matrix read it through
// materialize_weight() (float32, on demand). The residual stream and every statistic stay float32.
//
//   at::Tensor W = vocablens::materialize_weight(model.weights().W_U);   // [d, V] float32
//   at::Tensor y = vocablens::weight_matmul(x2, L.w_in);                  // x2 [N, d] float32 -> [N, d_mlp]
//   if (vocablens::is_packed_weight(L.w_q)) ...
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "vocablens/gguf.hpp"
#include "vocablens/tensor_fwd.hpp"

namespace vocablens {

/// A packed ggml matrix over `file`'s bytes at `offset`: `rows` stored rows of `cols` values each, in
/// `type`'s block layout (row_bytes = cols / block_values * block_bytes). The returned tensor has the
/// logical shape [rows, cols] (call .t() for the "x @ W" orientation [cols, rows]) and keeps `file` alive.
at::Tensor make_packed_weight(std::shared_ptr<const void> owner, const uint8_t* data, GgmlType type, int64_t rows, int64_t cols);

/// True when `w` is a packed ggml weight (or a row view of one).
bool is_packed_weight(const at::Tensor& w);
/// The ggml type of a packed weight; GgmlType::F32/F16/BF16 for dense float32/float16/bfloat16 tensors.
GgmlType weight_storage_type(const at::Tensor& w);
/// "F32", "BF16", "Q4_K", ... (what weight_storage_type says, as text).
std::string weight_storage_name(const at::Tensor& w);

/// The weight as a float32 tensor of the same logical shape: `w` itself when already float32, otherwise
/// a fresh upcast / dequantized copy. Undefined stays undefined.
at::Tensor materialize_weight(const at::Tensor& w);

/// How the runner computes its matrix products with non-float32 weights (CLI `--compute`, Python `set_compute`).
///  - Float32 (default): each weight tile is upcast/dequantized to float32 and multiplied in float32, so
///    results equal a float32 model holding the same (stored-precision) weights up to summation order.
///  - BFloat16: activations are rounded to bfloat16 and bfloat16 weights multiplied by LibTorch's bf16
///    GEMM (float32 accumulation); quantized tiles are dequantized to bfloat16. Faster on CPUs with
///    AVX512-BF16, less exact (docs/runner.md gives the measured error). On CPUs without AVX-512, where
///    LibTorch's bf16 GEMM is a scalar loop, the same arithmetic runs on the float32 SGEMM (float32's speed).
///  - Int8: llama.cpp's numerics for quantized weights. Each activation row is quantized per block as
///    llama.cpp's CPU backend quantizes it for the weight's type (Q8_0 for Q4_0/Q5_0/Q8_0 weights, Q8_K for
///    Q4_K/Q5_K/Q6_K) and multiplied by the stored blocks with integer dot products (AVX-512 VNNI, AVX2 or
///    scalar kernels, chosen at run time; src/model/quant_dot.hpp). Weights of other types (float32, F16, BF16,
///    Q2_K, Q3_K, Q4_1, ...) are multiplied exactly as under Float32, and the first such product of each type
///    says so on stderr once. Norms, attention, the residual stream and gradients stay float32.
enum class ComputeDtype { Float32, BFloat16, Int8 };
void set_compute_dtype(ComputeDtype d);
ComputeDtype compute_dtype();
/// "float32" / "bfloat16" / "int8" -> ComputeDtype (also "fp32", "f32", "bf16"); throws UsageError otherwise.
ComputeDtype compute_dtype_from_string(const std::string& s);
/// "float32", "bfloat16" or "int8": what inspect, results' provenance ("compute") and the server report.
const char* compute_dtype_name(ComputeDtype d);

/// True when a product with `w` now runs on the int8 kernels: Int8 compute and a packed GGUF weight of a type they
/// multiply. A projection through such a weight (the lens's W_U) then multiplies it in place with weight_matmul,
/// as the model's own unembedding does, rather than through a float32 copy.
bool int8_product(const at::Tensor& w);

/// x [N, in] (float32) @ w [in, out] (+ b [out]; undefined: none) -> [N, out] float32, for any representation above.
at::Tensor weight_matmul(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b);
/// weight_matmul(x, w, b) without a bias (two overloads, not a default argument: at::Tensor is only declared here).
at::Tensor weight_matmul(const at::Tensor& x, const at::Tensor& w);

/// Rows `ids` (int64 [n]) of a [rows, cols] weight (an embedding) as float32 [n, cols]; only those rows
/// are upcast or dequantized.
at::Tensor weight_rows(const at::Tensor& w, const at::Tensor& ids);

}  // namespace vocablens

// expert_gemm.hpp (internal) — float32 products of a mixture's experts on their few routed rows, the weight read
// where the checkpoint stores it.
//
// Concept. An expert runs on the ~N k / E rows routed to it (64 at 256 tokens, Mixtral's 8 experts, top 2). A BLAS
// SGEMM copies ("packs") its weight operand into its own blocked layout on every call, and with so few rows that
// copy is a large share of the call (OpenBLAS's sgemm_incopy: 11 % of a Mixtral-shaped forward's samples). Here the
// activations are the operand laid out for the kernel: transposed, [K, ldx] with the expert's rows as columns
// (ldx a multiple of 16, the padding columns zero), so that 16 rows sit in one AVX-512 register; each weight value
// W[o, k] is read once from its stored row (the nn.Linear / GGUF [out, in] layout, row o at w + o * ldw) and
// broadcast against them. The output comes out transposed as well, [O, ldx], which is the next product's operand:
// gate and up give [width, ldx], the gated product of the two is the down projection's input as it stands.
//
//   if (expert_gemm_available() && expert_weight_rows(L.exp_gate[e]))
//     expert_gemm(L.exp_gate[e], xT, gT);     // xT [d, ldx], gT [width, ldx] written
//
// Shapes: w a float32 [K, O] view of a stored [O, K] matrix (stride(0) == 1); xT [K, ldx] and yT [O, ldx] float32,
// contiguous, ldx % 16 == 0. Guarantees: yT[o, t] = sum over k in order 0..K-1 of W[o, k] · xT[k, t] with one fused
// multiply-add per term, so each row's result depends on that row alone (not on how many rows the expert got or
// where they sit), on any thread count. Not differentiable: callers fall back to at::mm when autograd records.
#pragma once
#include <ATen/ATen.h>

namespace vocablens::detail {

/// True when this CPU runs the kernel (AVX-512F), VOCABLENS_KERNELS has not asked for a lower instruction set and
/// set_expert_gemm(false) has not turned it off.
bool expert_gemm_available();
/// Off: every expert product goes through weight_matmul (at::mm) as before the kernel; the tests and bench_moe
/// compare the two in one process. On by default.
void set_expert_gemm(bool on);
/// True when `w` [K, O] is a float32 view of stored rows [O, K] (stride(0) == 1), so the kernel reads it in place.
bool expert_weight_rows(const at::Tensor& w);
/// yT [O, ldx] = (x @ w)ᵀ for xT = xᵀ [K, ldx]; output rows split across threads.
void expert_gemm(const at::Tensor& w, const at::Tensor& xT, at::Tensor& yT);

}  // namespace vocablens::detail

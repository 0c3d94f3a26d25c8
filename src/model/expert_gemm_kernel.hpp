// expert_gemm_kernel.hpp (internal) — the raw kernel behind expert_gemm.hpp, on pointers (no ATen, so that its file
// compiles for AVX-512 alone). yT[o, t] for o in [o0, o1), t in [0, ldx): sum over k of w[o * ldw + k] · xT[k * ldx + t].
#pragma once
#include <cstdint>

namespace vocablens::detail {

struct ExpertGemmArgs {
  const float* w;  // stored weight rows [O, K], row o at w + o * ldw
  int64_t ldw, K;
  const float* xT;  // [K, ldx], ldx % 16 == 0
  int64_t ldx;
  float* yT;  // [O, ldx]
};

void expert_gemm_rows_avx512(const ExpertGemmArgs& g, int64_t o0, int64_t o1);

}  // namespace vocablens::detail

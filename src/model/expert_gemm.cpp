// expert_gemm.hpp: which weights and CPUs the kernel takes, and the split of output rows across threads.
#include "model/expert_gemm.hpp"

#include "model/expert_gemm_kernel.hpp"
#include "model/quant_dot.hpp"
#include "util/parallel.hpp"

#include <atomic>

namespace vocablens::detail {

namespace {
std::atomic<bool> g_on{true};
}  // namespace

void set_expert_gemm(bool on) { g_on = on; }

bool expert_gemm_available() {
  if (!g_on.load()) return false;
  // VOCABLENS_KERNELS=avx2|scalar makes the process run as on a CPU without AVX-512 (quant_dot.hpp): honoured here.
  static const bool cpu = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
  }();
  return cpu && qdot::active_kernel() == qdot::Kernel::Avx512Vnni;
}

bool expert_weight_rows(const at::Tensor& w) {
  return w.defined() && w.dim() == 2 && w.scalar_type() == at::kFloat && w.device().is_cpu() && w.stride(0) == 1 &&
         w.size(0) > 0 && w.size(1) > 0 && (w.size(1) == 1 || w.stride(1) >= w.size(0));
}

void expert_gemm(const at::Tensor& w, const at::Tensor& xT, at::Tensor& yT) {
  const int64_t K = w.size(0), O = w.size(1);
  const ExpertGemmArgs g{w.data_ptr<float>(), O > 1 ? w.stride(1) : K, K, xT.data_ptr<float>(), xT.size(1), yT.data_ptr<float>()};
  // Chunks of at least 48 output rows (8 tiles): a thread's share of a smaller product is not worth waking it for.
  parallel_for(0, O, 48, [&](int64_t o0, int64_t o1) { expert_gemm_rows_avx512(g, o0, o1); });
}

}  // namespace vocablens::detail

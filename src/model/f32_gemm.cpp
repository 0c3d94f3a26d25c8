// The exact path's float32 GEMM through oneDNN's matmul primitive (see f32_gemm.hpp). No ATen here.
#include "model/f32_gemm.hpp"

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "model/dnnl_exec.hpp"

namespace vocablens::detail {

#ifdef VOCABLENS_HAVE_DNNL
namespace {

using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool>;  // M K N lda sbk sbn ldc bias

struct Prim {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
  bool jit = false;  // oneDNN chose a JIT kernel (else the caller's SGEMM runs the product)
};

struct F32Cache {
  std::mutex mu;
  // Creating a primitive JIT-compiles its kernel (0.2-0.9 ms); a forward reuses a few shapes per token count.
  // Bounded: a server answering prompts of many lengths starts over past kMaxCached shapes.
  std::map<Key, Prim> cache;
};
constexpr size_t kMaxCached = 512;

F32Cache& f32_cache() {
  static F32Cache c;
  return c;
}

bool jit_kernel(const char* impl) { return std::strstr(impl, "brg") != nullptr || std::strstr(impl, "jit") != nullptr; }

Prim make(const Key& k) {
  const auto [M, K, N, lda, sbk, sbn, ldc, bias] = k;
  using dt = dnnl::memory::data_type;
  dnnl::memory::desc a({M, K}, dt::f32, {lda, 1}), b({K, N}, dt::f32, {sbk, sbn}), c({M, N}, dt::f32, {ldc, 1});
  dnnl::matmul::desc d =
      bias ? dnnl::matmul::desc(a, b, dnnl::memory::desc({1, N}, dt::f32, {N, 1}), c) : dnnl::matmul::desc(a, b, c);
  Prim p{dnnl::matmul::primitive_desc(d, dnnl_user_scratchpad(), dnnl_cpu_engine()), {}, false};
  p.jit = jit_kernel(p.pd.impl_info_str());
  if (p.jit) p.prim = dnnl::matmul(p.pd);
  return p;
}

bool disabled_by_env() {
  static const bool off = [] {
    const char* v = std::getenv("VOCABLENS_F32_GEMM");
    return v && std::strcmp(v, "blas") == 0;
  }();
  return off;
}

}  // namespace

bool f32_gemm_available(std::string* kernel) {
  static const std::string impl = [] {
    try {
      return std::string(make(Key{128, 2048, 2048, 2048, 1, 2048, 2048, false}).pd.impl_info_str());
    } catch (...) { return std::string(); }
  }();
  if (kernel) *kernel = impl;
  return !disabled_by_env() && jit_kernel(impl.c_str());
}

bool f32_gemm(const float* A, int64_t lda, const float* B, int64_t sbk, int64_t sbn, const float* bias, float* C, int64_t ldc,
              int64_t M, int64_t K, int64_t N) {
  if (M <= 0 || K <= 0 || N <= 0 || !f32_gemm_available()) return false;
  F32Cache& c = f32_cache();
  const Key key{M, K, N, lda, sbk, sbn, ldc, bias != nullptr};
  // Copies of the handles (oneDNN objects are reference-counted): another thread may clear the cache meanwhile.
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
  try {
    std::lock_guard<std::mutex> lk(c.mu);
    auto it = c.cache.find(key);
    if (it == c.cache.end()) {
      if (c.cache.size() >= kMaxCached) c.cache.clear();
      it = c.cache.emplace(key, make(key)).first;
    }
    if (!it->second.jit) return false;
    pd = it->second.pd;
    prim = it->second.prim;
  } catch (...) { return false; }
  try {
    const dnnl::engine& eng = dnnl_cpu_engine();
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, dnnl::memory(pd.src_desc(), eng, const_cast<float*>(A))},
                                               {DNNL_ARG_WEIGHTS, dnnl::memory(pd.weights_desc(), eng, const_cast<float*>(B))},
                                               {DNNL_ARG_DST, dnnl::memory(pd.dst_desc(), eng, C)}};
    if (bias) args.insert({DNNL_ARG_BIAS, dnnl::memory(pd.bias_desc(), eng, const_cast<float*>(bias))});
    dnnl_execute(prim, pd.scratchpad_desc(), std::move(args));
  } catch (...) { return false; }  // (C may be partly written; the caller's SGEMM overwrites it whole)
  return true;
}

#else

bool f32_gemm_available(std::string* kernel) {
  if (kernel) kernel->clear();
  return false;
}
bool f32_gemm(const float*, int64_t, const float*, int64_t, int64_t, const float*, float*, int64_t, int64_t, int64_t, int64_t) {
  return false;
}

#endif

}  // namespace vocablens::detail

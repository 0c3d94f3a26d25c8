// The exact path's float32 GEMM through oneDNN's matmul primitive (see f32_gemm.hpp). No ATen here.
#include "model/f32_gemm.hpp"

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#ifdef VOCABLENS_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace vocablens::detail {

#ifdef VOCABLENS_HAVE_DNNL
namespace {

using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool>;  // M K N lda sbk sbn ldc bias

struct Prim {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
  bool jit = false;  // oneDNN chose a JIT kernel (else the caller's SGEMM runs the product)
};

struct F32Engine {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  std::mutex mu;
  // Creating a primitive JIT-compiles its kernel (0.2-0.9 ms); a forward reuses a few shapes per token count.
  // Bounded: a server answering prompts of many lengths starts over past kMaxCached shapes.
  std::map<Key, Prim> cache;
};
constexpr size_t kMaxCached = 512;

F32Engine& f32_engine() {
  static F32Engine e;
  return e;
}

bool jit_kernel(const char* impl) { return std::strstr(impl, "brg") != nullptr || std::strstr(impl, "jit") != nullptr; }

Prim make(const Key& k) {
  const auto [M, K, N, lda, sbk, sbn, ldc, bias] = k;
  using dt = dnnl::memory::data_type;
  dnnl::memory::desc a({M, K}, dt::f32, {lda, 1}), b({K, N}, dt::f32, {sbk, sbn}), c({M, N}, dt::f32, {ldc, 1});
  // The caller's scratchpad: a primitive executed from several threads at once must not share the library's.
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  dnnl::matmul::desc d =
      bias ? dnnl::matmul::desc(a, b, dnnl::memory::desc({1, N}, dt::f32, {N, 1}), c) : dnnl::matmul::desc(a, b, c);
  Prim p{dnnl::matmul::primitive_desc(d, attr, f32_engine().eng), {}, false};
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
  F32Engine& e = f32_engine();
  const Key key{M, K, N, lda, sbk, sbn, ldc, bias != nullptr};
  // Copies of the handles (oneDNN objects are reference-counted): another thread may clear the cache meanwhile.
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
  try {
    std::lock_guard<std::mutex> lk(e.mu);
    auto it = e.cache.find(key);
    if (it == e.cache.end()) {
      if (e.cache.size() >= kMaxCached) e.cache.clear();
      it = e.cache.emplace(key, make(key)).first;
    }
    if (!it->second.jit) return false;
    pd = it->second.pd;
    prim = it->second.prim;
  } catch (...) { return false; }
  thread_local dnnl::stream str(e.eng);
  thread_local std::vector<uint8_t> scratch;
  try {
    const size_t ns = pd.scratchpad_desc().get_size();
    if (scratch.size() < ns) scratch.resize(ns);
    dnnl::memory am(pd.src_desc(), e.eng, const_cast<float*>(A)), bm(pd.weights_desc(), e.eng, const_cast<float*>(B)),
        cm(pd.dst_desc(), e.eng, C), sm(pd.scratchpad_desc(), e.eng, scratch.data());
    if (bias) {
      dnnl::memory biasm(pd.bias_desc(), e.eng, const_cast<float*>(bias));
      prim.execute(
          str,
          {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_BIAS, biasm}, {DNNL_ARG_DST, cm}, {DNNL_ARG_SCRATCHPAD, sm}});
    } else {
      prim.execute(str, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}, {DNNL_ARG_SCRATCHPAD, sm}});
    }
    str.wait();
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

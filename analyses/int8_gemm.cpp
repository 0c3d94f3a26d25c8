// Exact int8 GEMM through oneDNN's matmul primitive (see int8_gemm.hpp). No ATen here (no precompiled header).
#include "int8_gemm.hpp"

#include <map>
#include <mutex>
#include <stdexcept>
#include <tuple>
#include <vector>

#ifdef VOCABLENS_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace vocablens::detail {

#ifdef VOCABLENS_HAVE_DNNL
namespace {

struct Engine {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  std::mutex mu;
  // (M, K, N) -> primitive: creating one JIT-compiles its kernel (milliseconds), a chunked pass reuses a few shapes
  std::map<std::tuple<int64_t, int64_t, int64_t>, std::pair<dnnl::matmul::primitive_desc, dnnl::matmul>> cache;
};

Engine& engine() {
  static Engine e;
  return e;
}

dnnl::matmul::primitive_desc describe(int64_t M, int64_t K, int64_t N) {
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  dnnl::memory::desc a({M, K}, dt::s8, tag::ab), b({K, N}, dt::s8, tag::ba), c({M, N}, dt::s32, tag::ab);
  // The caller's scratchpad: a primitive executed from several threads at once must not share the library's
  // (oneDNN's default shares one unless built with DNNL_ENABLE_CONCURRENT_EXEC).
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), attr, engine().eng);
}

// Kernels whose int8 dot products accumulate exactly in 32 bits: VNNI (vpdpbusd) and AMX.
bool exact_kernel(const std::string& impl) {
  return impl.find("vnni") != std::string::npos || impl.find("amx") != std::string::npos;
}

}  // namespace

bool int8_gemm_available(std::string* kernel) {
  static const std::string impl = [] {
    try {
      return std::string(describe(256, 768, 4096).impl_info_str());
    } catch (...) {
      return std::string();
    }
  }();
  if (kernel) *kernel = impl;
  return exact_kernel(impl);
}

void int8_gemm(const int8_t* A, const int8_t* B, int32_t* C, int64_t M, int64_t K, int64_t N) {
  if (!int8_gemm_available()) throw std::runtime_error("int8 GEMM: no exact oneDNN int8 kernel on this CPU");
  if (K > 65000) throw std::runtime_error("int8 GEMM: inner dimension above 65 000 could overflow int32");
  Engine& e = engine();
  const dnnl::matmul* prim;
  const dnnl::matmul::primitive_desc* pd;
  {
    std::lock_guard<std::mutex> lk(e.mu);
    auto key = std::make_tuple(M, K, N);
    auto it = e.cache.find(key);
    if (it == e.cache.end()) {
      auto d = describe(M, K, N);
      it = e.cache.emplace(key, std::make_pair(d, dnnl::matmul(d))).first;
    }
    pd = &it->second.first;  // (std::map nodes never move)
    prim = &it->second.second;
  }
  if (!exact_kernel(pd->impl_info_str()))
    throw std::runtime_error(std::string("int8 GEMM: oneDNN chose ") + pd->impl_info_str() + ", not an exact kernel");
  // Primitives may run concurrently (each caller its own stream); called inside a parallel region, oneDNN runs
  // on the calling thread alone.
  thread_local dnnl::stream str(e.eng);
  thread_local std::vector<uint8_t> scratch;
  const size_t ns = pd->scratchpad_desc().get_size();
  if (scratch.size() < ns) scratch.resize(ns);
  dnnl::memory am(pd->src_desc(), e.eng, const_cast<int8_t*>(A)), bm(pd->weights_desc(), e.eng, const_cast<int8_t*>(B)),
      cm(pd->dst_desc(), e.eng, C), sm(pd->scratchpad_desc(), e.eng, scratch.data());
  prim->execute(str, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}, {DNNL_ARG_SCRATCHPAD, sm}});
  str.wait();
}

#else

bool int8_gemm_available(std::string* kernel) {
  if (kernel) *kernel = "none (built without oneDNN)";
  return false;
}

void int8_gemm(const int8_t*, const int8_t*, int32_t*, int64_t, int64_t, int64_t) {
  throw std::runtime_error("int8 GEMM: built without oneDNN");
}

#endif

}  // namespace vocablens::detail

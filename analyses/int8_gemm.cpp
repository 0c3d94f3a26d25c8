// Exact int8 GEMM through oneDNN's matmul primitive (see int8_gemm.hpp). No ATen here (no precompiled header).
#include "int8_gemm.hpp"

#include <map>
#include <mutex>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "model/dnnl_exec.hpp"

namespace vocablens::detail {

#ifdef VOCABLENS_HAVE_DNNL
namespace {

struct Cache {
  std::mutex mu;
  // (M, K, N) -> primitive: creating one JIT-compiles its kernel (milliseconds), a chunked pass reuses a few shapes
  std::map<std::tuple<int64_t, int64_t, int64_t, bool>, std::pair<dnnl::matmul::primitive_desc, dnnl::matmul>> cache;
};

Cache& cache() {
  static Cache e;
  return e;
}

dnnl::matmul::primitive_desc describe(int64_t M, int64_t K, int64_t N, bool packed = false) {
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  dnnl::memory::desc a({M, K}, dt::s8, tag::ab), b({K, N}, dt::s8, packed ? tag::any : tag::ba), c({M, N}, dt::s32, tag::ab);
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), dnnl_user_scratchpad(), dnnl_cpu_engine());
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
    } catch (...) { return std::string(); }
  }();
  if (kernel) *kernel = impl;
  return exact_kernel(impl);
}

namespace {

// The primitive for (M, K, N) with a plain or packed B, made once (creating one JIT-compiles its kernel).
const std::pair<dnnl::matmul::primitive_desc, dnnl::matmul>& primitive(int64_t M, int64_t K, int64_t N, bool packed) {
  if (!int8_gemm_available()) throw std::runtime_error("int8 GEMM: no exact oneDNN int8 kernel on this CPU");
  if (K > 65000) throw std::runtime_error("int8 GEMM: inner dimension above 65 000 could overflow int32");
  Cache& e = cache();
  std::lock_guard<std::mutex> lk(e.mu);
  auto key = std::make_tuple(M, K, N, packed);
  auto it = e.cache.find(key);
  if (it == e.cache.end()) {
    auto d = describe(M, K, N, packed);
    if (!exact_kernel(d.impl_info_str()))
      throw std::runtime_error(std::string("int8 GEMM: oneDNN chose ") + d.impl_info_str() + ", not an exact kernel");
    it = e.cache.emplace(key, std::make_pair(d, dnnl::matmul(d))).first;
  }
  return it->second;  // (std::map nodes never move)
}

// Runs a primitive on the calling thread's stream and scratchpad (dnnl_exec.hpp).
void run(const std::pair<dnnl::matmul::primitive_desc, dnnl::matmul>& p, const void* A, const void* B, int32_t* C) {
  const auto& pd = p.first;
  const dnnl::engine& eng = dnnl_cpu_engine();
  dnnl_execute(p.second, pd.scratchpad_desc(),
               {{DNNL_ARG_SRC, dnnl::memory(pd.src_desc(), eng, const_cast<void*>(A))},
                {DNNL_ARG_WEIGHTS, dnnl::memory(pd.weights_desc(), eng, const_cast<void*>(B))},
                {DNNL_ARG_DST, dnnl::memory(pd.dst_desc(), eng, C)}});
}

}  // namespace

void int8_gemm(const int8_t* A, const int8_t* B, int32_t* C, int64_t M, int64_t K, int64_t N) {
  run(primitive(M, K, N, false), A, B, C);
}

Int8PackedB::Int8PackedB(const int8_t* B, int64_t K_, int64_t N_, int64_t M_) : K(K_), N(N_), M(M_) {
  const auto& p = primitive(M, K, N, true);
  const auto& plain_pd = primitive(M, K, N, false).first;
  packed.resize(p.first.weights_desc().get_size());
  dnnl_reorder(dnnl::memory(plain_pd.weights_desc(), dnnl_cpu_engine(), const_cast<int8_t*>(B)),
               dnnl::memory(p.first.weights_desc(), dnnl_cpu_engine(), packed.data()));
}

void int8_gemm(const int8_t* A, const Int8PackedB& W, int32_t* C, int64_t M) {
  const auto& pw = primitive(M, W.K, W.N, true);
  const dnnl::memory::desc wd = primitive(W.M, W.K, W.N, true).first.weights_desc();
  if (M == W.M || pw.first.weights_desc() == wd) {
    run(pw, A, W.packed.data(), C);
    return;
  }
  // (another row count whose kernel reads another layout: back to the plain layout, on this thread)
  const auto& pp = primitive(M, W.K, W.N, false);
  thread_local std::vector<int8_t> plain;
  plain.resize(static_cast<size_t>(W.K * W.N));
  dnnl_reorder(dnnl::memory(wd, dnnl_cpu_engine(), const_cast<uint8_t*>(W.packed.data())),
               dnnl::memory(pp.first.weights_desc(), dnnl_cpu_engine(), plain.data()));
  run(pp, A, plain.data(), C);
}

#else

bool int8_gemm_available(std::string* kernel) {
  if (kernel) *kernel = "none (built without oneDNN)";
  return false;
}

void int8_gemm(const int8_t*, const int8_t*, int32_t*, int64_t, int64_t, int64_t) {
  throw std::runtime_error("int8 GEMM: built without oneDNN");
}

Int8PackedB::Int8PackedB(const int8_t*, int64_t K_, int64_t N_, int64_t M_) : K(K_), N(N_), M(M_) {
  throw std::runtime_error("int8 GEMM: built without oneDNN");
}

void int8_gemm(const int8_t*, const Int8PackedB&, int32_t*, int64_t) {
  throw std::runtime_error("int8 GEMM: built without oneDNN");
}

#endif

}  // namespace vocablens::detail

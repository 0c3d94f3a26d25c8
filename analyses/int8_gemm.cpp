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
  std::map<std::tuple<int64_t, int64_t, int64_t, bool>, std::pair<dnnl::matmul::primitive_desc, dnnl::matmul>> cache;
};

Engine& engine() {
  static Engine e;
  return e;
}

dnnl::matmul::primitive_desc describe(int64_t M, int64_t K, int64_t N, bool packed = false) {
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  dnnl::memory::desc a({M, K}, dt::s8, tag::ab), b({K, N}, dt::s8, packed ? tag::any : tag::ba), c({M, N}, dt::s32, tag::ab);
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
  Engine& e = engine();
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

// Runs a primitive on the calling thread's stream and scratchpad. Primitives may run concurrently (each caller
// its own stream and scratchpad); called inside a parallel region, oneDNN runs on the calling thread alone.
void run(const std::pair<dnnl::matmul::primitive_desc, dnnl::matmul>& p, const void* A, const void* B, int32_t* C) {
  Engine& e = engine();
  const auto& pd = p.first;
  thread_local dnnl::stream str(e.eng);
  thread_local std::vector<uint8_t> scratch;
  const size_t ns = pd.scratchpad_desc().get_size();
  if (scratch.size() < ns) scratch.resize(ns);
  dnnl::memory am(pd.src_desc(), e.eng, const_cast<void*>(A)), bm(pd.weights_desc(), e.eng, const_cast<void*>(B)),
      cm(pd.dst_desc(), e.eng, C), sm(pd.scratchpad_desc(), e.eng, scratch.data());
  p.second.execute(str, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}, {DNNL_ARG_SCRATCHPAD, sm}});
  str.wait();
}

}  // namespace

void int8_gemm(const int8_t* A, const int8_t* B, int32_t* C, int64_t M, int64_t K, int64_t N) {
  run(primitive(M, K, N, false), A, B, C);
}

Int8PackedB::Int8PackedB(const int8_t* B, int64_t K_, int64_t N_, int64_t M_) : K(K_), N(N_), M(M_) {
  const auto& p = primitive(M, K, N, true);
  Engine& e = engine();
  const auto& plain_pd = primitive(M, K, N, false).first;
  packed.resize(p.first.weights_desc().get_size());
  dnnl::memory src(plain_pd.weights_desc(), e.eng, const_cast<int8_t*>(B)), dst(p.first.weights_desc(), e.eng, packed.data());
  dnnl::stream str(e.eng);
  dnnl::reorder(src, dst).execute(str, src, dst);
  str.wait();
}

void int8_gemm(const int8_t* A, const Int8PackedB& W, int32_t* C, int64_t M) {
  const auto& pw = primitive(M, W.K, W.N, true);
  const dnnl::memory::desc wd = primitive(W.M, W.K, W.N, true).first.weights_desc();
  if (M == W.M || pw.first.weights_desc() == wd) {
    run(pw, A, W.packed.data(), C);
    return;
  }
  // (another row count whose kernel reads another layout: back to the plain layout, on this thread)
  Engine& e = engine();
  const auto& pp = primitive(M, W.K, W.N, false);
  thread_local std::vector<int8_t> plain;
  plain.resize(static_cast<size_t>(W.K * W.N));
  dnnl::memory src(wd, e.eng, const_cast<uint8_t*>(W.packed.data())), dst(pp.first.weights_desc(), e.eng, plain.data());
  thread_local dnnl::stream str(e.eng);
  dnnl::reorder(src, dst).execute(str, src, dst);
  str.wait();
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

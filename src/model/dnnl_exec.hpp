// dnnl_exec.hpp (internal) — the process's oneDNN CPU engine, and how the project runs oneDNN primitives: on the
// calling thread's stream, with the calling thread's scratchpad. Only for files built with oneDNN
// (VOCABLENS_DNNL_SOURCES in CMakeLists.txt: src/model/f32_gemm.cpp, analyses/int8_gemm.cpp).
//
//   dnnl::matmul::primitive_desc pd(desc, detail::dnnl_user_scratchpad(), detail::dnnl_cpu_engine());
//   detail::dnnl_execute(dnnl::matmul(pd), pd.scratchpad_desc(), {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, ...});
//
// Primitives are made with the caller's scratchpad (dnnl_user_scratchpad): one executed from several threads at once
// must not share the library's (oneDNN's default shares one unless built with DNNL_ENABLE_CONCURRENT_EXEC). Each
// thread has its own stream and scratchpad, grown on demand and kept. Called inside an OpenMP parallel region,
// oneDNN runs on the calling thread alone. Every call waits for its primitive to finish.
#pragma once
#ifdef VOCABLENS_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>

#include <unordered_map>

namespace vocablens::detail {

const dnnl::engine& dnnl_cpu_engine();
/// Attributes for a primitive run by dnnl_execute: the scratchpad is the caller's.
dnnl::primitive_attr dnnl_user_scratchpad();
/// Runs `p` (made with dnnl_user_scratchpad; `scratchpad` its primitive_desc's scratchpad_desc()) with `args` and
/// the calling thread's scratchpad, on the calling thread's stream.
void dnnl_execute(const dnnl::primitive& p, const dnnl::memory::desc& scratchpad, std::unordered_map<int, dnnl::memory> args);
/// src copied into dst's layout, on the calling thread's stream.
void dnnl_reorder(const dnnl::memory& src, const dnnl::memory& dst);

}  // namespace vocablens::detail
#endif

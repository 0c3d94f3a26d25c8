// The oneDNN engine and primitive execution shared by the float32 and int8 GEMMs (see dnnl_exec.hpp). No ATen here.
#include "model/dnnl_exec.hpp"

#ifdef VOCABLENS_HAVE_DNNL
#include <cstdint>
#include <vector>

namespace vocablens::detail {

const dnnl::engine& dnnl_cpu_engine() {
  static const dnnl::engine e{dnnl::engine::kind::cpu, 0};
  return e;
}

dnnl::primitive_attr dnnl_user_scratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

namespace {
dnnl::stream& thread_stream() {
  thread_local dnnl::stream s(dnnl_cpu_engine());
  return s;
}
}  // namespace

void dnnl_execute(const dnnl::primitive& p, const dnnl::memory::desc& scratchpad, std::unordered_map<int, dnnl::memory> args) {
  thread_local std::vector<uint8_t> buf;
  const size_t n = scratchpad.get_size();
  if (buf.size() < n) buf.resize(n);
  args.insert({DNNL_ARG_SCRATCHPAD, dnnl::memory(scratchpad, dnnl_cpu_engine(), buf.data())});
  dnnl::stream& s = thread_stream();
  p.execute(s, args);
  s.wait();
}

void dnnl_reorder(const dnnl::memory& src, const dnnl::memory& dst) {
  dnnl::memory from = src, to = dst;  // (handles: execute takes them by non-const reference)
  dnnl::stream& s = thread_stream();
  dnnl::reorder(from, to).execute(s, from, to);
  s.wait();
}

}  // namespace vocablens::detail
#endif

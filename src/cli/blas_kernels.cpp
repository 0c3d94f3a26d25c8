#include "cli/blas_kernels.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace vocablens::cli {

const char* blas_kernel_name() {
  using Fn = char* (*)();
  auto fn = reinterpret_cast<Fn>(::dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  const char* name = fn ? fn() : nullptr;
  return name ? name : "";
}

void reexec_with_fast_blas_kernels(char** argv, bool reproducible) {
  if (std::getenv("OPENBLAS_CORETYPE") || std::getenv("VOCABLENS_KEEP_BLAS")) return;
  const char* have = blas_kernel_name();
  if (!*have) return;  // not OpenBLAS
  __builtin_cpu_init();
  const char* core = __builtin_cpu_supports("avx512f") ? "SkylakeX"
                     : __builtin_cpu_supports("avx2")  ? "Haswell"
                                                       : nullptr;
  if (!core || std::strcmp(have, core) == 0) return;
  if (!reproducible && std::strcmp(have, "Prescott") != 0) return;
  ::setenv("OPENBLAS_CORETYPE", core, 1);
  ::execv("/proc/self/exe", argv);
  // exec failed (no /proc, say): keep going with the kernels we have; the variable stays set for children.
}

}  // namespace vocablens::cli

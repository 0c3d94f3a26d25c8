#include "cli/blas_kernels.hpp"

#include "cli/early_env.hpp"

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

namespace {

// The OpenBLAS kernel family to ask for, or nullptr when the one running is right (see the header).
const char* blas_core_wanted(bool reproducible) {
  if (std::getenv("OPENBLAS_CORETYPE") || std::getenv("VOCABLENS_KEEP_BLAS")) return nullptr;
  const char* have = blas_kernel_name();
  if (!*have) return nullptr;  // not OpenBLAS
  __builtin_cpu_init();
  const char* core = __builtin_cpu_supports("avx512f") ? "SkylakeX" : __builtin_cpu_supports("avx2") ? "Haswell" : nullptr;
  if (!core || std::strcmp(have, core) == 0) return nullptr;
  if (!reproducible && std::strcmp(have, "Prescott") != 0) return nullptr;
  return core;
}

}  // namespace

void reexec_with_runtime_settings(char** argv, bool reproducible) {
  bool again = false;
  if (const char* core = blas_core_wanted(reproducible)) {
    ::setenv("OPENBLAS_CORETYPE", core, 1);
    again = true;
  }
  if (early::set_wait_policy_if_unset()) again = true;
  if (again) ::execv("/proc/self/exe", argv);
  // exec failed (no /proc, say): keep going as we are; the variables stay set for children.
}

}  // namespace vocablens::cli

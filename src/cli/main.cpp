// The `vocablens` program: a loader. Everything else is in run_main() (src/cli/run_main.cpp), built into
// libvocablens-cli.so next to this program and shared with the test suite's fork server.
//
// Why a loader: libgomp, which LibTorch loads, reads OMP_WAIT_POLICY only in its constructor. A program linked
// against LibTorch runs its own code after that, so it could only set the variable and execute itself again
// (a second process start: ~0.65 CPU-s here). This program links nothing but libc and libdl: it sets the
// variable (cli/early_env.hpp), then loads the CLI's library and LibTorch with it, once.
#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstring>
#include <string>

#include "cli/early_env.hpp"

int main(int argc, char** argv) {
  vocablens::cli::early::set_wait_policy_if_unset();
  // The library sits next to this program (the build tree) or in the install's library directory.
  std::string dir;
  char self[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    self[n] = '\0';
    if (const char* slash = std::strrchr(self, '/')) dir.assign(self, static_cast<size_t>(slash - self + 1));
  }
  std::string tried;
  void* handle = nullptr;
  for (const std::string& lib : {dir + "libvocablens-cli.so", dir + VOCABLENS_CLI_LIB_FROM_BIN "/libvocablens-cli.so"}) {
    if (::access(lib.c_str(), F_OK) != 0) {
      tried += (tried.empty() ? "" : ", ") + lib;
      continue;
    }
    if (!(handle = ::dlopen(lib.c_str(), RTLD_LAZY | RTLD_LOCAL))) {
      std::fprintf(stderr, "vocablens: error: cannot load the CLI's library %s: %s\n", lib.c_str(), ::dlerror());
      return 127;
    }
    break;
  }
  if (!handle) {
    std::fprintf(stderr, "vocablens: error: the CLI's library libvocablens-cli.so is missing (looked for %s)\n", tried.c_str());
    return 127;
  }
  using Main = int (*)(int, char**);
  auto run = reinterpret_cast<Main>(::dlsym(handle, "vocablens_cli_main"));
  if (!run) {
    std::fprintf(stderr, "vocablens: error: libvocablens-cli.so has no vocablens_cli_main: %s\n", ::dlerror());
    return 127;
  }
  return run(argc, argv);
}

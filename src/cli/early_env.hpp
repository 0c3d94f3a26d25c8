// The CLI's settings that must be in the environment before LibTorch's libraries load: OpenMP's wait policy.
//
// libgomp (LibTorch's and OpenBLAS's OpenMP runtime) reads OMP_WAIT_POLICY once, in its constructor, when it is
// loaded. Unset, its idle threads spin ~300 000 pauses after every parallel region, and on a busy 2-core
// machine the spinning thread burns the time slices its descheduled partner needs (docs/benchmarks.md, "Idle
// threads that sleep"). `vocablens` (src/cli/main.cpp) calls set_wait_policy_if_unset() before it loads the
// CLI's library (libvocablens-cli.so, and LibTorch with it), so one process start suffices; a program that
// links the CLI's objects directly (the test suite's fork server) relies on cli::reexec_with_runtime_settings.
// Header-only on purpose: main.cpp links nothing but libc and libdl.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <initializer_list>

namespace vocablens::cli::early {

// Whether the run may use more than one thread: VOCABLENS_THREADS or OMP_NUM_THREADS of 1, or one CPU, say no.
inline bool may_use_threads() {
  for (const char* name : {"VOCABLENS_THREADS", "OMP_NUM_THREADS"})
    if (const char* v = std::getenv(name); v && std::strcmp(v, "1") == 0) return false;
  return ::sysconf(_SC_NPROCESSORS_ONLN) > 1;
}

// Sets OMP_WAIT_POLICY=PASSIVE unless it or GOMP_SPINCOUNT is set (the user's choice stands) or the run uses one
// thread (nothing waits); returns whether it set it.
inline bool set_wait_policy_if_unset() {
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT") || !may_use_threads()) return false;
  ::setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  return true;
}

}  // namespace vocablens::cli::early

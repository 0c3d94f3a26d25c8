// bench_clock.hpp — the process's CPU clock for the benchmarks in bench/ (every thread, user + system).
//
//   const double t0 = vl_bench::cpu_now();  ...;  const double cpu_s = vl_bench::cpu_now() - t0;
//   const double best = vl_bench::best_of(5, [&] { model.forward(ids); });   // fewest CPU seconds of 5 runs
//
// CPU seconds rather than wall: on the shared 2-core machine they are the steadier measure (docs/benchmarks.md).
#pragma once
#include <time.h>

#include <algorithm>
#include <functional>

namespace vl_bench {

inline double cpu_now() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

/// The fewest CPU seconds of `repeats` runs of f.
inline double best_of(int repeats, const std::function<void()>& f) {
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const double t0 = cpu_now();
    f();
    best = std::min(best, cpu_now() - t0);
  }
  return best;
}

}  // namespace vl_bench

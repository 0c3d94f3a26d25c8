// The one place the project's parallel loops are compiled with OpenMP (see util/parallel.hpp).
#include "util/parallel.hpp"

#include <ATen/Parallel.h>
#include <dlfcn.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace vocablens {
namespace detail {
namespace {
using OmpSetNumThreads = void (*)(int);
using OmpGetMaxThreads = int (*)();
// libgomp's omp_set_num_threads, looked up at run time (LibTorch and OpenBLAS load libgomp), so that this file
// links the same with or without OpenMP found at configure time. nullptr when absent.
OmpSetNumThreads omp_set_num_threads_fn() {
  static OmpSetNumThreads f = reinterpret_cast<OmpSetNumThreads>(::dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  return f;
}
OmpGetMaxThreads omp_get_max_threads_fn() {
  static OmpGetMaxThreads f = reinterpret_cast<OmpGetMaxThreads>(::dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
  return f;
}
}  // namespace

double serial_work_limit() {
  static const double limit = [] {
    if (const char* env = std::getenv("VOCABLENS_SERIAL_WORK")) {
      char* end = nullptr;
      const double v = std::strtod(env, &end);
      if (end != env && *end == '\0' && v >= 0 && std::isfinite(v)) return v;
      std::fprintf(stderr, "vocablens: VOCABLENS_SERIAL_WORK=%s is not a number >= 0; using the default 2e7\n", env);
    }
    return 2e7;
  }();
  return limit;
}

SerialBelow::SerialBelow(double work) {
  if (!(work < serial_work_limit())) return;
  auto get = omp_get_max_threads_fn();
  auto set = omp_set_num_threads_fn();
  if (!get || !set) return;
  const int n = get();
  if (n <= 1) return;
  prev_ = n;
  set(1);
}

SerialBelow::~SerialBelow() {
  if (prev_ > 0)
    if (auto set = omp_set_num_threads_fn()) set(prev_);
}

void parallel_for(int64_t begin, int64_t end, int64_t grain, const std::function<void(int64_t, int64_t)>& f) {
  at::parallel_for(begin, end, grain, f);
}

void parallel_workers(int workers, const std::function<void(int)>& fn) {
  if (workers < 1) workers = 1;
  std::exception_ptr err;
  std::mutex mu;
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(workers));
  for (int w = 0; w < workers; ++w)
    threads.emplace_back([&, w] {
      // OpenMP's thread count is per thread: 1 here makes every BLAS call in this worker single-threaded.
      if (auto set = omp_set_num_threads_fn()) set(1);
      try {
        fn(w);
      } catch (...) {
        std::lock_guard<std::mutex> lk(mu);
        if (!err) err = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  if (err) std::rethrow_exception(err);
}

}  // namespace detail
}  // namespace vocablens

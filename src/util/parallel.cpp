// The one place the project's parallel loops are compiled with OpenMP (see util/parallel.hpp).
#include "util/parallel.hpp"

#include <ATen/Parallel.h>
#include <dlfcn.h>

#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace vocablens {
namespace detail {
namespace {
using OmpSetNumThreads = void (*)(int);
// libgomp's omp_set_num_threads, looked up at run time (LibTorch and OpenBLAS load libgomp), so that this file
// links the same with or without OpenMP found at configure time. nullptr when absent.
OmpSetNumThreads omp_set_num_threads_fn() {
  static OmpSetNumThreads f = reinterpret_cast<OmpSetNumThreads>(::dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  return f;
}
}  // namespace

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

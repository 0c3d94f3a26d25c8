// util/parallel.hpp (internal) — at::parallel_for on every thread, from any file.
//
// at::parallel_for is an inline template whose `#pragma omp parallel` is compiled into the calling file: called
// from a file built without -fopenmp it runs on one thread (ATen's own operators are parallel either way). This
// one is compiled once, with OpenMP (src/util/parallel.cpp), so the project's own loops use every thread while
// their files keep the precompiled header and need no flag. Same contract as at::parallel_for: f(b, e) on
// disjoint chunks of [begin, end) of at least `grain` iterations (one chunk, on the caller's thread, when the
// range is small, one thread is set or the call is already inside a parallel region); at::get_thread_num()
// inside f names the worker; an exception thrown by f is rethrown to the caller.
//
//   vocablens::detail::parallel_for(0, rows, 16, [&](int64_t b, int64_t e) {
//     for (int64_t r = b; r < e; ++r) scan_row(r);
//   });
#pragma once
#include <cstdint>
#include <functional>

namespace vocablens {
namespace detail {

void parallel_for(int64_t begin, int64_t end, int64_t grain, const std::function<void(int64_t, int64_t)>& f);

/// fn(0..workers-1) on `workers` new threads, joined; the first exception is rethrown. Inside each worker
/// OpenMP's per-thread count is 1, so BLAS calls there are single-threaded: for loops whose bodies call at::mm
/// (one long-lived worker per core instead of GEMMs split into small pieces). vocablens::parallel_workers
/// (vocablens/linalg/topk_stream.hpp) is this.
void parallel_workers(int workers, const std::function<void(int)>& fn);

/// For its lifetime, the calling thread's OpenMP thread count is 1 when `work` (the multiply-adds of what
/// follows) is below serial_work_limit(), and unchanged otherwise. A small model's decoding step or a short
/// prompt is hundreds of operations each far too small to split: every parallel region then costs waking a
/// second thread, and on a busy machine waiting for it while it is descheduled (measured: a 32-step generate
/// on a 3 M-parameter model took 40x the forward's CPU seconds on two threads). OpenMP's count is per
/// thread, so other threads (a server's workers, Python threads) are unaffected.
class SerialBelow {
 public:
  explicit SerialBelow(double work);
  ~SerialBelow();
  SerialBelow(const SerialBelow&) = delete;
  SerialBelow& operator=(const SerialBelow&) = delete;

 private:
  int prev_ = 0;  ///< the count to restore; 0: nothing was changed
};

/// The work (multiply-adds) below which SerialBelow runs one thread: 2e7 by default (docs/runner.md,
/// "Threads"); VOCABLENS_SERIAL_WORK=N sets it (0: never).
double serial_work_limit();

}  // namespace detail
}  // namespace vocablens

// MPI behind vocablens/dist.hpp; without VOCABLENS_HAVE_MPI every call is the one-process form.
#include "vocablens/dist.hpp"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

#ifdef VOCABLENS_HAVE_MPI
#include <mpi.h>
#endif

#include "vocablens/error.hpp"

namespace vocablens::dist {
namespace {

bool launched_by_mpirun(int& world) {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}) {
    if (const char* s = std::getenv(v)) {
      world = std::atoi(s);
      return true;
    }
  }
  return false;
}

bool g_active = false;
int g_rank = 0, g_size = 1;

#ifdef VOCABLENS_HAVE_MPI
void finalize_at_exit() {
  int fin = 0;
  MPI_Finalized(&fin);
  if (!fin) MPI_Finalize();
}
#endif

}  // namespace

void init() {
  if (g_active) return;
  int world = 1;
  if (!launched_by_mpirun(world)) return;
#ifdef VOCABLENS_HAVE_MPI
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) MPI_Init(nullptr, nullptr);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  g_active = true;
  std::atexit(finalize_at_exit);
#else
  if (world > 1)
    throw UsageError("launched by mpirun with " + std::to_string(world) +
                     " ranks, but this vocablens was built without MPI (install libopenmpi-dev and rebuild)");
#endif
}

int rank() { return g_rank; }
int size() { return g_size; }

void allreduce_sum(double* data, int64_t n) {
  if (g_size <= 1 || n == 0) return;
#ifdef VOCABLENS_HAVE_MPI
  MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(n), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
#endif
}

void allreduce_sum(float* data, int64_t n) {
  if (g_size <= 1 || n == 0) return;
#ifdef VOCABLENS_HAVE_MPI
  MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
#endif
}

std::vector<int64_t> allgather(const std::vector<int64_t>& mine) {
  if (g_size <= 1) return mine;
#ifdef VOCABLENS_HAVE_MPI
  const long long n = static_cast<long long>(mine.size());
  std::vector<long long> sizes(static_cast<size_t>(g_size));
  MPI_Allgather(&n, 1, MPI_LONG_LONG, sizes.data(), 1, MPI_LONG_LONG, MPI_COMM_WORLD);
  std::vector<int> counts(static_cast<size_t>(g_size)), displs(static_cast<size_t>(g_size));
  long long total = 0;
  for (int r = 0; r < g_size; ++r) {
    displs[static_cast<size_t>(r)] = static_cast<int>(std::min<long long>(total, 0x7fffffff));
    counts[static_cast<size_t>(r)] = static_cast<int>(std::min<long long>(sizes[static_cast<size_t>(r)], 0x7fffffff));
    total += sizes[static_cast<size_t>(r)];
  }
  // Every rank sees the same sizes, so every rank refuses together (none is left waiting in the gather).
  if (total > 0x7fffffff)
    throw UsageError("mpirun: " + std::to_string(total) + " entries to gather over the ranks, more than MPI's 2^31 - 1");
  std::vector<int64_t> out(static_cast<size_t>(total));
  static_assert(sizeof(long long) == sizeof(int64_t), "int64_t is long long's size");
  MPI_Allgatherv(mine.data(), static_cast<int>(n), MPI_LONG_LONG, out.data(), counts.data(), displs.data(), MPI_LONG_LONG,
                 MPI_COMM_WORLD);
  return out;
#else
  return mine;
#endif
}

int64_t allreduce_max(int64_t v) {
  if (g_size <= 1) return v;
#ifdef VOCABLENS_HAVE_MPI
  long long x = v;
  MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
  return x;
#else
  return v;
#endif
}

void barrier() {
#ifdef VOCABLENS_HAVE_MPI
  if (g_size > 1) MPI_Barrier(MPI_COMM_WORLD);
#endif
}

void abort_job(int code) {
#ifdef VOCABLENS_HAVE_MPI
  if (g_active && g_size > 1) {
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) MPI_Abort(MPI_COMM_WORLD, code != 0 ? code : 1);
  }
#else
  (void)code;
#endif
}

}  // namespace vocablens::dist

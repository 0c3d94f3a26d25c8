// vocablens/dist.hpp — work shared across processes with MPI (Debian's OpenMPI), or one process without it.
//
// `mpirun -np N vocablens lens --corpus ...` starts N copies of the binary; each is one rank. The CLI calls
// dist::init() at start: under mpirun (OMPI_COMM_WORLD_SIZE / PMI_SIZE in the environment) it initialises
// MPI, otherwise nothing happens and rank() == 0, size() == 1. Built without MPI (CMake found none), the
// same calls are one-process no-ops and init() refuses to run under mpirun with more than one rank.
//
//   vocablens::dist::init();                         // main(): once
//   if (vocablens::dist::rank() == 0) print(...);     // one rank prints and writes files
//   vocablens::dist::allreduce_sum(grad.data(), n);   // element-wise sum over ranks, result on every rank
//
// Reductions: allreduce_sum(double) of arrays whose entries are non-zero on at most one rank is exact (x + 0
// is x), which is how corpus statistics reduce to the one-process numbers bit for bit (vocablens/lens_corpus.hpp);
// float gradients are summed by MPI in an order of its choosing (equal within float32 rounding).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace vocablens::dist {

/// Initialises MPI when launched by mpirun; idempotent. Registers finalize() at exit.
void init();
int rank();
int size();
/// In-place element-wise sum over all ranks (no-op with one rank).
void allreduce_sum(double* data, int64_t n);
void allreduce_sum(float* data, int64_t n);
/// Every rank's `mine`, concatenated in rank order, on every rank (`mine` itself with one rank). Throws
/// UsageError when the whole would exceed 2^31 - 1 entries (MPI's counts are int).
std::vector<int64_t> allgather(const std::vector<int64_t>& mine);
/// Maximum over ranks (for "did any rank fail").
int64_t allreduce_max(int64_t v);
void barrier();
/// Ends the whole job when this process is one of several ranks: MPI_Abort(MPI_COMM_WORLD, code), so that a
/// rank that failed (bad input met only in its share of the work) does not leave the others waiting in a
/// reduction forever. With one rank (or without MPI) it returns and the caller exits as usual.
void abort_job(int code);

}  // namespace vocablens::dist

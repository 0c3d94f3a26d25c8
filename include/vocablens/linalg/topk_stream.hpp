// vocablens/linalg/topk_stream.hpp — exact top-k entries of a low-rank product A·B without materialising it.
//
// A [n, r] and B [r, m] are float32 (any strides); M = A·B is n×m and may be far too big to hold
// (a head's vocabulary-space circuit is V×V = 50257² ≈ 10 GB). topk_stream() returns the k largest
// entries of M exactly; topk_rows() the k largest entries of each row. Both stream tiles of M through
// one float32 GEMM per tile into a small reusable buffer and keep only what can still enter the top-k.
//
//   vocablens::TopkStreamOptions o;
//   o.k = 100;
//   o.exclude_diagonal = true;                 // drop (i, i): e.g. same-token pairs of a V×V circuit
//   o.cols = allowed_token_ids;                // restrict columns (rows likewise) inside the stream
//   auto top = vocablens::topk_stream(A, B, o); // [{i, j, value}, ...] best first
//
// Exactness and determinism (the contract):
//  * The value of entry (i, j) is canonical_dot(): Σ_k A[i,k]·B[k,j] accumulated in float64 in the order
//    k = 0..r-1 (each float32×float32 product is exact in float64). It does not depend on tiling, threads,
//    the BLAS library or the CPU, so results are reproducible bit for bit everywhere.
//  * Order is (value descending, i ascending, j ascending); ties are therefore broken deterministically.
//  * The float32 GEMM only filters: an entry is skipped when its float32 value is below the current k-th
//    best minus a rigorous bound on the float32-vs-canonical difference ((γ_r(f32) + γ_r(f64))·‖a_i‖·‖b_j‖,
//    standard dot-product error analysis, doubled for safety). Survivors are recomputed canonically.
//  * Pruning (on by default): rows and columns are visited in order of decreasing norm, and a whole row
//    block / column block is skipped when ‖a_i‖·‖b_j‖ (Cauchy–Schwarz) cannot reach the current k-th
//    best. Exact, since the bound is rigorous; it saves most of the work when norms vary a lot.
//  * Filters act inside the stream (before the heap), so the result is the exact top-k of the filtered
//    set, not a post-filtered top-k: row/column allow-lists (gathered away, so they also cut the GEMM),
//    the diagonal, equal-class pairs, and an arbitrary predicate evaluated on candidates only.
//  * Non-finite values in A or B are rejected (UsageError).
//
// Threads: at::get_num_threads() workers (or opts.threads), see parallel_workers(); each runs
// single-threaded GEMMs on its own tiles with its own bounded heap; a shared threshold (the best k-th value any worker has) lets every
// worker discard early. Memory: sorted copies of A and B (plus Bᵀ) and one block_rows×block_cols float
// buffer per worker; never n×m.
#pragma once
#include "vocablens/tensor_fwd.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

namespace vocablens {

/// One entry of M = A·B: row i, column j (indices into the original A rows / B columns), canonical value.
struct TopkEntry {
  int64_t i = 0;
  int64_t j = 0;
  double value = 0.0;
};

/// The total order of results: larger value first, then smaller i, then smaller j.
inline bool topk_better(const TopkEntry& a, const TopkEntry& b) {
  if (a.value != b.value) return a.value > b.value;
  if (a.i != b.i) return a.i < b.i;
  return a.j < b.j;
}

struct TopkStreamOptions {
  /// How many entries (topk_stream) or entries per row (topk_rows). Fewer are returned when fewer exist.
  int64_t k = 100;
  /// Allowed rows / columns (original indices, each in range, duplicates ignored); nullopt = all.
  /// topk_rows() returns one list per entry of `rows`, in this order.
  std::optional<std::vector<int64_t>> rows;
  std::optional<std::vector<int64_t>> cols;
  /// Drop entries with i == j (meaningful when rows and columns index the same set, e.g. tokens).
  bool exclude_diagonal = false;
  /// When both are non-empty (sizes n and m): drop (i, j) if row_class[i] == col_class[j] and it is >= 0.
  /// E.g. "same token up to case and leading space" as one class id per token.
  std::vector<int64_t> row_class, col_class;
  /// Optional predicate: keep (i, j) only if it returns true. Called only for entries that could enter
  /// the top-k (rare), possibly from several threads at once: it must be thread-safe.
  std::function<bool(int64_t i, int64_t j)> keep_pair;
  /// Tile shape (0 = automatic: 256 rows × 1024 columns, 1 MB: a tile stays in a core's L2 cache).
  int64_t block_rows = 0;
  int64_t block_cols = 0;
  /// Worker threads (0 = at::get_num_threads()).
  int threads = 0;
  /// Norm-bound pruning (exact; see above). Off only to measure the full streaming cost.
  bool prune = true;
  /// topk_stream's screen: true = a register-blocked product whose 8 x 32 result blocks are compared with
  /// the rows' thresholds in registers, never written (used where the CPU has AVX-512F and block_cols is a
  /// multiple of 32); false = BLAS tiles written to memory, then scanned. Same entries either way.
  bool fused_screen = true;
};

/// What a stream did (for benchmarks and --verbose output).
struct TopkStreamStats {
  int64_t rows = 0, cols = 0, rank = 0;  ///< after allow-lists
  double dense_flops = 0;                ///< 2·rows·cols·rank: the cost of the full product
  double gemm_flops = 0;                 ///< flops of the GEMMs actually run (less when pruning)
  int64_t tiles = 0;                     ///< tiles multiplied
  int64_t tiles_pruned = 0;              ///< tiles skipped by the norm bound
  int64_t candidates = 0;                ///< entries recomputed canonically
  double seconds = 0;                    ///< wall time of the stream (excluding nothing)
};

/// The k largest entries of A·B over allowed rows × allowed columns minus the filtered pairs, best first
/// (see topk_better). A: float32 [n, r]; B: float32 [r, m]. Throws UsageError on bad shapes, dtypes,
/// out-of-range indices or non-finite values.
std::vector<TopkEntry> topk_stream(const at::Tensor& A, const at::Tensor& B, const TopkStreamOptions& opts,
                                   TopkStreamStats* stats = nullptr);

/// For every allowed row i (in opts.rows order, or 0..n-1): the k largest entries of row i of A·B over
/// allowed columns minus filtered pairs, best first. Same value definition and order as topk_stream.
std::vector<std::vector<TopkEntry>> topk_rows(const at::Tensor& A, const at::Tensor& B, const TopkStreamOptions& opts,
                                              TopkStreamStats* stats = nullptr);

/// Runs fn(0..workers-1) on `workers` new threads and waits; rethrows the first exception. Inside each
/// worker, BLAS calls (at::mm) are single-threaded (OpenMP's per-thread thread count is set to 1), so the
/// workers never oversubscribe the cores. Use this instead of a parallel_for for loops that call at::mm: one
/// long-lived worker per core, each GEMM whole on its thread, instead of every GEMM split over every core.
void parallel_workers(int workers, const std::function<void(int)>& fn);

/// The canonical value of one entry: Σ_k a[k·sa]·b[k·sb] in float64, k ascending (see above).
double canonical_dot(const float* a, int64_t sa, const float* b, int64_t sb, int64_t r);

/// Reference implementation for tests and benchmarks: materialises every allowed entry canonically
/// (n·m doubles — small inputs only) and sorts. Same filters, same result as topk_stream (bit for bit).
std::vector<TopkEntry> topk_bruteforce(const at::Tensor& A, const at::Tensor& B, const TopkStreamOptions& opts);

}  // namespace vocablens

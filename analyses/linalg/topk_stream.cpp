// Exact streamed top-k of a low-rank product (see include/vocablens/linalg/topk_stream.hpp for the contract).
#include "vocablens/linalg/topk_stream.hpp"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>

#include "screen_kernels.hpp"
#include "vocablens/error.hpp"
#include "vocablens/nonfinite.hpp"
#include "util/parallel.hpp"

namespace vocablens {

void parallel_workers(int workers, const std::function<void(int)>& fn) { detail::parallel_workers(workers, fn); }

double canonical_dot(const float* a, int64_t sa, const float* b, int64_t sb, int64_t r) {
  // Each float32 x float32 product is exact in float64 (24 + 24 <= 53 significant bits), so a fused
  // multiply-add, if the compiler chose one, gives the same result: the value depends only on this order.
  double s = 0.0;
  for (int64_t k = 0; k < r; ++k) s += static_cast<double>(a[k * sa]) * static_cast<double>(b[k * sb]);
  return s;
}

namespace {

using detail::fused_screen_available;
using detail::pack_col_panels;
using detail::pack_row_block;
using detail::scan_ge;
using detail::screen_block;
constexpr int64_t kMR = detail::kScreenRows, kNR = detail::kScreenCols;

constexpr double kInf = std::numeric_limits<double>::infinity();

// The largest float <= x (x finite or -inf).
float float_at_most(double x) {
  if (std::isnan(x)) return -std::numeric_limits<float>::infinity();
  float f = static_cast<float>(x);
  if (static_cast<double>(f) > x) f = std::nextafter(f, -std::numeric_limits<float>::infinity());
  return f;
}

double gamma(int64_t r, double u) {
  double ru = static_cast<double>(r) * u;
  return ru / (1.0 - ru);
}

// A bounded heap of the k best entries; front() is the worst kept.
struct Heap {
  int64_t k = 0;
  std::vector<TopkEntry> h;
  static bool cmp(const TopkEntry& a, const TopkEntry& b) { return topk_better(a, b); }
  bool full() const { return static_cast<int64_t>(h.size()) >= k; }
  double threshold() const { return full() && k > 0 ? h.front().value : -kInf; }
  // True when kept.
  bool offer(const TopkEntry& e) {
    if (k <= 0) return false;
    if (!full()) {
      h.push_back(e);
      std::push_heap(h.begin(), h.end(), cmp);
      return true;
    }
    if (!topk_better(e, h.front())) return false;
    std::pop_heap(h.begin(), h.end(), cmp);
    h.back() = e;
    std::push_heap(h.begin(), h.end(), cmp);
    return true;
  }
  std::vector<TopkEntry> sorted() const {
    auto v = h;
    std::sort(v.begin(), v.end(), topk_better);
    return v;
  }
};

void update_max(std::atomic<double>& a, double v) {
  double cur = a.load(std::memory_order_relaxed);
  while (v > cur && !a.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {}
}

// Inputs after validation, allow-lists, and (optionally) sorting by norm.
struct Prepared {
  int64_t n = 0, m = 0, r = 0;
  std::vector<int64_t> orow, ocol;  // position -> original index
  std::vector<double> rn, cn;       // norms, same positions
  at::Tensor As;                    // [n, r] float32 contiguous
  at::Tensor Bs;                    // [r, m] float32 contiguous
  at::Tensor Bt;                    // [m, r] float32 contiguous (canonical recomputation reads rows)
  double err_c = 0;                 // |float GEMM - canonical| <= err_c * rn * cn + abs_slack
  double bound_c = 0;               // |canonical| <= bound_c * rn * cn + abs_slack
  double abs_slack = 0;
  int64_t full_n = 0, full_m = 0;  // original sizes
};

void check_operands(const at::Tensor& A, const at::Tensor& B) {
  if (!A.defined() || !B.defined()) throw UsageError("topk_stream: undefined operand");
  if (A.dim() != 2 || B.dim() != 2)
    throw UsageError("topk_stream: A and B must be matrices (got " + std::to_string(A.dim()) + "-d and " +
                     std::to_string(B.dim()) + "-d)");
  if (A.size(1) != B.size(0))
    throw UsageError("topk_stream: inner sizes differ (A is [" + std::to_string(A.size(0)) + ", " + std::to_string(A.size(1)) +
                     "], B is [" + std::to_string(B.size(0)) + ", " + std::to_string(B.size(1)) + "])");
  if (A.scalar_type() != at::kFloat || B.scalar_type() != at::kFloat) throw UsageError("topk_stream: operands must be float32");
  if (A.numel() > 0 && !all_finite(A)) throw UsageError("topk_stream: A has non-finite values");
  if (B.numel() > 0 && !all_finite(B)) throw UsageError("topk_stream: B has non-finite values");
}

std::vector<int64_t> selection(const std::optional<std::vector<int64_t>>& sel, int64_t n, const char* what, bool dedupe) {
  std::vector<int64_t> out;
  if (!sel) {
    out.resize(static_cast<size_t>(n));
    std::iota(out.begin(), out.end(), int64_t{0});
    return out;
  }
  out = *sel;
  for (int64_t v : out)
    if (v < 0 || v >= n)
      throw UsageError(std::string("topk_stream: ") + what + " index " + std::to_string(v) + " out of range [0, " +
                       std::to_string(n) + ")");
  if (dedupe) {
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
  }
  return out;
}

void check_filters(const TopkStreamOptions& o, int64_t n, int64_t m) {
  if (o.k < 0) throw UsageError("topk_stream: k must be >= 0");
  if (!o.row_class.empty() || !o.col_class.empty()) {
    if (static_cast<int64_t>(o.row_class.size()) != n || static_cast<int64_t>(o.col_class.size()) != m)
      throw UsageError("topk_stream: row_class / col_class must have one entry per row / column");
  }
  if (o.block_rows < 0 || o.block_cols < 0) throw UsageError("topk_stream: block sizes must be >= 0");
}

std::vector<double> norms(const at::Tensor& X, int64_t dim) {
  at::Tensor nrm = X.to(at::kDouble).pow(2).sum(dim).sqrt().contiguous();
  const double* p = nrm.data_ptr<double>();
  return std::vector<double>(p, p + nrm.numel());
}

Prepared prepare(const at::Tensor& A, const at::Tensor& B, const TopkStreamOptions& o, bool sort_rows, bool dedupe_rows) {
  check_operands(A, B);
  Prepared p;
  p.full_n = A.size(0);
  p.full_m = B.size(1);
  p.r = A.size(1);
  check_filters(o, p.full_n, p.full_m);
  std::vector<int64_t> rows = selection(o.rows, p.full_n, "row", dedupe_rows);
  std::vector<int64_t> cols = selection(o.cols, p.full_m, "column", true);
  std::vector<double> rn_all = norms(A, 1), cn_all = norms(B, 0);
  if (o.prune) {
    // Decreasing norm, then increasing index (deterministic).
    if (sort_rows) std::stable_sort(rows.begin(), rows.end(), [&](int64_t a, int64_t b) { return rn_all[a] > rn_all[b]; });
    std::stable_sort(cols.begin(), cols.end(), [&](int64_t a, int64_t b) { return cn_all[a] > cn_all[b]; });
  }
  p.n = static_cast<int64_t>(rows.size());
  p.m = static_cast<int64_t>(cols.size());
  p.orow = rows;
  p.ocol = cols;
  p.rn.resize(rows.size());
  p.cn.resize(cols.size());
  for (size_t i = 0; i < rows.size(); ++i) p.rn[i] = rn_all[rows[i]];
  for (size_t j = 0; j < cols.size(); ++j) p.cn[j] = cn_all[cols[j]];
  at::Tensor ri = at::tensor(rows, at::kLong), ci = at::tensor(cols, at::kLong);
  p.As = A.index_select(0, ri).contiguous();
  p.Bs = B.index_select(1, ci).contiguous();
  p.Bt = p.Bs.t().contiguous();
  // Error analysis (Higham, "Accuracy and Stability of Numerical Algorithms", §3.1): any float32 summation
  // order gives |fl(a·b) - a·b| <= γ_r(2^-24) Σ|a_k b_k|, the canonical float64 sum likewise with 2^-53,
  // and Σ|a_k b_k| <= ‖a‖‖b‖. Doubled for safety; norms are float64 (relative error ~1e-15, absorbed).
  p.err_c = 2.0 * (gamma(p.r, std::ldexp(1.0, -24)) + gamma(p.r, std::ldexp(1.0, -53))) + 1e-12;
  p.bound_c = 1.0 + 2.0 * gamma(p.r, std::ldexp(1.0, -53)) + 1e-12;
  // Underflow (subnormal products, or flush-to-zero in the BLAS): at most 2^-126 per product and input.
  double amax = p.As.numel() ? p.As.abs().max().item<double>() : 0.0;
  double bmax = p.Bs.numel() ? p.Bs.abs().max().item<double>() : 0.0;
  p.abs_slack = 4.0 * static_cast<double>(p.r) * std::ldexp(1.0, -126) * (1.0 + amax) * (1.0 + bmax);
  return p;
}

struct Filter {
  const TopkStreamOptions& o;
  bool classes;
  explicit Filter(const TopkStreamOptions& opts) : o(opts), classes(!opts.row_class.empty()) {}
  bool keep(int64_t i, int64_t j) const {
    if (o.exclude_diagonal && i == j) return false;
    if (classes) {
      int64_t c = o.row_class[static_cast<size_t>(i)];
      if (c >= 0 && c == o.col_class[static_cast<size_t>(j)]) return false;
    }
    if (o.keep_pair && !o.keep_pair(i, j)) return false;
    return true;
  }
};

int worker_count(const TopkStreamOptions& o, int64_t work_items) {
  int t = o.threads > 0 ? o.threads : at::get_num_threads();
  if (t < 1) t = 1;
  if (work_items < t) t = static_cast<int>(std::max<int64_t>(work_items, 1));
  return t;
}

int64_t auto_rows(const TopkStreamOptions& o) { return o.block_rows > 0 ? o.block_rows : 256; }
int64_t auto_cols(const TopkStreamOptions& o) { return o.block_cols > 0 ? o.block_cols : 1024; }

// The tiles both kernels cut the product into: br rows x bc columns, and the largest column norm per column tile
// (the first one when columns are sorted).
struct Tiling {
  int64_t br = 0, bc = 0, row_tiles = 0, col_tiles = 0;
  std::vector<double> cmax;
};

Tiling tiling(const Prepared& p, const TopkStreamOptions& opts) {
  Tiling t;
  t.br = std::min<int64_t>(auto_rows(opts), std::max<int64_t>(p.n, 1));
  t.bc = std::min<int64_t>(auto_cols(opts), std::max<int64_t>(p.m, 1));
  t.row_tiles = (p.n + t.br - 1) / t.br;
  t.col_tiles = (p.m + t.bc - 1) / t.bc;
  t.cmax.assign(static_cast<size_t>(t.col_tiles), 0.0);
  for (int64_t j = 0; j < p.m; ++j) t.cmax[j / t.bc] = std::max(t.cmax[j / t.bc], p.cn[j]);
  return t;
}

// a += v for an atomic double (no fetch_add for floating point before C++20).
void add_to(std::atomic<double>& a, double v) {
  double cur = a.load();
  while (!a.compare_exchange_weak(cur, cur + v)) {}
}

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// The stream's counters, for the caller's TopkStreamStats (both stream variants report the same way).
void fill_stats(TopkStreamStats& st, int64_t n, int64_t m, int64_t r, double gemm_flops, int64_t tiles, int64_t all_tiles,
                int64_t candidates, double t_start) {
  st.rows = n;
  st.cols = m;
  st.rank = r;
  st.dense_flops = 2.0 * static_cast<double>(n) * static_cast<double>(m) * static_cast<double>(r);
  st.gemm_flops = gemm_flops;
  st.tiles = tiles;
  st.tiles_pruned = all_tiles - tiles;
  st.candidates = candidates;
  st.seconds = now_s() - t_start;
}

}  // namespace

std::vector<TopkEntry> topk_stream(const at::Tensor& A, const at::Tensor& B, const TopkStreamOptions& opts,
                                   TopkStreamStats* stats) {
  double t_start = now_s();
  at::NoGradGuard no_grad;
  Prepared p = prepare(A, B, opts, /*sort_rows=*/true, /*dedupe_rows=*/true);
  const int64_t n = p.n, m = p.m, r = p.r;
  const Tiling tl = tiling(p, opts);
  const int64_t br = tl.br, bc = tl.bc, row_tiles = tl.row_tiles, col_tiles = tl.col_tiles;
  const std::vector<double>& tile_cmax = tl.cmax;
  std::vector<double> tile_rmax(static_cast<size_t>(row_tiles), 0.0);
  for (int64_t i = 0; i < n; ++i) tile_rmax[i / br] = std::max(tile_rmax[i / br], p.rn[i]);

  Filter filter(opts);
  std::atomic<int64_t> next_tile{0};
  std::atomic<bool> stop{false};
  std::atomic<double> global_thr{-kInf};
  std::atomic<int64_t> n_tiles{0}, n_candidates{0};
  std::atomic<double> flops{0};
  std::mutex merge_mu;
  std::vector<TopkEntry> merged;
  const bool prune = opts.prune;
  const float* As = p.As.data_ptr<float>();
  const float* Bt = p.Bt.data_ptr<float>();

  // The fused screen's inputs: B in column panels (as large as B, packed once), tiles whole panels wide.
  const bool fused = opts.fused_screen && bc % kNR == 0 && fused_screen_available();
  const at::Tensor panels = fused ? pack_col_panels(p.Bs) : at::Tensor();
  const float* Bp = fused ? panels.data_ptr<float>() : nullptr;

  auto fused_worker = [&](int) {
    Heap heap;
    heap.k = opts.k;
    std::vector<float> apack(static_cast<size_t>((br + kMR - 1) / kMR * kMR * r));
    float vals[kMR * kNR];
    uint32_t masks[kMR];
    float tf[kMR];
    double margin[kMR];
    int64_t my_tiles = 0, my_cand = 0;
    double my_flops = 0;
    auto thr_now = [&] { return std::max(heap.threshold(), global_thr.load(std::memory_order_relaxed)); };
    while (!stop.load(std::memory_order_relaxed)) {
      int64_t t = next_tile.fetch_add(1);
      if (t >= row_tiles) break;
      const int64_t i0 = t * br, bi = std::min(br, n - i0), blocks = (bi + kMR - 1) / kMR;
      if (prune && p.bound_c * tile_rmax[t] * p.cn.front() + p.abs_slack < thr_now()) {
        stop = true;  // rows are sorted by norm: every later tile is bounded lower still
        break;
      }
      for (int64_t b = 0; b < blocks; ++b)
        pack_row_block(As + (i0 + b * kMR) * r, r, std::min(kMR, bi - b * kMR), apack.data() + b * kMR * r);
      for (int64_t ct = 0; ct < col_tiles; ++ct) {
        const int64_t j0 = ct * bc, cj = std::min(bc, m - j0);
        if (prune && p.bound_c * tile_rmax[t] * tile_cmax[ct] + p.abs_slack < thr_now()) break;
        ++my_tiles;
        my_flops += 2.0 * static_cast<double>(bi) * static_cast<double>(cj) * static_cast<double>(r);
        for (int64_t b = 0; b < blocks; ++b) {
          const int64_t ib = i0 + b * kMR, rows = std::min(kMR, bi - b * kMR);
          double thr = thr_now();
          // Rows are sorted by norm: the rest of this tile is bounded lower still.
          if (prune && p.bound_c * p.rn[ib] * tile_cmax[ct] + p.abs_slack < thr) break;
          // A row that cannot reach the heap (or is past the tile) gets +inf: nothing passes it.
          auto set_thresholds = [&] {
            for (int64_t ii = 0; ii < kMR; ++ii) {
              const bool live = ii < rows && !(prune && p.bound_c * p.rn[ib + ii] * tile_cmax[ct] + p.abs_slack < thr);
              margin[ii] = live ? p.err_c * p.rn[ib + ii] * tile_cmax[ct] + p.abs_slack : 0.0;
              tf[ii] = live ? float_at_most(thr - margin[ii]) : std::numeric_limits<float>::infinity();
            }
          };
          set_thresholds();
          for (int64_t q = j0 / kNR, qe = (j0 + cj + kNR - 1) / kNR; q < qe; ++q) {
            const int64_t c0 = q * kNR, w = std::min(kNR, j0 + cj - c0);
            const uint32_t colmask = w == kNR ? 0xffffffffu : ((1u << w) - 1u);
            if (!screen_block(apack.data() + b * kMR * r, Bp + q * r * kNR, r, tf, colmask, masks, vals)) continue;
            for (int64_t ii = 0; ii < rows; ++ii) {
              const int64_t i = ib + ii;
              const float* arow = As + i * r;
              for (uint32_t mk = masks[ii]; mk; mk &= mk - 1) {
                const int64_t c = __builtin_ctz(mk), jj = c0 + c;
                if (vals[ii * kNR + c] < tf[ii]) continue;  // the threshold rose since the screen
                const int64_t oi = p.orow[i], oj = p.ocol[jj];
                if (!filter.keep(oi, oj)) continue;
                ++my_cand;
                double s = canonical_dot(arow, 1, Bt + jj * r, 1, r);
                if (s < thr) continue;
                if (heap.offer({oi, oj, s}) && heap.full()) {
                  update_max(global_thr, heap.threshold());
                  thr = thr_now();
                  set_thresholds();
                }
              }
            }
          }
        }
      }
    }
    n_tiles += my_tiles;
    n_candidates += my_cand;
    add_to(flops, my_flops);
    std::lock_guard<std::mutex> lk(merge_mu);
    merged.insert(merged.end(), heap.h.begin(), heap.h.end());
  };

  auto blas_worker = [&](int) {
    Heap heap;
    heap.k = opts.k;
    std::vector<float> buf(static_cast<size_t>(br * bc));
    std::vector<int32_t> idx(static_cast<size_t>(bc));
    int64_t my_tiles = 0, my_cand = 0;
    double my_flops = 0;
    auto thr_now = [&] { return std::max(heap.threshold(), global_thr.load(std::memory_order_relaxed)); };
    while (!stop.load(std::memory_order_relaxed)) {
      int64_t t = next_tile.fetch_add(1);
      if (t >= row_tiles) break;
      const int64_t i0 = t * br, bi = std::min(br, n - i0);
      if (prune && p.bound_c * tile_rmax[t] * p.cn.front() + p.abs_slack < thr_now()) {
        stop = true;  // rows are sorted by norm: every later tile is bounded lower still
        break;
      }
      at::Tensor a_blk = p.As.narrow(0, i0, bi);
      for (int64_t ct = 0; ct < col_tiles; ++ct) {
        const int64_t j0 = ct * bc, cj = std::min(bc, m - j0);
        // Columns are sorted by norm: later column tiles are bounded lower still.
        if (prune && p.bound_c * tile_rmax[t] * tile_cmax[ct] + p.abs_slack < thr_now()) break;
        at::Tensor out = at::from_blob(buf.data(), {bi, cj}, at::TensorOptions().dtype(at::kFloat));
        at::mm_out(out, a_blk, p.Bs.narrow(1, j0, cj));
        ++my_tiles;
        my_flops += 2.0 * static_cast<double>(bi) * static_cast<double>(cj) * static_cast<double>(r);
        for (int64_t ii = 0; ii < bi; ++ii) {
          const int64_t i = i0 + ii;
          double thr = thr_now();
          // Rows are sorted by norm: the rest of this tile is bounded lower still.
          if (prune && p.bound_c * p.rn[i] * tile_cmax[ct] + p.abs_slack < thr) break;
          const double margin = p.err_c * p.rn[i] * tile_cmax[ct] + p.abs_slack;
          float tf = float_at_most(thr - margin);
          const float* row = buf.data() + ii * cj;
          int64_t cnt = scan_ge(row, cj, tf, idx.data());
          const float* arow = As + i * r;
          for (int64_t q = 0; q < cnt; ++q) {
            const int64_t jj = j0 + idx[q];
            if (row[idx[q]] < tf) continue;  // the threshold rose since the scan
            const int64_t oi = p.orow[i], oj = p.ocol[jj];
            if (!filter.keep(oi, oj)) continue;
            ++my_cand;
            double s = canonical_dot(arow, 1, Bt + jj * r, 1, r);
            if (s < thr) continue;
            if (heap.offer({oi, oj, s}) && heap.full()) {
              update_max(global_thr, heap.threshold());
              thr = thr_now();
              tf = float_at_most(thr - margin);
            }
          }
        }
      }
    }
    n_tiles += my_tiles;
    n_candidates += my_cand;
    add_to(flops, my_flops);
    std::lock_guard<std::mutex> lk(merge_mu);
    merged.insert(merged.end(), heap.h.begin(), heap.h.end());
  };

  if (opts.k > 0 && n > 0 && m > 0) {
    if (fused) parallel_workers(worker_count(opts, row_tiles), fused_worker);
    else parallel_workers(worker_count(opts, row_tiles), blas_worker);
  }
  std::sort(merged.begin(), merged.end(), topk_better);
  if (static_cast<int64_t>(merged.size()) > opts.k) merged.resize(static_cast<size_t>(opts.k));
  if (stats) fill_stats(*stats, n, m, r, flops.load(), n_tiles.load(), row_tiles * col_tiles, n_candidates.load(), t_start);
  return merged;
}

std::vector<std::vector<TopkEntry>> topk_rows(const at::Tensor& A, const at::Tensor& B, const TopkStreamOptions& opts,
                                              TopkStreamStats* stats) {
  double t_start = now_s();
  at::NoGradGuard no_grad;
  Prepared p = prepare(A, B, opts, /*sort_rows=*/false, /*dedupe_rows=*/false);
  const int64_t n = p.n, m = p.m, r = p.r;
  const Tiling tl = tiling(p, opts);
  const int64_t br = tl.br, bc = tl.bc, row_tiles = tl.row_tiles, col_tiles = tl.col_tiles;
  const std::vector<double>& tile_cmax = tl.cmax;

  Filter filter(opts);
  std::vector<std::vector<TopkEntry>> result(static_cast<size_t>(n));
  std::atomic<int64_t> next_tile{0}, n_tiles{0}, n_candidates{0};
  std::atomic<double> flops{0};
  const bool prune = opts.prune;
  const float* As = p.As.data_ptr<float>();
  const float* Bt = p.Bt.data_ptr<float>();

  auto worker = [&](int) {
    std::vector<float> buf(static_cast<size_t>(br * bc));
    std::vector<int32_t> idx(static_cast<size_t>(bc));
    std::vector<Heap> heaps(static_cast<size_t>(br));
    int64_t my_tiles = 0, my_cand = 0;
    double my_flops = 0;
    for (;;) {
      int64_t t = next_tile.fetch_add(1);
      if (t >= row_tiles) break;
      const int64_t i0 = t * br, bi = std::min(br, n - i0);
      for (int64_t ii = 0; ii < bi; ++ii) {
        heaps[ii].k = opts.k;
        heaps[ii].h.clear();
      }
      at::Tensor a_blk = p.As.narrow(0, i0, bi);
      for (int64_t ct = 0; ct < col_tiles; ++ct) {
        const int64_t j0 = ct * bc, cj = std::min(bc, m - j0);
        if (prune) {
          // Columns are sorted by norm: once no row of the block can gain, no later column tile can either.
          bool needed = false;
          for (int64_t ii = 0; ii < bi && !needed; ++ii)
            needed = p.bound_c * p.rn[i0 + ii] * tile_cmax[ct] + p.abs_slack >= heaps[ii].threshold();
          if (!needed) break;
        }
        at::Tensor out = at::from_blob(buf.data(), {bi, cj}, at::TensorOptions().dtype(at::kFloat));
        at::mm_out(out, a_blk, p.Bs.narrow(1, j0, cj));
        ++my_tiles;
        my_flops += 2.0 * static_cast<double>(bi) * static_cast<double>(cj) * static_cast<double>(r);
        for (int64_t ii = 0; ii < bi; ++ii) {
          const int64_t i = i0 + ii;
          Heap& heap = heaps[ii];
          double thr = heap.threshold();
          if (prune && p.bound_c * p.rn[i] * tile_cmax[ct] + p.abs_slack < thr) continue;
          const double margin = p.err_c * p.rn[i] * tile_cmax[ct] + p.abs_slack;
          float tf = float_at_most(thr - margin);
          const float* row = buf.data() + ii * cj;
          int64_t cnt = scan_ge(row, cj, tf, idx.data());
          const float* arow = As + i * r;
          const int64_t oi = p.orow[i];
          for (int64_t q = 0; q < cnt; ++q) {
            const int64_t jj = j0 + idx[q];
            if (row[idx[q]] < tf) continue;
            const int64_t oj = p.ocol[jj];
            if (!filter.keep(oi, oj)) continue;
            ++my_cand;
            double s = canonical_dot(arow, 1, Bt + jj * r, 1, r);
            if (s < thr) continue;
            if (heap.offer({oi, oj, s}) && heap.full()) {
              thr = heap.threshold();
              tf = float_at_most(thr - margin);
            }
          }
        }
      }
      for (int64_t ii = 0; ii < bi; ++ii) result[static_cast<size_t>(i0 + ii)] = heaps[ii].sorted();
    }
    n_tiles += my_tiles;
    n_candidates += my_cand;
    add_to(flops, my_flops);
  };

  if (n > 0 && m > 0 && opts.k > 0) parallel_workers(worker_count(opts, row_tiles), worker);
  if (stats) fill_stats(*stats, n, m, r, flops.load(), n_tiles.load(), row_tiles * col_tiles, n_candidates.load(), t_start);
  return result;
}

namespace {
// row[c] = Σ_k a[k]·bd[k * nc + c], accumulated in float64 for k = 0..r-1 in this order: canonical_dot's value
// for every column c, computed for all columns at once. Cloned for AVX-512 and AVX2 (wider vectors across
// columns; a fused multiply-add gives the same sums, each float32 x float32 product being exact in float64).
__attribute__((target_clones("avx512f", "avx2", "default"))) void canonical_row(const float* a, const double* bd, int64_t r,
                                                                                int64_t nc, double* row) {
  for (int64_t c = 0; c < nc; ++c) row[c] = 0.0;
  for (int64_t k = 0; k < r; ++k) {
    const double ak = static_cast<double>(a[k]);
    const double* bk = bd + k * nc;
    for (int64_t c = 0; c < nc; ++c) row[c] += ak * bk[c];
  }
}
}  // namespace

std::vector<TopkEntry> topk_bruteforce(const at::Tensor& A, const at::Tensor& B, const TopkStreamOptions& opts) {
  check_operands(A, B);
  check_filters(opts, A.size(0), B.size(1));
  std::vector<int64_t> rows = selection(opts.rows, A.size(0), "row", true);
  std::vector<int64_t> cols = selection(opts.cols, B.size(1), "column", true);
  at::Tensor Ac = A.contiguous();
  const float* a = Ac.data_ptr<float>();
  const int64_t r = A.size(1), nc = static_cast<int64_t>(cols.size());
  // The allowed columns of B in float64, k-major: bd[k * nc + c] = B[k, cols[c]] (exact conversions).
  at::Tensor Bsel = B.index_select(1, at::tensor(cols, at::kLong)).to(at::kDouble).contiguous();
  const double* bd = Bsel.data_ptr<double>();
  Filter filter(opts);
  Heap heap;
  heap.k = opts.k;
  // One row of canonical values at a time: row[c] accumulates a[i,k]·b[k,c] for k = 0..r-1 in this order,
  // exactly canonical_dot's sum, but independent across c (the compiler vectorises over columns instead
  // of waiting on one serial chain of r additions per entry: ~10x faster at r = 16).
  std::vector<double> row(static_cast<size_t>(nc));
  for (int64_t i : rows) {
    canonical_row(a + i * r, bd, r, nc, row.data());
    for (int64_t c = 0; c < nc; ++c) {
      const double v = row[static_cast<size_t>(c)];
      if (heap.full() && v < heap.threshold()) continue;  // cannot enter: saves the filter and the heap
      const int64_t j = cols[static_cast<size_t>(c)];
      if (!filter.keep(i, j)) continue;
      heap.offer({i, j, v});
    }
  }
  return heap.sorted();
}

}  // namespace vocablens

// The int8 screen of the feature logit weights (docs/features.md, "How the screen stays exact"): its scans,
// bounds and the per-thread screened pass that analyses/features.cpp calls where oneDNN is exact. The numbers
// it screens with (int8 rounding, W_U quantised and packed once per pass) come from features_int8_quant.cpp.
#include "features_int8.hpp"
#include "vocablens/features.hpp"

#include <ATen/Parallel.h>
#include <immintrin.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "vocablens/error.hpp"
#include "vocablens/hooks.hpp"
#include "vocablens/model.hpp"
#include "vocablens/sae.hpp"
#include "vocablens/tokenizer.hpp"
#include "vocablens/unembed.hpp"
#include "vocablens/weight.hpp"

#include "features_int8_quant.hpp"
#include "int8_gemm.hpp"
#include "util/parallel.hpp"

namespace vocablens {
namespace {

// ---- the int8 screen (docs/features.md, "How the screen stays exact") ----
//
// Notation for one decoder row x [r] (float32, after the norm scale) and one unembedding column p [r]:
//   x = s_x·a + e_x,  a ∈ int8^r, s_x = max|x_i| / 127, e_x the rounding residual (its norm in float64);
//   p = s_p·b + e_p,  likewise per column;
//   C = a·b, exact in int32 (int8_gemm.hpp); the screened value, in units of s_x, is s = fl(fl(C)·s_p).
// Then x·p − s_x s_p C = x·e_p + e_x·p − e_x·e_p, so by Cauchy–Schwarz
//   |x·p − s_x s_p C| ≤ ‖x‖‖e_p‖ + ‖e_x‖‖p‖ + ‖e_x‖‖e_p‖                            (quantisation)
//   |s_x s_p C| ≤ ‖s_x a‖‖s_p b‖ ≤ (‖x‖ + ‖e_x‖)(‖p‖ + ‖e_p‖)                         (what float32 rounds)
//   |canonical − x·p| ≤ γ_r(2^-53)·‖x‖‖p‖                                             (float64 sum in order)
// Computing s, b and s ± b in float32 costs at most a few roundings of relative size u = 2^-24 on numbers no
// larger than |s_p C| + b; 8u·(‖x‖ + ‖e_x‖)(‖p‖ + ‖e_p‖)/s_x covers them, 2^-145 covers underflow. So with
//   b(v) = al·‖e_p‖ + be·‖p‖ + tau,  al = (‖x‖ + ‖e_x‖)(1 + 8u)/s_x,  be = (‖e_x‖ + 8u(‖x‖ + ‖e_x‖) + γ_r(2^-53)‖x‖)/s_x
// (al, be and the column norms rounded up, times 1 + 1e-5 for the float64 rounding of the norms), every token's
// canonical value lies in s_x·[lo, hi] with lo = s − b, hi = s + b as computed. If T is the k-th largest lo of
// the row, k tokens have canonical ≥ s_x·T, so a token with hi < T is below k others: it cannot be in the top k
// nor tie with the k-th. The survivors (hi ≥ T; at the bottom lo ≤ the k-th smallest hi) are recomputed in
// float32, error ≤ (γ_r(u) + γ_r(2^-53))·‖x‖‖p‖ (+ underflow), the same argument removes those whose upper
// bound is below the k-th largest lower bound, and the finalists are computed canonically and sorted: the lists
// are those of the canonical values of all tokens.

constexpr double kU32 = 0x1p-24;
constexpr double kTiny = 0x1p-147;  // covers float32 underflow in one product or conversion
constexpr double kBig = 1e30;       // ‖x‖‖p‖ above this: float32 dots could overflow
constexpr double kF = 8 * kU32;     // float32 evaluation of s, b, s ± b (see the top comment)

struct Cand {
  int32_t j;
  float lo, hi;  // bounds on the token's canonical value, in units of s_x
};

// One row's candidates at one end, and the running threshold that admits them. Top end: key = lo, and a token
// is admitted when hi >= thr; bottom end (the mirror, negated): key = −hi, admitted when −lo >= thr. `heap`
// holds the k largest keys offered so far (a min-heap), thr its smallest once it holds k: the k-th largest lower
// bound (top) among the tokens admitted so far, which is never above the row's final k-th largest lower bound
// (a subset's k-th largest is no larger) and ends equal to it (a token whose lo reaches the final threshold
// passes every earlier threshold, so it is admitted and offered).
struct Keep {
  std::vector<Cand> c;
  std::vector<float> heap;
  float thr;
  size_t lim;
  void reset(size_t k, bool on) {
    c.clear();
    heap.clear();
    heap.reserve(k);
    thr = on ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
    lim = 2 * k + 256;
  }
  void offer(float key, size_t k) {
    if (heap.size() < k) {
      heap.push_back(key);
      std::push_heap(heap.begin(), heap.end(), std::greater<float>());
      if (heap.size() == k) thr = heap.front();
    } else if (key > heap.front()) {
      std::pop_heap(heap.begin(), heap.end(), std::greater<float>());
      heap.back() = key;
      std::push_heap(heap.begin(), heap.end(), std::greater<float>());
      thr = heap.front();
    }
  }
  // Drops the candidates the current threshold excludes (all of them, or once the list has doubled).
  void compact(bool top, bool all) {
    if (!all && c.size() < lim) return;
    size_t w = 0;
    for (const Cand& e : c)
      if (top ? e.hi >= thr : -e.lo >= thr) c[w++] = e;
    c.resize(w);
    lim = 2 * w + 256;
  }
};

// One row's scan over columns [0, n) of a product tile: s = fl(fl(C[j])·sc[j]), b = al·E[j] + (be·P[j] + tau),
// lo = s − b, hi = s + b (float32). (base + j, lo, hi) is admitted at the top when hi >= top.thr, at the bottom
// when −lo >= bot.thr; each admission offers its key and may raise the threshold at once. Almost every block of
// 16 passes neither test (the vectorised path's reason to exist).
struct ScanArgs {
  const float *sc, *E, *P;
  float al, be, tau;
};
inline void admit(Keep& top, Keep& bot, int32_t j, float lo, float hi, size_t k) {
  if (hi >= top.thr) {
    top.c.push_back({j, lo, hi});
    top.offer(lo, k);
  }
  if (-lo >= bot.thr) {
    bot.c.push_back({j, lo, hi});
    bot.offer(-hi, k);
  }
}
void scan_scalar(const int32_t* C, const ScanArgs& g, int64_t j0, int64_t n, int64_t base, size_t k, Keep& top, Keep& bot) {
  for (int64_t j = j0; j < n; ++j) {
    const float s = static_cast<float>(C[j]) * g.sc[j];
    const float b = g.al * g.E[j] + (g.be * g.P[j] + g.tau);
    admit(top, bot, static_cast<int32_t>(base + j), s - b, s + b, k);
  }
}

// (GCC 12 warns about the intrinsics' own _mm512_undefined_* placeholders)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
__attribute__((target("avx512f"))) void scan_avx512(const int32_t* C, const ScanArgs& g, int64_t j0, int64_t n, int64_t base,
                                                    size_t k, Keep& top, Keep& bot) {
  const __m512 al = _mm512_set1_ps(g.al), be = _mm512_set1_ps(g.be), tau = _mm512_set1_ps(g.tau);
  __m512 vt = _mm512_set1_ps(top.thr), vb = _mm512_set1_ps(-bot.thr);
  int64_t j = j0;
  alignas(64) float blo[16], bhi[16];
  for (; j + 16 <= n; j += 16) {
    const __m512 s = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_loadu_si512(C + j)), _mm512_loadu_ps(g.sc + j));
    // (two roundings, not fused: the bound allows for them either way)
    const __m512 b = _mm512_add_ps(_mm512_mul_ps(al, _mm512_loadu_ps(g.E + j)),
                                   _mm512_add_ps(_mm512_mul_ps(be, _mm512_loadu_ps(g.P + j)), tau));
    const __m512 lo = _mm512_sub_ps(s, b), hi = _mm512_add_ps(s, b);
    // (lo <= −thr is −lo >= thr exactly: negation is exact)
    unsigned m = _mm512_cmp_ps_mask(hi, vt, _CMP_GE_OQ) | _mm512_cmp_ps_mask(lo, vb, _CMP_LE_OQ);
    if (m == 0) continue;
    _mm512_store_ps(blo, lo);
    _mm512_store_ps(bhi, hi);
    for (; m; m &= m - 1) {
      const int q = __builtin_ctz(m);
      admit(top, bot, static_cast<int32_t>(base + j + q), blo[q], bhi[q], k);
    }
    vt = _mm512_set1_ps(top.thr);
    vb = _mm512_set1_ps(-bot.thr);
  }
  scan_scalar(C, g, j, n, base, k, top, bot);
}

using ScanFn = void (*)(const int32_t*, const ScanArgs&, int64_t, int64_t, int64_t, size_t, Keep&, Keep&);
ScanFn pick_scan() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") ? scan_avx512 : scan_scalar;
}

// float32 dot product (any order: its error bound holds for every order).
float dot_scalar(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int q = 0; q < 8; ++q) acc[q] += a[i + q] * b[i + q];
  float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

__attribute__((target("avx512f"))) float dot_avx512(const float* a, const float* b, int64_t n) {
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
    s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
  }
  float s = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

#pragma GCC diagnostic pop

// Four canonical dot products x·p[u] (topk_stream.hpp: float64, index order). Each sum is its own chain in
// index order, and each float32 × float32 product is exact in float64, so every value is bit for bit
// canonical_dot's, whatever the compiler fuses or vectorises across the four.
void canonical_dot4(const float* x, const float* const* p, int64_t r, double* out) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  const float *p0 = p[0], *p1 = p[1], *p2 = p[2], *p3 = p[3];
  for (int64_t i = 0; i < r; ++i) {
    const double xi = x[i];
    s0 += xi * static_cast<double>(p0[i]);
    s1 += xi * static_cast<double>(p1[i]);
    s2 += xi * static_cast<double>(p2[i]);
    s3 += xi * static_cast<double>(p3[i]);
  }
  out[0] = s0;
  out[1] = s1;
  out[2] = s2;
  out[3] = s3;
}

using DotFn = float (*)(const float*, const float*, int64_t);
DotFn pick_dot() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") ? dot_avx512 : dot_scalar;
}

// Step 2 of a chunk: float32 dots of the survivors, column by column (each column read once per chunk, not
// once per row that kept it: the survivors are a sparse sample of the product, and reading columns at random
// was the cost). Lists of k or fewer need no float32 stage.
// Each thread takes a range of columns: it reads every list (sequentially) and buckets the entries of its own
// columns, so that the bucketing runs on all threads too. One range per thread: parallel_for hands out
// contiguous equal shares anyway, and each range more is one more read of every list.
// ys[l][e] is the float32 dot of surv[l][e]'s column with decoder row l / 2 (Xd [rows, r]), canonical where
// float32 could overflow; `n_ranges` ranges of columns, one per thread.
void survivor_dots(const std::vector<std::vector<Cand>>& surv, int64_t k, const detail::int8_screen::Columns& P, int64_t Vc,
                   const float* Xd, const std::vector<detail::int8_screen::Quantized>& rq, const std::vector<double>& pn,
                   DotFn dotf, int64_t n_ranges, std::vector<std::vector<double>>& ys) {
  const int64_t r = P.r;
  ys.resize(surv.size());
  detail::parallel_for(0, static_cast<int64_t>(surv.size()), 64, [&](int64_t lb, int64_t le) {
    for (int64_t l = lb; l < le; ++l) ys[static_cast<size_t>(l)].assign(surv[static_cast<size_t>(l)].size(), 0.0);
  });
  detail::parallel_for(0, n_ranges, 1, [&](int64_t tb_, int64_t te_) {
    std::vector<float> colbuf(static_cast<size_t>(r));
    std::vector<int32_t> start;
    std::vector<std::pair<int32_t, int32_t>> pr;  // (list, entry) grouped by column
    for (int64_t t = tb_; t < te_; ++t) {
      const int64_t v0 = Vc * t / n_ranges, v1 = Vc * (t + 1) / n_ranges;
      start.assign(static_cast<size_t>(v1 - v0 + 1), 0);
      for (size_t l = 0; l < surv.size(); ++l)
        if (surv[l].size() > static_cast<size_t>(k))
          for (const Cand& e : surv[l])
            if (e.j >= v0 && e.j < v1) ++start[static_cast<size_t>(e.j - v0 + 1)];
      for (int64_t v = 0; v < v1 - v0; ++v) start[static_cast<size_t>(v + 1)] += start[static_cast<size_t>(v)];
      pr.resize(static_cast<size_t>(start.back()));
      for (size_t l = 0; l < surv.size(); ++l)
        if (surv[l].size() > static_cast<size_t>(k))
          for (size_t e = 0; e < surv[l].size(); ++e) {
            const int32_t j = surv[l][e].j;
            if (j >= v0 && j < v1)
              pr[static_cast<size_t>(start[static_cast<size_t>(j - v0)]++)] = {static_cast<int32_t>(l), static_cast<int32_t>(e)};
          }
      // (start[v] now ends bucket v: bucket v is [start[v-1], start[v]))
      for (int64_t v = v0; v < v1; ++v) {
        const int64_t p0 = v == v0 ? 0 : start[static_cast<size_t>(v - v0 - 1)], p1 = start[static_cast<size_t>(v - v0)];
        if (p0 == p1) continue;
        const float* col = P.column(v, colbuf.data());
        for (int64_t p = p0; p < p1; ++p) {
          const auto [l, e] = pr[static_cast<size_t>(p)];
          const float* xr = Xd + (l / 2) * r;
          // (a product that could overflow float32 is computed canonically: its bound is then 0)
          ys[static_cast<size_t>(l)][static_cast<size_t>(e)] =
              rq[static_cast<size_t>(l / 2)].norm * pn[static_cast<size_t>(v)] > kBig ? canonical_dot(xr, 1, col, 1, r)
                                                                                      : static_cast<double>(dotf(xr, col, r));
        }
      }
    }
  });
}

// Gives a mapped range's pages back to the kernel (clean file pages are dropped, re-read if touched again):
// keeps the resident size of a pass over a multi-GB mapped decoder at one chunk. Harmless on other memory.
void release_pages(const void* p, size_t n) {
#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif
  const uintptr_t pg = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  uintptr_t a = (reinterpret_cast<uintptr_t>(p) + pg - 1) / pg * pg, b = (reinterpret_cast<uintptr_t>(p) + n) / pg * pg;
  if (b > a) ::madvise(reinterpret_cast<void*>(a), b - a, MADV_PAGEOUT);
}

}  // namespace

bool feature_logits_int8_available() { return detail::int8_gemm_available(); }

namespace detail {

// The int8-screened pass (see the comment above). Returns false, having done nothing, when the unembedding
// cannot be quantised (non-finite or beyond float32's comfortable range): the caller then uses float32.
bool feature_logits_int8(const Model& m, const Sae& sae, const FeatureLogitsOptions& o, const at::Tensor& gamma,
                         const std::vector<int64_t>& ids, const std::vector<int64_t>& col_id, FeatureLogits& a) {
  using namespace int8_screen;
  static const ScanFn scan = pick_scan();
  static const DotFn dotf = pick_dot();
  // W_U's int8 columns in tiles of 1024, each reordered once into the layout oneDNN's kernel reads for the
  // usual row block (rows per block: a chunk shared evenly by the threads, 64 to 512 rows; 512 × 1024 columns
  // of int32 is 2 MB, measured faster here than 128 or 256 rows, and than 512 or 2048 columns).
  const int64_t N = static_cast<int64_t>(ids.size()), kChunk = 1024;
  const int64_t nthr = std::max<int64_t>(1, at::get_num_threads()), colblk = 1024;
  QuantizedUnembedding U;
  if (!quantize_unembedding(m, col_id, colblk, std::clamp<int64_t>((std::min(kChunk, N) + nthr - 1) / nthr, 64, 512), U))
    return false;
  const Columns& P = U.P;
  const int64_t r = P.r, Vc = U.Vc;
  const int64_t k = std::min<int64_t>(o.top_k, Vc);
  const std::vector<float>&sB = U.sB, &Pf = U.Pf, &Ef = U.Ef;
  const std::vector<double>& pn = U.pn;
  a.screen = "int8";
  auto gamma_r = [&](double u) { return r * u / (1 - r * u); };
  const double g53 = gamma_r(0x1p-53), g24 = gamma_r(kU32);
  const double slack = 1 + 1e-6;
  auto token = [&](int64_t c) { return col_id.empty() ? c : col_id[static_cast<size_t>(c)]; };
  // Decoder rows in chunks of kChunk (their float32 copy, int8 copy and survivors; the product lives in one
  // [rows, 1024] int32 tile per thread).
  const bool release =
      sae.W_dec.is_contiguous() && sae.W_dec.scalar_type() == at::kFloat && sae.W_dec.nbytes() > (size_t{256} << 20);
  std::vector<int8_t> Aq;
  std::vector<Keep> keeps;              // [2·cn]: row q's top (2q) and bottom (2q + 1) candidates
  std::vector<std::vector<Cand>> surv;  // [2·cn]: their survivors
  std::vector<std::vector<double>> ys;  // their float32 dots (canonical where float32 could overflow)
  std::atomic<int64_t> survivors{0}, finalists{0};
  for (int64_t c0 = 0; c0 < N; c0 += kChunk) {
    if (o.progress) o.progress(c0, N);
    const int64_t cn = std::min(kChunk, N - c0);
    bool consecutive = true;  // ids[c0 + i] == ids[c0] + i: the chunk is a slice of W_dec (no gather)
    for (int64_t i = 1; i < cn && consecutive; ++i)
      consecutive = ids[static_cast<size_t>(c0 + i)] == ids[static_cast<size_t>(c0)] + i;
    at::Tensor X = consecutive ? sae.W_dec.narrow(0, ids[static_cast<size_t>(c0)], cn)
                               : sae.W_dec.index_select(
                                     0, at::tensor(std::vector<int64_t>(ids.begin() + c0, ids.begin() + c0 + cn), at::kLong));
    X = materialize_weight(X).to(at::kFloat).contiguous();
    if (gamma.defined()) X = (X * gamma).contiguous();
    if (!at::isfinite(X).all().item<bool>()) throw UsageError(sae.source + ": non-finite decoder rows");
    at::Tensor nr = X.to(at::kDouble).norm(2, {1}).contiguous();
    const float* Xd = X.data_ptr<float>();
    Aq.resize(static_cast<size_t>(cn * r));
    std::vector<Quantized> rq(static_cast<size_t>(cn));
    detail::parallel_for(0, cn, 16, [&](int64_t b, int64_t e) {
      for (int64_t q = b; q < e; ++q) rq[static_cast<size_t>(q)] = quantize(Xd + q * r, r, Aq.data() + q * r);
    });
    auto nra = nr.accessor<double, 1>();
    for (int64_t q = 0; q < cn; ++q) a.decoder_norms[static_cast<size_t>(c0 + q)] = nra[q];
    // 1. Product and scan, a tile of 1024 columns at a time: the int32 tile [cn, 1024] (4 MB) stays in cache
    //    between the product (all threads, one oneDNN call) and the scan (rows shared by the threads); each
    //    row's candidate lists and thresholds carry over from tile to tile.
    surv.resize(static_cast<size_t>(2 * cn));
    for (auto& v : surv) v.clear();
    std::vector<ScanArgs> ga(static_cast<size_t>(cn));
    keeps.resize(static_cast<size_t>(2 * cn));
    for (int64_t i = 0; i < cn; ++i) {
      // b_v = al·‖e_p(v)‖ + be·‖p_v‖ + tau (the bound above, per column, in units of s_x; see the top comment)
      const Quantized& qx = rq[static_cast<size_t>(i)];
      const double xn = qx.norm, ex = qx.err, sx = qx.scale, sl = 1 + 1e-5;
      ScanArgs& g = ga[static_cast<size_t>(i)];
      g.sc = sB.data();
      g.E = Ef.data();
      g.P = Pf.data();
      g.al = float_at_least((xn + ex) * (1 + kF) / sx * sl);
      g.be = float_at_least((ex + kF * (xn + ex) + g53 * xn) / sx * sl);
      g.tau = static_cast<float>(4 * kTiny);
      keeps[static_cast<size_t>(2 * i)].reset(static_cast<size_t>(k), true);
      keeps[static_cast<size_t>(2 * i + 1)].reset(static_cast<size_t>(k), o.bottom);
    }
    // Each thread takes a block of rows at a time (from a shared counter, so a thread slowed by other work
    // takes fewer) and runs the whole pipeline on it alone: for each tile of columns, its own single-threaded
    // int8 product [rows, tile] (oneDNN runs on the calling thread inside a parallel region), then the scan
    // and the candidate keeping of those rows while the tile is still in cache. No step is serial and the
    // threads meet once per chunk, not twice per tile.
    // (rows per block: the chunk shared evenly by the threads, 64 to 512 rows; 512 × 1024 columns of int32 is
    // 2 MB, measured faster here than 128 or 256 rows, and than 512 or 2048 columns)
    const int64_t rowblk = std::clamp<int64_t>((cn + nthr - 1) / nthr, 64, 512);
    const int64_t n_rb = (cn + rowblk - 1) / rowblk;
    std::atomic<int64_t> next_rb{0};
    detail::parallel_for(0, std::min<int64_t>(n_rb, at::get_num_threads()), 1, [&](int64_t, int64_t) {
      std::vector<int32_t> Ct(static_cast<size_t>(rowblk * colblk));
      for (int64_t rb; (rb = next_rb++) < n_rb;) {
        const int64_t i0 = rb * rowblk, m = std::min(rowblk, cn - i0);
        for (int64_t j0 = 0; j0 < Vc; j0 += colblk) {
          const int64_t nb = std::min(colblk, Vc - j0);
          detail::int8_gemm(Aq.data() + i0 * r, U.Wt[static_cast<size_t>(j0 / colblk)], Ct.data(), m);
          const bool last = j0 + nb == Vc;
          for (int64_t i = i0; i < i0 + m; ++i) {
            const size_t l = static_cast<size_t>(2 * i), ii = static_cast<size_t>(i);
            ScanArgs g = ga[ii];
            g.sc += j0;
            g.E += j0;
            g.P += j0;
            scan(Ct.data() + (i - i0) * nb, g, 0, nb, j0, static_cast<size_t>(k), keeps[l], keeps[l + 1]);
            // (after the last tile, the final test with the row's k-th lower bound)
            keeps[l].compact(true, last);
            keeps[l + 1].compact(false, last);
            if (last) {
              surv[l].swap(keeps[l].c);
              surv[l + 1].swap(keeps[l + 1].c);
            }
          }
        }
      }
    });
    // 2. float32 dots of the survivors (survivor_dots).
    survivor_dots(surv, k, P, Vc, Xd, rq, pn, dotf, nthr, ys);
    // 3. Per row and end: the float32 bound removes all but the finalists, which are computed canonically.
    detail::parallel_for(0, cn, 1, [&](int64_t qb, int64_t qe) {
      std::vector<float> colbuf(static_cast<size_t>(4 * r));
      std::vector<int32_t> js;
      std::vector<double> lows;
      std::vector<TopkEntry> fin;
      int64_t n_surv = 0, n_fin = 0;
      for (int64_t q = qb; q < qe; ++q) {
        const double xn = rq[static_cast<size_t>(q)].norm;
        const float* xr = Xd + q * r;
        auto finish = [&](size_t l, bool largest, std::vector<TopkEntry>& out) {
          const std::vector<Cand>& c = surv[l];
          const std::vector<double>& y = ys[l];
          const double sg = largest ? 1.0 : -1.0;
          n_surv += static_cast<int64_t>(c.size());
          const bool all = c.size() <= static_cast<size_t>(k);
          double T = -std::numeric_limits<double>::infinity();
          auto bound = [&](int32_t j) {
            const double xp = xn * pn[static_cast<size_t>(j)];
            return xp > kBig ? 0.0 : ((g24 + g53) * xp + r * kTiny) * slack;
          };
          if (!all) {
            lows.resize(c.size());
            for (size_t e = 0; e < c.size(); ++e) lows[e] = sg * y[e] - bound(c[e].j);
            std::nth_element(lows.begin(), lows.begin() + (k - 1), lows.end(), std::greater<double>());
            T = lows[static_cast<size_t>(k - 1)];
          }
          fin.clear();
          js.clear();
          for (size_t e = 0; e < c.size(); ++e)
            if (all || sg * y[e] + bound(c[e].j) >= T) js.push_back(c[e].j);
          // canonical values, four columns at a time (four independent sums, each in index order: the same
          // values as canonical_dot, with the additions' latency hidden)
          size_t e = 0;
          for (; e + 4 <= js.size(); e += 4) {
            const float* pc[4];
            double v[4];
            for (int u = 0; u < 4; ++u) pc[u] = P.column(js[e + u], colbuf.data() + u * r);
            canonical_dot4(xr, pc, r, v);
            for (int u = 0; u < 4; ++u) fin.push_back({c0 + q, token(js[e + u]), sg * v[u]});
          }
          for (; e < js.size(); ++e)
            fin.push_back({c0 + q, token(js[e]), sg * canonical_dot(xr, 1, P.column(js[e], colbuf.data()), 1, r)});
          n_fin += static_cast<int64_t>(fin.size());
          std::sort(fin.begin(), fin.end(), topk_better);
          fin.resize(static_cast<size_t>(k));
          for (auto& e : fin) e.value = sg * e.value;
          out = fin;
        };
        finish(static_cast<size_t>(2 * q), true, a.top[static_cast<size_t>(c0 + q)]);
        if (o.bottom) finish(static_cast<size_t>(2 * q + 1), false, a.bottom[static_cast<size_t>(c0 + q)]);
      }
      survivors += n_surv;
      finalists += n_fin;
    });
    X = at::Tensor();  // (may be a view of the mapped decoder)
    if (release && consecutive)
      release_pages(static_cast<const float*>(sae.W_dec.data_ptr()) + ids[static_cast<size_t>(c0)] * sae.W_dec.size(1),
                    static_cast<size_t>(cn * sae.W_dec.size(1)) * sizeof(float));
  }
  a.survivors = survivors;
  a.finalists = finalists;
  return true;
}

}  // namespace detail

}  // namespace vocablens

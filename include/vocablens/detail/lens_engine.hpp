// vocablens/detail/lens_engine.hpp — the logit lens's machinery (not a stable interface).
//
// What logit_lens, logit_lens_batch and lens_corpus share, and what lens_test and the lens benchmarks reach into:
// the fused per-row statistics kernel (row_stats), the raw per-(layer, position) statistics (LensStats), and the
// engine that prepares the unembedding once per model and option set (LensEngine: the tuned lens's translators,
// the decoder blocks, the final norm, then one GEMM per block of positions). Everything here may change with the
// implementation; programs use vocablens/lens.hpp.
//
//   vocablens::lens_detail::LensEngine eng(model, opts);
//   vocablens::lens_detail::LensStats st;
//   eng.run(ids, targets, opts.top_k, st);      // st.lse[li * T + t], st.top_ids[(li * T + t) * k + r], ...
//
// Shapes: n = eng.layers().size() lens layers, T positions, d = d_model, V = eng.vocab(). normalised_stack and
// normalise return [n, T, d] float32; log_probs returns [n, T, V] float32.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "vocablens/lens.hpp"

namespace vocablens {
namespace lens_detail {

/// What a statistic is where a row has none (no target, no next token, a non-finite row).
inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

/// What one row of logits is asked for.
struct RowRequest {
  int64_t k = 0;              ///< top-k size
  int64_t target = -1;        ///< id whose logit, and count of strictly larger logits, are wanted
  int64_t next = -1;          ///< id whose logit is wanted (next token), -1 = none
  const float* pf = nullptr;  ///< final distribution of the same position (for sum pf * z), or null
  bool write_probs = false;   ///< overwrite the row with softmax(row) afterwards
};

struct RowOut {
  float* top_vals = nullptr;   ///< [k] logits, descending
  int64_t* top_ids = nullptr;  ///< [k]
  int64_t top_n = 0;
  float max = 0;
  double lse = 0, entropy = 0, dot_pf = 0;
  float z_target = 0, z_next = 0;
  int64_t target_greater = 0;
  bool nonfinite = false;  ///< the row held a NaN/Inf logit: every statistic is NaN, ids -1, target_greater -1
};

/// The fused statistics of one row z[0..V): pass A (max, top-k, target rank, sum pf z), pass B (sum exp,
/// entropy), optional pass C (probabilities in place). AVX2 when the CPU has it, unless `scalar`.
void row_stats(float* z, int64_t V, const RowRequest& q, RowOut& o, bool scalar);

/// Raw per-(layer, position) statistics of one sequence; index li * T + t.
struct LensStats {
  int64_t n = 0, T = 0, k = 0;
  std::vector<double> lse, entropy, dot_pf;
  std::vector<float> z_target, z_next, top_vals;
  std::vector<int64_t> target_greater, top_ids;
  double gemm_seconds = 0, stats_seconds = 0;  ///< time spent in the unembedding GEMMs / the row passes
  void resize(int64_t n, int64_t T, int64_t k);
  /// KL(final || layer li) at position t, nats (clamped at 0).
  double kl(int64_t li, int64_t t) const;
};

/// Positions per GEMM block when LensOptions::block_positions is 0, for n lens layers and a vocabulary of V:
/// about 1024 rows of layers x positions, fewer when the [rows, V] float32 logit block would pass 256 MiB, but
/// never under 512 rows (or one position). At GPT-2-small's shape (n 13, V 50 257) that is 78 positions,
/// 1 014 rows, a 204 MB block: OpenBLAS ran the [rows, 768] x [768, V] GEMM at 98 % of its [1024, ...] rate,
/// against 89-93 % with the former ~512 rows (docs/benchmarks.md, "Logit lens").
int64_t default_block_positions(int64_t n, int64_t V);

/// The lens machinery for one model and option set: the unembedding matrix (W_U or E⁺) prepared once,
/// then any number of sequences.
class LensEngine {
 public:
  LensEngine(const Model& m, const LensOptions& o);
  const std::vector<LensLayer>& layers() const { return layers_; }
  int64_t vocab() const { return W_.size(1); }
  /// The final norm applied to every lens layer's residual (after the decoder blocks, if any): [n, T, d].
  at::Tensor normalised_stack(const at::Tensor& ids) const;
  /// The same from the lens layers' residuals [n, T, d] of one sequence (their hooks, stacked in layers()
  /// order): the tuned lens's translators, the decoder blocks, then the final norm.
  at::Tensor normalise(const at::Tensor& stack) const;
  /// Statistics for ids (already validated); targets[t] = -1 for none.
  void run(const std::vector<int64_t>& ids, const std::vector<int64_t>& targets, int64_t k, LensStats& s) const;
  /// log-softmax(normed · W + b) [n, T, V] float32, from a normalised stack (LensOptions::save_log_probs).
  at::Tensor log_probs(const at::Tensor& normed) const;
  /// Same, from an already normalised stack [n, T, d] (benchmarks time the two halves apart).
  void run_normalised(const at::Tensor& normed, const std::vector<int64_t>& ids, const std::vector<int64_t>& targets, int64_t k,
                      LensStats& s) const;
  /// The same statistics as run() without the [n, T, d] stack (LensOptions::two_pass): a forward for the final
  /// layer's distribution [T, V], then a second forward whose hooks compute every other layer's statistics in
  /// blocks of positions as the layer is produced.
  void run_two_pass(const std::vector<int64_t>& ids, const std::vector<int64_t>& targets, int64_t k, LensStats& s) const;

 private:
  const Model& m_;
  LensOptions o_;
  std::vector<LensLayer> layers_;
  at::Tensor W_, b_;
  double final_softcap_ = 0.0;  ///< the model's final logit soft-cap (Gemma-2), applied after W_U; 0 = none

  /// Z [rows, V] = the logits of normalised rows X [rows, d]: X·W (+ b, soft-cap), as the model's unembedding.
  void logits_into(at::Tensor& Z, const at::Tensor& X) const;
  /// The statistics of lens layer li at position t from its logit row z (pf: the final distribution at t, or
  /// null; write_probs: overwrite z with softmax(z)) into s.
  void row_into(float* z, int64_t li, int64_t t, const float* pf, bool write_probs, const std::vector<int64_t>& ids,
                const std::vector<int64_t>& targets, LensStats& s) const;
};

/// The LensResult of one sequence from its normalised stack [n, T, d] (what logit_lens does after its
/// forward pass; logit_lens_batch calls it with the rows of a batched forward). ids already validated.
LensResult lens_from_normalised(const Model& m, const LensEngine& eng, const at::Tensor& normed, const std::vector<int64_t>& ids,
                                const LensOptions& opts);
/// The LensResult of statistics already computed (what lens_from_normalised does after run_normalised).
LensResult lens_from_stats(const Model& m, const LensEngine& eng, const LensStats& st, const std::vector<int64_t>& ids,
                           const std::vector<int64_t>& targets, const LensOptions& opts);
/// The target of every position: opts.target, else the next input token (-1 at the last position).
std::vector<int64_t> lens_targets(const std::vector<int64_t>& ids, const LensOptions& opts);

void validate_options(const Model& m, const LensOptions& o);
void validate_ids(const Model& m, const std::vector<int64_t>& ids);

}  // namespace lens_detail
}  // namespace vocablens

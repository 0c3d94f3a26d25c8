// The logit lens (see vocablens/lens.hpp): every layer's residual, re-normalised by the model's own final
// norm, read through the unembedding; fused per-row statistics so that the [layers, T, V] logit cube is
// never held at once. The per-row kernels (one pass for top-k + max, one for the log-sum-exp, ...) are in
// lens_rows.cpp.
#include "vocablens/detail/lens_engine.hpp"

#include <ATen/Parallel.h>
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "vocablens/detail/hook_readonly.hpp"
#include "vocablens/error.hpp"
#include "vocablens/hooks.hpp"
#include "vocablens/interrupt.hpp"
#include "vocablens/model.hpp"
#include "vocablens/nonfinite.hpp"
#include "vocablens/tokenizer.hpp"
#include "vocablens/tuned_lens.hpp"
#include "vocablens/unembed.hpp"
#include "vocablens/weight.hpp"
#include "model/bf16_gemm.hpp"
#include "model/f32_gemm.hpp"
#include "util/parallel.hpp"

namespace vocablens {
namespace lens_detail {

// ---------------------------------------------------------------------------------------------------

void validate_options(const Model& m, const LensOptions& o) {
  const auto& c = m.config();
  if (o.top_k < 0) throw UsageError("--top-k must be >= 0 (got " + std::to_string(o.top_k) + ")");
  if (o.top_k > c.vocab_size)
    throw UsageError("--top-k " + std::to_string(o.top_k) + " is larger than the vocabulary (" + std::to_string(c.vocab_size) +
                     ")");
  if (o.decoder_blocks < 0 || o.decoder_blocks > c.n_layers)
    throw UsageError("--decoder-blocks must be in [0, " + std::to_string(c.n_layers) + "] (got " +
                     std::to_string(o.decoder_blocks) + ")");
  if (o.target && (*o.target < 0 || *o.target >= c.vocab_size))
    throw UsageError("target token id " + std::to_string(*o.target) + " is outside the vocabulary [0, " +
                     std::to_string(c.vocab_size) + ")");
  if (o.block_positions < 0) throw UsageError("block_positions must be >= 0");
  if (o.two_pass && o.save_log_probs)
    throw UsageError("--two-pass cannot be combined with --save-probs (which keeps every layer's [T, V] distribution)");
  if (o.tuned) {
    if (o.resid_mid) throw UsageError("--tuned cannot be combined with --resid-mid (translators read resid_post only)");
    if (o.decoder_blocks > 0) throw UsageError("--tuned cannot be combined with --decoder-blocks");
    o.tuned->check_model(m);
  }
}

void validate_ids(const Model& m, const std::vector<int64_t>& ids) {
  const auto& c = m.config();
  if (ids.empty()) throw UsageError("empty input: the logit lens needs at least one token");
  if (static_cast<int64_t>(ids.size()) > c.n_ctx)
    throw UsageError("input of " + std::to_string(ids.size()) + " tokens is longer than the model's context of " +
                     std::to_string(c.n_ctx) + " tokens");
  for (auto id : ids)
    if (id < 0 || id >= c.vocab_size)
      throw UsageError("token id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(c.vocab_size) + ")");
}

// ---------------------------------------------------------------------------------------------------

// Lens layer li of n: its raw residual x [T, d] translated (tuned lens), decoded (the last blocks) and
// normalised, [T, d]. Every step acts on this layer's rows alone.
static at::Tensor normalise_layer(const Model& m, const LensOptions& o, const at::Tensor& x, int64_t li, int64_t n) {
  at::Tensor h = x;
  // Translator l reads lens layer l; the last lens layer is the model's output (no translator).
  if (o.tuned && li + 1 < n) h = o.tuned->translate(h, li);
  // The decoder blocks one layer at a time: attention scores are [H, T, T] per sequence, not [n, H, T, T].
  if (o.decoder_blocks > 0)
    h = run_blocks(m.config(), m.weights(), h.unsqueeze(0), m.config().n_layers - o.decoder_blocks, m.config().n_layers)[0];
  return m.final_norm(h);
}

LensEngine::LensEngine(const Model& m, const LensOptions& o) : m_(m), o_(o) {
  validate_options(m, o);
  layers_ = lens_layers(m, o);
  if (o.unembed == LensUnembed::PseudoInverse) {
    W_ = embedding_pinv(m).pinv;  // [d, V], cached by unembed.hpp
  } else {
    const at::Tensor& stored = m.weights().W_U;
    if (compute_dtype() == ComputeDtype::BFloat16 && stored.scalar_type() != at::kFloat) {
      // --dtype bfloat16 with non-float32 weights: the projection runs as the model's own unembedding does
      // (bfloat16 GEMM, float32 accumulation and statistics); a bfloat16 W_U is used in place, not upcast.
      W_ = stored.scalar_type() == at::kBFloat16 ? stored : materialize_weight(stored).to(at::kBFloat16);
    } else if (int8_product(stored)) {
      // --compute int8 with a quantized W_U: multiplied in its stored blocks as the model's own unembedding is
      // (llama.cpp's numerics; the last lens layer is the model's logits), and no float32 copy of [d, V] is made.
      W_ = stored;
    } else {
      W_ = m.W_U();
    }
    b_ = m.weights().b_U;
    final_softcap_ = m.config().final_softcap;  // as Model::unembed: logits = c * tanh(x W_U / c)
  }
}

at::Tensor LensEngine::normalised_stack(const at::Tensor& ids) const {
  // Streamed: a hook at each lens point normalises that layer's residual into its slice of the stack as
  // the forward produces it, and nothing is recorded in a cache. The forward holds one stream at a time,
  // so the [n, T, d] residuals exist once (the normalised stack the statistics read: KL(final || layer)
  // needs the final distribution, known only after the last block), not twice (a cache beside the stack).
  // The stack's pages are touched as layers arrive (at::empty maps, writing fills). Every step acts on one
  // layer's [T, d] rows, so the values are those of normalising the stacked residuals.
  const int64_t T = ids.dim() == 1 ? ids.size(0) : ids.size(1);
  const int64_t n = static_cast<int64_t>(layers_.size());
  at::Tensor stack = at::empty({n, T, m_.config().d_model}, at::TensorOptions().dtype(at::kFloat));
  HookList hooks = o_.interventions ? *o_.interventions : HookList{};
  for (int64_t li = 0; li < n; ++li)
    hooks.add(layers_[static_cast<size_t>(li)].hook, [this, &stack, li, n](at::Tensor& x) {
      if (o_.tuned || o_.decoder_blocks > 0) {
        stack[li].copy_(normalise_layer(m_, o_, x[0], li, n));
        return;
      }
      // The final norm acts row by row: in row blocks, its temporaries stay small at any T.
      const at::Tensor rows = x[0];
      for (int64_t r0 = 0; r0 < rows.size(0); r0 += 2048) {
        const int64_t r = std::min<int64_t>(2048, rows.size(0) - r0);
        stack[li].narrow(0, r0, r).copy_(m_.final_norm(rows.narrow(0, r0, r)));
      }
    });
  // The hooks only read their layer's residual (into the stack): the forward hands it over without the
  // copy a hook point makes otherwise (one [T, d] less through each block).
  hook_detail::ReadOnlyHooks read_only;
  run_with_hooks(m_, ids, hooks, CacheSpec{}, /*compute_logits=*/false);
  return stack;
}

at::Tensor LensEngine::normalise(const at::Tensor& raw) const {
  const int64_t n = raw.size(0);
  if (!o_.tuned && o_.decoder_blocks == 0) return m_.final_norm(raw).contiguous();
  at::Tensor stack = at::empty(raw.sizes(), raw.options().dtype(at::kFloat));
  for (int64_t li = 0; li < n; ++li) stack[li].copy_(normalise_layer(m_, o_, raw[li], li, n));
  return stack;
}

void LensEngine::run(const std::vector<int64_t>& ids, const std::vector<int64_t>& targets, int64_t k, LensStats& s) const {
  run_normalised(normalised_stack(at::tensor(ids, at::kLong)), ids, targets, k, s);
}

at::Tensor LensEngine::log_probs(const at::Tensor& normed) const {
  const at::Tensor x = normed.to(at::kFloat);
  at::Tensor z = is_packed_weight(W_) ? weight_matmul(x.reshape({-1, x.size(-1)}), W_).reshape({x.size(0), x.size(1), -1})
                                      : at::matmul(x, W_.to(at::kFloat));
  if (b_.defined()) z = z + b_.to(at::kFloat);
  return at::log_softmax(z.to(at::kDouble), -1).to(at::kFloat);  // [n, T, V]
}

void LensEngine::logits_into(at::Tensor& Z, const at::Tensor& X) const {
  if (is_packed_weight(W_)) Z.copy_(weight_matmul(X, W_));  // int8 compute (the constructor)
  else if (W_.scalar_type() == at::kBFloat16) Z.copy_(detail::mm_bf16(X.to(at::kBFloat16), W_));
  else detail::mm_f32_out(Z, X, W_);  // oneDNN's matmul where it runs (src/model/f32_gemm.hpp)
  if (b_.defined()) Z.add_(b_);
  if (final_softcap_ > 0) Z.div_(final_softcap_).tanh_().mul_(final_softcap_);  // the model's own last step (Gemma-2)
}

void LensEngine::row_into(float* z, int64_t li, int64_t t, const float* pf, bool write_probs, const std::vector<int64_t>& ids,
                          const std::vector<int64_t>& targets, LensStats& s) const {
  const int64_t T = s.T, k = s.k, V = W_.size(1);
  RowRequest q;
  q.k = k;
  q.target = targets[static_cast<size_t>(t)];
  q.next = t + 1 < T ? ids[static_cast<size_t>(t + 1)] : -1;
  q.pf = pf;
  q.write_probs = write_probs;
  RowOut o;
  const size_t at = static_cast<size_t>(li * T + t);
  o.top_vals = s.top_vals.data() + at * static_cast<size_t>(k);
  o.top_ids = s.top_ids.data() + at * static_cast<size_t>(k);
  row_stats(z, V, q, o, o_.scalar_kernel);
  // Under the default policy the weights and the model's activations were checked finite, so a row whose
  // logits are not (or whose softmax overflows) comes from finite values too large for float32 (a 3e38
  // embedding row, translators of 1e19): refused like non-finite input instead of NaN rows and exit 0.
  if (o.nonfinite && nonfinite_policy() == NonFinitePolicy::Refuse)
    throw NonFiniteError("logit lens: the logits of " + layers_[static_cast<size_t>(li)].hook + " at position " +
                         std::to_string(t) +
                         " overflow float32 (non-finite or too large for the softmax) although every "
                         "weight is finite: finite values too large for the analysis (an edited checkpoint or tuned lens?)");
  s.lse[at] = o.lse;
  s.entropy[at] = o.entropy;
  s.dot_pf[at] = o.dot_pf;
  s.z_target[at] = o.z_target;
  s.target_greater[at] = o.target_greater;
  s.z_next[at] = o.z_next;
}

void LensEngine::run_normalised(const at::Tensor& normed, const std::vector<int64_t>& ids, const std::vector<int64_t>& targets,
                                int64_t k, LensStats& s) const {
  const int64_t T = static_cast<int64_t>(ids.size());
  const int64_t n = static_cast<int64_t>(layers_.size());
  const int64_t V = W_.size(1);
  s.resize(n, T, k);
  int64_t P = o_.block_positions > 0 ? o_.block_positions : default_block_positions(n, W_.size(1));
  P = std::min(P, T);
  const int64_t d = normed.size(2);
  at::Tensor zbuf = at::empty({n * P, V}, at::TensorOptions().dtype(at::kFloat));
  at::Tensor xbuf = at::empty({n, P, d}, at::TensorOptions().dtype(at::kFloat));
  for (int64_t t0 = 0; t0 < T; t0 += P) {
    throw_if_cancelled("the logit lens");  // a caller's CancelScope: stop between blocks of positions
    const int64_t p = std::min(P, T - t0);
    at::Tensor X = xbuf.narrow(1, 0, p);
    X.copy_(normed.narrow(1, t0, p));
    at::Tensor Z = zbuf.narrow(0, 0, n * p);
    auto c0 = std::chrono::steady_clock::now();
    logits_into(Z, X.reshape({n * p, d}));
    auto c1 = std::chrono::steady_clock::now();
    float* zp = Z.data_ptr<float>();
    // 1) the final layer's rows: statistics, then overwritten by the final distribution.
    const int64_t fin0 = (n - 1) * p;
    detail::parallel_for(fin0, n * p, 1, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) row_into(zp + r * V, r / p, t0 + r % p, nullptr, n > 1, ids, targets, s);
    });
    // 2) every other layer, with the dot product against the final distribution of the same position.
    if (n > 1)
      detail::parallel_for(0, fin0, 1, [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) row_into(zp + r * V, r / p, t0 + r % p, zp + (fin0 + r % p) * V, false, ids, targets, s);
      });
    s.gemm_seconds += std::chrono::duration<double>(c1 - c0).count();
    s.stats_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - c1).count();
  }
}

void LensEngine::run_two_pass(const std::vector<int64_t>& ids, const std::vector<int64_t>& targets, int64_t k,
                              LensStats& s) const {
  const int64_t T = static_cast<int64_t>(ids.size());
  const int64_t n = static_cast<int64_t>(layers_.size());
  const int64_t V = W_.size(1);
  s.resize(n, T, k);
  // One layer's rows per GEMM: the block the one-pass engine gives all n layers, for this one.
  const int64_t P = std::min(o_.block_positions > 0 ? o_.block_positions : default_block_positions(1, V), T);
  const at::Tensor idt = at::tensor(ids, at::kLong);
  // Layer li's residual x [T, d] (from its hook), normalised and read P positions at a time: each block's
  // logits go through `each(t0, p, Z)`. The final norm acts row by row, so a plain lens normalises block by
  // block; a tuned lens or decoder blocks act on the whole layer first (the decoder's attention reads every
  // position of it).
  auto blocks = [&](const at::Tensor& x, int64_t li, const std::function<void(int64_t, int64_t, at::Tensor&)>& each) {
    const at::Tensor whole = (o_.tuned || o_.decoder_blocks > 0) ? normalise_layer(m_, o_, x, li, n) : at::Tensor();
    at::Tensor zbuf = at::empty({P, V}, at::TensorOptions().dtype(at::kFloat));
    for (int64_t t0 = 0; t0 < T; t0 += P) {
      throw_if_cancelled("the logit lens");
      const int64_t p = std::min(P, T - t0);
      const at::Tensor X = whole.defined() ? whole.narrow(0, t0, p) : m_.final_norm(x.narrow(0, t0, p));
      at::Tensor Z = zbuf.narrow(0, 0, p);
      auto c0 = std::chrono::steady_clock::now();
      logits_into(Z, X.to(at::kFloat).contiguous());
      auto c1 = std::chrono::steady_clock::now();
      each(t0, p, Z);
      s.gemm_seconds += std::chrono::duration<double>(c1 - c0).count();
      s.stats_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - c1).count();
    }
  };
  hook_detail::ReadOnlyHooks read_only;  // the hooks only read their layer's residual
  // 1) The final layer: its statistics, and (when other layers need it) its distribution for every position [T, V].
  at::Tensor pf_all = n > 1 ? at::empty({T, V}, at::TensorOptions().dtype(at::kFloat)) : at::Tensor();
  {
    HookList hooks = o_.interventions ? *o_.interventions : HookList{};
    hooks.add(layers_.back().hook, [&](at::Tensor& x) {
      blocks(x[0], n - 1, [&](int64_t t0, int64_t p, at::Tensor& Z) {
        float* zp = Z.data_ptr<float>();
        detail::parallel_for(0, p, 1, [&](int64_t b, int64_t e) {
          for (int64_t r = b; r < e; ++r) row_into(zp + r * V, n - 1, t0 + r, nullptr, n > 1, ids, targets, s);
        });
        if (n > 1) pf_all.narrow(0, t0, p).copy_(Z);
      });
    });
    run_with_hooks(m_, idt, hooks, CacheSpec{}, /*compute_logits=*/false);
  }
  if (n == 1) return;
  // 2) Every other layer as the second forward produces it, against the final distribution of each position.
  HookList hooks = o_.interventions ? *o_.interventions : HookList{};
  for (int64_t li = 0; li + 1 < n; ++li)
    hooks.add(layers_[static_cast<size_t>(li)].hook, [&, li](at::Tensor& x) {
      blocks(x[0], li, [&](int64_t t0, int64_t p, at::Tensor& Z) {
        float* zp = Z.data_ptr<float>();
        const float* pp = pf_all.data_ptr<float>();
        detail::parallel_for(0, p, 1, [&](int64_t b, int64_t e) {
          for (int64_t r = b; r < e; ++r) row_into(zp + r * V, li, t0 + r, pp + (t0 + r) * V, false, ids, targets, s);
        });
      });
    });
  run_with_hooks(m_, idt, hooks, CacheSpec{}, /*compute_logits=*/false);
}

int64_t default_block_positions(int64_t n, int64_t V) {
  const int64_t budget_rows = (int64_t{256} << 20) / (4 * std::max<int64_t>(V, 1));
  const int64_t rows = std::clamp<int64_t>(budget_rows, 512, 1024);
  return std::max<int64_t>(1, rows / std::max<int64_t>(n, 1));
}

void LensStats::resize(int64_t n_, int64_t T_, int64_t k_) {
  n = n_;
  T = T_;
  k = k_;
  const size_t nt = static_cast<size_t>(n * T);
  lse.assign(nt, 0);
  entropy.assign(nt, 0);
  dot_pf.assign(nt, 0);
  z_target.assign(nt, 0);
  target_greater.assign(nt, 0);
  z_next.assign(nt, 0);
  top_vals.assign(nt * static_cast<size_t>(k), 0);
  top_ids.assign(nt * static_cast<size_t>(k), -1);
  gemm_seconds = stats_seconds = 0;
}

double LensStats::kl(int64_t li, int64_t t) const {
  const size_t a = static_cast<size_t>(li * T + t), f = static_cast<size_t>((n - 1) * T + t);
  // KL(f || l) = sum pf log pf - sum pf log pl = -H_f - sum pf z_l + lse_l
  const double v = -entropy[f] - dot_pf[a] + lse[a];
  // std::max(0.0, NaN) is 0.0 — NaN logits printed "KL -> final 0.000". NaN stays NaN.
  if (std::isnan(v)) return std::numeric_limits<double>::quiet_NaN();
  if (li == n - 1) return 0.0;
  return std::max(0.0, v);
}

}  // namespace lens_detail

// -------------------------------------------------------------------------------------------------------

std::vector<LensLayer> lens_layers(const Model& m, const LensOptions& o) {
  const int64_t L = m.config().n_layers;
  const int64_t last_block = L - o.decoder_blocks;  // blocks [0, last_block) are lensed
  std::vector<LensLayer> v;
  v.push_back({"resid_pre.0", "embed", -1});
  for (int64_t l = 0; l < last_block; ++l) {
    if (o.resid_mid) v.push_back({"resid_mid." + std::to_string(l), std::to_string(l) + ".mid", l});
    v.push_back({"resid_post." + std::to_string(l), std::to_string(l), l});
  }
  return v;
}

double LensResult::mean_cross_entropy(int64_t layer) const {
  double sum = 0;
  int64_t cnt = 0;
  for (int64_t t = 0; t < n_positions(); ++t) {
    float v = cross_entropy[at(layer, t)];
    if (!std::isnan(v)) {
      sum += v;
      ++cnt;
    }
  }
  return cnt ? sum / static_cast<double>(cnt) : std::numeric_limits<double>::quiet_NaN();
}

LensResult logit_lens(const Model& m, const std::vector<int64_t>& ids, const LensOptions& opts) {
  using namespace lens_detail;
  validate_options(m, opts);
  validate_ids(m, ids);
  LensEngine eng(m, opts);
  if (!opts.two_pass) {
    at::Tensor stack = eng.normalised_stack(at::tensor(ids, at::kLong));
    // The forward's freed working set goes back to the system before the logit blocks are allocated: the CLI
    // keeps up to 256 MiB of freed heap for reuse (src/cli/run_main.cpp), which would otherwise sit under the
    // blocks and raise the peak above the sum --dry-run counts (the larger phase, not both).
    ::malloc_trim(0);
    return lens_from_normalised(m, eng, stack, ids, opts);
  }
  const std::vector<int64_t> targets = lens_targets(ids, opts);
  LensStats st;
  eng.run_two_pass(ids, targets, opts.top_k, st);
  return lens_from_stats(m, eng, st, ids, targets, opts);
}

namespace lens_detail {

std::vector<int64_t> lens_targets(const std::vector<int64_t>& ids, const LensOptions& opts) {
  const int64_t T = static_cast<int64_t>(ids.size());
  std::vector<int64_t> targets(static_cast<size_t>(T), -1);
  for (int64_t t = 0; t < T; ++t)
    targets[static_cast<size_t>(t)] = opts.target ? *opts.target : (t + 1 < T ? ids[static_cast<size_t>(t + 1)] : -1);
  return targets;
}

LensResult lens_from_normalised(const Model& m, const LensEngine& eng, const at::Tensor& normed, const std::vector<int64_t>& ids,
                                const LensOptions& opts) {
  const std::vector<int64_t> targets = lens_targets(ids, opts);
  LensStats st;
  eng.run_normalised(normed, ids, targets, opts.top_k, st);
  LensResult r = lens_from_stats(m, eng, st, ids, targets, opts);
  if (opts.save_log_probs) {
    at::Tensor lp = eng.log_probs(normed).contiguous();
    r.log_probs.assign(lp.data_ptr<float>(), lp.data_ptr<float>() + lp.numel());
  }
  return r;
}

LensResult lens_from_stats(const Model& m, const LensEngine& eng, const LensStats& st, const std::vector<int64_t>& ids,
                           const std::vector<int64_t>& targets, const LensOptions& opts) {
  const int64_t T = static_cast<int64_t>(ids.size());
  LensResult r;
  r.tokens = ids;
  r.layers = eng.layers();
  r.options = opts;
  r.vocab_size = eng.vocab();
  r.top_k = opts.top_k;
  r.targets = targets;
  r.model_source = m.source();
  const int64_t n = r.n_layers(), k = r.top_k;
  const size_t nt = static_cast<size_t>(n * T);
  r.top_ids = st.top_ids;
  r.top_probs.resize(nt * static_cast<size_t>(k));
  r.entropy.resize(nt);
  r.kl_final.resize(nt);
  r.cross_entropy.resize(nt);
  r.logsumexp.resize(nt);
  r.target_prob.resize(nt);
  r.target_logprob.resize(nt);
  r.target_rank.resize(nt);
  for (int64_t li = 0; li < n; ++li)
    for (int64_t t = 0; t < T; ++t) {
      const size_t a = r.at(li, t);
      const double lse = st.lse[a];
      for (int64_t j = 0; j < k; ++j) {
        const size_t q = a * static_cast<size_t>(k) + static_cast<size_t>(j);
        r.top_probs[q] = static_cast<float>(std::exp(static_cast<double>(st.top_vals[q]) - lse));
      }
      r.entropy[a] = static_cast<float>(st.entropy[a]);
      r.kl_final[a] = static_cast<float>(st.kl(li, t));
      r.logsumexp[a] = static_cast<float>(lse);
      r.cross_entropy[a] = t + 1 < T ? static_cast<float>(lse - st.z_next[a]) : kNaN;
      if (targets[static_cast<size_t>(t)] >= 0) {
        const double lp = static_cast<double>(st.z_target[a]) - lse;
        r.target_logprob[a] = static_cast<float>(lp);
        r.target_prob[a] = static_cast<float>(std::exp(lp));
        r.target_rank[a] = st.target_greater[a] < 0 ? -1 : 1 + st.target_greater[a];  // -1: a NaN row has no rank
      } else {
        r.target_logprob[a] = kNaN;
        r.target_prob[a] = kNaN;
        r.target_rank[a] = -1;
      }
    }
  return r;
}

}  // namespace lens_detail

}  // namespace vocablens

// -------------------------------------------------------------------------------------------------------
// Result for the exporters

namespace vocablens {
namespace {

nlohmann::json num_or_null(double v) { return std::isnan(v) ? nlohmann::json(nullptr) : nlohmann::json(v); }

std::string token_string(const Tokenizer* tok, int64_t id) {
  if (id < 0) return "";
  return tok ? tok->display(id) : "#" + std::to_string(id);
}

const char* unembed_name(LensUnembed u) { return u == LensUnembed::PseudoInverse ? "pinv" : "W_U"; }

}  // namespace

Result LensResult::to_result(const Tokenizer* tok, const std::string& prompt) const {
  const int64_t n = n_layers(), T = n_positions(), k = top_k;
  Result r;
  r.kind = "logit_lens";
  nlohmann::json target = nullptr;
  if (options.target) target = {{"id", *options.target}, {"token", token_string(tok, *options.target)}};
  r.settings = {{"top_k", k},
                {"resid_mid", options.resid_mid},
                {"unembed", unembed_name(options.unembed)},
                {"decoder_blocks", options.decoder_blocks},
                {"two_pass", options.two_pass},          // the same statistics either way; says which engine read them
                {"save_probs", options.save_log_probs},  // the option's name on every surface (--save-probs)
                {"final_norm", "recomputed on each layer's residual"},
                {"lens", options.tuned ? "tuned" : "logit"},
                {"tuned_lens", options.tuned ? nlohmann::json(options.tuned->source) : nlohmann::json(nullptr)},
                {"target", target.is_null() ? nlohmann::json("next token") : target},
                {"units", "nats"}};
  if (!prompt.empty()) r.settings["prompt"] = prompt;

  nlohmann::json toks = nlohmann::json::array();
  for (int64_t t = 0; t < T; ++t)
    toks.push_back({{"position", t},
                    {"id", tokens[t]},
                    {"token", token_string(tok, tokens[t])},
                    {"target_id", targets[t] >= 0 ? nlohmann::json(targets[t]) : nlohmann::json(nullptr)},
                    {"target", targets[t] >= 0 ? nlohmann::json(token_string(tok, targets[t])) : nlohmann::json(nullptr)}});
  nlohmann::json lays = nlohmann::json::array(), per_layer = nlohmann::json::array();
  for (int64_t li = 0; li < n; ++li) {
    const auto& L = layers[static_cast<size_t>(li)];
    lays.push_back({{"index", li}, {"hook", L.hook}, {"label", L.label}, {"block", L.block}});
    double se = 0, sk = 0;
    for (int64_t t = 0; t < T; ++t) {
      se += entropy[at(li, t)];
      sk += kl_final[at(li, t)];
    }
    nlohmann::json last = {
        {"target_rank", target_rank[at(li, T - 1)] >= 0 ? nlohmann::json(target_rank[at(li, T - 1)]) : nlohmann::json(nullptr)},
        {"target_prob", num_or_null(target_prob[at(li, T - 1)])}};
    nlohmann::json top = nlohmann::json::array();
    for (int64_t j = 0; j < k; ++j)
      if (top_id(li, T - 1, j) >= 0)  // a NaN row (--allow-nonfinite) has no top tokens: []
        top.push_back(
            {{"id", top_id(li, T - 1, j)}, {"token", token_string(tok, top_id(li, T - 1, j))}, {"prob", top_prob(li, T - 1, j)}});
    last["top"] = top;
    per_layer.push_back({{"layer", L.label},
                         {"hook", L.hook},
                         {"mean_cross_entropy", num_or_null(mean_cross_entropy(li))},
                         {"mean_entropy", se / static_cast<double>(T)},
                         {"mean_kl_final", sk / static_cast<double>(T)},
                         {"last_position", last}});
  }
  r.summary = {{"model", model_source}, {"prompt", prompt}, {"n_tokens", T},         {"vocab_size", vocab_size},
               {"tokens", toks},        {"layers", lays},   {"per_layer", per_layer}};
  if (k > 0 && n * T <= 20000) {
    nlohmann::json grid_tok = nlohmann::json::array(), grid_p = nlohmann::json::array();
    for (int64_t li = 0; li < n; ++li) {
      nlohmann::json rt = nlohmann::json::array(), rp = nlohmann::json::array();
      for (int64_t t = 0; t < T; ++t) {
        rt.push_back(token_string(tok, top_id(li, t, 0)));
        rp.push_back(top_prob(li, t, 0));
      }
      grid_tok.push_back(rt);
      grid_p.push_back(rp);
    }
    r.summary["top1"] = {{"tokens", grid_tok}, {"probs", grid_p}};
  }

  r.arrays["tokens"] = NdArray::i64({T}, tokens.data());
  r.arrays["targets"] = NdArray::i64({T}, targets.data());
  if (k > 0) {
    r.arrays["top_ids"] = NdArray::i64({n, T, k}, top_ids.data());
    r.arrays["top_probs"] = NdArray::f32({n, T, k}, top_probs.data());
  }
  r.arrays["entropy"] = NdArray::f32({n, T}, entropy.data());
  r.arrays["kl_final"] = NdArray::f32({n, T}, kl_final.data());
  r.arrays["cross_entropy"] = NdArray::f32({n, T}, cross_entropy.data());
  r.arrays["logsumexp"] = NdArray::f32({n, T}, logsumexp.data());
  r.arrays["target_prob"] = NdArray::f32({n, T}, target_prob.data());
  r.arrays["target_logprob"] = NdArray::f32({n, T}, target_logprob.data());
  r.arrays["target_rank"] = NdArray::i64({n, T}, target_rank.data());
  if (!log_probs.empty() && static_cast<int64_t>(log_probs.size()) == n * T * vocab_size)
    r.arrays["log_probs"] = NdArray::f32({n, T, vocab_size}, log_probs.data());

  Table tab;
  tab.name = "top_k";
  tab.columns = {"layer", "hook",      "position",     "input_id",    "input_token", "rank",    "token_id", "token",
                 "prob",  "target_id", "target_token", "target_rank", "target_prob", "entropy", "kl_final", "cross_entropy"};
  auto cached = [&](int64_t id) { return token_string(tok, id); };
  tab.rows.reserve(static_cast<size_t>(n * T * std::max<int64_t>(k, 1)));
  for (int64_t li = 0; li < n; ++li) {
    const auto& L = layers[static_cast<size_t>(li)];
    for (int64_t t = 0; t < T; ++t) {
      const size_t a = at(li, t);
      const int64_t tg = targets[t];
      nlohmann::json tgj = tg >= 0 ? nlohmann::json(tg) : nlohmann::json(nullptr);
      nlohmann::json tgs = tg >= 0 ? nlohmann::json(cached(tg)) : nlohmann::json(nullptr);
      nlohmann::json tr = target_rank[a] >= 0 ? nlohmann::json(target_rank[a]) : nlohmann::json(nullptr);
      std::string in_tok = cached(tokens[t]);
      for (int64_t j = 0; j < std::max<int64_t>(k, 1); ++j) {
        const bool has = j < k;
        tab.rows.push_back({L.label, L.hook, t, tokens[t], in_tok, has ? nlohmann::json(j + 1) : nlohmann::json(nullptr),
                            has ? nlohmann::json(top_id(li, t, j)) : nlohmann::json(nullptr),
                            has ? nlohmann::json(cached(top_id(li, t, j))) : nlohmann::json(nullptr),
                            has ? nlohmann::json(top_prob(li, t, j)) : nlohmann::json(nullptr), tgj, tgs, tr,
                            num_or_null(target_prob[a]), num_or_null(entropy[a]), num_or_null(kl_final[a]),
                            num_or_null(cross_entropy[a])});
      }
    }
  }
  r.tables.push_back(std::move(tab));
  return r;
}

}  // namespace vocablens

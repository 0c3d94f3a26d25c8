// An SAE over a corpus (see vocablens/sae_corpus.hpp): firing density, log-binned activation histograms, L0,
// max-activating contexts and SAELens's evaluation metrics, streamed window by window and shared by mpirun ranks.
#include "vocablens/sae_corpus.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "corpus_windows.hpp"
#include "util/regular_file.hpp"
#include "vocablens/dist.hpp"
#include "vocablens/error.hpp"
#include "vocablens/hooks.hpp"
#include "vocablens/memory_estimate.hpp"
#include "vocablens/model.hpp"
#include "vocablens/sae.hpp"
#include "vocablens/text_inputs.hpp"
#include "vocablens/tokenizer.hpp"

namespace vocablens {

int histogram_bin(double a) {
  if (!(a > 0)) return 0;
  const double b = std::floor(5.0 * (std::log10(a) + 3.0));
  return static_cast<int>(std::clamp(b, 0.0, static_cast<double>(kHistogramBins - 1)));
}

namespace {

// Per-window float sums, reduced in window order (the one-process order whatever the ranks).
enum Slot { kCeClean, kCeSae, kCeZero, kKlSae, kKlZero, kRss, kSumSq, kCos, kL0, kSlots };

// Log-probabilities [T-1, V] (float64) of positions 0 .. T-2 from the logits of a window of T tokens.
at::Tensor scored_logp(const at::Tensor& logits, int64_t T) {
  return logits.reshape({T, -1}).narrow(0, 0, T - 1).to(at::kDouble).log_softmax(-1);
}

// Next-token cross-entropy of positions 0 .. T-2, from their log-probabilities.
void add_ce(const at::Tensor& lp, const std::vector<int64_t>& ids, double* ce) {
  auto acc = lp.accessor<double, 2>();
  for (size_t t = 0; t + 1 < ids.size(); ++t) *ce -= acc[static_cast<int64_t>(t)][ids[t + 1]];
}

// Next-token cross-entropy and KL(clean || other) of positions 0 .. T-2, in float64; `clean_p` is
// clean_logp.exp(), computed once per window for both patched runs.
void ce_kl(const at::Tensor& clean_logp, const at::Tensor& clean_p, const at::Tensor& logits, const std::vector<int64_t>& ids,
           double* ce, double* kl) {
  const at::Tensor lp = scored_logp(logits, static_cast<int64_t>(ids.size()));
  add_ce(lp, ids, ce);
  *kl += (clean_p * (clean_logp - lp)).sum().item<double>();
}

// The better of two contexts: larger activation, then earlier window, then earlier position.
bool better(double a, int64_t wa, int64_t pa, double b, int64_t wb, int64_t pb) {
  if (a != b) return a > b;
  if (wa != wb) return wa < wb;
  return pa < pb;
}

}  // namespace

int64_t SaeCorpusStats::dead() const {
  return static_cast<int64_t>(std::count(fire_count.begin(), fire_count.end(), int64_t{0}));
}

namespace {

int64_t checked_window(const Model& m, const SaeCorpusOptions& opts) {
  const int64_t n_ctx = m.config().n_ctx;
  const int64_t W = opts.window > 0 ? opts.window : n_ctx;
  if (W < 2 || W > n_ctx)
    throw UsageError("--window must be in [2, " + std::to_string(n_ctx) + "] (got " + std::to_string(W) + ")");
  return W;
}

double stored_bytes(const at::Tensor& t) {
  return t.defined() ? static_cast<double>(t.numel()) * static_cast<double>(t.element_size()) : 0.0;
}

}  // namespace

MemoryEstimate estimate_sae_corpus_memory(const Model& m, const Sae& sae, const SaeCorpusOptions& opts) {
  const int64_t W = checked_window(m, opts);
  const double T = static_cast<double>(W), D = static_cast<double>(sae.d_sae);
  const double d_in = static_cast<double>(sae.d_in), d_out = static_cast<double>(sae.d_out);
  const double V = static_cast<double>(m.config().vocab_size);
  MemoryEstimate e = estimate_forward_memory(m, 1, W, CacheSpec{}, opts.ce_metrics);
  double w = 0;
  for (const at::Tensor* t : {&sae.W_enc, &sae.W_dec, &sae.b_enc, &sae.b_dec, &sae.threshold, &sae.scaling_factor, &sae.W_skip,
                              &sae.b_gate, &sae.b_mag, &sae.r_mag})
    w += stored_bytes(*t);
  e.add("SAE weights as stored", w);
  const double act = opts.float64 ? 8.0 : 4.0;
  e.add("one window's hook activations and reconstruction (+ float64 copies)", T * (d_in + 2 * d_out) * (act + 8));
  e.add("one window's feature pre-activations, activations and their float64 copy", T * D * (2 * act + 8));
  const double C = static_cast<double>(opts.context_before + 1 + opts.context_after);
  e.add("per-feature statistics (counts, histogram, max-activating contexts)",
        D * (8 + 8.0 * kHistogramBins) + D * static_cast<double>(opts.contexts) * (C * 16 + 64));
  if (opts.ce_metrics) e.add("cross-entropy: clean and spliced log-probabilities in float64", 2 * T * V * 8);
  return e;
}

namespace {

// One of a feature's best contexts while the corpus is read: value, window, position, tokens.
struct Cand {
  double v;
  int64_t w, p, at;
  std::vector<int64_t> ids;
  std::vector<double> vals;  // the feature's activation at each of ids
};

// Top contexts of every rank, merged: slot [rank, feature, q] holds (value, window, position, at, C ids);
// each slot is written by one rank only, so the sum over ranks is exact. Every rank ends with the n best of all.
void merge_top_contexts(std::vector<std::vector<Cand>>& best, int64_t n, int64_t C, int shard_rank, int shard_count) {
  const int64_t D = static_cast<int64_t>(best.size());
  const int64_t rec = 4 + 2 * C;
  std::vector<double> cand(static_cast<size_t>(shard_count * D * n * rec), 0.0);
  for (int64_t fi = 0; fi < D; ++fi) {
    const auto& b = best[static_cast<size_t>(fi)];
    for (size_t q = 0; q < b.size(); ++q) {
      double* s = cand.data() + ((shard_rank * D + fi) * n + static_cast<int64_t>(q)) * rec;
      s[0] = b[q].v;
      s[1] = static_cast<double>(b[q].w + 1);  // 0 = empty slot
      s[2] = static_cast<double>(b[q].p);
      s[3] = static_cast<double>(b[q].at);
      for (int64_t c = 0; c < static_cast<int64_t>(b[q].ids.size()); ++c) {
        s[4 + c] = static_cast<double>(b[q].ids[static_cast<size_t>(c)] + 1);
        s[4 + C + c] = b[q].vals[static_cast<size_t>(c)];
      }
    }
  }
  dist::allreduce_sum(cand.data(), static_cast<int64_t>(cand.size()));
  for (int64_t fi = 0; fi < D; ++fi) {
    std::vector<Cand> all;
    for (int rk = 0; rk < shard_count; ++rk)
      for (int64_t q = 0; q < n; ++q) {
        const double* s = cand.data() + ((rk * D + fi) * n + q) * rec;
        if (s[1] == 0) continue;
        Cand c{s[0], static_cast<int64_t>(s[1]) - 1, static_cast<int64_t>(s[2]), static_cast<int64_t>(s[3]), {}, {}};
        for (int64_t k = 0; k < C && s[4 + k] != 0; ++k) {
          c.ids.push_back(static_cast<int64_t>(s[4 + k]) - 1);
          c.vals.push_back(s[4 + C + k]);
        }
        all.push_back(std::move(c));
      }
    std::sort(all.begin(), all.end(), [](const Cand& a, const Cand& b) { return better(a.v, a.w, a.p, b.v, b.w, b.p); });
    if (static_cast<int64_t>(all.size()) > n) all.resize(static_cast<size_t>(n));
    best[static_cast<size_t>(fi)] = std::move(all);
  }
}

// The statistics from the per-window sums (kSlots + d per window, summed in window order), the firing counts, the
// histogram and the best contexts (moved out of `best`).
void finish_stats(SaeCorpusStats& r, const std::vector<double>& per_window, const std::vector<double>& counts,
                  const std::vector<double>& hist, std::vector<std::vector<Cand>>& best, bool ce_metrics) {
  const int64_t D = r.d_sae, d = r.d;
  const int64_t stride = kSlots + d;
  double sums[kSlots] = {0};
  std::vector<double> colsum(static_cast<size_t>(d), 0.0);
  for (int64_t w = 0; w < r.windows; ++w) {
    const double* win = per_window.data() + w * stride;
    for (int s = 0; s < kSlots; ++s) sums[s] += win[s];
    for (int64_t j = 0; j < d; ++j) colsum[static_cast<size_t>(j)] += win[kSlots + j];
  }
  const double P = static_cast<double>(r.positions);
  r.fire_count.resize(static_cast<size_t>(D));
  for (int64_t fi = 0; fi < D; ++fi)
    r.fire_count[static_cast<size_t>(fi)] = static_cast<int64_t>(counts[static_cast<size_t>(fi)]);
  r.histogram.resize(hist.size());
  for (size_t i = 0; i < hist.size(); ++i) r.histogram[i] = static_cast<int64_t>(hist[i]);
  r.mean_l0 = sums[kL0] / P;
  r.mse = sums[kRss] / (P * static_cast<double>(d));
  // Σ‖x − x̄‖² = Σ‖x‖² − ‖Σx‖² / P
  double mean_sq = 0;
  for (double c : colsum) mean_sq += c * c;
  const double tss = sums[kSumSq] - mean_sq / P;
  r.explained_variance = tss > 0 ? 1.0 - sums[kRss] / tss : std::numeric_limits<double>::quiet_NaN();
  r.cossim = sums[kCos] / P;
  if (ce_metrics) {
    r.ce_clean = sums[kCeClean] / P;
    r.ce_sae = sums[kCeSae] / P;
    r.ce_zero = sums[kCeZero] / P;
    r.ce_loss_score = (r.ce_zero - r.ce_sae) / (r.ce_zero - r.ce_clean);
    r.kl_sae = sums[kKlSae] / P;
    r.kl_zero = sums[kKlZero] / P;
    r.kl_div_score = (r.kl_zero - r.kl_sae) / r.kl_zero;
  }
  r.top_contexts.resize(static_cast<size_t>(D));
  for (int64_t fi = 0; fi < D; ++fi)
    for (auto& c : best[static_cast<size_t>(fi)])
      r.top_contexts[static_cast<size_t>(fi)].push_back({c.v, c.w, c.p, std::move(c.ids), c.at, std::move(c.vals)});
}

}  // namespace

SaeCorpusStats sae_corpus_stats(const Model& m, const Sae& sae, const Tokenizer& tok, const std::string& path,
                                const SaeCorpusOptions& opts) {
  at::NoGradGuard no_grad;
  if (sae.hook_name.empty()) throw UsageError(sae.source + ": the SAE names no hook point; give one (--hook / hook_name=)");
  check_sae_fits(sae, m);
  const int64_t W = checked_window(m, opts);
  if (opts.chunk_bytes < 16) throw UsageError("chunk_bytes must be at least 16");
  if (opts.contexts < 0 || opts.context_before < 0 || opts.context_after < 0)
    throw UsageError("--contexts and the context widths must be >= 0");
  if (opts.max_tokens < 0) throw UsageError("--max-tokens must be >= 0");

  detail::check_regular_file(path, detail::kMaxCorpusBytes, "corpora");
  std::error_code size_ec;
  const uint64_t total = std::filesystem::file_size(path, size_ec);  // for progress only

  SaeCorpusStats r;
  r.options = opts;
  r.options.progress = nullptr;
  r.corpus = path;
  r.sae_source = sae.source;
  r.hook_name = sae.hook_name;
  // What the SAE reconstructs: its own input, or (a transcoder) the activation at the point it writes.
  r.target_hook = sae.hook_name_out.empty() ? sae.hook_name : sae.hook_name_out;
  r.d_sae = sae.d_sae;
  r.d = sae.d_out;
  r.window = W;
  const int64_t D = sae.d_sae, d = sae.d_out, n = opts.contexts;
  const int64_t C = opts.context_before + 1 + opts.context_after;
  const bool transcoder = r.target_hook != sae.hook_name;

  std::vector<double> counts(static_cast<size_t>(D), 0.0);  // integers: exact in any order
  std::vector<double> hist(static_cast<size_t>(D * kHistogramBins), 0.0);
  std::vector<double> per_window;  // kSlots + d per window
  const int64_t stride = kSlots + d;
  // This process's best contexts per feature (Cand), kept sorted (best first).
  std::vector<std::vector<Cand>> best(static_cast<size_t>(D));
  const int shard_rank = opts.distributed ? dist::rank() : 0, shard_count = opts.distributed ? dist::size() : 1;

  auto hook_act = [&](const at::Tensor& a, int64_t T, int64_t width) {
    at::Tensor x = a.reshape({T, -1});
    if (x.size(1) != width)
      throw UsageError("the activation at the hook has width " + std::to_string(x.size(1)) + ", the SAE " +
                       std::to_string(width));
    return x;
  };

  auto process = [&](const std::vector<int64_t>& ids) {
    const int64_t T = static_cast<int64_t>(ids.size());
    per_window.resize(per_window.size() + static_cast<size_t>(stride), 0.0);
    const int64_t w = r.windows;
    if (w % shard_count == shard_rank) {
      double* win = per_window.data() + w * stride;
      at::Tensor tids = at::tensor(ids, at::kLong);
      at::Tensor in_act, out_act;
      HookList hooks;
      hooks.add(sae.hook_name, [&](at::Tensor& a) { in_act = a.detach().clone(); });
      if (transcoder) hooks.add(r.target_hook, [&](at::Tensor& a) { out_act = a.detach().clone(); });
      ForwardOutput clean = run_with_hooks(m, tids, hooks, {}, opts.ce_metrics);
      if (!in_act.defined() || (transcoder && !out_act.defined()))
        throw UsageError("hook " + (in_act.defined() ? r.target_hook : sae.hook_name) + " was not reached in the forward pass");
      at::Tensor x_in = hook_act(in_act, T, sae.d_in);
      at::Tensor x = transcoder ? hook_act(out_act, T, d) : x_in;
      at::Tensor xs = opts.float64 ? x_in.to(at::kDouble) : x_in.to(at::kFloat);
      at::Tensor acts = sae.encode(xs);
      at::Tensor xhat = sae.decode(acts, xs);
      const int64_t P = T - 1;  // scored positions
      at::Tensor a64 = acts.narrow(0, 0, P).to(at::kDouble).contiguous();
      at::Tensor x64 = x.narrow(0, 0, P).to(at::kDouble), xh64 = xhat.narrow(0, 0, P).to(at::kDouble);
      win[kRss] = (x64 - xh64).pow(2).sum().item<double>();
      win[kSumSq] = x64.pow(2).sum().item<double>();
      win[kCos] = at::cosine_similarity(x64, xh64, 1, 0.0).sum().item<double>();
      at::Tensor colsum = x64.sum(0).contiguous();
      std::copy(colsum.data_ptr<double>(), colsum.data_ptr<double>() + d, win + kSlots);
      const double* A = a64.data_ptr<double>();
      int64_t l0 = 0;
      for (int64_t p = 0; p < P; ++p) {
        const double* row = A + p * D;
        for (int64_t fi = 0; fi < D; ++fi) {
          const double v = row[fi];
          if (!(v > 0)) continue;
          ++l0;
          counts[static_cast<size_t>(fi)] += 1;
          hist[static_cast<size_t>(fi * kHistogramBins + histogram_bin(v))] += 1;
          if (n == 0) continue;
          auto& b = best[static_cast<size_t>(fi)];
          if (static_cast<int64_t>(b.size()) == n && !better(v, w, p, b.back().v, b.back().w, b.back().p)) continue;
          Cand c{v, w, p, 0, {}, {}};
          const int64_t s = std::max<int64_t>(0, p - opts.context_before), e = std::min(T, p + opts.context_after + 1);
          c.ids.assign(ids.begin() + s, ids.begin() + e);
          // The last position (T-1) is not scored but its activation is known: read it from acts.
          for (int64_t q = s; q < e; ++q) c.vals.push_back(q < P ? A[q * D + fi] : acts[q][fi].item<double>());
          c.at = p - s;
          auto pos = std::find_if(b.begin(), b.end(), [&](const Cand& o) { return better(v, w, p, o.v, o.w, o.p); });
          b.insert(pos, std::move(c));
          if (static_cast<int64_t>(b.size()) > n) b.pop_back();
        }
      }
      win[kL0] = static_cast<double>(l0);
      if (opts.ce_metrics) {
        // The clean log-probabilities and probabilities once per window (each is a float64 exp over [P, V]).
        const at::Tensor clean_lp = scored_logp(clean.logits, T), clean_p = clean_lp.exp();
        add_ce(clean_lp, ids, &win[kCeClean]);
        at::Tensor xhat_f = xhat.to(at::kFloat);
        HookList splice;
        splice.add(r.target_hook, [&](at::Tensor& a) { a.copy_(xhat_f.reshape(a.sizes())); });
        ce_kl(clean_lp, clean_p, run_with_hooks(m, tids, splice).logits, ids, &win[kCeSae], &win[kKlSae]);
        HookList zero;
        zero.add(r.target_hook, [](at::Tensor& a) { a.zero_(); });
        ce_kl(clean_lp, clean_p, run_with_hooks(m, tids, zero).logits, ids, &win[kCeZero], &win[kKlZero]);
      }
    }
    r.positions += T - 1;
    r.windows += 1;
  };

  // Windows: the same cut as lens --corpus (corpus_windows.hpp).
  const CorpusWindowCut cut{tok, path, static_cast<size_t>(opts.chunk_bytes), W, opts.max_tokens, m.config().vocab_size};
  r.tokens = for_each_corpus_window(cut, total, opts.progress, process).tokens;
  if (r.positions == 0) throw UsageError(path + ": the corpus has fewer than 2 tokens; nothing to score");

  if (shard_count > 1) {
    dist::allreduce_sum(per_window.data(), static_cast<int64_t>(per_window.size()));
    dist::allreduce_sum(counts.data(), static_cast<int64_t>(counts.size()));
    dist::allreduce_sum(hist.data(), static_cast<int64_t>(hist.size()));
    if (n > 0) merge_top_contexts(best, n, C, shard_rank, shard_count);
  }
  finish_stats(r, per_window, counts, hist, best, opts.ce_metrics);
  return r;
}

Result SaeCorpusStats::to_result(const Tokenizer* tok) const {
  auto text = [&](int64_t id) { return tok ? tok->display(id) : "#" + std::to_string(id); };
  Result r;
  r.kind = "feature_corpus";
  r.settings = {{"corpus", corpus},
                {"sae", sae_source},
                {"hook_name", hook_name},
                {"target_hook", target_hook},
                {"window", window},
                {"contexts", options.contexts},
                {"context_before", options.context_before},
                {"context_after", options.context_after},
                {"float64", options.float64},
                {"ce_metrics", options.ce_metrics},
                {"histogram_bins", "bin b: 10^(-3 + b/5) <= a < 10^(-3 + (b+1)/5); first and last open"},
                {"positions", "0 .. T-2 of each window (every corpus token but the last, once)"}};
  if (dist::size() > 1 && options.distributed) r.settings["ranks"] = dist::size();
  nlohmann::json metrics = {
      {"positions", positions},  {"windows", windows}, {"tokens", tokens}, {"d_sae", d_sae},
      {"dead_features", dead()}, {"mean_l0", mean_l0}, {"mse", mse},       {"explained_variance", explained_variance},
      {"cossim", cossim}};
  if (options.ce_metrics)
    metrics.update({{"ce_loss_without_sae", ce_clean},
                    {"ce_loss_with_sae", ce_sae},
                    {"ce_loss_with_ablation", ce_zero},
                    {"ce_loss_score", ce_loss_score},
                    {"kl_div_with_sae", kl_sae},
                    {"kl_div_with_ablation", kl_zero},
                    {"kl_div_score", kl_div_score}});
  r.summary["metrics"] = metrics;
  const int64_t D = d_sae;
  std::vector<double> density(static_cast<size_t>(D)), maxact(static_cast<size_t>(D), 0.0);
  for (int64_t f = 0; f < D; ++f) {
    density[static_cast<size_t>(f)] =
        positions ? static_cast<double>(fire_count[static_cast<size_t>(f)]) / static_cast<double>(positions) : 0.0;
    if (!top_contexts.empty() && !top_contexts[static_cast<size_t>(f)].empty())
      maxact[static_cast<size_t>(f)] = top_contexts[static_cast<size_t>(f)][0].activation;
  }
  r.arrays["density"] = NdArray::f64({D}, density.data());
  r.arrays["fire_count"] = NdArray::i64({D}, fire_count.data());
  if (options.contexts > 0) r.arrays["max_activation"] = NdArray::f64({D}, maxact.data());
  r.arrays["histogram"] = NdArray::i64({D, kHistogramBins}, histogram.data());
  std::vector<double> edges;
  for (int b = 0; b <= kHistogramBins; ++b) edges.push_back(std::pow(10.0, -3.0 + b / 5.0));
  r.arrays["histogram_edges"] = NdArray::f64({kHistogramBins + 1}, edges.data());
  // Contexts, one row each: feature, rank, activation, window, position, tokens (-1 padded), index of the max.
  const int64_t C = options.context_before + 1 + options.context_after;
  std::vector<int64_t> cf, cw, cp, cat, cids;
  std::vector<double> ca, cv;
  Table tab{"contexts", {"feature", "rank", "activation", "window", "position", "context", "token"}, {}};
  nlohmann::json pages = nlohmann::json::array();
  for (int64_t f = 0; f < D && f < static_cast<int64_t>(top_contexts.size()); ++f) {
    nlohmann::json ex = nlohmann::json::array();
    const auto& cs = top_contexts[static_cast<size_t>(f)];
    for (size_t q = 0; q < cs.size(); ++q) {
      const auto& c = cs[q];
      cf.push_back(f);
      ca.push_back(c.activation);
      cw.push_back(c.window);
      cp.push_back(c.position);
      cat.push_back(c.at);
      std::string s;
      nlohmann::json toks = nlohmann::json::array();
      for (int64_t k = 0; k < C; ++k) {
        const int64_t id = k < static_cast<int64_t>(c.ids.size()) ? c.ids[static_cast<size_t>(k)] : -1;
        cids.push_back(id);
        cv.push_back(k < static_cast<int64_t>(c.values.size()) ? c.values[static_cast<size_t>(k)] : 0.0);
        if (id < 0) continue;
        toks.push_back(text(id));
        s += (k == c.at ? "[[" + text(id) + "]]" : text(id));
      }
      tab.rows.push_back(
          {f, static_cast<int64_t>(q + 1), c.activation, c.window, c.position, s, text(c.ids[static_cast<size_t>(c.at)])});
      ex.push_back({{"tokens", toks}, {"at", c.at}, {"activation", c.activation}, {"values", c.values}});
    }
    if (pages.size() < 2000) pages.push_back({{"feature", f}, {"density", density[static_cast<size_t>(f)]}, {"contexts", ex}});
  }
  const int64_t R = static_cast<int64_t>(cf.size());
  r.arrays["context_features"] = NdArray::i64({R}, cf.data());
  r.arrays["context_activations"] = NdArray::f64({R}, ca.data());
  r.arrays["context_windows"] = NdArray::i64({R}, cw.data());
  r.arrays["context_positions"] = NdArray::i64({R}, cp.data());
  r.arrays["context_at"] = NdArray::i64({R}, cat.data());
  r.arrays["context_ids"] = NdArray::i64({R, C}, cids.data());
  r.arrays["context_values"] = NdArray::f64({R, C}, cv.data());
  r.summary["features"] = pages;
  r.tables.push_back(std::move(tab));
  return r;
}

}  // namespace vocablens

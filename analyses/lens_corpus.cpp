// Corpus mode of the logit lens (see vocablens/lens.hpp): a text file streamed through the model in
// windows of its context; per-layer mean cross-entropy (nats, bits per byte), KL to the final layer,
// entropy and top-1 accuracy over every predicted token. Memory is bounded by the chunk and window size.
#include <cmath>
#include <limits>

#include "vocablens/dist.hpp"
#include "vocablens/error.hpp"
#include "vocablens/detail/lens_engine.hpp"
#include "vocablens/lens.hpp"
#include "vocablens/lens_corpus.hpp"
#include "vocablens/model.hpp"
#include "vocablens/tokenizer.hpp"
#include "vocablens/text_inputs.hpp"
#include "util/regular_file.hpp"
#include "corpus_windows.hpp"

namespace vocablens {

CorpusLensResult logit_lens_corpus(const Model& m, const Tokenizer& tok, const std::string& path, const CorpusLensOptions& opts) {
  using namespace lens_detail;
  LensOptions lo = opts.lens;
  lo.top_k = 1;
  lo.target.reset();
  validate_options(m, lo);
  const int64_t n_ctx = m.config().n_ctx;
  const int64_t W = opts.window > 0 ? opts.window : n_ctx;
  if (W < 2 || W > n_ctx)
    throw UsageError("--window must be in [2, " + std::to_string(n_ctx) + "] (got " + std::to_string(W) + ")");
  if (opts.chunk_bytes < 16) throw UsageError("chunk_bytes must be at least 16");

  // Streamed by for_each_corpus_chunk (text_inputs.hpp), which opens only a regular file (/dev/zero never ends, a FIFO blocks).
  const uint64_t total = detail::check_regular_file(path, detail::kMaxCorpusBytes, "corpora");

  LensEngine eng(m, lo);
  const int64_t n = static_cast<int64_t>(eng.layers().size());
  CorpusLensResult r;
  r.corpus = path;
  r.layers = eng.layers();
  r.window = W;
  r.options = opts.lens;
  r.corpus_bytes = total;
  std::vector<double> ce(static_cast<size_t>(n), 0), kl(static_cast<size_t>(n), 0), ent(static_cast<size_t>(n), 0),
      top1(static_cast<size_t>(n), 0);

  // Bytes each token stands for (bits per byte counts the bytes of the predicted tokens).
  std::vector<int32_t> token_len(static_cast<size_t>(m.config().vocab_size), 0);
  for (int64_t id = 0; id < m.config().vocab_size && id < tok.vocab_size(); ++id) {
    try {
      token_len[static_cast<size_t>(id)] = static_cast<int32_t>(tok.token_bytes(id).size());
    } catch (const Error&) {}
  }

  LensStats st;
  std::vector<int64_t> none;

  // Per-window sums (4 per layer: cross-entropy, KL, entropy, top-1), reduced in window order at the end so
  // that any number of ranks gives the one-process numbers bit for bit (vocablens/dist.hpp).
  const int64_t n4 = 4 * n;
  std::vector<double> per_window;
  const int shard_rank = opts.distributed ? dist::rank() : 0, shard_count = opts.distributed ? dist::size() : 1;
  std::vector<double> pos_kl(static_cast<size_t>(n * W), 0.0), pos_count(static_cast<size_t>(W), 0.0);
  auto process = [&](const std::vector<int64_t>& ids) {
    const int64_t T = static_cast<int64_t>(ids.size());
    per_window.resize(per_window.size() + static_cast<size_t>(n4), 0.0);
    double* win = per_window.data() + per_window.size() - static_cast<size_t>(n4);
    for (int64_t t = 0; t + 1 < T; ++t)
      r.bytes += static_cast<uint64_t>(token_len[static_cast<size_t>(ids[static_cast<size_t>(t + 1)])]);
    if (r.windows % shard_count == shard_rank) {
      none.assign(static_cast<size_t>(T), -1);
      eng.run(ids, none, 1, st);
      for (int64_t t = 0; t + 1 < T; ++t) {
        const int64_t next = ids[static_cast<size_t>(t + 1)];
        for (int64_t li = 0; li < n; ++li) {
          const size_t a = static_cast<size_t>(li * T + t);
          const double k = st.kl(li, t);
          win[4 * li + 0] += st.lse[a] - static_cast<double>(st.z_next[a]);
          win[4 * li + 1] += k;
          win[4 * li + 2] += st.entropy[a];
          // A NaN row (a NaN logit under --allow-nonfinite) has no top-1: the accuracy becomes NaN, not lower.
          win[4 * li + 3] +=
              std::isnan(st.lse[a]) ? std::numeric_limits<double>::quiet_NaN() : (st.top_ids[a] == next ? 1.0 : 0.0);
          if (opts.by_position) pos_kl[static_cast<size_t>(li * W + t)] += k;
        }
        if (opts.by_position) pos_count[static_cast<size_t>(t)] += 1;
      }
    }
    r.predicted += T - 1;
    r.windows += 1;
  };
  const CorpusWindowCut cut{tok, path, static_cast<size_t>(opts.chunk_bytes), W, opts.max_tokens, m.config().vocab_size};
  r.tokens = for_each_corpus_window(cut, total, opts.progress, process).tokens;
  if (r.predicted == 0) throw UsageError(path + ": the corpus has fewer than 2 tokens; nothing to predict");
  if (shard_count > 1) {
    dist::allreduce_sum(per_window.data(), static_cast<int64_t>(per_window.size()));  // exact: one owner per window
    if (opts.by_position) {
      dist::allreduce_sum(pos_kl.data(), static_cast<int64_t>(pos_kl.size()));
      dist::allreduce_sum(pos_count.data(), static_cast<int64_t>(pos_count.size()));
    }
  }
  for (int64_t w = 0; w < r.windows; ++w)
    for (int64_t li = 0; li < n; ++li) {
      const double* win = per_window.data() + w * n4 + 4 * li;
      ce[static_cast<size_t>(li)] += win[0];
      kl[static_cast<size_t>(li)] += win[1];
      ent[static_cast<size_t>(li)] += win[2];
      top1[static_cast<size_t>(li)] += win[3];
    }
  if (opts.by_position) {
    int64_t used = W;
    while (used > 0 && pos_count[static_cast<size_t>(used - 1)] == 0) --used;
    r.kl_by_position.assign(static_cast<size_t>(n * used), std::numeric_limits<double>::quiet_NaN());
    for (int64_t li = 0; li < n; ++li)
      for (int64_t t = 0; t < used; ++t)
        if (pos_count[static_cast<size_t>(t)] > 0)
          r.kl_by_position[static_cast<size_t>(li * used + t)] =
              pos_kl[static_cast<size_t>(li * W + t)] / pos_count[static_cast<size_t>(t)];
    r.positions = used;
  }

  r.mean_cross_entropy.resize(static_cast<size_t>(n));
  r.bits_per_byte.resize(static_cast<size_t>(n));
  r.mean_kl_final.resize(static_cast<size_t>(n));
  r.mean_entropy.resize(static_cast<size_t>(n));
  r.top1_accuracy.resize(static_cast<size_t>(n));
  const double N = static_cast<double>(r.predicted);
  for (size_t li = 0; li < static_cast<size_t>(n); ++li) {
    r.mean_cross_entropy[li] = ce[li] / N;
    r.bits_per_byte[li] =
        r.bytes ? ce[li] / (std::log(2.0) * static_cast<double>(r.bytes)) : std::numeric_limits<double>::quiet_NaN();
    r.mean_kl_final[li] = kl[li] / N;
    r.mean_entropy[li] = ent[li] / N;
    r.top1_accuracy[li] = top1[li] / N;
  }
  return r;
}

Result CorpusLensResult::to_result() const {
  const int64_t n = static_cast<int64_t>(layers.size());
  Result r;
  r.kind = "logit_lens_corpus";
  r.settings = {{"corpus", corpus},
                {"window", window},
                {"resid_mid", options.resid_mid},
                {"unembed", options.unembed == LensUnembed::PseudoInverse ? "pinv" : "W_U"},
                {"decoder_blocks", options.decoder_blocks},
                {"lens", options.tuned ? "tuned" : "logit"},
                {"final_norm", "recomputed on each layer's residual"},
                {"units", "nats; bits per byte = total cross-entropy / (ln 2 * bytes of the predicted tokens)"}};
  nlohmann::json per = nlohmann::json::array();
  Table tab;
  tab.name = "per_layer";
  tab.columns = {"layer", "hook", "cross_entropy_nats", "bits_per_byte", "kl_final_nats", "entropy_nats", "top1_accuracy"};
  for (int64_t li = 0; li < n; ++li) {
    const size_t i = static_cast<size_t>(li);
    per.push_back({{"layer", layers[i].label},
                   {"hook", layers[i].hook},
                   {"cross_entropy_nats", mean_cross_entropy[i]},
                   {"bits_per_byte", bits_per_byte[i]},
                   {"kl_final_nats", mean_kl_final[i]},
                   {"entropy_nats", mean_entropy[i]},
                   {"top1_accuracy", top1_accuracy[i]}});
    tab.rows.push_back({layers[i].label, layers[i].hook, mean_cross_entropy[i], bits_per_byte[i], mean_kl_final[i],
                        mean_entropy[i], top1_accuracy[i]});
  }
  r.summary = {{"corpus", corpus},         {"corpus_bytes", corpus_bytes}, {"tokens", tokens}, {"predicted_tokens", predicted},
               {"predicted_bytes", bytes}, {"windows", windows},           {"per_layer", per}};
  r.arrays["mean_cross_entropy"] = NdArray::f64({n}, mean_cross_entropy.data());
  r.arrays["bits_per_byte"] = NdArray::f64({n}, bits_per_byte.data());
  r.arrays["mean_kl_final"] = NdArray::f64({n}, mean_kl_final.data());
  r.arrays["mean_entropy"] = NdArray::f64({n}, mean_entropy.data());
  r.arrays["top1_accuracy"] = NdArray::f64({n}, top1_accuracy.data());
  if (positions > 0) r.arrays["kl_by_position"] = NdArray::f64({n, positions}, kl_by_position.data());
  r.tables.push_back(std::move(tab));
  return r;
}

}  // namespace vocablens

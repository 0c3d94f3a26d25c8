// vocablens/lens.hpp — the logit lens: every layer's residual stream read through the unembedding.
//
// For each lens layer (the embedding output resid_pre.0, then resid_post.L after every block, and
// optionally resid_mid.L between attention and MLP) and every position, the residual is passed through
// the model's *own* final norm, recomputed on that residual (LayerNorm or RMSNorm with its scale and
// bias: never the final layer's cached scale), then through W_U (+ b_U). From those logits it reports
// top-k tokens with probabilities, the target's rank and probability (default target: the next token
// of the input), entropy, KL(final || layer) and the cross-entropy against the next token.
//
//   vocablens::Model m = vocablens::load_model("fixtures/gpt2-tiny");
//   vocablens::LensOptions opt;   opt.top_k = 5;
//   vocablens::LensResult lens = vocablens::logit_lens(m, {464, 412, 733, 417, 8765});
//   float p = lens.top_prob(lens.n_layers() - 1, 4, 0);      // final layer, last position, top-1
//   vocablens::Result r = lens.to_result(tokenizer.get());    // for write_result / the CLI
//
// Variants: LensOptions::tuned reads every layer through its tuned-lens translator (vocablens/tuned_lens.hpp);
// LensOptions::unembed = PseudoInverse reads through E⁺ (vocablens::embedding_pinv, [d_model, V])
// instead of W_U; LensOptions::decoder_blocks = k runs each layer's residual through the last k blocks before the
// final norm (the "last blocks as decoder" lens of nostalgebraist / Belrose et al.'s baseline).
//
// Speed: logits are never materialised for the whole [layers, T, V] cube. Positions are taken in blocks;
// for each block all layers' normalised residuals go through one GEMM into a reused buffer, followed by
// one fused per-row pass (max, top-k, target rank, dot with the final distribution) and one exp pass
// (log-sum-exp, entropy), parallel over rows. Memory: O(layers * block * V) floats, not O(layers * T * V).
//
// All values are in nats; probabilities are float32; KL and entropies are computed in double and stored
// as float32. The engine behind it (shared with lens_batch.hpp and lens_corpus.hpp) is in
// vocablens/detail/lens_engine.hpp, for tests and benchmarks only.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "vocablens/result.hpp"

namespace vocablens {

class Model;
class Tokenizer;
struct TunedLens;
class HookList;

enum class LensUnembed {
  Model,          ///< the model's own unembedding W_U (+ b_U)
  PseudoInverse,  ///< E⁺ = pinv(W_Uᵀ) [d_model, V] from unembed.hpp (= pinv(W_E) when tied), cached on disk
};

struct LensOptions {
  /// Tokens reported per (layer, position); 0 = none (corpus statistics only). At most the vocabulary.
  int64_t top_k = 10;
  /// Also lens the residual between attention and MLP of every block (resid_mid.L).
  bool resid_mid = false;
  LensUnembed unembed = LensUnembed::Model;
  /// Treat the last k blocks as part of the decoder: layer residuals are run through blocks
  /// n_layers-k .. n_layers-1 (with attention over the same layer's residuals at all positions) before
  /// the final norm. Only layers up to resid_post.(n_layers-k-1) (i.e. before those blocks) are lensed;
  /// the last of them then equals the model's own output. 0 <= k <= n_layers.
  int64_t decoder_blocks = 0;
  /// One target token for every position. Unset: the next input token (none at the last position).
  std::optional<int64_t> target;
  /// Positions per GEMM block; 0 = choose automatically (about 1024 rows of layers x positions, the logit
  /// block capped at 256 MiB: lens_detail::default_block_positions).
  int64_t block_positions = 0;
  /// Force the portable scalar statistics kernel instead of the AVX2 one (for tests and comparison).
  bool scalar_kernel = false;
  /// The tuned lens (vocablens/tuned_lens.hpp): every lens layer but the last is passed through its
  /// translator before the final norm. Null = the logit lens. Not with resid_mid or decoder_blocks.
  std::shared_ptr<const TunedLens> tuned;
  /// Also keep every layer's full log-distribution (LensResult::log_probs, [n, T, V] float32: n·T·V·4 bytes),
  /// what `vocablens compare` needs for the KL between two runs (`lens --save-probs`).
  bool save_log_probs = false;
  /// Hold one lens layer at a time instead of every layer's normalised residual [n, T, d]: a first forward
  /// keeps only the final layer and its distribution [T, V] (what KL(final || layer) needs), a second computes
  /// every other layer's statistics as its hook produces it. The same statistics (up to the GEMM's float32
  /// rounding) for n·T·d·4 bytes less and T·V·4 more, at the cost of a second forward: for long prompts on
  /// models where n·d > V (a 7B Llama at 8192 tokens: 4.2 GB of residuals against 1.0 GB of distribution).
  /// Not with save_log_probs (which keeps every layer's [T, V] anyway).
  bool two_pass = false;
  /// Hooks that edit the forward the lens reads (`lens --ablate-expert`, vocablens/experts.hpp), added before
  /// the lens's own to every forward it runs. They may edit only the tensor they are handed. Null: the model's
  /// own forward.
  std::shared_ptr<const HookList> interventions;
};

/// One lensed point of the residual stream.
struct LensLayer {
  std::string hook;    ///< "resid_pre.0", "resid_mid.3", "resid_post.3"
  std::string label;   ///< "embed", "3.mid", "3" (short, for tables)
  int64_t block = -1;  ///< block index the residual comes out of (-1: embedding)
};

/// The typed output of the logit lens. Arrays are C order; n = n_layers(), T = tokens.size(), k = top_k.
/// Entries with no target (the last position when the target is the next token) are NaN (float) or -1.
struct LensResult {
  std::vector<int64_t> tokens;    ///< [T] input ids
  std::string model_source;       ///< Model::source()
  std::vector<LensLayer> layers;  ///< [n]; the last one is the model's output (unless decoder_blocks > 0)
  LensOptions options;
  int64_t vocab_size = 0;
  int64_t top_k = 0;
  std::vector<int64_t> targets;       ///< [T] the target of each position, -1 = none
  std::vector<int64_t> top_ids;       ///< [n, T, k] most probable tokens, descending (ties: lower id first)
  std::vector<float> top_probs;       ///< [n, T, k]
  std::vector<float> entropy;         ///< [n, T] nats
  std::vector<float> kl_final;        ///< [n, T] KL(final layer || this layer), nats
  std::vector<float> cross_entropy;   ///< [n, T] -log p(next token), nats; NaN at the last position
  std::vector<float> logsumexp;       ///< [n, T] of this layer's logits
  std::vector<float> target_prob;     ///< [n, T]
  std::vector<float> target_logprob;  ///< [n, T]
  std::vector<int64_t> target_rank;   ///< [n, T] 1 + number of tokens with a strictly larger logit
  std::vector<float> log_probs;       ///< [n, T, V] log-softmax of each layer's logits; empty unless save_log_probs

  int64_t n_layers() const { return static_cast<int64_t>(layers.size()); }
  int64_t n_positions() const { return static_cast<int64_t>(tokens.size()); }
  size_t at(int64_t layer, int64_t pos) const { return static_cast<size_t>(layer * n_positions() + pos); }
  int64_t top_id(int64_t layer, int64_t pos, int64_t r) const { return top_ids[at(layer, pos) * top_k + r]; }
  float top_prob(int64_t layer, int64_t pos, int64_t r) const { return top_probs[at(layer, pos) * top_k + r]; }
  /// Mean cross-entropy of a layer over the positions that have a next token (NaN if none).
  double mean_cross_entropy(int64_t layer) const;

  /// The Result for exporters: kind "logit_lens"; settings (options, prompt if given); summary (tokens
  /// as ids and display strings, layers, per-layer means, per-position top-1 grid); arrays top_ids,
  /// top_probs, entropy, kl_final, cross_entropy, logsumexp, target_prob, target_logprob, target_rank,
  /// tokens, targets (and log_probs [n, T, V] when kept); table "top_k" (one row per layer x position x rank). `tok` may be null (then token
  /// strings are "#id").
  Result to_result(const Tokenizer* tok, const std::string& prompt = "") const;
};

/// The logit lens over one sequence (ids: T >= 1 tokens, T <= n_ctx). Throws UsageError on bad input
/// (empty, too long, id out of range, bad options).
LensResult logit_lens(const Model& m, const std::vector<int64_t>& ids, const LensOptions& opts = {});

/// The lens layers the options select, in order (what LensResult::layers will hold).
std::vector<LensLayer> lens_layers(const Model& m, const LensOptions& opts);

}  // namespace vocablens

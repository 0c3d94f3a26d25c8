// vocablens/sae_corpus.hpp — an SAE (or transcoder) over a whole text file: how often each feature fires, how
// strongly (a log-binned histogram), which features never fire, L0, the contexts that excite each feature most,
// and SAELens's evaluation metrics (reconstruction MSE, explained variance, cross-entropy loss recovered when
// the reconstruction is spliced into the forward pass). `vocablens features MODEL --sae PATH --corpus FILE`.
//
// The corpus is streamed exactly as `lens --corpus` streams it (vocablens/lens_corpus.hpp): read in chunks,
// tokenised, cut into windows of the model's context that overlap by one token. In each window of T tokens the
// positions 0 .. T-2 are scored (those that predict a next token), so every token of the corpus but the last
// is counted exactly once, for the activation statistics and for the cross-entropy alike.
//
//   vocablens::SaeCorpusOptions o;  o.max_tokens = 100000;  o.contexts = 10;
//   auto s = vocablens::sae_corpus_stats(model, sae, *tok, "wiki.txt", o);
//   s.fire_count[f] / double(s.positions);   // feature f's firing density
//   s.ce_loss_score;                          // 1 = the SAE loses nothing, 0 = as bad as zeroing the hook
//   vocablens::Result r = s.to_result(tok.get());   // kind "feature_corpus"
//
// Per window three forward passes: the clean one (its activation at the hook is read), one with the
// reconstruction x̂ spliced in at the hook (a transcoder: at the point it writes), one with that point zeroed
// (SAELens's zero ablation). Definitions (sums over every scored position p, in float64):
//   density_f         = #{p : f_p > 0} / P                 dead: never fires in the P positions
//   mean_l0           = Σ_p #{f : f_p > 0} / P
//   histogram [d_sae, 40]: counts of the positive activations in fixed log-spaced bins, bin b holding
//                     10^(-3 + b/5) <= a < 10^(-3 + (b+1)/5); bin 0 also holds everything below 10^-3 and
//                     bin 39 everything from 10^4.8 (kHistogramEdges lists the 41 edges)
//   mse               = Σ_p ‖x_p − x̂_p‖² / (P · d)          (torch's mse_loss over every element)
//   explained_variance = 1 − Σ_p ‖x_p − x̂_p‖² / Σ_p ‖x_p − x̄‖²,  x̄ the mean over the P positions
//   cossim            = mean_p cos(x_p, x̂_p)
//   ce_clean / ce_sae / ce_zero: mean next-token cross-entropy (nats) of the three passes
//   ce_loss_score     = (ce_zero − ce_sae) / (ce_zero − ce_clean)   (SAELens's "CE loss recovered")
//   kl_sae / kl_zero  = mean KL(clean ‖ spliced) / KL(clean ‖ zeroed);  kl_div_score = (kl_zero − kl_sae) / kl_zero
// where x is the activation the SAE reconstructs (for a transcoder, the one at hook_name_out).
//
// Max-activating contexts: for every feature the `contexts` scored positions with the largest activation
// (ties: earlier window, then earlier position), each with the tokens around it (context_before tokens
// before, context_after after, within its window).
//
// Under mpirun (vocablens/dist.hpp) window w is run by rank w mod size; every rank returns the same result,
// equal bit for bit to one process: counts are integers, the float sums are reduced per window in window
// order, and the top contexts are merged with the order above.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "vocablens/result.hpp"

namespace vocablens {

class Model;
class Tokenizer;
struct Sae;
struct MemoryEstimate;

inline constexpr int kHistogramBins = 40;
/// Bin b of the activation histogram: [10^(-3 + b/5), 10^(-3 + (b+1)/5)); the first and last bins are open.
int histogram_bin(double activation);

struct SaeCorpusOptions {
  int64_t window = 0;            ///< tokens per window; 0 = the model's context
  size_t chunk_bytes = 1 << 20;  ///< bytes of text tokenised at a time
  int64_t max_tokens = 0;        ///< stop after this many scored positions (0 = the whole corpus)
  int64_t contexts = 5;          ///< max-activating contexts kept per feature (0 = none)
  int64_t context_before = 8, context_after = 4;
  bool ce_metrics = true;   ///< the spliced and zeroed forward passes (cross-entropy, KL)
  bool float64 = false;     ///< encode / decode in float64 (references); float32 otherwise
  bool distributed = true;  ///< share windows across mpirun ranks
  /// Called after each window with (positions predicted so far, their total): max_tokens when > 0, else the
  /// corpus's estimated from the tokens per byte read so far (exact once the file is read).
  std::function<void(uint64_t, uint64_t)> progress;
};

struct SaeCorpusStats {
  SaeCorpusOptions options;
  std::string corpus, sae_source, hook_name, target_hook;
  int64_t d_sae = 0, d = 0, window = 0, windows = 0, tokens = 0, positions = 0;
  std::vector<int64_t> fire_count;  ///< [d_sae]
  std::vector<int64_t> histogram;   ///< [d_sae, kHistogramBins]
  double mean_l0 = 0, mse = 0, explained_variance = 0, cossim = 0;
  double ce_clean = 0, ce_sae = 0, ce_zero = 0, ce_loss_score = 0;
  double kl_sae = 0, kl_zero = 0, kl_div_score = 0;
  struct Context {
    double activation = 0;
    int64_t window = 0, position = 0;  ///< where in the corpus (window index, position in it)
    std::vector<int64_t> ids;          ///< the tokens around it
    int64_t at = 0;                    ///< index of the activating token in ids
    std::vector<double> values;        ///< the feature's activation at each token of ids
  };
  std::vector<std::vector<Context>> top_contexts;  ///< [d_sae], strongest first

  int64_t dead() const;
  /// kind "feature_corpus": arrays density, fire_count, max_activation [d_sae], histogram [d_sae, 40],
  /// histogram_edges [41], context_features / context_activations / context_ids [rows ...]; summary metrics
  /// and one page per feature with its densest contexts; table "features".
  Result to_result(const Tokenizer* tok) const;
};

/// Throws UsageError on a bad window, an SAE with no hook point, fewer than 2 tokens; FormatError when the
/// file cannot be read.
SaeCorpusStats sae_corpus_stats(const Model& m, const Sae& sae, const Tokenizer& tok, const std::string& path,
                                const SaeCorpusOptions& opts = {});

/// The peak memory sae_corpus_stats will need, from shapes alone (the CLI's `--dry-run`): the model and one
/// window's forward (vocablens/memory_estimate.hpp), the SAE's weights as stored, one window's activations
/// [window, d_sae] (float32 pre-activations and activations, their float64 copy for the statistics), the
/// statistics kept for every feature (counts, histogram, `contexts` contexts), and with `ce_metrics` the
/// logits of the clean and spliced forwards in float64. Same checks of the window as sae_corpus_stats.
MemoryEstimate estimate_sae_corpus_memory(const Model& m, const Sae& sae, const SaeCorpusOptions& opts = {});

}  // namespace vocablens

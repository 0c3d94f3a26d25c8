// vocablens/tuned_lens.hpp — the tuned lens (Belrose et al. 2023, "Eliciting Latent Predictions from
// Transformers with the Tuned Lens"): one affine translator per layer, h ↦ h + A_l·h + b_l, applied to the
// residual before the model's own final norm and unembedding. Trained to minimise KL(final ‖ lens_l) on the
// model's own predictions (`vocablens tuned-lens train`, vocablens/tuned_lens_train.hpp); read here.
//
// Layers: translator l (l = 0 .. n_layers-1) reads the l-th lens layer of the logit lens without
// resid_mid: l = 0 the embedding output resid_pre.0, l >= 1 resid_post.(l-1). The last lens layer,
// resid_post.(n_layers-1), is the model's own output and has no translator (as in the tuned-lens package,
// whose `layer_translators` has num_hidden_layers entries).
//
// Files (a directory):
//   tuned_lens.safetensors   "<l>.weight" [d, d] (nn.Linear orientation: out x in, A_l·h = h @ Wᵀ),
//                            "<l>.bias" [d]; metadata: format "vocablens-tuned-lens"
//   params.pt                the tuned-lens package's torch.save(layer_translators.state_dict()): same keys
//   config.json              the package's TunedLensConfig: base_model_name_or_path, d_model,
//                            num_hidden_layers, bias, base_model_revision, unembed_hash, lens_type
// load_tuned_lens reads either checkpoint (safetensors first) through vocablens/tuned_lens_checkpoint.hpp (where
// TunedLensConfig and tuned_lens_unfinished are); save_tuned_lens writes both.
//
//   vocablens::TunedLens tl = vocablens::load_tuned_lens("out/stories-lens");
//   tl.check_model(model);                               // one line naming both when they do not match
//   at::Tensor h2 = tl.translate(h, 3);                  // [..., d] -> [..., d]
//   vocablens::LensOptions o;  o.tuned = std::make_shared<vocablens::TunedLens>(tl);
//   auto lens = vocablens::logit_lens(model, ids, o);    // every logit-lens metric through the translators
//
// Tensors are float32 (params.pt in float16/bfloat16 is upcast at load).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "vocablens/lens_corpus.hpp"
#include "vocablens/result.hpp"
#include "vocablens/tensor_fwd.hpp"
#include "vocablens/tuned_lens_checkpoint.hpp"

namespace vocablens {

class Model;
class Tokenizer;

struct TunedLens {
  // Out of line: at::Tensor is only declared here (vocablens/tensor_fwd.hpp); using the tensors needs <ATen/ATen.h>.
  TunedLens();
  ~TunedLens();
  TunedLens(const TunedLens&);
  TunedLens(TunedLens&&) noexcept;
  TunedLens& operator=(const TunedLens&);
  TunedLens& operator=(TunedLens&&) noexcept;

  TunedLensConfig config;
  std::vector<at::Tensor> weight;  ///< [n_layers] of [d, d], out x in
  std::vector<at::Tensor> bias;    ///< [n_layers] of [d] (zeros when config.bias is false)
  std::string source;              ///< directory it was read from ("" when built in memory)
  /// SHA-256 of the float32 bytes of W_U (+ b_U) of the model it was trained on (unembedding_sha256()),
  /// kept in tuned_lens.safetensors' metadata; "" when unknown (params.pt from the package).
  std::string unembed_sha256;

  int64_t n_translators() const;
  /// Identity translators (A = 0, b = 0) for `m`: the tuned lens then equals the logit lens.
  static TunedLens identity(const Model& m);
  /// h [..., d] + h @ weight[idx]ᵀ + bias[idx]. idx in [0, n_translators()).
  at::Tensor translate(const at::Tensor& h, int64_t idx) const;
  /// Throws UsageError naming the lens and the model when d_model or the layer count differ.
  void check_model(const Model& m) const;
  /// False when unembed_sha256 is known and differs from `m`'s: same shapes, another model (a warning, not
  /// an error: lenses transfer between fine-tunes of one model).
  bool matches_unembedding(const Model& m) const;
};

/// Text sampled from the model itself, for training and held-out corpora: sequences start at BOS (token 1 when
/// the model has none), draw each next token from softmax(logits / temperature) with a portable generator
/// seeded by `seed` (inverse CDF in double: the same text on every machine), and end at BOS/EOS or after
/// `max_len` tokens (0 = min(n_ctx, 256)); decoded and joined by newlines until `n_tokens` are drawn.
/// Sequences sample_corpus draws side by side (one forward of [kSampleCorpusBatch, 1] per position, the earlier
/// positions' keys and values cached: vocablens/kv_cache.hpp).
inline constexpr int64_t kSampleCorpusBatch = 32;
std::string sample_corpus(const Model& m, const Tokenizer& tok, int64_t n_tokens, uint64_t seed, double temperature = 1.0,
                          int64_t max_len = 0);

/// SHA-256 hex of W_U's float32 bytes followed by b_U's (when defined).
std::string unembedding_sha256(const Model& m);

/// Reads a tuned lens directory (tuned_lens.safetensors or params.pt, and config.json when present) with
/// read_tuned_lens_checkpoint, and warns on stderr when its training was stopped early (tuned_lens_unfinished).
/// Throws FormatError naming the file on any problem (missing translator, wrong shape, non-finite value).
TunedLens load_tuned_lens(const std::string& dir);

// ---- evaluation: the logit lens and the tuned lens side by side on held-out text ----------------------

struct TunedLensEvalOptions {
  int64_t window = 0;      ///< tokens per window; 0 = the model's context (windows overlap by one token)
  int64_t max_tokens = 0;  ///< stop after this many predicted tokens (0 = the whole file)
  std::function<void(uint64_t, uint64_t)> progress;  ///< as CorpusLensOptions::progress, per lens
};

/// Per layer, in bits per byte (nats summed over the predicted tokens / (ln 2 · their bytes)): cross-entropy
/// against the next token, entropy of the lens distribution, KL(final ‖ lens); and the mean KL (nats) at
/// each window position for the heatmap. Kind "tuned_lens_eval".
struct TunedLensEvalResult {
  std::string lens_dir;
  CorpusLensResult logit, tuned;  ///< the two corpus passes (same windows), with kl_by_position
  std::vector<double> logit_ce_bpb, tuned_ce_bpb, logit_entropy_bpb, tuned_entropy_bpb, logit_kl_bpb, tuned_kl_bpb;
  Result to_result() const;
};

/// Runs the corpus lens twice over `corpus` (logit, then tuned). Throws as logit_lens_corpus does, and
/// UsageError when the lens does not belong to the model.
TunedLensEvalResult evaluate_tuned_lens(const Model& m, const Tokenizer& tok, std::shared_ptr<const TunedLens> lens,
                                        const std::string& corpus, const TunedLensEvalOptions& o = {});

}  // namespace vocablens

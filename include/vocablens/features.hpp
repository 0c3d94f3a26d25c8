// vocablens/features.hpp — SAE / transcoder features read in vocabulary space (logit weights).
//
// Feature f writes its decoder direction d_f = W_dec[f] [d] into the residual stream; its logit weights
// are d_f W_U [V] (Neuronpedia's "top / bottom logits", Bricken et al. 2023), optionally through the final
// norm's scale (d_f ⊙ γ) W_U — the direct effect on the logits of a unit activation, ignoring the norm's
// data-dependent 1/σ. feature_logits() returns, for every requested feature, the exact top-k and bottom-k
// tokens of that row, never forming the d_sae × V product (67 G entries for a 262k-feature SAE on a 256k
// vocabulary): a chunk of decoder rows (≤ 64 M products, ~256 MB) is multiplied by W_U in one float32 GEMM,
// the k + 16 best and worst candidates of each row are recomputed as canonical float64 dot products
// (topk_stream's definition), and a rigorous float32 error bound proves that no other token can enter;
// the rare row it cannot settle goes through the streamed top-k engine (vocablens/linalg/topk_stream.hpp).
//
//   vocablens::Sae sae = vocablens::load_sae("saes/res-1");
//   vocablens::FeatureLogitsOptions o;
//   o.top_k = 10; o.features = {0, 5, 6};          // empty = every feature
//   auto a = vocablens::feature_logits(model, sae, o, tok.get());
//   a.top[0][0].j;       // best token id of feature 0, a.top[0][0].value its logit weight
//
// Values are canonical float64 dot products (topk_stream's contract); order is value descending, token id
// ascending; bottom lists are lowest first. Result kind "features": arrays feature_ids [N], top_ids /
// bottom_ids [N, k] int64, top_values / bottom_values [N, k] float64, decoder_norms [N]; table "top_k".
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "vocablens/linalg/topk_stream.hpp"
#include "vocablens/result.hpp"
#include "vocablens/token_filter.hpp"

namespace vocablens {

class Model;
class Tokenizer;
struct Sae;

struct FeatureLogitsOptions {
  int64_t top_k = 10;
  std::vector<int64_t> features;   ///< empty = every feature
  bool bottom = true;              ///< also the k lowest tokens of each feature
  bool final_norm_scale = false;   ///< multiply each decoder row by the final norm's scale γ first
  TokenFilter filter;
  /// Called as the work advances with (features done, features in total); may be empty.
  std::function<void(int64_t, int64_t)> progress;
};

struct FeatureLogits {
  FeatureLogitsOptions options;
  std::string sae_source, sae_layout, architecture, hook_name, hook_name_out;
  int64_t d_sae = 0, d_in = 0, vocab_size = 0;
  std::vector<int64_t> features;
  std::vector<double> decoder_norms;                 ///< ‖W_dec[f]‖ (after the norm scale when asked)
  std::vector<std::vector<TopkEntry>> top, bottom;   ///< per feature; TopkEntry.j = token id
  int64_t rows_streamed = 0;  ///< lists the chunked product could not settle, computed by the streamed engine
  /// kind "features" (see above).
  Result to_result(const Tokenizer* tok) const;
};

/// Feature lens on a prompt: the SAE reads its hook point during the model's forward pass on `ids`; at each
/// position, the features that fire (activation > 0), L0, and the `top_features` strongest with their
/// activations and (top_k) the tokens each one's decoder direction promotes.
struct FeatureLensOptions {
  int64_t top_features = 5;
  int64_t top_k = 5;              ///< tokens listed per feature shown
  bool final_norm_scale = false;
};

struct FeatureLens {
  FeatureLensOptions options;
  std::string sae_source, hook_name;
  std::vector<int64_t> ids;
  at::Tensor acts;                                         ///< [T, d_sae] float32
  std::vector<int64_t> l0;                                 ///< [T] features firing per position
  std::vector<std::vector<std::pair<int64_t, double>>> top;  ///< per position: (feature, activation), strongest first
  std::vector<int64_t> shown;                              ///< every feature in `top`, ascending
  std::vector<std::vector<TopkEntry>> shown_tokens;        ///< top tokens of each shown feature
  /// kind "feature_lens": arrays ids [T], l0 [T], top_features [T, n] int64 (-1 when fewer fire),
  /// top_activations [T, n] float64, shown_features [S], shown_token_ids [S, k]; table "top_features".
  Result to_result(const Tokenizer* tok, const std::string& prompt) const;
};

/// Throws UsageError when the SAE names no hook point (give one with SaeLoadOptions::hook_name).
FeatureLens feature_lens(const Model& m, const Sae& sae, const std::vector<int64_t>& ids, const FeatureLensOptions& o,
                         const Tokenizer* tok = nullptr);

/// Throws UsageError on a feature out of range, top_k < 1 or > V, or an SAE whose decoder does not write
/// d_model-wide vectors (its file named).
FeatureLogits feature_logits(const Model& m, const Sae& sae, const FeatureLogitsOptions& o,
                             const Tokenizer* tok = nullptr);

}  // namespace vocablens

// vocablens/features.hpp — SAE / transcoder features read in vocabulary space (logit weights).
//
// Feature f writes its decoder direction d_f = W_dec[f] [d] into the residual stream; its logit weights
// are d_f W_U [V] (Neuronpedia's "top / bottom logits", Bricken et al. 2023), optionally through the final
// norm's scale (d_f ⊙ γ) W_U — the direct effect on the logits of a unit activation, ignoring the norm's
// data-dependent 1/σ. feature_logits() returns, for every requested feature, the exact top-k and bottom-k
// tokens of that row, never forming the d_sae × V product (67 G entries for a 262k-feature SAE on a 256k
// vocabulary). Chunks of decoder rows (≤ 64 M products, ~256 MB) are SCREENED by a cheap product, then the
// survivors are recomputed exactly:
//  * int8 screen (default where oneDNN has an exact int8 kernel: AVX-512 VNNI / AMX): each decoder row and
//    each W_U column is rounded to int8 with its own scale, multiplied exactly in int32 (~4× the float32
//    GEMM's speed), and every token whose screened value plus a rigorous bound on the quantisation error
//    (Cauchy–Schwarz on the rounding residuals, docs/features.md "How the screen stays exact") could still
//    reach the k-th best lower bound survives; survivors get a float32 dot with its own bound, then the
//    finalists the canonical float64 dot product (topk_stream's definition). W_U is read in column blocks
//    in its stored dtype (a BF16 unembedding is never copied to float32), W_dec in row chunks.
//  * float32 screen (fallback, or FeatureLogitsOptions::screen = "float32"): one float32 GEMM per chunk, the
//    k + 16 best and worst candidates recomputed canonically, a float32 error bound proving no other token
//    can enter; the rare row it cannot settle goes through the streamed engine (vocablens/linalg/topk_stream.hpp).
// Both give the same lists, bit for bit: the screen only decides which tokens are recomputed.
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
#include <ATen/ATen.h>

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
  std::vector<int64_t> features;  ///< empty = every feature
  bool bottom = true;             ///< also the k lowest tokens of each feature
  bool final_norm_scale = false;  ///< multiply each decoder row by the final norm's scale γ first
  TokenFilter filter;
  /// "auto" (int8 where available and at least 256 features are asked for, float32 otherwise), "int8"
  /// (float32 where int8 is unavailable here) or "float32". Results are identical; only speed differs.
  std::string screen = "auto";
  /// Called as the work advances with (features done, features in total); may be empty.
  std::function<void(int64_t, int64_t)> progress;
};

struct FeatureLogits {
  FeatureLogitsOptions options;
  std::string sae_source, sae_layout, architecture, hook_name, hook_name_out;
  int64_t d_sae = 0, d_in = 0, vocab_size = 0;
  std::vector<int64_t> features;
  std::vector<double> decoder_norms;                ///< ‖W_dec[f]‖ (after the norm scale when asked)
  std::vector<std::vector<TopkEntry>> top, bottom;  ///< per feature; TopkEntry.j = token id
  int64_t rows_streamed = 0;  ///< lists the chunked product could not settle, computed by the streamed engine
  std::string screen;         ///< the screen that ran: "int8" or "float32"
  int64_t survivors = 0;      ///< int8 screen: tokens that passed it (all features, both ends), recomputed in float32
  int64_t finalists = 0;      ///< tokens recomputed canonically (float64)
  /// kind "features" (see above).
  Result to_result(const Tokenizer* tok) const;
};

/// Feature lens on a prompt: the SAE reads its hook point during the model's forward pass on `ids`; at each
/// position, the features that fire (activation > 0), L0, and the `top_features` strongest with their
/// activations and (top_k) the tokens each one's decoder direction promotes.
struct FeatureLensOptions {
  int64_t top_features = 5;
  int64_t top_k = 5;  ///< tokens listed per feature shown
  bool final_norm_scale = false;
};

struct FeatureLens {
  FeatureLensOptions options;
  std::string sae_source, hook_name;
  std::vector<int64_t> ids;
  at::Tensor acts;                                           ///< [T, d_sae] float32
  std::vector<int64_t> l0;                                   ///< [T] features firing per position
  std::vector<std::vector<std::pair<int64_t, double>>> top;  ///< per position: (feature, activation), strongest first
  std::vector<int64_t> shown;                                ///< every feature in `top`, ascending
  std::vector<std::vector<TopkEntry>> shown_tokens;          ///< top tokens of each shown feature
  /// kind "feature_lens": arrays ids [T], l0 [T], top_features [T, n] int64 (-1 when fewer fire),
  /// top_activations [T, n] float64, shown_features [S], shown_token_ids [S, k]; table "top_features".
  Result to_result(const Tokenizer* tok, const std::string& prompt) const;
};

/// Throws UsageError when the SAE names no hook point (give one with SaeLoadOptions::hook_name).
FeatureLens feature_lens(const Model& m, const Sae& sae, const std::vector<int64_t>& ids, const FeatureLensOptions& o,
                         const Tokenizer* tok = nullptr);

/// True when the int8 screen can run on this machine (built with oneDNN, an exact int8 kernel on this CPU).
bool feature_logits_int8_available();

/// Throws UsageError on a feature out of range, top_k < 1 or > V, or an SAE whose decoder does not write
/// d_model-wide vectors (its file named).
FeatureLogits feature_logits(const Model& m, const Sae& sae, const FeatureLogitsOptions& o, const Tokenizer* tok = nullptr);

}  // namespace vocablens

// vocablens/project.hpp — hidden states at a hook point, projected to tokens (the `project` command).
//
// Runs the model once, takes the vectors of one hook (resid_pre / resid_mid / resid_post / attn_out /
// mlp_out at one layer or every layer, or final_norm) at the chosen positions, and reports the top-k
// tokens of each: as a written vector x W_U (default), after the final norm (logit-lens style), or as a
// read vector x R with R from vocablens/unembed.hpp (E⁺, W_U, W_Eᵀ). Streamed: never layers × T × V.
//
//   vocablens::HiddenProjectionOptions o;  o.hook = "mlp_out";  o.top_k = 5;
//   auto p = vocablens::project_hidden(model, ids, o, tok.get());
//   p.top[l][i][0].j;                                  // best token id at layers[l], positions[i]
//   vocablens::Result r = p.to_result(tok.get());      // kind "projection"
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "vocablens/result.hpp"
#include "vocablens/token_filter.hpp"
#include "vocablens/unembed.hpp"

namespace vocablens {

class Model;
class Tokenizer;

struct HiddenProjectionOptions {
  std::string hook = "resid_post";  ///< resid_pre | resid_mid | resid_post | attn_out | mlp_out | final_norm
  int64_t layer = -1;               ///< -1 = every layer (ignored for final_norm)
  int64_t top_k = 10;
  bool apply_final_norm = false;  ///< normalise with the model's final norm first (logit-lens style)
  bool read = false;              ///< project as a read vector (x R, R chosen by `inverse`) instead of x W_U
  InverseKind inverse = InverseKind::Pinv;
  PinvOptions pinv;
  std::vector<int64_t> positions;  ///< empty = every position (negative counts from the end)
  TokenFilter filter;
};

/// Top-k tokens of hidden states: layers × positions × k.
struct HiddenProjection {
  HiddenProjectionOptions options;
  std::vector<int64_t> ids;        ///< the input token ids
  std::vector<int64_t> layers;     ///< hook layers, in order (-1 for final_norm)
  std::vector<int64_t> positions;  ///< resolved positions
  /// top[l][p] = top-k entries of layer layers[l], position positions[p] (TopkEntry.j = token id).
  std::vector<std::vector<std::vector<TopkEntry>>> top;
  std::vector<std::vector<double>> norms;  ///< ‖x‖ of each projected vector, [layer][position]
  /// kind "projection": settings, summary (tokens as text), tables "top_k", arrays of ids and scores.
  Result to_result(const Tokenizer* tok) const;
};

/// Runs the model on `ids` (int64 [T]) and projects the requested hook's vectors.
HiddenProjection project_hidden(const Model& m, const std::vector<int64_t>& ids, const HiddenProjectionOptions& o,
                                const Tokenizer* tok = nullptr);

}  // namespace vocablens

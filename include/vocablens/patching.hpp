// vocablens/patching.hpp — activation patching: which activations of a clean run restore its prediction
// when copied into a corrupted run (Meng et al. 2022; Wang et al. 2022; TransformerLens's patching demos).
//
// Two prompts of the same token length: `clean` (e.g. "When John and Mary went to the store, Mary gave it
// to") and `corrupt` (the same with one fact changed). The metric is the logit difference
// m = logit[target] - logit[wrong] at the last position (logit[target] alone when no wrong token is
// given). For every layer L and every position t (or every head h), the corrupted run is repeated with
// ONE activation replaced by the clean run's, and
//     restored[L, t] = (m_patched - m_corrupt) / (m_clean - m_corrupt)
// so 0 = no effect (the corrupted run), 1 = the clean run's metric fully restored; values can be
// negative or above 1. Patched sites per `over`:
//   Resid  blocks.L.hook_resid_pre at position t              -> [n_layers, T]
//   Attn   blocks.L.hook_attn_out  at position t              -> [n_layers, T]
//   Mlp    blocks.L.hook_mlp_out   at position t              -> [n_layers, T]
//   Heads  blocks.L.attn.hook_z    of head h, every position  -> [n_layers, n_heads]
//
//   vocablens::PatchOptions o;  o.over = vocablens::PatchOver::Resid;  o.target = 5335;  o.wrong = 1757;
//   vocablens::PatchResult p = vocablens::activation_patching(model, clean_ids, corrupt_ids, o);
//   double r = p.restored[p.at(3, p.cols - 1)];   // layer 3, last position
//
// Speed: the variants of one layer run as one batch (rows = positions or heads), in chunks bounded in
// memory; only the final norm at the metric position is unembedded, on the two columns the metric reads.
// When m_clean == m_corrupt the normalisation is undefined: `restored` is NaN and `degenerate` is true.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "vocablens/result.hpp"

namespace vocablens {

class Model;
class Tokenizer;

enum class PatchOver { Resid, Attn, Mlp, Heads };

const char* patch_over_name(PatchOver o);  ///< "resid", "attn", "mlp", "heads"
/// Parses "resid" | "attn" | "mlp" | "heads"; throws UsageError listing them.
PatchOver parse_patch_over(const std::string& s);

struct PatchOptions {
  PatchOver over = PatchOver::Resid;
  int64_t target = -1;    ///< required: the token the clean run should predict
  int64_t wrong = -1;     ///< -1: the metric is logit[target] alone
  int64_t position = -1;  ///< where the metric is read; -1 = the last position
  /// Called after each layer with (layers done, n_layers); may be empty.
  std::function<void(int64_t, int64_t)> progress;
};

struct PatchResult {
  std::vector<int64_t> clean_tokens, corrupt_tokens;  ///< [T] each
  std::string model_source;
  PatchOptions options;
  int64_t position = 0;                ///< metric position (resolved)
  int64_t rows = 0, cols = 0;          ///< n_layers x (T or n_heads)
  std::vector<std::string> row_hooks;  ///< [rows] TransformerLens hook name patched in each row
  double clean_metric = 0, corrupt_metric = 0;
  std::vector<double> metric;    ///< [rows, cols] the patched run's metric
  std::vector<double> restored;  ///< [rows, cols] normalised, 0 = corrupt, 1 = clean
  bool degenerate = false;       ///< clean and corrupt metrics equal: restored is NaN

  size_t at(int64_t r, int64_t c) const { return static_cast<size_t>(r * cols + c); }
  /// kind "activation_patching": settings, summary (metrics, tokens, row/column labels, the strongest
  /// sites), arrays "restored" and "metric" [rows, cols], table "sites" (one row per cell).
  Result to_result(const Tokenizer* tok, const std::string& clean_prompt = "", const std::string& corrupt_prompt = "") const;
};

/// Runs the clean and corrupted prompts and every single-site patch. Throws UsageError when the prompts'
/// token lengths differ (the message gives both), when target/wrong/position are out of range, or when
/// either prompt is empty or longer than the context.
PatchResult activation_patching(const Model& m, const std::vector<int64_t>& clean, const std::vector<int64_t>& corrupt,
                                const PatchOptions& opts);

}  // namespace vocablens

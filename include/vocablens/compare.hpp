// vocablens/compare.hpp — two logit-lens runs side by side (`vocablens compare RUN_A RUN_B`): two prompts on
// one model, or one prompt on two models that share a tokenizer.
//
//   vocablens::Result a = vocablens::read_lens_run("runs/paris");     // a `lens --out` directory (manifest verified)
//   vocablens::Result b = vocablens::read_lens_run("runs/rome");
//   vocablens::LensCompareResult c = vocablens::compare_lens_runs(a, b, {});
//   float dp = c.delta_prob[c.at(layer, pos)];                        // p_A(target_A) − p_B(target_B)
//   vocablens::Result r = c.to_result();                              // kind "lens_compare"
//
// What is compared, per lens layer (rows: A's layers) and position (columns):
//  - target probability and rank of each run (each run's own target: the next token of its own prompt, or the
//    target it was given), and their differences Δp = p_A − p_B, Δrank = rank_A − rank_B;
//  - KL(A‖B) = Σ_v p_A(v) (log p_A(v) − log p_B(v)) and KL(B‖A) between the two lenses' full distributions
//    (nats, float64 sums over the saved float32 log-probabilities). Needs both runs made with
//    `lens --save-probs` (array log_probs [n, T, V]); otherwise KL is absent and the result says so.
// Shapes: n = A's lens layers; B's layer for A's layer i is i when both have the same number, else the layer at
// the same relative depth, round(i (n_B − 1) / (n_A − 1)) (table "layers" names the pairs). T = the compared
// positions: both runs' token count when equal; else, with LensCompareOptions::align, the first (Start) or last
// (End) min(T_A, T_B) positions of each.
// Guarantees: comparing a run with itself gives Δp = 0, Δrank = 0, KL = 0 exactly.
// Errors (UsageError, one line): a directory without a logit_lens result; runs whose vocabularies differ
// (recorded vocabulary SHA-256 or size: their ids do not name the same tokens); different token counts without
// align; a malformed array.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "vocablens/result.hpp"

namespace vocablens {

class Tokenizer;

/// SHA-256 of a vocabulary as the lens sees it: the size, then every id's bytes (length-prefixed) and special
/// flag. Two runs whose fingerprints are equal name the same tokens by the same ids. Recorded by `lens` in
/// provenance "vocab_sha256".
std::string vocabulary_sha256(const Tokenizer& tok);

/// The logit_lens result of a run directory (read_run_directory: every side file checked against the
/// manifest). Throws FormatError for a malformed or partial directory, UsageError when it holds no
/// logit_lens result (naming what it holds, e.g. a logit_lens_batch run).
Result read_lens_run(const std::string& dir);

enum class LensAlign { None, Start, End };

struct LensCompareOptions {
  LensAlign align = LensAlign::None;       ///< how to pair positions when the token counts differ
  std::string name_a = "A", name_b = "B";  ///< how errors and the report name the runs (their directories)
};

struct LensCompareResult {
  std::string name_a, name_b;
  std::string model_a, model_b, prompt_a, prompt_b;
  int64_t n = 0, T = 0, T_a = 0, T_b = 0, offset_a = 0, offset_b = 0, vocab_size = 0;
  std::string align = "none";
  std::string vocab_check;            ///< how the vocabularies were found to agree
  int64_t readout = 0;                ///< the last position where both runs have a target (else T − 1)
  std::vector<std::string> layers;    ///< [n] A's labels
  std::vector<std::string> layers_b;  ///< [n] the paired B labels
  std::vector<int64_t> layer_b;       ///< [n] B's layer index for each row
  std::vector<std::string> tokens_a, tokens_b, targets_a, targets_b;  ///< [T] display strings ("" none)
  std::vector<float> prob_a, prob_b, delta_prob;                      ///< [n, T]; NaN where a run has no target
  std::vector<int64_t> rank_a, rank_b;                                ///< [n, T]; -1 none
  std::vector<float> delta_rank;                                      ///< [n, T] rank_A − rank_B; NaN where either has none
  bool has_kl = false;
  std::string kl_missing;           ///< why KL is absent ("" when has_kl)
  std::vector<float> kl_ab, kl_ba;  ///< [n, T] nats

  size_t at(int64_t layer, int64_t pos) const { return static_cast<size_t>(layer * T + pos); }

  /// kind "lens_compare": arrays prob_a, prob_b, delta_prob, rank_a, rank_b, delta_rank (and kl_ab, kl_ba);
  /// tables "cells" (one row per layer and position) and "layers" (per-layer means, the layer pairs, and
  /// Δp at the readout position);
  /// summary: both runs (directory, model, prompt, tokens), alignment, vocabulary check, KL availability.
  Result to_result() const;
};

/// Compares two logit_lens Results (from read_lens_run or LensResult::to_result). Throws UsageError as above.
LensCompareResult compare_lens_runs(const Result& a, const Result& b, const LensCompareOptions& opts = {});

}  // namespace vocablens

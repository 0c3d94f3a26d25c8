// vocablens/lens_batch.hpp — the logit lens over many prompts at once (`lens --prompts FILE`): one run
// directory with a prompt axis and one tidy table of every prompt's target rank and probability per layer.
//
// The prompts file is either plain text (one prompt per line; blank lines skipped) or JSON Lines (every
// non-blank line an object {"prompt": "...", "target": " Paris"}; "target" optional). A line starting with
// '{' makes the whole file JSON Lines. Escapes such as \n are only possible in JSON Lines.
//
//   auto prompts = vocablens::read_lens_prompts("prompts.jsonl");
//   auto b = vocablens::logit_lens_batch(model, *tok, prompts, {});     // b.runs[p] is a LensResult
//   vocablens::Result r = b.to_result(tok.get());                        // kind "logit_lens_batch"
//
// One batched forward per chunk of prompts (sorted by length, right-padded with each prompt's last id; exact
// under causal attention), then each prompt's lens pass on its own rows — measured faster than one forward per
// prompt (bench/bench_lens_batch.cpp, docs/benchmarks.md). Numbers equal a single-prompt `logit_lens` run to
// float32 rounding (batched GEMMs sum in another order: a target rank can move by the tokens tied with the
// target within that rounding). With decoder_blocks > 0 each prompt runs on its own. The readout position of a prompt is its last position when it has a
// target, else the second-to-last (whose next token is the prompt's last token); its layer curve is the
// tidy table. Shapes: P prompts, n lens layers, T = the longest prompt in tokens; shorter prompts are
// padded with NaN (float) / -1 (int).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "vocablens/lens.hpp"
#include "vocablens/text_inputs.hpp"  // LensPrompt, read_lens_prompts
#include "vocablens/result.hpp"
#include "vocablens/tokenizer.hpp"

namespace vocablens {

class Model;

struct LensBatchResult {
  std::string source;               ///< the prompts file ("" when given in memory)
  std::vector<LensPrompt> prompts;  ///< [P]
  std::vector<LensResult> runs;     ///< [P]
  std::vector<int64_t> readout;     ///< [P] readout position (-1: none, a one-token prompt without target)
  double seconds = 0;

  /// kind "logit_lens_batch": arrays target_prob / target_rank / entropy / kl_final [P, n, T], tokens
  /// [P, T], lengths [P], readout_prob / readout_rank [P, n]; table "by_layer" (prompt_index, prompt,
  /// target, position, layer, layer_label, target_rank, target_prob, top1, top1_prob): one row per prompt and
  /// layer at the readout position; summary: layers, per-prompt tokens (display strings).
  Result to_result(const Tokenizer* tok) const;
};

/// Runs the lens on every prompt (tokenised with `eo`). A prompt's target must be a single token and every
/// prompt at most the model's context: otherwise UsageError naming the line. `progress(done, total)` may be empty.
LensBatchResult logit_lens_batch(const Model& m, const Tokenizer& tok, const std::vector<LensPrompt>& prompts,
                                 const LensOptions& opts, const EncodeOptions& eo = {},
                                 const std::function<void(size_t, size_t)>& progress = {});

}  // namespace vocablens

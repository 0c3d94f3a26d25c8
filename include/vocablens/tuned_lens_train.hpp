// vocablens/tuned_lens_train.hpp — training the tuned lens's translators (vocablens/tuned_lens.hpp) on a text
// corpus, with the recipe of the tuned-lens package (tuned_lens/scripts/train_loop.py + ingredients.py):
//
//   loss       sum over layers l of mean over positions of KL(final ‖ lens_l): the model's own distribution at
//              the same position is the target (the package's default "kl" loss, token shift 0)
//   optimizer  SGD, Nesterov momentum 0.9, lr = lr_scale · (1 − momentum) = 0.1, weight decay 1e-3 on every
//              translator tensor (as torch.optim.SGD: d = g + wd·p; buf = m·buf + d; p −= lr·(d + m·buf))
//   schedule   linear decay to 0 over `steps` (no warm-up for SGD): lr_s = lr · (steps − s) / steps
//   clipping   global gradient norm ≤ 1.0 (torch.nn.utils.clip_grad_norm_)
//   data       the corpus tokenised once and cut into non-overlapping windows of `window` tokens (remainder
//              dropped), shuffled with `seed` (a fresh permutation each pass when steps need more windows)
//   step       tokens_per_step / window windows (at least 1); the package's defaults: 250 steps of 2^18 tokens
//
// Defaults scaled to the model and the corpus (tokens_per_step = 0): the package's 2^18 tokens per step are
// meant for models of d_model >= 1024 on large corpora; here a step holds min(2^18, 256 * d_model) tokens,
// in whole windows, and never more windows than the corpus has (stories260K, d_model 64: 16384 tokens, not
// 262144 — minutes instead of hours). `plan` reports the schedule before the first step (how many times the
// corpus is read over, so that callers can warn about a small corpus); `progress` reports every micro-batch
// with the fraction done and an ETA. A run that stops before `steps` (stop_after, Ctrl-C) writes its lens
// marked unfinished (config.json "vocablens_unfinished", train_log.json "finished": false); load_tuned_lens
// warns about such a lens.
//
// The model's activations of a window do not change while the translators train: when the schedule reads the
// corpus more than once and every window's inputs to the loss (the residual entering each layer [W, d] and the
// final distribution [W, V], as log-probabilities and probabilities) fit in kTunedLensKeptBudget bytes, each
// window's forward runs once and later passes read it back (the same values; a small corpus trained for many
// steps, as the docs' recipe, spends about half its time in the forward otherwise).
//
// Under mpirun (vocablens/dist.hpp) window j of a step's batch is run by rank j mod size and the gradients
// are summed over ranks before clipping: the update equals the one-process update within float32 rounding.
//
// Output directory: tuned_lens.safetensors + params.pt + config.json (vocablens/tuned_lens.hpp),
// checkpoint.safetensors (translators, momentum buffers, step; rewritten every checkpoint_every steps and at
// the end) and train_log.json (loss per step). A NaN or Inf in the loss, a gradient or a translator stops
// training with an error; the last good checkpoint stays as it was.
//
//   vocablens::TunedLensTrainOptions o;  o.corpus = "tiny.txt";  o.out_dir = "out/lens";  o.steps = 100;
//   auto rep = vocablens::train_tuned_lens(model, *tok, o);      // rep.losses: mean loss per step
//   auto tl = vocablens::load_tuned_lens("out/lens");
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "vocablens/model_config.hpp"
#include "vocablens/tuned_lens.hpp"

namespace vocablens {

class Model;
class Tokenizer;

struct TunedLensTrainProgress {
  int64_t step = 0, steps = 0;  ///< steps finished (within_step: the step under way is step + 1), of the schedule
  double loss = 0;              ///< this step's loss (sum over layers of mean KL, nats); 0 while within_step
  double lr = 0;
  double seconds = 0;  ///< since train_tuned_lens was called
  bool checkpoint = false;
  /// true: a micro-batch of the step under way has finished (loss and lr not known yet).
  bool within_step = false;
  int64_t windows_done = 0, windows_total = 0;  ///< of this call's steps (start .. stop), all ranks together
  double eta_seconds = -1;                      ///< to the end of this call's steps, from the training time so far; -1 = unknown
};

/// The schedule, reported once before the first step.
struct TunedLensTrainPlan {
  int64_t corpus_tokens = 0, windows = 0, window = 0;  ///< the corpus in non-overlapping windows
  int64_t windows_per_step = 0, tokens_per_step = 0;
  int64_t steps = 0, start_step = 0, stop_step = 0;  ///< schedule length; this call runs steps start+1 .. stop
  bool tokens_per_step_scaled = false;               ///< tokens_per_step was 0: scaled to the model and corpus (see above)
  double corpus_passes = 0;                          ///< windows the whole schedule reads / windows in the corpus
  int64_t micro_batch = 0;                           ///< windows per forward pass
};

struct TunedLensTrainOptions {
  std::string corpus;
  std::string out_dir;
  int64_t steps = 250;
  /// 0 = scaled: min(2^18, 256 * d_model) tokens in whole windows, at most the corpus's windows (see above).
  int64_t tokens_per_step = 0;
  int64_t window = 0;       ///< tokens per window; 0 = the model's context
  int64_t micro_batch = 0;  ///< windows per forward pass; 0 = about 8k tokens (fewer for large vocabularies)
  double lr_scale = 1.0;
  double momentum = 0.9;
  double weight_decay = 1e-3;
  double max_grad_norm = 1.0;
  uint64_t seed = 42;
  int64_t checkpoint_every = 50;
  /// Continue from out_dir/checkpoint.safetensors (same corpus, window, tokens per step and seed; steps may
  /// grow).
  bool resume = false;
  /// Stop after this many steps in this call (a checkpoint is written then; --resume continues); 0 = run to
  /// `steps`. The learning-rate schedule always spans `steps`.
  int64_t stop_after = 0;
  /// Keep every window's activations between passes when they fit kTunedLensKeptBudget (see above); false
  /// runs the forward for every window of every step (the same values, slower; less memory).
  bool keep_activations = true;
  /// Test hook: make the loss of this step (1-based) NaN, to check that training stops and keeps the last
  /// good checkpoint. 0 = never.
  int64_t inject_nan_at_step = 0;
  std::function<void(const TunedLensTrainProgress&)> progress;
  std::function<void(const TunedLensTrainPlan&)> plan;
};

struct TunedLensTrainReport {
  std::string out_dir;
  int64_t start_step = 0, steps = 0;
  int64_t corpus_tokens = 0, windows = 0, window = 0, windows_per_step = 0;
  std::vector<double> losses;  ///< [steps] loss of every step (earlier runs' from the checkpoint)
  double seconds = 0;
  int ranks = 1;
};

/// At most this many bytes of kept window activations (see above).
inline constexpr double kTunedLensKeptBudget = 512.0 * 1024 * 1024;
/// Bytes one window of `window` tokens keeps: n_layers residuals [W, d_model] and the final distribution
/// [W, V] twice (log-probabilities and probabilities), float32.
inline double tuned_lens_kept_bytes_per_window(const ModelConfig& c, int64_t window) {
  return static_cast<double>(window) * (static_cast<double>(c.n_layers * c.d_model) + 2.0 * static_cast<double>(c.vocab_size)) *
         4.0;
}

/// Trains (or resumes) and writes the lens into o.out_dir. Throws UsageError on bad options or a corpus
/// shorter than one window, FormatError on unreadable files, Error when training diverges.
TunedLensTrainReport train_tuned_lens(const Model& m, const Tokenizer& tok, const TunedLensTrainOptions& o);

/// Writes tuned_lens.safetensors, params.pt (torch.save format the package reads) and config.json into dir.
void save_tuned_lens(const TunedLens& t, const std::string& dir);
/// The same for a lens trained `trained_steps` of `steps`: when fewer, marked unfinished (config.json key
/// "vocablens_unfinished": {"trained_steps", "steps"}; tuned_lens.safetensors metadata "unfinished").
void save_tuned_lens(const TunedLens& t, const std::string& dir, int64_t trained_steps, int64_t steps);

}  // namespace vocablens

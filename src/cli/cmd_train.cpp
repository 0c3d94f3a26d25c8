// `vocablens train --model KIND (--corpus FILE | --synthetic) --out DIR`: train embed-lm, skipgram, cbow
// or a small GPT from scratch (see vocablens/train.hpp and docs/train.md).
#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <memory>

#include "cli/command.hpp"
#include "vocablens/error.hpp"
#include "vocablens/train.hpp"

namespace vocablens::cli {

std::string format_seconds(double s) {
  if (s < 60) return fmt::format("{:.1f}s", s);
  const int m = static_cast<int>(s) / 60;
  return fmt::format("{}m{:02d}s", m, static_cast<int>(s) - 60 * m);
}

/// The progress display of `train` and `demo`: a bar redrawn in place on a terminal (stderr), otherwise
/// one plain line every `every` steps and at the end.
std::function<void(const TrainProgress&)> train_progress_printer(const std::string& label, bool quiet) {
  if (quiet) return {};
  const bool tty = ::isatty(STDERR_FILENO) == 1;
  return [label, tty](const TrainProgress& p) {
    const double f = p.steps > 0 ? static_cast<double>(p.step) / static_cast<double>(p.steps) : 1.0;
    if (tty) {
      if (p.done) {
        std::fputs("\r\033[K", stderr);
        std::fflush(stderr);
        return;
      }
      const int width = 28, filled = static_cast<int>(f * width);
      const double eta = p.step > 0 ? p.seconds / static_cast<double>(p.step) * static_cast<double>(p.steps - p.step) : 0;
      fmt::print(stderr, "\r\033[K{} [{}{}] {}/{}  loss {:.4f}  lr {:.2e}  {}  eta {}", label,
                 std::string(static_cast<size_t>(filled), '#'), std::string(static_cast<size_t>(width - filled), '.'), p.step,
                 p.steps, p.smoothed_loss, p.lr, format_seconds(p.seconds), format_seconds(eta));
      std::fflush(stderr);
      return;
    }
    const int64_t every = std::max<int64_t>(1, p.steps / 10);
    if (p.done || p.step % every == 0 || p.checkpoint)
      fmt::print(stderr, "{} step {}/{}  loss {:.4f}  lr {:.2e}  {}{}\n", label, p.step, p.steps, p.smoothed_loss, p.lr,
                 format_seconds(p.seconds), p.checkpoint ? "  (checkpoint)" : "");
  };
}

}  // namespace vocablens::cli

namespace {

struct TrainCli {
  vocablens::TrainOptions o;
  std::string model = "gpt";
  std::string positions = "learned";
  bool untied = false;
  bool quiet = false;
  int64_t synthetic_lines = 0;
  int64_t synthetic_seed = -1;
  CLI::Option* steps_opt = nullptr;
};

int run_train(TrainCli& c) {
  using namespace vocablens;
  TrainOptions o = c.o;
  o.model = train_model_from_string(c.model);
  o.positions = position_kind_from_string(c.positions);
  o.tied = !c.untied;
  if (c.synthetic_lines > 0) o.synthetic_options.lines = c.synthetic_lines;
  if (c.synthetic_seed >= 0) o.synthetic_options.seed = static_cast<uint64_t>(c.synthetic_seed);
  if (o.resume && c.steps_opt->count() == 0) o.steps = 0;                       // keep the checkpoint's planned steps
  if (o.model == TrainModel::GloVe && c.steps_opt->count() == 0) o.steps = 25;  // epochs
  if (o.resume && (!o.corpus.empty() || o.synthetic))
    throw UsageError("--resume continues the run saved in --out DIR with its own corpus and options: drop --corpus/--synthetic");
  o.on_progress = cli::train_progress_printer(std::string("train ") + to_string(o.model), c.quiet);
  TrainReport r = train(o);
  if (r.model == TrainModel::GloVe)
    fmt::print(
        "trained glove ({} parameters, vocabulary {}) for {} epochs in {}: cost {:.6f} (first epoch {:.6f}; "
        "mean over the nonzero counts of 1/2 f(X)(w.w~ + b + b~ - log X)^2)\n",
        r.parameters, r.vocab_size, r.step, cli::format_seconds(r.seconds), r.final_loss,
        r.losses.empty() ? 0.0 : r.losses.front());
  else
    fmt::print(
        "trained {} ({} parameters, vocabulary {}) for {} steps in {}: final loss {:.4f} nats/token "
        "(mean of the last {} steps)\n",
        to_string(r.model), r.parameters, r.vocab_size, r.step, cli::format_seconds(r.seconds), r.final_loss,
        std::min<int64_t>(50, r.step));
  for (const std::string& n : r.notes) fmt::print(stderr, "vocablens: note: {}\n", n);
  const bool w2v = r.model == TrainModel::SkipGram || r.model == TrainModel::CBOW || r.model == TrainModel::GloVe;
  fmt::print("wrote {}/ (config.json, {}, {}, train_log.json, checkpoint/)\n", r.out_dir,
             w2v ? "embeddings.safetensors, embeddings.npy" : "model.safetensors",
             !o.tokenizer.empty()              ? "the tokenizer's files"
             : o.tokenizer_algo == "wordpiece" ? "vocab.txt, tokenizer_config.json"
                                               : "vocab.json, merges.txt");
  if (o.snapshot_every > 0)
    fmt::print("snapshots every {} steps: {}/snapshots/step-N/ (e.g. vocablens compare-embeddings on two of them)\n",
               o.snapshot_every, r.out_dir);
  if (r.model == TrainModel::GPT)
    fmt::print("next: vocablens inspect {0}   ·   vocablens lens {0} --prompt \"the capital of france is\"\n", r.out_dir);
  return 0;
}

vocablens::cli::Register registered_cmd_train{
    "train",
    "Train a model from scratch (embed-lm, skipgram, cbow, glove, or a small GPT) on a text file or the built-in "
    "synthetic corpus; writes a Hugging Face-style directory",
    [](CLI::App& sub) -> vocablens::cli::Runner {
      auto c = std::make_shared<TrainCli>();
      auto& o = c->o;
      sub.add_option("--model", c->model, "embed-lm | skipgram | cbow | glove | gpt (default gpt)")
          ->check(CLI::IsMember({"embed-lm", "skipgram", "skip-gram", "cbow", "glove", "gpt"}));
      sub.add_option("--corpus", o.corpus, "Training text (UTF-8; <prompt>...</prompt> spans get no loss)");
      sub.add_flag("--synthetic", o.synthetic, "Use the built-in synthetic corpus with planted structure");
      sub.add_option("--synthetic-lines", c->synthetic_lines, "Lines of synthetic corpus (default 40000)");
      sub.add_option("--synthetic-seed", c->synthetic_seed, "Seed of the synthetic corpus (default 1)");
      sub.add_option("--out", o.out_dir, "Output directory (created)")->required();
      sub.add_option("--tokenizer", o.tokenizer, "Use this tokenizer (file or directory) instead of training a BPE");
      sub.add_option("--vocab-size", o.vocab_size, "Size of the trained tokenizer's vocabulary (default 1024)");
      sub.add_option("--tokenizer-algo", o.tokenizer_algo,
                     "Tokenizer trained when --tokenizer is not given: bpe (GPT-2 byte-level, vocab.json + merges.txt) "
                     "or wordpiece (BERT, vocab.txt); default bpe")
          ->check(CLI::IsMember({"bpe", "wordpiece"}));
      c->steps_opt = sub.add_option("--steps", o.steps, "Optimisation steps (default 1000); glove: epochs (default 25)");
      sub.add_option("--batch", o.batch_size, "Batch: sequences (gpt, embed-lm; default 32) or pairs (word2vec; 256)");
      sub.add_option("--lr", o.lr, "Peak learning rate (default gpt 3e-3, glove 0.05 = AdaGrad's eta, others 1e-2)");
      sub.add_option("--warmup", o.warmup_steps, "Linear warm-up steps before cosine decay (default 50)");
      sub.add_option("--weight-decay", o.weight_decay, "Decoupled weight decay on matrices (AdamW; default 0)");
      sub.add_option("--grad-clip", o.grad_clip, "Clip the global gradient norm (default 1; 0 = off)");
      sub.add_option("--seed", o.seed, "Random seed: initial weights and batches (default 1)");
      sub.add_option("--d-model", o.d_model, "Width / vector size (default 64)");
      sub.add_option("--layers", o.n_layers, "gpt: blocks (default 2)");
      sub.add_option("--heads", o.n_heads, "gpt: attention heads (default 4)");
      sub.add_option("--d-mlp", o.d_mlp, "gpt: MLP width (default 4 x d-model)");
      sub.add_option("--ctx", o.n_ctx, "gpt: context = training window in tokens (default 64)");
      sub.add_option("--positions", c->positions, "gpt: learned | sinusoidal | rope | alibi | none (default learned)")
          ->check(CLI::IsMember({"learned", "sinusoidal", "rope", "rotary", "alibi", "none"}));
      sub.add_option("--rope-theta", o.rope_theta, "gpt: rotary base (default 10000)");
      sub.add_flag("--segments", o.segments,
                   "gpt: learn segment (token-type) embeddings W_seg [2, d] summed with token and position embeddings");
      sub.add_option("--segment-source", o.segment_source,
                     "gpt --segments: prompt (answer after a <prompt> span = 1), lines (alternating lines), "
                     "auto (prompt if the corpus has spans; default)")
          ->check(CLI::IsMember({"auto", "prompt", "lines"}));
      sub.add_flag("--untied", c->untied, "gpt, embed-lm: a separate unembedding instead of W = E^T");
      sub.add_option("--window", o.window, "word2vec, glove: context radius (default word2vec 4, glove 10)");
      sub.add_option("--negatives", o.negatives, "word2vec: negative samples per pair (default 5)");
      sub.add_option("--subsample", o.subsample, "word2vec: frequent-token subsampling threshold (default 1e-3; 0 = off)");
      sub.add_option("--x-max", o.glove_x_max, "glove: weighting f(x) = min(1, (x/x_max)^alpha) (default 100)");
      sub.add_option("--alpha", o.glove_alpha, "glove: exponent of the weighting (default 0.75)");
      sub.add_option("--checkpoint-every", o.checkpoint_every, "Also checkpoint every N steps (the end always does)");
      sub.add_option("--snapshot-every", o.snapshot_every,
                     "Also keep a loadable model directory DIR/snapshots/step-N/ every N steps (e.g. for compare-embeddings)");
      sub.add_flag("--resume", o.resume, "Continue the run in --out DIR from its checkpoint (bit-identical)");
      sub.add_option("--stop-after", o.stop_after, "Stop after N steps of this call (checkpointed; continue with --resume)");
      sub.add_flag("--overwrite", o.overwrite, "Replace an existing run in --out DIR");
      sub.add_option("--threads", o.threads,
                     "LibTorch threads while training (default: VOCABLENS_THREADS if set, else 1 per million parameters)");
      sub.add_flag("-q,--quiet", c->quiet, "No progress output");
      return [c] { return run_train(*c); };
    }};

}  // namespace

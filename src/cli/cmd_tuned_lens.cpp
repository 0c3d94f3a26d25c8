// `vocablens tuned-lens train MODEL --corpus FILE --out DIR` and `vocablens tuned-lens eval MODEL --tuned DIR
// --corpus HELDOUT` (see vocablens/tuned_lens.hpp, vocablens/tuned_lens_train.hpp, docs/lens.md). Both run as
// one process, or sharded over ranks under mpirun (vocablens/dist.hpp).
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include <filesystem>

#include "cli/command.hpp"
#include "cli/declared_flags.hpp"
#include "cli/memory_check.hpp"
#include "vocablens/memory_estimate.hpp"
#include "cli/output.hpp"
#include "cli/progress.hpp"
#include "vocablens/detail/atomic_file.hpp"
#include "vocablens/dist.hpp"
#include "vocablens/error.hpp"
#include "vocablens/kv_cache.hpp"
#include "vocablens/model.hpp"
#include "vocablens/tokenizer.hpp"
#include "vocablens/tuned_lens.hpp"
#include "vocablens/tuned_lens_train.hpp"
#include "vocablens/analysis_estimate.hpp"
#include "vocablens/analysis_registry.hpp"

namespace {

using vocablens::UsageError;

struct TunedCli {
  std::string model, tokenizer, corpus, tuned;
  vocablens::TunedLensTrainOptions train;
  std::shared_ptr<vocablens::cli::DeclaredFlags> eval;  // tuned_lens_eval's declaration (analyses/tuned_lens_entry.cpp)
  bool quiet = false;
  bool dry_run = false;
  vocablens::cli::OutputOptions out;
  CLI::App* train_cmd = nullptr;
  CLI::App* eval_cmd = nullptr;
  CLI::App* sample_cmd = nullptr;
  int64_t sample_tokens = 20000, sample_max_len = 0;
  uint64_t sample_seed = 1;
  double temperature = 1.0;
  std::string sample_out;
};

int run_sample(TunedCli& c) {
  using namespace vocablens;
  Model m = load_model(c.model);
  adapt_threads_to(m);
  auto tok = load_tokenizer_for(c.model, c.tokenizer);
  {
    const int64_t T =
        c.sample_max_len > 0 ? std::min<int64_t>(c.sample_max_len, m.config().n_ctx) : std::min<int64_t>(256, m.config().n_ctx);
    // One position of every sequence per step, the earlier ones' keys and values cached.
    auto e = estimate_forward_memory(m, kSampleCorpusBatch, 1, CacheSpec::none(), true);
    e.add(fmt::format("KV cache [{} x {} positions]", kSampleCorpusBatch, T), kv_cache_bytes(m.config(), kSampleCorpusBatch, T));
    if (auto rc = cli::check_memory(
            "tuned-lens sample",
            fmt::format("sampling {} sequences of {} tokens side by side from {}", kSampleCorpusBatch, T, m.source()), e,
            c.dry_run, "--max-len (shorter sequences)"))
      return *rc;
  }
  const std::string text = sample_corpus(m, *tok, c.sample_tokens, c.sample_seed, c.temperature, c.sample_max_len);
  if (c.sample_out.empty() || c.sample_out == "-") {
    fmt::print("{}", text);
  } else {
    write_file_atomic(c.sample_out, text);
    fmt::print(stderr, "wrote {} ({} bytes, {} tokens drawn at temperature {}, seed {})\n", c.sample_out, text.size(),
               c.sample_tokens, c.temperature, c.sample_seed);
  }
  return 0;
}

// What the user sees of a training run, on rank 0: the schedule and a warning when the corpus is read many
// times over (before the first step), an estimate of the time after the first micro-batch, then a bar on a
// terminal or a line every interval otherwise — each with the ETA.
struct TrainDisplay {
  bool tty = false, quiet = false, estimated = false;
  double interval = 30, last_line = -1;
  int64_t last_tenth = 0, start_step = 0, stop_step = 0;
  std::chrono::steady_clock::time_point last_draw{};

  void plan(const vocablens::TunedLensTrainPlan& p, int64_t d_model) {
    start_step = p.start_step;
    stop_step = p.stop_step;
    if (!quiet)
      fmt::print(
          stderr, "tuned-lens: {} steps of {} windows x {} tokens = {} tokens per step ({}); the corpus: {} tokens, {} windows\n",
          p.steps, p.windows_per_step, p.window, p.tokens_per_step,
          p.tokens_per_step_scaled
              ? fmt::format("scaled to d_model {} and the corpus; the package's recipe is --tokens-per-step 262144", d_model)
              : std::string("--tokens-per-step"),
          p.corpus_tokens, p.windows);
    // Reusing a small corpus many times fits the translators to that text; the package trains on ~1 pass.
    if (p.corpus_passes > 4)
      fmt::print(stderr,
                 "vocablens: warning: the schedule reads the corpus {:.0f} times over ({} steps x {} windows, {} windows in "
                 "the corpus): the translators may fit this text more than the model. A longer corpus "
                 "(`vocablens tuned-lens sample MODEL --tokens N --out FILE`) or fewer --steps reads it less often\n",
                 p.corpus_passes, p.steps, p.windows_per_step, p.windows);
    std::fflush(stderr);
  }

  void progress(const vocablens::TunedLensTrainProgress& p) {
    if (quiet) return;
    if (!estimated && p.eta_seconds >= 0 && p.windows_done < p.windows_total) {
      estimated = true;
      const double total = p.eta_seconds * static_cast<double>(p.windows_total) /
                           static_cast<double>(std::max<int64_t>(1, p.windows_total - p.windows_done));
      if (tty) fmt::print(stderr, "\r\033[K");
      fmt::print(stderr, "tuned-lens: estimated {} for steps {}..{} of {} ({} windows; measured on the first {}){}\n",
                 vocablens::cli::duration_text(total), start_step + 1, stop_step, p.steps, p.windows_total, p.windows_done,
                 total > 600 ? "; --steps, --tokens-per-step or --window shorten it" : "");
    }
    const double f = static_cast<double>(p.windows_done) / static_cast<double>(std::max<int64_t>(1, p.windows_total));
    const int64_t shown_step = p.within_step ? p.step + 1 : p.step;
    if (tty) {
      const auto now = std::chrono::steady_clock::now();
      const bool end = !p.within_step && p.windows_done == p.windows_total;
      if (!end && now - last_draw < std::chrono::milliseconds(100)) return;
      last_draw = now;
      const int width = 28, filled = static_cast<int>(f * width);
      fmt::print(stderr, "\r\033[Ktuned-lens [{}{}] step {}/{}  loss {}  {}  eta {}",
                 std::string(static_cast<size_t>(filled), '#'), std::string(static_cast<size_t>(width - filled), '.'), shown_step,
                 p.steps, p.within_step ? std::string("...") : fmt::format("{:.4f}", p.loss),
                 vocablens::cli::duration_text(p.seconds), vocablens::cli::duration_text(p.eta_seconds));
      if (end) fmt::print(stderr, "\r\033[K");
      std::fflush(stderr);
      return;
    }
    // Not a terminal: a line every tenth of this run's steps, and at least every `interval` seconds.
    const int64_t tenth = static_cast<int64_t>(f * 10);
    const bool at_tenth = !p.within_step && (tenth > last_tenth || p.windows_done == p.windows_total);
    if (!at_tenth && !(last_line < 0 ? p.seconds >= interval : p.seconds - last_line >= interval)) return;
    last_line = p.seconds;
    if (!p.within_step) last_tenth = tenth;
    if (p.within_step)
      fmt::print(stderr, "tuned-lens step {}/{} ({:.1f} %): {} of {} windows  elapsed {}  eta {}\n", shown_step, p.steps, 100 * f,
                 p.windows_done, p.windows_total, vocablens::cli::duration_text(p.seconds),
                 vocablens::cli::duration_text(p.eta_seconds));
    else
      fmt::print(stderr, "tuned-lens step {}/{} ({:.1f} %)  loss {:.4f}  lr {:.2e}  elapsed {}  eta {}{}\n", p.step, p.steps,
                 100 * f, p.loss, p.lr, vocablens::cli::duration_text(p.seconds), vocablens::cli::duration_text(p.eta_seconds),
                 p.checkpoint ? "  (checkpoint)" : "");
    std::fflush(stderr);
  }
};

int run_train(TunedCli& c) {
  using namespace vocablens;
  dist::init();
  auto& o = c.train;
  if (c.corpus.empty()) throw UsageError("--corpus FILE is required");
  o.corpus = c.corpus;
  Model m = load_model(c.model);
  adapt_threads_to(m);
  auto tok = load_tokenizer_for(c.model, c.tokenizer);
  {
    // With grad the forward keeps every block's activations for the backward pass and takes the
    // materialising attention ([B, H, W, W] scores, softmax): counted per layer; the lens logits of all
    // layers for one micro-batch (the loss) on top. An upper estimate.
    const auto& cf = m.config();
    const int64_t W = o.window > 0 ? std::min<int64_t>(o.window, cf.n_ctx) : cf.n_ctx;
    int64_t B = o.micro_batch > 0 ? o.micro_batch : std::max<int64_t>(1, 8192 / W);
    // No more windows than one step takes, nor than the corpus holds (a token is at least one byte).
    std::error_code ec;
    const auto bytes = std::filesystem::file_size(o.corpus, ec);
    if (!ec) B = std::min<int64_t>(B, static_cast<int64_t>(bytes) / std::max<int64_t>(1, W - 1) + 1);
    if (o.tokens_per_step > 0) B = std::min<int64_t>(B, std::max<int64_t>(1, o.tokens_per_step / W));
    const double rows = static_cast<double>(B * W), d = static_cast<double>(cf.d_model), V = static_cast<double>(cf.vocab_size);
    auto e = estimate_forward_memory(m, B, W, CacheSpec::none(), false);
    e.add("train: activations kept for the backward pass",
          static_cast<double>(cf.n_layers) *
              (rows * (10 * d + 3 * static_cast<double>(cf.d_mlp)) +
               3.0 * static_cast<double>(B * cf.n_heads) * static_cast<double>(W) * static_cast<double>(W)) *
              4);
    e.add("train: translators, their gradients and momentum", 3.0 * static_cast<double>(cf.n_layers) * (d * d + d) * 4);
    if (!ec)  // every window's activations, kept when the corpus is read more than once (at most the budget)
      e.add("train: the windows' activations, kept between passes",
            std::min(kTunedLensKeptBudget,
                     static_cast<double>(bytes / static_cast<uintmax_t>(W)) * tuned_lens_kept_bytes_per_window(cf, W)));
    e.add_phase("train: one layer's lens logits and their gradient", 3 * rows * V * 4);
    if (auto rc = cli::check_memory("tuned-lens train", fmt::format("training on micro-batches of {} windows of {} tokens", B, W),
                                    e, c.dry_run, "--micro-batch (fewer windows per forward) or --window"))
      return *rc;
  }
  auto display = std::make_shared<TrainDisplay>();
  display->tty = ::isatty(STDERR_FILENO) == 1;
  display->quiet = c.quiet;
  display->interval = vocablens::cli::progress_line_interval();
  if (dist::rank() == 0) {
    const int64_t d_model = m.config().d_model;
    o.plan = [display, d_model](const TunedLensTrainPlan& p) { display->plan(p, d_model); };
    o.progress = [display](const TunedLensTrainProgress& p) { display->progress(p); };
  }
  auto r = train_tuned_lens(m, *tok, o);
  if (dist::rank() == 0) {
    const double first = r.losses.empty() ? NAN : r.losses.front();
    const double last = r.losses.empty() ? NAN : r.losses.back();
    const auto trained = static_cast<int64_t>(r.losses.size());
    fmt::print(
        "trained a tuned lens for {} ({} translators) on {} tokens ({} windows of {}; {} per step{}) for steps "
        "{}..{} of {} in {}: loss {:.4f} -> {:.4f} (sum over layers of mean KL to the final layer, nats)\n",
        m.source(), m.config().n_layers, r.corpus_tokens, r.windows, r.window, r.windows_per_step,
        r.ranks > 1 ? fmt::format(", {} ranks", r.ranks) : "", r.start_step + 1, trained, r.steps,
        vocablens::cli::duration_text(r.seconds), first, last);
    fmt::print("wrote {}/tuned_lens.safetensors, params.pt, config.json (read with `vocablens lens MODEL --tuned {}`)\n",
               r.out_dir, r.out_dir);
    if (trained < r.steps)
      fmt::print(
          "the lens is unfinished ({} of {} steps) and marked so in {}/config.json: continue with the same command "
          "and --resume\n",
          trained, r.steps, r.out_dir);
  }
  return 0;
}

// The table view, read back from the Result (kind "tuned_lens_eval", vocablens/tuned_lens.hpp).
void print_eval(const vocablens::Result& r, const std::string& tuned, const std::string& corpus) {
  fmt::print("logit lens vs tuned lens ({}) over {} · {} predicted tokens, {} bytes\n", tuned, corpus,
             r.summary["predicted_tokens"].get<int64_t>(), r.summary["predicted_bytes"].get<int64_t>());
  fmt::print("{:<7} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}\n", "layer", "CE logit", "CE tuned", "H logit", "H tuned",
             "KL logit", "KL tuned");
  for (const auto& t : r.tables)
    if (t.name == "per_layer")
      for (const auto& row : t.rows)  // layer, hook, CE logit / tuned, H logit / tuned, KL logit / tuned, ...
        fmt::print("{:<7} {:>10.4f} {:>10.4f} {:>10.4f} {:>10.4f} {:>10.4f} {:>10.4f}\n", row[0].get<std::string>(),
                   row[2].get<double>(), row[3].get<double>(), row[4].get<double>(), row[5].get<double>(), row[6].get<double>(),
                   row[7].get<double>());
  fmt::print("(bits per byte: cross-entropy to the next token, entropy, KL to the final layer)\n");
}

int run_eval(TunedCli& c) {
  using namespace vocablens;
  const auto& a = find_analysis("tuned_lens_eval");
  const nlohmann::json given = c.eval->given();
  const nlohmann::json resolved = resolve_options(a.decl, given, Surface::Cli);
  const std::string corpus = resolved["path"].get<std::string>(), tuned = resolved["tuned"].get<std::string>();
  dist::init();
  if (!c.out.out_dir.empty() && dist::rank() == 0) ensure_directory(c.out.out_dir);
  Model m = load_model(c.model);
  adapt_threads_to(m);
  auto tok = load_tokenizer_for(c.model, c.tokenizer);
  {
    // Read here too, small as it is, so that a lens of another model fails before the estimate and one of another
    // unembedding is said before the pass; the analysis reads it again.
    const TunedLens lens = load_tuned_lens(tuned);
    lens.check_model(m);
    if (auto rc = cli::check_memory("tuned-lens eval", estimate_analysis(a, m, tok.get(), given, Surface::Cli), c.dry_run))
      return *rc;
    if (!lens.matches_unembedding(m) && dist::rank() == 0)
      fmt::print(stderr,
                 "vocablens: warning: the tuned lens {} was trained on a model with another unembedding than {} "
                 "(same shapes; fine for a fine-tune of that model, meaningless otherwise)\n",
                 tuned, c.model);
  }
  auto res = run_analysis(a, m, tok.get(), given, Surface::Cli);
  if (dist::rank() != 0) return 0;
  cli::fill_provenance(res, m);
  cli::emit(res, c.out, [&] { print_eval(res, tuned, corpus); });
  return 0;
}

vocablens::cli::Register registered_cmd_tuned_lens{
    "tuned-lens", "Tuned lens: train per-layer affine translators (train) and compare them with the logit lens (eval)",
    [](CLI::App& sub) -> vocablens::cli::Runner {
      auto c = std::make_shared<TunedCli>();
      sub.require_subcommand(1);
      auto* t = c->train_cmd = sub.add_subcommand("train",
                                                  "Train translators h -> h + A h + b per layer on a text corpus (the tuned-lens "
                                                  "package's recipe, steps scaled to the model)");
      t->add_option("MODEL", c->model, vocablens::cli::kModelHelp)->required();
      t->add_option("--corpus", c->corpus, "Training text")->required();
      t->add_option("--out", c->train.out_dir, "Output directory: tuned_lens.safetensors, params.pt, config.json")->required();
      t->add_option("--steps", c->train.steps, "Optimisation steps (default 250)");
      t->add_option("--tokens-per-step", c->train.tokens_per_step,
                    "Tokens per step, rounded down to whole windows, at least one (default: min(2^18, 256 x d_model), at most "
                    "the corpus; 262144 = 2^18 is the package's recipe)")
          ->check(CLI::PositiveNumber);
      t->add_option("--window", c->train.window, "Tokens per training window (default: the model's context)")
          ->check(CLI::Range(int64_t{2}, INT64_MAX));
      t->add_option("--micro-batch", c->train.micro_batch, "Windows per forward pass (default: about 8k tokens)");
      t->add_option("--lr-scale", c->train.lr_scale, "SGD learning rate = lr-scale * (1 - momentum) (default 1.0)");
      t->add_option("--momentum", c->train.momentum, "Nesterov momentum (default 0.9)");
      t->add_option("--weight-decay", c->train.weight_decay, "Weight decay (default 1e-3)");
      t->add_option("--max-grad-norm", c->train.max_grad_norm, "Gradient-norm clipping (default 1.0)");
      t->add_option("--seed", c->train.seed, "Seed of the window order (default 42)");
      t->add_option("--checkpoint-every", c->train.checkpoint_every, "Steps between checkpoints (default 50)");
      t->add_flag("--resume", c->train.resume, "Continue from DIR/checkpoint.safetensors");
      t->add_option("--stop-after", c->train.stop_after,
                    "Run at most this many steps now (checkpoint, then --resume continues; the schedule spans --steps)");
      t->add_option("--inject-nan-at-step", c->train.inject_nan_at_step, "Test hook: make this step's loss NaN")->group("");
      t->add_option("--tokenizer", c->tokenizer, "Tokenizer file or directory (default: found beside the model)");
      t->add_flag("--quiet", c->quiet,
                  "No progress display (warnings still show). Without a terminal, a progress line "
                  "every 30 s (VOCABLENS_PROGRESS_INTERVAL seconds) and every tenth of the steps");
      t->add_flag("--dry-run", c->dry_run, vocablens::cli::kDryRunHelp);

      auto* e = c->eval_cmd = sub.add_subcommand(
          "eval", "Per-layer cross-entropy, entropy and KL (bits per byte) of the logit and the tuned lens on held-out text");
      e->add_option("MODEL", c->model, vocablens::cli::kModelHelp)->required();
      c->eval = std::make_shared<vocablens::cli::DeclaredFlags>(vocablens::find_analysis("tuned_lens_eval").decl);
      c->eval->add_to(*e);
      e->add_option("--tokenizer", c->tokenizer, "Tokenizer file or directory (default: found beside the model)");
      e->add_flag("--dry-run", c->dry_run, vocablens::cli::kDryRunHelp);
      vocablens::cli::add_output_options(*e, c->out);
      auto* s = c->sample_cmd = sub.add_subcommand(
          "sample", "Text sampled from the model itself (temperature, fixed seed): training or held-out corpora");
      s->add_option("MODEL", c->model, vocablens::cli::kModelHelp)->required();
      s->add_option("--tokens", c->sample_tokens, "Tokens to draw (default 20000)");
      s->add_option("--seed", c->sample_seed, "Seed (default 1)");
      s->add_option("--temperature", c->temperature, "Sampling temperature (default 1)");
      s->add_option("--max-len", c->sample_max_len, "Tokens per sequence before a new one starts (default min(context, 256))");
      s->add_option("--out", c->sample_out, "Output file (default: stdout)");
      s->add_option("--tokenizer", c->tokenizer, "Tokenizer file or directory (default: found beside the model)");
      s->add_flag("--dry-run", c->dry_run, vocablens::cli::kDryRunHelp);
      return [c] {
        if (c->train_cmd->parsed()) return run_train(*c);
        if (c->sample_cmd->parsed()) return run_sample(*c);
        return run_eval(*c);
      };
    }};

}  // namespace

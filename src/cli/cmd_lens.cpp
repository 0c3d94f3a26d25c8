// `vocablens lens MODEL --prompt TEXT`: the logit lens (see vocablens/lens.hpp); `--corpus FILE` for
// per-layer statistics over a whole text file.
#include <fmt/color.h>
#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <optional>

#include "cli/command.hpp"
#include "cli/memory_check.hpp"
#include "cli/output.hpp"
#include "vocablens/atomic_file.hpp"
#include "vocablens/dist.hpp"
#include "vocablens/compare.hpp"
#include "vocablens/error.hpp"
#include "vocablens/lens.hpp"
#include "vocablens/lens_batch.hpp"
#include "vocablens/lens_corpus.hpp"
#include "vocablens/memory_estimate.hpp"
#include "vocablens/model.hpp"
#include "vocablens/timings.hpp"
#include "vocablens/tokenizer.hpp"
#include "vocablens/token_id.hpp"
#include "vocablens/tuned_lens.hpp"

namespace {

using vocablens::UsageError;

struct LensCliOptions {
  std::string model;
  std::optional<std::string> prompt;
  std::vector<int64_t> prompt_ids;  // issue #16: a reference sequence without a decode/encode round trip
  std::optional<std::string> target;
  std::optional<int64_t> target_id;
  std::string tokenizer;
  std::string corpus;
  std::string tuned;
  std::string prompts;
  std::string unembed = "model";
  int64_t top_k = 10;
  int64_t decoder_blocks = 0;
  int64_t window = 0;
  int64_t max_tokens = 0;
  bool resid_mid = false;
  bool save_probs = false;
  bool bos = false, no_bos = false;
  bool dry_run = false;
  vocablens::cli::OutputOptions out;
};

// ---- terminal helpers ----------------------------------------------------------------------------------

int terminal_width() {
  struct winsize w{};
  if (::isatty(STDOUT_FILENO) && ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col > 20) return w.ws_col;
  if (const char* c = std::getenv("COLUMNS")) {
    int v = std::atoi(c);
    if (v > 20) return v;
  }
  return 160;
}

// Number of terminal columns of UTF-8 text (one per code point; good enough for tables of tokens).
size_t columns(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// First `width` columns of s, padded with spaces to exactly `width` ("…" marks a cut).
std::string fit(const std::string& s, size_t width) {
  if (columns(s) <= width) return s + std::string(width - columns(s), ' ');
  std::string out;
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if ((c & 0xC0) != 0x80) {
      if (n == width - 1) break;
      ++n;
    }
    out.push_back(s[i]);
  }
  return out + "…";
}

std::string pct(double p) {
  if (std::isnan(p)) return "   -";
  if (p >= 0.995) return "100%";
  if (p < 0.005) return " <1%";
  return fmt::format("{:>3.0f}%", p * 100);
}

void print_lens_table(const vocablens::LensResult& L, const vocablens::Tokenizer& tok, const vocablens::Model& m,
                      bool color) {
  const int64_t n = L.n_layers(), T = L.n_positions(), k = L.top_k;
  auto style = [&](const std::string& s, fmt::text_style st) { return color ? fmt::format(st, "{}", s) : s; };
  fmt::print("{}\n", style(fmt::format("{} lens · {} · {} tokens · {} layers · unembedding {}{}",
                                       L.options.tuned ? "tuned" : "logit", m.source(), T, n,
                                       L.options.unembed == vocablens::LensUnembed::PseudoInverse ? "E⁺ = pinv(W_Uᵀ)" : "W_U",
                                       L.options.decoder_blocks ? fmt::format(" · last {} blocks as decoder",
                                                                              L.options.decoder_blocks)
                                                                : ""),
                               fmt::emphasis::bold));
  fmt::print("final norm recomputed on each layer's residual; cells: top-1 token and its probability{}\n",
             k == 0 ? " (none: --top-k 0)" : "");
  const size_t label_w = 7, tok_w = 7, cell_w = tok_w + 1 + 4;
  const int width = terminal_width();
  int64_t fit_cols = std::max<int64_t>(1, (width - static_cast<int64_t>(label_w)) / static_cast<int64_t>(cell_w + 1));
  int64_t first = std::max<int64_t>(0, T - fit_cols);
  if (first > 0)
    fmt::print("(showing positions {}..{} of {}; the terminal is {} columns wide — use --format csv/json or --out "
               "for all)\n",
               first, T - 1, T, width);
  auto row_label = [&](const std::string& s) { return style(fit(s, label_w), fmt::emphasis::bold); };
  // header: position, input token, target
  std::string line = row_label("pos");
  for (int64_t t = first; t < T; ++t) line += " " + fit(std::to_string(t), cell_w);
  fmt::print("{}\n", line);
  line = row_label("input");
  for (int64_t t = first; t < T; ++t) line += " " + fit(tok.display(L.tokens[t]), cell_w);
  fmt::print("{}\n", line);
  line = row_label("target");
  for (int64_t t = first; t < T; ++t)
    line += " " + style(fit(L.targets[t] >= 0 ? tok.display(L.targets[t]) : "-", cell_w), fmt::fg(fmt::terminal_color::cyan));
  fmt::print("{}\n", line);
  if (k > 0) {
    for (int64_t li = 0; li < n; ++li) {
      line = row_label(L.layers[li].label);
      for (int64_t t = first; t < T; ++t) {
        const int64_t id = L.top_id(li, t, 0);
        const double p = L.top_prob(li, t, 0);
        std::string cell = fit(id < 0 ? "NaN" : tok.display(id), tok_w) + " " + pct(p);  // -1: a NaN row
        fmt::text_style st;
        if (id == L.targets[t]) st = fmt::fg(fmt::terminal_color::green) | fmt::emphasis::bold;
        else if (p >= 0.5) st = fmt::emphasis::bold;
        else if (p < 0.1) st = fmt::emphasis::faint;
        line += " " + (color ? fmt::format(st, "{}", cell) : cell);
      }
      fmt::print("{}\n", line);
    }
  }
  // per-layer summary
  fmt::print("\n{}\n", style(fmt::format("{:<7} {:>9} {:>9} {:>9}  {:>8} {:>7}  {}", "layer", "mean CE", "entropy",
                                         "KL→final", "tgt rank", "tgt p", "top at last position"),
                             fmt::emphasis::bold));
  for (int64_t li = 0; li < n; ++li) {
    const size_t a = L.at(li, T - 1);
    double se = 0, sk = 0;
    for (int64_t t = 0; t < T; ++t) {
      se += L.entropy[L.at(li, t)];
      sk += L.kl_final[L.at(li, t)];
    }
    std::string tops;
    for (int64_t j = 0; j < std::min<int64_t>(k, 3); ++j)
      tops += (j ? "  " : "") + (L.top_id(li, T - 1, j) < 0 ? std::string("NaN") : tok.display(L.top_id(li, T - 1, j))) + " " +
              pct(L.top_prob(li, T - 1, j));
    double ce = L.mean_cross_entropy(li);
    fmt::print("{} {:>9} {:>9.3f} {:>9.3f}  {:>8} {:>7}  {}\n", row_label(L.layers[li].label),
               std::isnan(ce) ? std::string("-") : fmt::format("{:.3f}", ce), se / static_cast<double>(T),
               sk / static_cast<double>(T), L.target_rank[a] >= 0 ? std::to_string(L.target_rank[a]) : "-",
               std::isnan(L.target_prob[a]) ? std::string("-") : fmt::format("{:.4g}", L.target_prob[a]), tops);
  }
  fmt::print("(entropy and KL: mean over positions, nats; target at the last position{})\n",
             L.options.target ? "" : " = none when the target is the next token");
}

void print_corpus_table(const vocablens::CorpusLensResult& c, bool color) {
  auto style = [&](const std::string& s, fmt::text_style st) { return color ? fmt::format(st, "{}", s) : s; };
  fmt::print("{}\n", style(fmt::format("{} lens over {} · {} bytes · {} tokens in {} windows of {}",
                                       c.options.tuned ? "tuned" : "logit", c.corpus,
                                       c.corpus_bytes, c.tokens, c.windows, c.window),
                           fmt::emphasis::bold));
  fmt::print("{}\n", style(fmt::format("{:<7} {:>10} {:>10} {:>10} {:>10} {:>8}", "layer", "CE nats", "bits/byte",
                                       "KL→final", "entropy", "top-1"),
                           fmt::emphasis::bold));
  for (size_t i = 0; i < c.layers.size(); ++i)
    fmt::print("{:<7} {:>10.4f} {:>10.4f} {:>10.4f} {:>10.4f} {:>7.2f}%\n", fit(c.layers[i].label, 7),
               c.mean_cross_entropy[i], c.bits_per_byte[i], c.mean_kl_final[i], c.mean_entropy[i],
               c.top1_accuracy[i] * 100);
  fmt::print("({} predicted tokens, {} bytes; means over every predicted token, final norm recomputed per layer)\n",
             c.predicted, c.bytes);
}

// ---- the command ------------------------------------------------------------------------------------------

vocablens::LensOptions lens_options(const LensCliOptions& o) {
  vocablens::LensOptions l;
  l.top_k = o.top_k;
  l.resid_mid = o.resid_mid;
  l.save_log_probs = o.save_probs;
  l.decoder_blocks = o.decoder_blocks;
  if (o.unembed == "pinv") l.unembed = vocablens::LensUnembed::PseudoInverse;
  else if (o.unembed != "model") throw UsageError("--unembed must be model or pinv (got '" + o.unembed + "')");
  return l;
}

int64_t resolve_target(const LensCliOptions& o, const vocablens::Tokenizer& tok) {
  if (o.target_id) return *o.target_id;
  const std::string& s = *o.target;
  if (s.empty()) throw UsageError("--target is empty: give one token, e.g. --target \" Paris\"");
  std::vector<int64_t> ids;
  if (auto id = vocablens::single_token_id(tok, s, &ids)) return *id;
  throw UsageError("--target '" + s + "' is " + std::to_string(ids.size()) + " tokens: " + vocablens::display_ids(tok, ids) +
                   " (the target must be a single token of " + tok.source() + ")");
}

int run_lens_prompts(const LensCliOptions& o, vocablens::LensOptions lo);

// --tuned DIR: the translators, checked against the model (another model's: one line naming both).
void attach_tuned_lens(const LensCliOptions& o, const vocablens::Model& m, vocablens::LensOptions& lo) {
  if (o.tuned.empty()) return;
  lo.tuned = std::make_shared<vocablens::TunedLens>(vocablens::load_tuned_lens(o.tuned));
  vocablens::lens_detail::validate_options(m, lo);
  if (!lo.tuned->matches_unembedding(m))
    fmt::print(stderr, "vocablens: warning: the tuned lens {} was trained on a model with another unembedding than {} "
                       "(same shapes; fine for a fine-tune of that model, meaningless otherwise)\n", o.tuned, o.model);
}

// The peak memory the lens of T tokens will need (vocablens/memory_estimate.hpp): the forward records
// nothing (each lens layer is normalised into the stack by a hook as it is produced), the stack [n, T, d]
// lives through the forward and the lens, then one block of logits (~512 rows of all layers) at a time.
// --dry-run prints it; without it a run that would not fit is refused before any work.
int check_lens_memory(const LensCliOptions& o, const vocablens::Model& m, int64_t T) {
  const auto& c = m.config();
  auto e = vocablens::estimate_forward_memory(m, 1, T, vocablens::CacheSpec::none(), false);
  const double n = static_cast<double>(c.n_layers + 1 + (o.resid_mid ? c.n_layers : 0)), d = static_cast<double>(c.d_model);
  const double V = static_cast<double>(c.vocab_size), Td = static_cast<double>(T), k = static_cast<double>(o.top_k);
  e.add("lens: normalised residuals [layers, T, d]", n * Td * d * 4);
  e.add("lens: per-position results", n * Td * (k * 12 + 64) + (o.save_probs ? n * Td * V * 4 : 0.0));
  e.add_phase("lens: one logit block", std::max(n, 512.0) * (V + d) * 4);
  const std::string reduce = std::string("give a shorter prompt, or --corpus FILE --window N to read it in windows") +
                             (o.save_probs ? ", or leave out --save-probs" : "");
  if (auto rc = vocablens::cli::check_memory("lens", fmt::format("the lens of {} tokens of {}", T, m.source()), e,
                                             o.dry_run, reduce))
    return *rc;
  return -1;
}

int run_lens(const LensCliOptions& o) {
  if (o.dry_run && (!o.prompts.empty() || !o.corpus.empty()))
    throw UsageError("--dry-run applies to one prompt (--prompt or --prompt-ids), not to --prompts or --corpus");
  if (o.save_probs && (!o.prompts.empty() || !o.corpus.empty()))
    throw UsageError("--save-probs applies to one prompt (--prompt or --prompt-ids), not to --prompts or --corpus");
  if (!o.prompts.empty()) {
    if (o.prompt || !o.corpus.empty() || !o.prompt_ids.empty())
      throw UsageError("--prompts cannot be used with --prompt, --prompt-ids or --corpus");
    if (o.target || o.target_id) throw UsageError("--target has no meaning with --prompts (give \"target\" per line in JSON Lines)");
    if (o.bos && o.no_bos) throw UsageError("--bos and --no-bos cannot be used together");
    return run_lens_prompts(o, lens_options(o));
  }
  if (o.corpus.empty() && !o.prompt && o.prompt_ids.empty())
    throw UsageError("give --prompt TEXT, --prompt-ids IDS, --corpus FILE or --prompts FILE");
  if ((!o.corpus.empty()) + (o.prompt ? 1 : 0) + (!o.prompt_ids.empty()) > 1)
    throw UsageError("give only one of --prompt, --prompt-ids and --corpus");
  if (!o.prompt_ids.empty() && (o.bos || o.no_bos))
    throw UsageError("--bos/--no-bos apply to --prompt text; --prompt-ids are used exactly as given");
  if (o.prompt && o.prompt->empty())
    throw UsageError("empty prompt: --prompt needs at least one character of text");
  if (o.target && o.target_id) throw UsageError("--target and --target-id cannot be used together");
  if (!o.corpus.empty() && (o.target || o.target_id)) throw UsageError("--target has no meaning with --corpus");
  if (o.bos && o.no_bos) throw UsageError("--bos and --no-bos cannot be used together");
  vocablens::LensOptions lo = lens_options(o);
  // Fail on an unwritable --out before the (possibly long) computation.
  if (!o.out.out_dir.empty()) vocablens::ensure_directory(o.out.out_dir);

  vocablens::Model m = vocablens::load_model(o.model);
  vocablens::adapt_threads_to(m);
  auto tok = [&] {
    vocablens::timings::Phase phase("load");
    return vocablens::load_tokenizer_for(o.model, o.tokenizer);
  }();
  const bool color = vocablens::cli::use_color(o.out);
  attach_tuned_lens(o, m, lo);

  if (!o.corpus.empty()) {
    vocablens::dist::init();  // under mpirun: windows sharded over ranks, rank 0 reports
    vocablens::CorpusLensOptions co;
    co.lens = lo;
    co.window = o.window;
    co.max_tokens = o.max_tokens;
    const bool bar = ::isatty(STDERR_FILENO) == 1 && vocablens::dist::rank() == 0;
    if (bar)
      co.progress = [tokens = o.max_tokens > 0](uint64_t done, uint64_t total) {
        double f = total ? std::min(1.0, static_cast<double>(done) / static_cast<double>(total)) : 1.0;
        int filled = static_cast<int>(f * 30);
        const std::string amount = tokens ? fmt::format("{}/{} tokens", done, total)
                                          : fmt::format("{:.1f}/{:.1f} MB", done / 1e6, total / 1e6);
        fmt::print(stderr, "\r[{}{}] {:5.1f}%  {}", std::string(static_cast<size_t>(filled), '#'),
                   std::string(static_cast<size_t>(30 - filled), '.'), f * 100, amount);
        std::fflush(stderr);
      };
    auto c = vocablens::logit_lens_corpus(m, *tok, o.corpus, co);
    if (bar) fmt::print(stderr, "\r{}\r", std::string(60, ' '));
    if (vocablens::dist::rank() != 0) return 0;
    auto r = c.to_result();
    if (vocablens::dist::size() > 1) r.settings["ranks"] = vocablens::dist::size();
    vocablens::cli::fill_provenance(r, m);
    r.provenance["tokenizer"] = tok->source();
    vocablens::cli::emit(r, o.out, [&] { print_corpus_table(c, color); });
    return 0;
  }

  vocablens::EncodeOptions eo;
  if (o.bos) eo.add_bos = true;
  if (o.no_bos) eo.add_bos = false;
  std::vector<int64_t> ids = [&] {
    vocablens::timings::Phase phase("tokenise");
    return o.prompt_ids.empty() ? tok->encode(*o.prompt, eo) : o.prompt_ids;
  }();
  if (ids.empty()) throw UsageError("empty prompt: it encodes to no tokens");
  for (int64_t id : ids)
    if (id < 0 || id >= m.config().vocab_size)
      throw UsageError("--prompt-ids: id " + std::to_string(id) + " is outside the vocabulary [0, " +
                       std::to_string(m.config().vocab_size) + ")");
  if (static_cast<int64_t>(ids.size()) > m.config().n_ctx)
    throw UsageError("the prompt is " + std::to_string(ids.size()) + " tokens, longer than the model's context of " +
                     std::to_string(m.config().n_ctx) + " tokens");
  if (o.target || o.target_id) lo.target = resolve_target(o, *tok);
  if (int rc = check_lens_memory(o, m, static_cast<int64_t>(ids.size())); rc >= 0) return rc;
  auto lens = vocablens::logit_lens(m, ids, lo);
  auto r = lens.to_result(tok.get(), o.prompt ? *o.prompt : tok->decode(ids));
  if (!o.prompt_ids.empty()) r.settings["prompt_ids"] = ids;
  vocablens::cli::fill_provenance(r, m);
  r.provenance["tokenizer"] = tok->source();
  r.provenance["vocab_sha256"] = vocablens::vocabulary_sha256(*tok);  // what `vocablens compare` checks
  vocablens::cli::emit(r, o.out, [&] { print_lens_table(lens, *tok, m, color); });
  return 0;
}

// `--prompts FILE`: the lens of every prompt, one run directory with a prompt axis.
int run_lens_prompts(const LensCliOptions& o, vocablens::LensOptions lo) {
  auto prompts = vocablens::read_lens_prompts(o.prompts);
  if (!o.out.out_dir.empty()) vocablens::ensure_directory(o.out.out_dir);
  vocablens::Model m = vocablens::load_model(o.model);
  vocablens::adapt_threads_to(m);
  auto tok = vocablens::load_tokenizer_for(o.model, o.tokenizer);
  attach_tuned_lens(o, m, lo);
  vocablens::EncodeOptions eo;
  if (o.bos) eo.add_bos = true;
  if (o.no_bos) eo.add_bos = false;
  const bool bar = ::isatty(STDERR_FILENO) == 1 && prompts.size() > 1;
  auto progress = [bar](size_t done, size_t total) {
    if (bar) fmt::print(stderr, "\rlens: prompt {}/{}", done, total);
  };
  auto b = vocablens::logit_lens_batch(m, *tok, prompts, lo, eo, progress);
  if (bar) fmt::print(stderr, "\r{}\r", std::string(40, ' '));
  b.source = o.prompts;
  auto r = b.to_result(tok.get());
  vocablens::cli::fill_provenance(r, m);
  r.provenance["tokenizer"] = tok->source();
  const bool color = vocablens::cli::use_color(o.out);
  vocablens::cli::emit(r, o.out, [&] {
    auto bold = [&](const std::string& t) { return color ? fmt::format(fmt::emphasis::bold, "{}", t) : t; };
    fmt::print("{}\n", bold(fmt::format("logit lens over {} prompts of {} · {} · {:.2f} s", b.runs.size(), o.prompts, m.source(), b.seconds)));
    fmt::print("target probability at each prompt's readout position, per layer (rank in brackets)\n");
    std::string head = fmt::format("{:>3} {:<28} {:<10}", "#", "prompt", "target");
    for (const auto& ly : b.runs[0].layers) head += fmt::format(" {:>13}", fit(ly.label, 13));
    fmt::print("{}\n", bold(head));
    for (size_t p = 0; p < b.runs.size(); ++p) {
      const auto& L = b.runs[p];
      const int64_t ro = b.readout[p];
      std::string line = fmt::format("{:>3} {:<28} {:<10}", p, fit(b.prompts[p].prompt, 28),
                                     fit(ro >= 0 ? tok->display(L.targets[static_cast<size_t>(ro)]) : "-", 10));
      for (int64_t l = 0; l < L.n_layers(); ++l)
        line += ro < 0 ? fmt::format(" {:>13}", "-")
                       : fmt::format(" {:>13}", fmt::format("{:.3f} [{}]", L.target_prob[L.at(l, ro)], L.target_rank[L.at(l, ro)]));
      fmt::print("{}\n", line);
    }
    fmt::print("(readout: the last position for a JSON Lines target, else the second-to-last, predicting the last token)\n");
  });
  return 0;
}

vocablens::cli::Register reg{
    "lens",
    "Logit lens: every layer's residual through the final norm and unembedding (top-k, target rank, entropy, KL)",
    [](CLI::App& sub) -> vocablens::cli::Runner {
      auto o = std::make_shared<LensCliOptions>();
      sub.add_option("MODEL", o->model, vocablens::cli::kModelHelp)->required();
      sub.add_option("--prompt", o->prompt, "Text to read (tokenised with the model's tokenizer)");
      sub.add_option("--prompt-ids", o->prompt_ids,
                     "Token ids to read instead of text, used exactly as given (no BOS added), e.g. --prompt-ids 1,403,407")
          ->delimiter(',');
      sub.add_option("--target", o->target, "Target token (its bytes, e.g. \" Paris\"); default: the next token");
      sub.add_option("--target-id", o->target_id, "Target token by id");
      sub.add_option("--top-k", o->top_k, "Tokens reported per layer and position (default 10; 0 = none)");
      sub.add_flag("--resid-mid", o->resid_mid, "Also lens the residual between attention and MLP of every block");
      sub.add_flag("--save-probs", o->save_probs,
                   "Also save every layer's full log-distribution (log_probs.npy, layers x tokens x vocabulary float32), "
                   "for the KL of `vocablens compare`");
      sub.add_option("--unembed", o->unembed, "model (W_U, default) or pinv (E⁺, the pseudo-inverse of W_Uᵀ; = pinv(W_E) when tied)")
          ->check(CLI::IsMember({"model", "pinv"}));
      sub.add_option("--decoder-blocks", o->decoder_blocks,
                     "Treat the last K blocks as part of the decoder (default 0)");
      sub.add_option("--corpus", o->corpus,
                     "Per-layer statistics over a text file, streamed in context windows (under `mpirun -np N` the "
                     "windows are shared by the ranks; the numbers equal the one-process run)");
      sub.add_option("--tuned", o->tuned,
                     "Read every layer through a tuned lens's translators (a directory from `vocablens tuned-lens "
                     "train`, or the tuned-lens package's params.pt + config.json)");
      sub.add_option("--prompts", o->prompts,
                     "Many prompts: a file with one prompt per line, or JSON Lines {\"prompt\": ..., \"target\": ...}");
      // Counts are checked when parsed (exit 2): -5 or 0 must not silently mean "the default".
      sub.add_option("--window", o->window, "Corpus window in tokens (default: the model's context)")->check(CLI::Range(int64_t{2}, INT64_MAX));
      sub.add_option("--max-tokens", o->max_tokens, "Corpus: stop after this many predicted tokens")->check(CLI::PositiveNumber);
      sub.add_option("--tokenizer", o->tokenizer, "Tokenizer file or directory (default: found beside the model)");
      sub.add_flag("--bos", o->bos, "Prepend the BOS token to the prompt");
      sub.add_flag("--no-bos", o->no_bos, "Do not prepend BOS (llama2.c tokenizers add it by default)");
      sub.add_flag("--dry-run", o->dry_run, vocablens::cli::kDryRunHelp);
      vocablens::cli::add_output_options(sub, o->out);
      return [o] { return run_lens(*o); };
    }};

}  // namespace

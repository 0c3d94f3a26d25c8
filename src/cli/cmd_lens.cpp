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
#include "cli/declared_flags.hpp"
#include "cli/memory_check.hpp"
#include "cli/output.hpp"
#include "cli/text_fit.hpp"
#include "model/bf16_gemm.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/detail/atomic_file.hpp"
#include "vocablens/declared_options.hpp"
#include "vocablens/detail/lens_engine.hpp"
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
#include "vocablens/tuned_lens.hpp"

namespace {

using vocablens::cli::columns;
using vocablens::cli::fit;

using vocablens::UsageError;

// The analyses' options come from their declarations (analyses/lens_entry.cpp: lens, lens_corpus,
// lens_batch); the command's own flags are the aliases below, the tokenizer, --dry-run and the output.
struct LensCliOptions {
  std::string model;
  std::shared_ptr<vocablens::cli::DeclaredFlags> flags;     // lens (one prompt)
  std::shared_ptr<vocablens::cli::DeclaredFlags> corpus;    // lens_corpus's options that lens lacks
  std::shared_ptr<vocablens::cli::DeclaredFlags> batch;     // lens_batch's options that lens lacks
  std::vector<int64_t> prompt_ids;  // --prompt-ids: the prompt as ids, used exactly as given (no BOS)
  std::optional<int64_t> target_id; // --target-id: the target by id (= --target '#ID')
  std::string tokenizer;
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

// First `width` columns of s, padded with spaces to exactly `width` ("…" marks a cut).

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

// A declaration holding only the options of `d` that `base` does not declare (the flags the lens command adds
// for its corpus and batch forms).
vocablens::AnalysisDecl only_new(vocablens::AnalysisDecl d, const vocablens::AnalysisDecl& base) {
  std::vector<vocablens::OptionDecl> keep;
  for (auto& o : d.options)
    if (!base.find(o.name)) keep.push_back(o);
  d.options = std::move(keep);
  return d;
}

// The options typed for the one-prompt lens that `decl` (lens_corpus or lens_batch) also declares; anything else
// given is refused with the message this command has always given.
nlohmann::json carried_to(const vocablens::AnalysisDecl& decl, const nlohmann::json& lens_given, const char* form) {
  nlohmann::json out = nlohmann::json::object();
  for (auto it = lens_given.begin(); it != lens_given.end(); ++it) {
    if (decl.find(it.key())) out[it.key()] = it.value();
    else if (it.key() == "save_probs" || it.key() == "two_pass")
      throw UsageError(std::string(it.key() == "save_probs" ? "--save-probs" : "--two-pass") +
                       " applies to one prompt (--prompt or --prompt-ids), not to " + form);
    else if (it.key() == "target" && std::string(form) == "--prompts")
      throw UsageError("--target has no meaning with --prompts (give \"target\" per line in JSON Lines)");
    else if (it.key() == "target")
      throw UsageError("--target has no meaning with --corpus");
    // --bos / --no-bos with --corpus: the windows are read as the file's tokens (accepted, as before)
  }
  return out;
}

// --tuned DIR with another unembedding than the model's: a warning (fine for a fine-tune of that model).
void warn_tuned(const vocablens::LensOptions& lo, const nlohmann::json& resolved, const LensCliOptions& o,
                const vocablens::Model& m) {
  if (!lo.tuned) return;
  vocablens::lens_detail::validate_options(m, lo);
  if (!lo.tuned->matches_unembedding(m))
    fmt::print(stderr, "vocablens: warning: the tuned lens {} was trained on a model with another unembedding than {} "
                       "(same shapes; fine for a fine-tune of that model, meaningless otherwise)\n",
               resolved["tuned"].get<std::string>(), o.model);
}

// The peak memory the lens of T tokens will need (vocablens/memory_estimate.hpp): the forward records
// nothing (each lens layer is normalised into the stack by a hook as it is produced), the stack [n, T, d]
// lives through the forward and the lens, then one block of logits (lens_detail::default_block_positions:
// 512-1024 rows of all layers, at most 256 MiB when more than 512 rows) at a time. With --two-pass: the final
// distribution [T, V] instead of the stack, one layer's logit block at a time (and, for a tuned lens or
// decoder blocks, one normalised layer [T, d]).
// --dry-run prints it; without it a run that would not fit is refused before any work. -1: run.
int check_lens_memory(const nlohmann::json& ro, bool dry_run, const vocablens::Model& m, int64_t T) {
  const bool resid_mid = ro["resid_mid"].get<bool>(), save_probs = ro["save_probs"].get<bool>(),
             two_pass = ro.value("two_pass", false);
  const auto& c = m.config();
  const double n = static_cast<double>(c.n_layers + 1 + (resid_mid ? c.n_layers : 0)), d = static_cast<double>(c.d_model);
  const double V = static_cast<double>(c.vocab_size), Td = static_cast<double>(T),
               k = static_cast<double>(ro["top_k"].get<int64_t>());
  // One pass: the logit blocks follow the forward (a phase; the forward's freed heap is trimmed in between).
  // Two passes: each layer's block is made by a hook while the forward runs, so both are resident together.
  // Under --dtype bfloat16 with a W_U not stored as float32 the block's product is a bf16 GEMM
  // (LensEngine::logits_into): the bf16 activations and result beside the float32 block, and where the CPU has
  // no AVX-512 (src/model/bf16_gemm.hpp) the float32 activations, one widened column block of W_U (≤ 4 M values)
  // and its float32 product.
  const bool bf16_product = vocablens::compute_dtype() == vocablens::ComputeDtype::BFloat16 &&
                            m.weights().W_U.scalar_type() != at::kFloat && ro["unembed"].get<std::string>() != "pinv";
  auto stats_and_block = [&](vocablens::MemoryEstimate& e, double layers_per_block) {
    e.add("lens: per-position results", n * Td * (k * 12 + 64) + (save_probs ? n * Td * V * 4 : 0.0));
    const double rows = layers_per_block * static_cast<double>(std::min<int64_t>(
                            T, vocablens::lens_detail::default_block_positions(static_cast<int64_t>(layers_per_block), c.vocab_size)));
    const double R = std::max(layers_per_block, rows);
    double block = R * (V + d) * 4;
    if (bf16_product) {
      block += R * (V + d) * 2;
      if (!vocablens::detail::bf16_gemm_libtorch()) {
        const double cols = std::min(V, std::max(1.0, std::floor(static_cast<double>(vocablens::detail::kBf16WidenValues) / d)));
        block += R * d * 4 + d * cols * 4 + R * cols * 4;
      }
    }
    const std::string with = bf16_product ? " (and its bfloat16 product)" : "";
    if (layers_per_block > 1) e.add_phase("lens: one logit block" + with, block);
    else e.add("lens --two-pass: one layer's logit block" + with + ", made during the forward", block);
  };
  // The projection matrix the engine holds for the whole run (LensEngine's constructor): E⁺ [d, V] float32 with
  // --unembed pinv; else W_U in place when stored as float32 (or bfloat16 under --dtype bfloat16), otherwise a
  // copy — float32, or bfloat16 under --dtype bfloat16 (made from a transient float32 one).
  auto projection = [&](vocablens::MemoryEstimate& e) {
    const at::Tensor& stored = m.weights().W_U;
    const bool bf16 = vocablens::compute_dtype() == vocablens::ComputeDtype::BFloat16;
    if (ro["unembed"].get<std::string>() == "pinv") {
      e.add("lens: E⁺ [d, V] as float32", d * V * 4);
      // computed unless cached (linalg/pinv.cpp): E as float32, one float64 chunk of 8192 rows and its product,
      // the d × d Gram matrix, eigenvectors, workspace and the kept projector
      e.add_phase("lens: E⁺ computed when not cached",
                  (stored.scalar_type() == at::kFloat ? 0.0 : d * V * 4) + 2 * 8192 * d * 8 + 5 * d * d * 8);
    }
    else if (bf16 && stored.scalar_type() != at::kFloat && stored.scalar_type() != at::kBFloat16) {
      e.add("lens: W_U as bfloat16 (stored as " + vocablens::weight_storage_name(stored) + ")", d * V * 2);
      e.add_phase("lens: W_U's float32 copy, converted to bfloat16", d * V * 4);
    } else if (!bf16 && stored.scalar_type() != at::kFloat)
      e.add("lens: W_U as float32 (stored as " + vocablens::weight_storage_name(stored) + ")", d * V * 4);
  };
  auto one_pass = vocablens::estimate_forward_memory(m, 1, T, vocablens::CacheSpec::none(), false);
  one_pass.add("lens: normalised residuals [layers, T, d]", n * Td * d * 4);
  projection(one_pass);
  stats_and_block(one_pass, n);
  auto two = vocablens::estimate_forward_memory(m, 1, T, vocablens::CacheSpec::none(), false);
  projection(two);
  two.add("lens --two-pass: the final distribution [T, V]", Td * V * 4);
  if (!ro["tuned"].is_null() || ro["decoder_blocks"].get<int64_t>() > 0) two.add("lens --two-pass: one normalised layer [T, d]", Td * d * 4);
  stats_and_block(two, 1);
  const auto& e = two_pass ? two : one_pass;
  std::string reduce = std::string("give a shorter prompt, or --corpus FILE --window N to read it in windows") +
                       (save_probs ? ", or leave out --save-probs" : "");
  const bool suggest_two_pass = !two_pass && !save_probs && two.total() < one_pass.total();
  if (suggest_two_pass)
    reduce += fmt::format(", or --two-pass (about {:.0f} MiB: two forwards, one layer held at a time)", two.total() / 1048576.0);
  if (auto rc = vocablens::cli::check_memory("lens", fmt::format("the lens of {} tokens of {}", T, m.source()), e,
                                             dry_run, reduce)) {
    if (dry_run && suggest_two_pass)
      fmt::print("with --two-pass: about {:.1f} MiB (the forward runs twice; one layer's residual held at a time)\n",
                 two.total() / 1048576.0);
    return *rc;
  }
  return -1;
}

int run_lens_corpus(const LensCliOptions& o, const nlohmann::json& lens_given);
int run_lens_prompts(const LensCliOptions& o, const nlohmann::json& lens_given);

// A form's options: the lens flags it carries over, then its own flags.
nlohmann::json form_given(const vocablens::AnalysisDecl& decl, const nlohmann::json& lens_given, const char* form,
                          const nlohmann::json& own) {
  nlohmann::json given = carried_to(decl, lens_given, form);
  for (auto it = own.begin(); it != own.end(); ++it) given[it.key()] = it.value();
  return given;
}

// The model (threads adapted to its size) and its tokenizer, as every form of the command loads them.
struct Loaded {
  vocablens::Model m;
  std::unique_ptr<vocablens::Tokenizer> tok;
};
Loaded load(const LensCliOptions& o) {
  Loaded l{vocablens::load_model(o.model), nullptr};
  vocablens::adapt_threads_to(l.m);
  vocablens::timings::Phase phase("load");
  l.tok = vocablens::load_tokenizer_for(o.model, o.tokenizer);
  return l;
}

int run_lens(const LensCliOptions& o) {
  nlohmann::json given = o.flags->given();
  const bool corpus = o.corpus->given().contains("path"), prompts = o.batch->given().contains("prompts");
  const bool prompt = given.contains("prompt"), ids = !o.prompt_ids.empty();
  if (o.dry_run && (prompts || corpus))
    throw UsageError("--dry-run applies to one prompt (--prompt or --prompt-ids), not to --prompts or --corpus");
  if (prompts) {
    if (prompt || corpus || ids) throw UsageError("--prompts cannot be used with --prompt, --prompt-ids or --corpus");
    if (o.target_id) throw UsageError("--target has no meaning with --prompts (give \"target\" per line in JSON Lines)");
    return run_lens_prompts(o, given);
  }
  if (!corpus && !prompt && !ids) throw UsageError("give --prompt TEXT, --prompt-ids IDS, --corpus FILE or --prompts FILE");
  if (corpus + prompt + ids > 1) throw UsageError("give only one of --prompt, --prompt-ids and --corpus");
  if (ids && given.contains("bos"))
    throw UsageError("--bos/--no-bos apply to --prompt text; --prompt-ids are used exactly as given");
  if (given.contains("target") && o.target_id) throw UsageError("--target and --target-id cannot be used together");
  if (corpus && o.target_id) throw UsageError("--target has no meaning with --corpus");
  if (corpus) return run_lens_corpus(o, given);

  const auto& decl = vocablens::find_analysis("lens").decl;
  if (ids) given["prompt"] = o.prompt_ids;
  if (o.target_id) given["target"] = *o.target_id;
  // Checked before the model loads: a wrong flag costs nothing.
  const nlohmann::json resolved = vocablens::resolve_options(decl, given, vocablens::Surface::Cli);
  // Fail on an unwritable --out before the (possibly long) computation.
  if (!o.out.out_dir.empty()) vocablens::ensure_directory(o.out.out_dir);

  Loaded l = load(o);
  const vocablens::Model& m = l.m;
  const auto& tok = l.tok;
  const bool color = vocablens::cli::use_color(o.out);
  const vocablens::AnalysisRequest q{m, tok.get(), resolved, {}, nullptr, vocablens::Surface::Cli, &decl};
  std::vector<int64_t> prompt_ids = [&] {
    vocablens::timings::Phase phase("tokenise");
    return vocablens::entries::prompt_ids(q);
  }();
  vocablens::LensOptions lo = vocablens::entries::lens_options(q);
  warn_tuned(lo, resolved, o, m);
  if (int rc = check_lens_memory(resolved, o.dry_run, m, static_cast<int64_t>(prompt_ids.size())); rc >= 0) return rc;
  auto lens = vocablens::logit_lens(m, prompt_ids, lo);
  auto r = lens.to_result(tok.get(), vocablens::entries::prompt_text(q, prompt_ids));
  if (ids) r.settings["prompt_ids"] = prompt_ids;
  vocablens::cli::fill_provenance(r, m);
  r.provenance["tokenizer"] = tok->source();
  r.provenance["vocab_sha256"] = vocablens::vocabulary_sha256(*tok);  // what `vocablens compare` checks
  vocablens::cli::emit(r, o.out, [&] { print_lens_table(lens, *tok, m, color); });
  return 0;
}

// `--corpus FILE`: per-layer statistics over a text file (the lens_corpus analysis).
int run_lens_corpus(const LensCliOptions& o, const nlohmann::json& lens_given) {
  const auto& decl = vocablens::find_analysis("lens_corpus").decl;
  const nlohmann::json given = form_given(decl, lens_given, "--corpus", o.corpus->given());
  const nlohmann::json resolved = vocablens::resolve_options(decl, given, vocablens::Surface::Cli);
  if (!o.out.out_dir.empty()) vocablens::ensure_directory(o.out.out_dir);

  Loaded l = load(o);
  const vocablens::Model& m = l.m;
  const auto& tok = l.tok;
  const bool color = vocablens::cli::use_color(o.out);
  const vocablens::AnalysisRequest q{m, tok.get(), resolved, {}, nullptr, vocablens::Surface::Cli, &decl};
  vocablens::CorpusLensOptions co = vocablens::entries::corpus_options(q);
  warn_tuned(co.lens, resolved, o, m);
  vocablens::dist::init();  // under mpirun: windows sharded over ranks, rank 0 reports
  const bool bar = ::isatty(STDERR_FILENO) == 1 && vocablens::dist::rank() == 0;
  if (bar)
    co.progress = [tokens = co.max_tokens > 0](uint64_t done, uint64_t total) {
      double f = total ? std::min(1.0, static_cast<double>(done) / static_cast<double>(total)) : 1.0;
      int filled = static_cast<int>(f * 30);
      const std::string amount = tokens ? fmt::format("{}/{} tokens", done, total)
                                        : fmt::format("{:.1f}/{:.1f} MB", done / 1e6, total / 1e6);
      fmt::print(stderr, "\r[{}{}] {:5.1f}%  {}", std::string(static_cast<size_t>(filled), '#'),
                 std::string(static_cast<size_t>(30 - filled), '.'), f * 100, amount);
      std::fflush(stderr);
    };
  auto c = vocablens::logit_lens_corpus(m, *tok, resolved["path"].get<std::string>(), co);
  if (bar) fmt::print(stderr, "\r{}\r", std::string(60, ' '));
  if (vocablens::dist::rank() != 0) return 0;
  auto r = c.to_result();
  if (vocablens::dist::size() > 1) r.settings["ranks"] = vocablens::dist::size();
  vocablens::cli::fill_provenance(r, m);
  r.provenance["tokenizer"] = tok->source();
  vocablens::cli::emit(r, o.out, [&] { print_corpus_table(c, color); });
  return 0;
}

// `--prompts FILE`: the lens of every prompt, one run directory with a prompt axis (the lens_batch analysis).
int run_lens_prompts(const LensCliOptions& o, const nlohmann::json& lens_given) {
  const auto& decl = vocablens::find_analysis("lens_batch").decl;
  const nlohmann::json given = form_given(decl, lens_given, "--prompts", o.batch->given());
  const nlohmann::json resolved = vocablens::resolve_options(decl, given, vocablens::Surface::Cli);
  const std::string path = resolved["prompts"].get<std::string>();
  auto prompts = vocablens::read_lens_prompts(path);
  if (!o.out.out_dir.empty()) vocablens::ensure_directory(o.out.out_dir);
  Loaded l = load(o);
  const vocablens::Model& m = l.m;
  const auto& tok = l.tok;
  const vocablens::AnalysisRequest q{m, tok.get(), resolved, {}, nullptr, vocablens::Surface::Cli, &decl};
  vocablens::LensOptions lo = vocablens::entries::lens_options(q);
  warn_tuned(lo, resolved, o, m);
  vocablens::EncodeOptions eo;
  if (resolved["bos"].is_boolean()) eo.add_bos = resolved["bos"].get<bool>();
  const bool bar = ::isatty(STDERR_FILENO) == 1 && prompts.size() > 1;
  auto progress = [bar](size_t done, size_t total) {
    if (bar) fmt::print(stderr, "\rlens: prompt {}/{}", done, total);
  };
  auto b = vocablens::logit_lens_batch(m, *tok, prompts, lo, eo, progress);
  if (bar) fmt::print(stderr, "\r{}\r", std::string(40, ' '));
  b.source = path;
  auto r = b.to_result(tok.get());
  vocablens::cli::fill_provenance(r, m);
  r.provenance["tokenizer"] = tok->source();
  const bool color = vocablens::cli::use_color(o.out);
  vocablens::cli::emit(r, o.out, [&] {
    auto bold = [&](const std::string& t) { return color ? fmt::format(fmt::emphasis::bold, "{}", t) : t; };
    fmt::print("{}\n", bold(fmt::format("logit lens over {} prompts of {} · {} · {:.2f} s", b.runs.size(), path, m.source(), b.seconds)));
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

vocablens::cli::Register registered_cmd_lens{
    "lens", vocablens::find_analysis("lens").decl.summary, [](CLI::App& sub) -> vocablens::cli::Runner {
      auto o = std::make_shared<LensCliOptions>();
      const auto& lens = vocablens::find_analysis("lens").decl;
      o->flags = std::make_shared<vocablens::cli::DeclaredFlags>(lens);
      o->corpus = std::make_shared<vocablens::cli::DeclaredFlags>(only_new(vocablens::find_analysis("lens_corpus").decl, lens));
      o->batch = std::make_shared<vocablens::cli::DeclaredFlags>(only_new(vocablens::find_analysis("lens_batch").decl, lens));
      sub.add_option("MODEL", o->model, vocablens::cli::kModelHelp)->required();
      // --prompt may be --prompt-ids, --corpus or --prompts instead (run_lens says which one is missing).
      o->flags->add_to(sub, {"prompt"});
      o->corpus->add_to(sub, {"path"});
      o->batch->add_to(sub, {"prompts"});
      sub.add_option("--prompt-ids", o->prompt_ids,
                     "Token ids to read instead of text, used exactly as given (no BOS added), e.g. --prompt-ids 1,403,407")
          ->delimiter(',');
      sub.add_option("--target-id", o->target_id, "Target token by id (= --target '#ID')");
      sub.add_option("--tokenizer", o->tokenizer, "Tokenizer file or directory (default: found beside the model)");
      sub.add_flag("--dry-run", o->dry_run, vocablens::cli::kDryRunHelp);
      vocablens::cli::add_output_options(sub, o->out);
      return [o] { return run_lens(*o); };
    }};

}  // namespace

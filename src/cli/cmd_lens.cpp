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
#include "cli/progress.hpp"
#include "cli/text_fit.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/detail/atomic_file.hpp"
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
  std::shared_ptr<vocablens::cli::DeclaredFlags> flags;   // lens (one prompt)
  std::shared_ptr<vocablens::cli::DeclaredFlags> corpus;  // lens_corpus's options that lens lacks
  std::shared_ptr<vocablens::cli::DeclaredFlags> batch;   // lens_batch's options that lens lacks
  std::optional<int64_t> target_id;                       // --target-id: the target by id (= --target '#ID')
  std::string tokenizer;
  bool dry_run = false;
  vocablens::cli::OutputOptions out;
};

// ---- terminal helpers ----------------------------------------------------------------------------------

int terminal_width() {
  struct winsize w {};
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

// The lens Result as a terminal table: the top-1 grid (the last positions that fit), then per-layer means.
void print_lens_table(const vocablens::Result& r, const vocablens::Tokenizer& tok, bool color) {
  const auto& set = r.settings;
  const auto& sum = r.summary;
  const int64_t n = static_cast<int64_t>(sum["layers"].size()), T = sum["n_tokens"].get<int64_t>(),
                k = set["top_k"].get<int64_t>();
  const int64_t* tokens = vocablens::cli::array_values<int64_t>(r, "tokens");
  const int64_t* targets = vocablens::cli::array_values<int64_t>(r, "targets");
  const int64_t* top_ids = vocablens::cli::array_values<int64_t>(r, "top_ids");
  const float* top_probs = vocablens::cli::array_values<float>(r, "top_probs");
  const float* entropy = vocablens::cli::array_values<float>(r, "entropy");
  const float* kl_final = vocablens::cli::array_values<float>(r, "kl_final");
  const float* cross_entropy = vocablens::cli::array_values<float>(r, "cross_entropy");
  const float* target_prob = vocablens::cli::array_values<float>(r, "target_prob");
  const int64_t* target_rank = vocablens::cli::array_values<int64_t>(r, "target_rank");
  auto at = [T](int64_t li, int64_t t) { return static_cast<size_t>(li * T + t); };
  auto top_id = [&](int64_t li, int64_t t, int64_t j) {
    return top_ids[at(li, t) * static_cast<size_t>(k) + static_cast<size_t>(j)];
  };
  auto top_prob = [&](int64_t li, int64_t t, int64_t j) {
    return top_probs[at(li, t) * static_cast<size_t>(k) + static_cast<size_t>(j)];
  };
  auto label = [&](int64_t li) { return sum["layers"][static_cast<size_t>(li)]["label"].get<std::string>(); };
  auto style = [&](const std::string& s, fmt::text_style st) { return color ? fmt::format(st, "{}", s) : s; };
  const int64_t decoder_blocks = set["decoder_blocks"].get<int64_t>();
  fmt::print("{}\n", style(fmt::format("{} lens · {} · {} tokens · {} layers · unembedding {}{}", set["lens"].get<std::string>(),
                                       sum["model"].get<std::string>(), T, n,
                                       set["unembed"].get<std::string>() == "pinv" ? "E⁺ = pinv(W_Uᵀ)" : "W_U",
                                       decoder_blocks ? fmt::format(" · last {} blocks as decoder", decoder_blocks) : ""),
                           fmt::emphasis::bold));
  fmt::print("final norm recomputed on each layer's residual; cells: top-1 token and its probability{}\n",
             k == 0 ? " (none: --top-k 0)" : "");
  const size_t label_w = 7, tok_w = 7, cell_w = tok_w + 1 + 4;
  const int width = terminal_width();
  int64_t fit_cols = std::max<int64_t>(1, (width - static_cast<int64_t>(label_w)) / static_cast<int64_t>(cell_w + 1));
  int64_t first = std::max<int64_t>(0, T - fit_cols);
  if (first > 0)
    fmt::print(
        "(showing positions {}..{} of {}; the terminal is {} columns wide — use --format csv/json or --out "
        "for all)\n",
        first, T - 1, T, width);
  auto row_label = [&](const std::string& s) { return style(fit(s, label_w), fmt::emphasis::bold); };
  // header: position, input token, target
  std::string line = row_label("pos");
  for (int64_t t = first; t < T; ++t) line += " " + fit(std::to_string(t), cell_w);
  fmt::print("{}\n", line);
  line = row_label("input");
  for (int64_t t = first; t < T; ++t) line += " " + fit(tok.display(tokens[t]), cell_w);
  fmt::print("{}\n", line);
  line = row_label("target");
  for (int64_t t = first; t < T; ++t)
    line += " " + style(fit(targets[t] >= 0 ? tok.display(targets[t]) : "-", cell_w), fmt::fg(fmt::terminal_color::cyan));
  fmt::print("{}\n", line);
  if (k > 0) {
    for (int64_t li = 0; li < n; ++li) {
      line = row_label(label(li));
      for (int64_t t = first; t < T; ++t) {
        const int64_t id = top_id(li, t, 0);
        const double p = top_prob(li, t, 0);
        std::string cell = fit(id < 0 ? "NaN" : tok.display(id), tok_w) + " " + pct(p);  // -1: a NaN row
        fmt::text_style st;
        if (id == targets[t]) st = fmt::fg(fmt::terminal_color::green) | fmt::emphasis::bold;
        else if (p >= 0.5) st = fmt::emphasis::bold;
        else if (p < 0.1) st = fmt::emphasis::faint;
        line += " " + (color ? fmt::format(st, "{}", cell) : cell);
      }
      fmt::print("{}\n", line);
    }
  }
  // per-layer summary
  fmt::print("\n{}\n", style(fmt::format("{:<7} {:>9} {:>9} {:>9}  {:>8} {:>7}  {}", "layer", "mean CE", "entropy", "KL→final",
                                         "tgt rank", "tgt p", "top at last position"),
                             fmt::emphasis::bold));
  for (int64_t li = 0; li < n; ++li) {
    const size_t a = at(li, T - 1);
    double se = 0, sk = 0, sce = 0;
    int64_t nce = 0;
    for (int64_t t = 0; t < T; ++t) {
      se += entropy[at(li, t)];
      sk += kl_final[at(li, t)];
      if (!std::isnan(cross_entropy[at(li, t)])) {  // positions without a target have none
        sce += cross_entropy[at(li, t)];
        ++nce;
      }
    }
    std::string tops;
    for (int64_t j = 0; j < std::min<int64_t>(k, 3); ++j)
      tops += (j ? "  " : "") + (top_id(li, T - 1, j) < 0 ? std::string("NaN") : tok.display(top_id(li, T - 1, j))) + " " +
              pct(top_prob(li, T - 1, j));
    fmt::print("{} {:>9} {:>9.3f} {:>9.3f}  {:>8} {:>7}  {}\n", row_label(label(li)),
               nce == 0 ? std::string("-") : fmt::format("{:.3f}", sce / static_cast<double>(nce)), se / static_cast<double>(T),
               sk / static_cast<double>(T), target_rank[a] >= 0 ? std::to_string(target_rank[a]) : "-",
               std::isnan(target_prob[a]) ? std::string("-") : fmt::format("{:.4g}", target_prob[a]), tops);
  }
  fmt::print("(entropy and KL: mean over positions, nats; target at the last position{})\n",
             set["target"].is_object() ? "" : " = none when the target is the next token");
}

void print_corpus_table(const vocablens::Result& r, bool color) {
  const auto& set = r.settings;
  const auto& sum = r.summary;
  auto style = [&](const std::string& s, fmt::text_style st) { return color ? fmt::format(st, "{}", s) : s; };
  fmt::print("{}\n",
             style(fmt::format("{} lens over {} · {} bytes · {} tokens in {} windows of {}", set["lens"].get<std::string>(),
                               set["corpus"].get<std::string>(), sum["corpus_bytes"].get<int64_t>(), sum["tokens"].get<int64_t>(),
                               sum["windows"].get<int64_t>(), set["window"].get<int64_t>()),
                   fmt::emphasis::bold));
  fmt::print("{}\n", style(fmt::format("{:<7} {:>10} {:>10} {:>10} {:>10} {:>8}", "layer", "CE nats", "bits/byte", "KL→final",
                                       "entropy", "top-1"),
                           fmt::emphasis::bold));
  for (const auto& ly : sum["per_layer"])
    fmt::print("{:<7} {:>10.4f} {:>10.4f} {:>10.4f} {:>10.4f} {:>7.2f}%\n", fit(ly["layer"].get<std::string>(), 7),
               ly["cross_entropy_nats"].get<double>(), ly["bits_per_byte"].get<double>(), ly["kl_final_nats"].get<double>(),
               ly["entropy_nats"].get<double>(), ly["top1_accuracy"].get<double>() * 100);
  fmt::print("({} predicted tokens, {} bytes; means over every predicted token, final norm recomputed per layer)\n",
             sum["predicted_tokens"].get<int64_t>(), sum["predicted_bytes"].get<int64_t>());
}

void print_batch_table(const vocablens::Result& r, const vocablens::Model& m, bool color) {
  const auto& sum = r.summary;
  const int64_t P = sum["n_prompts"].get<int64_t>(), n = static_cast<int64_t>(sum["layers"].size()),
                T = sum["max_tokens"].get<int64_t>();
  const float* tp = vocablens::cli::array_values<float>(r, "target_prob");
  const int64_t* rank = vocablens::cli::array_values<int64_t>(r, "target_rank");
  auto bold = [&](const std::string& t) { return color ? fmt::format(fmt::emphasis::bold, "{}", t) : t; };
  fmt::print("{}\n", bold(fmt::format("logit lens over {} prompts of {} · {} · {:.2f} s", P,
                                      r.settings["prompts_file"].get<std::string>(), m.source(), sum["seconds"].get<double>())));
  fmt::print("target probability at each prompt's readout position, per layer (rank in brackets)\n");
  std::string head = fmt::format("{:>3} {:<28} {:<10}", "#", "prompt", "target");
  for (const auto& ly : sum["layers"]) head += fmt::format(" {:>13}", fit(ly.get<std::string>(), 13));
  fmt::print("{}\n", bold(head));
  for (int64_t p = 0; p < P; ++p) {
    const auto& pr = sum["prompts"][static_cast<size_t>(p)];
    const int64_t ro = pr["readout_position"].get<int64_t>();
    std::string line = fmt::format("{:>3} {:<28} {:<10}", p, fit(pr["prompt"].get<std::string>(), 28),
                                   fit(ro >= 0 ? pr["target"].get<std::string>() : "-", 10));
    for (int64_t l = 0; l < n; ++l) {
      const size_t i = static_cast<size_t>((p * n + l) * T + std::max<int64_t>(ro, 0));
      line += ro < 0 ? fmt::format(" {:>13}", "-") : fmt::format(" {:>13}", fmt::format("{:.3f} [{}]", tp[i], rank[i]));
    }
    fmt::print("{}\n", line);
  }
  fmt::print("(readout: the last position for a JSON Lines target, else the second-to-last, predicting the last token)\n");
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
    else if (it.key() == "ablate_expert" || it.key() == "ablate_mode" || it.key() == "scale_expert")
      throw UsageError(std::string(it.key() == "ablate_expert" ? "--ablate-expert"
                                   : it.key() == "ablate_mode" ? "--ablate-mode"
                                                               : "--scale-expert") +
                       " applies to one prompt (--prompt or --prompt-ids), not to " + form);
    else if (it.key() == "target" && std::string(form) == "--prompts")
      throw UsageError("--target has no meaning with --prompts (give \"target\" per line in JSON Lines)");
    else if (it.key() == "target") throw UsageError("--target has no meaning with --corpus");
    // --bos / --no-bos with --corpus: the windows are read as the file's tokens (accepted, as before)
  }
  return out;
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
  // --prompt-ids (declared with --prompt, DeclaredFlags) arrives as the prompt's ids.
  const bool ids = given.contains("prompt") && given["prompt"].is_array(), prompt = given.contains("prompt") && !ids;
  if (prompts) {
    if (prompt || corpus || ids) throw UsageError("--prompts cannot be used with --prompt, --prompt-ids or --corpus");
    if (o.target_id) throw UsageError("--target has no meaning with --prompts (give \"target\" per line in JSON Lines)");
    return run_lens_prompts(o, given);
  }
  if (!corpus && !prompt && !ids) throw UsageError("give --prompt TEXT, --prompt-ids IDS, --corpus FILE or --prompts FILE");
  if (corpus + prompt + ids > 1) throw UsageError("give only one of --prompt, --prompt-ids and --corpus");
  if (given.contains("target") && o.target_id) throw UsageError("--target and --target-id cannot be used together");
  if (corpus && o.target_id) throw UsageError("--target has no meaning with --corpus");
  if (corpus) return run_lens_corpus(o, given);

  const auto& a = vocablens::find_analysis("lens");
  if (o.target_id) given["target"] = *o.target_id;
  // Checked before the model loads: a wrong flag costs nothing.
  vocablens::resolve_options(a.decl, given, vocablens::Surface::Cli);
  // Fail on an unwritable --out before the (possibly long) computation.
  if (!o.out.out_dir.empty()) vocablens::ensure_directory(o.out.out_dir);

  Loaded l = load(o);
  const auto est = vocablens::estimate_analysis(a, l.m, l.tok.get(), given, vocablens::Surface::Cli);
  if (auto rc = vocablens::cli::check_memory("lens", est, o.dry_run)) return *rc;
  auto r = vocablens::run_analysis(a, l.m, l.tok.get(), given, vocablens::Surface::Cli);
  vocablens::cli::fill_provenance(r, l.m);
  const bool color = vocablens::cli::use_color(o.out);
  vocablens::cli::emit(r, o.out, [&] { print_lens_table(r, *l.tok, color); });
  return 0;
}

// `--corpus FILE`: per-layer statistics over a text file (the lens_corpus analysis).
int run_lens_corpus(const LensCliOptions& o, const nlohmann::json& lens_given) {
  const auto& a = vocablens::find_analysis("lens_corpus");
  const nlohmann::json given = form_given(a.decl, lens_given, "--corpus", o.corpus->given());
  vocablens::resolve_options(a.decl, given, vocablens::Surface::Cli);
  if (!o.out.out_dir.empty()) vocablens::ensure_directory(o.out.out_dir);

  Loaded l = load(o);
  const auto est = vocablens::estimate_analysis(a, l.m, l.tok.get(), given, vocablens::Surface::Cli);
  if (auto rc = vocablens::cli::check_memory("lens", est, o.dry_run)) return *rc;
  vocablens::dist::init();  // under mpirun: windows sharded over ranks, rank 0 reports
  // Rank 0 shows the progress (every rank reads the whole file; the windows are shared).
  vocablens::cli::ProgressBar bar("lens --corpus", "tokens");
  std::function<void(int64_t, int64_t)> progress;
  if (vocablens::dist::rank() == 0) progress = bar.callback();
  auto r = vocablens::run_analysis(a, l.m, l.tok.get(), given, vocablens::Surface::Cli, progress);
  bar.finish();
  if (vocablens::dist::rank() != 0) return 0;
  if (vocablens::dist::size() > 1) r.settings["ranks"] = vocablens::dist::size();
  vocablens::cli::fill_provenance(r, l.m);
  const bool color = vocablens::cli::use_color(o.out);
  vocablens::cli::emit(r, o.out, [&] { print_corpus_table(r, color); });
  return 0;
}

// `--prompts FILE`: the lens of every prompt, one run directory with a prompt axis (the lens_batch analysis).
int run_lens_prompts(const LensCliOptions& o, const nlohmann::json& lens_given) {
  const auto& a = vocablens::find_analysis("lens_batch");
  const nlohmann::json given = form_given(a.decl, lens_given, "--prompts", o.batch->given());
  const nlohmann::json resolved = vocablens::resolve_options(a.decl, given, vocablens::Surface::Cli);
  vocablens::read_lens_prompts(resolved["prompts"].get<std::string>());  // a bad file is refused before the load
  if (!o.out.out_dir.empty()) vocablens::ensure_directory(o.out.out_dir);
  Loaded l = load(o);
  const auto est = vocablens::estimate_analysis(a, l.m, l.tok.get(), given, vocablens::Surface::Cli);
  if (auto rc = vocablens::cli::check_memory("lens", est, o.dry_run)) return *rc;
  const bool tty = ::isatty(STDERR_FILENO) == 1;
  bool shown = false;
  auto progress = [tty, &shown](int64_t done, int64_t total) {
    if (!tty || total <= 1) return;
    fmt::print(stderr, "\rlens: prompt {}/{}", done, total);
    shown = true;
  };
  auto r = vocablens::run_analysis(a, l.m, l.tok.get(), given, vocablens::Surface::Cli, progress);
  if (shown) fmt::print(stderr, "\r{}\r", std::string(40, ' '));
  vocablens::cli::fill_provenance(r, l.m);
  const bool color = vocablens::cli::use_color(o.out);
  vocablens::cli::emit(r, o.out, [&] { print_batch_table(r, l.m, color); });
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
      sub.add_option("--target-id", o->target_id, "Target token by id (= --target '#ID')");
      sub.add_option("--tokenizer", o->tokenizer, "Tokenizer file or directory (default: found beside the model)");
      sub.add_flag("--dry-run", o->dry_run, vocablens::cli::kDryRunHelp);
      vocablens::cli::add_output_options(sub, o->out);
      return [o] { return run_lens(*o); };
    }};

}  // namespace

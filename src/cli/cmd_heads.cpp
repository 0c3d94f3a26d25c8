// `vocablens heads MODEL [--layer L --head H] [--kind ov|qk] [--top-k 50]`: attention heads in vocabulary
// space (see vocablens/heads.hpp): exact top-k (token, token) pairs of each head's OV / QK circuit,
// per-token lists, singular values, eigenvalues and copying scores.
#include <limits>
#include <fmt/color.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <memory>
#include <optional>

#include "cli/command.hpp"
#include "cli/declared_flags.hpp"
#include "cli/memory_check.hpp"
#include "cli/output.hpp"
#include "cli/text_fit.hpp"
#include "cli/progress.hpp"
#include "cli/token_filter_options.hpp"
#include "vocablens/analysis_estimate.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/detail/atomic_file.hpp"
#include "vocablens/declared_options.hpp"
#include "vocablens/error.hpp"
#include "vocablens/heads.hpp"
#include "vocablens/model.hpp"
#include "vocablens/neurons.hpp"
#include "vocablens/tokenizer.hpp"
#include "vocablens/token_id.hpp"

namespace {

using vocablens::cli::columns;
using vocablens::cli::fit;

using vocablens::UsageError;

// The analysis's options come from its declaration (analyses/heads_entry.cpp); these are the command's own.
struct HeadsCliOptions {
  std::string model;
  std::string tokenizer;
  std::shared_ptr<vocablens::cli::DeclaredFlags> flags;
  std::vector<int64_t> token_ids;  // --token-id N: the same as --token '#N'
  bool verbose = false;
  bool dry_run = false;
  vocablens::cli::OutputOptions out;
};



void print_heads(const vocablens::HeadsAnalysis& a, const vocablens::Tokenizer* tok, const vocablens::Model& m,
                 bool color) {
  auto style = [&](const std::string& s, fmt::text_style st) { return color ? fmt::format(st, "{}", s) : s; };
  auto text = [&](int64_t id) { return tok ? tok->display(id) : "#" + std::to_string(id); };
  const auto& o = a.options;
  fmt::print("{}\n", style(fmt::format("heads · {} · inverse {} · {} circuit{} · top {}{}", m.source(),
                                       vocablens::to_string(o.inverse), a.circuits.size(),
                                       a.circuits.size() == 1 ? "" : "s", o.top_k,
                                       a.allowed_tokens < a.vocab_size
                                           ? fmt::format(" · {} of {} tokens allowed", a.allowed_tokens, a.vocab_size)
                                           : ""),
                           fmt::emphasis::bold));
  fmt::print("ov: src = attended token, dst = token whose logit it raises · qk: src = query token, dst = key token\n");
  const bool compact = a.circuits.size() > 4;
  const int64_t shown = compact ? std::min<int64_t>(o.top_k, 6) : o.top_k;
  for (const auto& c : a.circuits) {
    std::string head = fmt::format("layer {} head {} · {}", c.layer, c.head, vocablens::to_string(c.kind));
    std::string spec = o.spectra ? fmt::format(" · copying score {:+.3f} (W_{} {:+.3f}) · σ₁ {:.4g}", c.copying_score,
                                               c.kind == vocablens::CircuitKind::OV ? "VO" : "QK",
                                               c.weight_copying_score,
                                               c.singular_values.empty() ? std::numeric_limits<double>::quiet_NaN()  // a NaN circuit
                                                                           : c.singular_values[0])
                                 : "";
    fmt::print("\n{}{}\n", style(head, fmt::emphasis::bold), spec);
    if (compact) {
      std::string line;
      for (int64_t q = 0; q < shown && q < static_cast<int64_t>(c.top.size()); ++q)
        line += (q ? "  " : "  ") + text(c.top[q].i) + "→" + text(c.top[q].j) + fmt::format(" {:.3g}", c.top[q].value);
      fmt::print("{}\n", line);
    } else {
      for (size_t q = 0; q < c.top.size(); ++q)
        // 4 significant digits ({:.4f} printed 0.0003 on every row of a small circuit).
        fmt::print("  {:>4}  {} → {} {:>10.4g}\n", q + 1, fit(text(c.top[q].i), 16), fit(text(c.top[q].j), 16),
                   c.top[q].value);
    }
    for (size_t s = 0; s < c.per_token.size(); ++s) {
      std::string line = fmt::format("  {} {} →", c.kind == vocablens::CircuitKind::OV ? "from" : "query",
                                     style(text(o.source_tokens[s]), fmt::fg(fmt::terminal_color::cyan)));
      for (const auto& e : c.per_token[s]) line += fmt::format("  {} {:.3g}", text(e.j), e.value);
      fmt::print("{}\n", line);
    }
  }
  if (compact && shown < o.top_k)
    fmt::print("\n(first {} of {} pairs per circuit shown; --format csv/json or --out DIR for all)\n", shown, o.top_k);
}

int run_heads(const HeadsCliOptions& co) {
  const auto& decl = vocablens::find_analysis("heads").decl;
  nlohmann::json given = co.flags->given();
  for (int64_t id : co.token_ids) given["tokens"].push_back(id);
  // Checked before the model loads: a wrong flag costs nothing.
  const nlohmann::json resolved = vocablens::resolve_options(decl, given, vocablens::Surface::Cli);
  if (!co.out.out_dir.empty()) vocablens::ensure_directory(co.out.out_dir);

  vocablens::Model m = vocablens::load_model(co.model);
  vocablens::cli::TokenFilterFlags tf;
  tf.tokenizer = co.tokenizer;
  tf.alpha_only = resolved["alpha_only"].get<bool>();
  bool token_text = resolved["drop_same_word"].get<bool>();  // text of tokens needs the tokenizer
  if (resolved["tokens"].is_array())
    for (const auto& t : resolved["tokens"]) token_text = token_text || t.is_string();
  auto tok = vocablens::cli::load_tokenizer(co.model, tf, token_text);
  const vocablens::AnalysisRequest q{m, tok.get(), resolved, {}, nullptr, vocablens::Surface::Cli, &decl};
  vocablens::HeadsOptions o = vocablens::entries::heads_options(q);
  const auto est = vocablens::estimate_analysis(vocablens::find_analysis("heads"), m, tok.get(), given,
                                                vocablens::Surface::Cli);
  if (auto rc = vocablens::cli::check_memory("heads", est, co.dry_run)) return *rc;
  vocablens::cli::ProgressBar bar("heads", "circuits");
  o.progress = bar.callback();
  auto a = vocablens::analyze_heads(m, o, tok.get());
  bar.finish();
  auto r = a.to_result(tok.get());
  vocablens::cli::fill_provenance(r, m);
  if (tok) r.provenance["tokenizer"] = tok->source();
  const bool color = vocablens::cli::use_color(co.out);
  vocablens::cli::emit(r, co.out, [&] {
    print_heads(a, tok.get(), m, color);
    if (co.verbose) {
      double dense = 0, gemm = 0, secs = 0;
      for (const auto& c : a.circuits) {
        dense += c.stats.dense_flops;
        gemm += c.stats.gemm_flops;
        secs += c.stats.seconds;
      }
      fmt::print("\nstreamed {:.3g} dense GFLOP ({:.1f}% multiplied after norm-bound pruning) in {:.2f} s\n", dense / 1e9,
                 dense > 0 ? 100 * gemm / dense : 0.0, secs);
    }
  });
  return 0;
}

vocablens::cli::Register registered_cmd_heads{
    "heads", vocablens::find_analysis("heads").decl.summary, [](CLI::App& sub) -> vocablens::cli::Runner {
      auto o = std::make_shared<HeadsCliOptions>();
      o->flags = std::make_shared<vocablens::cli::DeclaredFlags>(vocablens::find_analysis("heads").decl);
      sub.add_option("MODEL", o->model, vocablens::cli::kModelHelp)->required();
      o->flags->add_to(sub);
      sub.add_option("--token-id", o->token_ids, "Like --token, by id (repeatable)");
      sub.add_option("--tokenizer", o->tokenizer, "Tokenizer file or directory (default: found beside the model)");
      sub.add_flag("--verbose", o->verbose, "Report the streamed work and time");
      sub.add_flag("--dry-run", o->dry_run, vocablens::cli::kDryRunHelp);
      vocablens::cli::add_output_options(sub, o->out);
      return [o] { return run_heads(*o); };
    }};

}  // namespace

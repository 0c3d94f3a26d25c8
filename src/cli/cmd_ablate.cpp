// `vocablens ablate MODEL --prompt TEXT --head L.H [--neuron L.N] [--resid L.P] [--mode zero|mean]`:
// knock out sites and show the prediction before and after (see vocablens/ablation.hpp). The flags come from
// the analysis's declaration (analyses/interventions_entry.cpp).
#include <fmt/color.h>
#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "cli/command.hpp"
#include "cli/declared_flags.hpp"
#include "cli/memory_check.hpp"
#include "cli/output.hpp"
#include "cli/token_arg.hpp"
#include "vocablens/ablation.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/detail/atomic_file.hpp"
#include "vocablens/declared_options.hpp"
#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/tokenizer.hpp"

namespace {

using vocablens::UsageError;

struct AblateCliOptions {
  std::string model, tokenizer;
  std::shared_ptr<vocablens::cli::DeclaredFlags> flags;
  bool dry_run = false;
  vocablens::cli::OutputOptions out;
};

void print_ablation(const vocablens::AblationResult& a, const vocablens::Tokenizer& tok, bool color) {
  auto style = [&](const std::string& s, fmt::text_style st) { return color ? fmt::format(st, "{}", s) : s; };
  std::string sites;
  for (const auto& s : a.options.sites) sites += (sites.empty() ? "" : ", ") + s.label();
  fmt::print("{}\n", style(fmt::format("ablation ({}) of {} · {} · position {}",
                                       a.options.mode == vocablens::AblationMode::Mean ? "mean" : "zero", sites,
                                       a.model_source, a.position),
                           fmt::emphasis::bold));
  fmt::print("target {}: logit {:.4f} -> {:.4f} ({:+.4f}), p {:.4f} -> {:.4f}, rank {} -> {}\n",
             tok.display(a.target), a.before.target_logit, a.after.target_logit,
             a.after.target_logit - a.before.target_logit, a.before.target_prob, a.after.target_prob,
             a.before.target_rank, a.after.target_rank);
  fmt::print("KL(before || after) {:.5f} nats · largest logit change {:.4f}\n", a.kl, a.max_logit_change);
  fmt::print("{}\n", style(fmt::format("{:>4}  {:<20} {:>7}   {:<20} {:>7}", "rank", "before", "p", "after", "p"),
                           fmt::emphasis::bold));
  for (size_t j = 0; j < std::max(a.before.top_ids.size(), a.after.top_ids.size()); ++j) {
    auto col = [&](const vocablens::Prediction& p) {
      if (j >= p.top_ids.size()) return fmt::format("{:<20} {:>7}", "", "");
      std::string t = vocablens::cli::first_columns(tok.display(p.top_ids[j]), 20);
      size_t cols = 0;
      for (unsigned char ch : t) cols += (ch & 0xC0) != 0x80;
      return t + std::string(21 - cols, ' ') + fmt::format("{:>7.4f}", p.top_probs[j]);
    };
    fmt::print("{:>4}  {}   {}\n", j + 1, col(a.before), col(a.after));
  }
}

int run_ablate(const AblateCliOptions& o) {
  const auto& decl = vocablens::find_analysis("ablate").decl;
  const nlohmann::json resolved = vocablens::resolve_options(decl, o.flags->given(), vocablens::Surface::Cli);
  if (!o.out.out_dir.empty()) vocablens::ensure_directory(o.out.out_dir);
  vocablens::Model m = vocablens::load_model(o.model);
  vocablens::adapt_threads_to(m);
  auto tok = vocablens::load_tokenizer_for(o.model, o.tokenizer);
  const vocablens::AnalysisRequest q{m, tok.get(), resolved, {}, nullptr, vocablens::Surface::Cli, &decl};
  const vocablens::AblationOptions ao = vocablens::entries::ablation_options(q);
  const auto ids = vocablens::entries::prompt_ids(q);
  {
    const auto& cf = m.config();
    const double d = static_cast<double>(cf.d_model), V = static_cast<double>(cf.vocab_size);
    (void)d; (void)V;
    const double Tn = static_cast<double>(ids.size());
    (void)Tn;
    vocablens::CacheSpec spec = [] { vocablens::CacheSpec s; s.resid_pre = s.resid_post = true; return s; }();
    auto e = vocablens::estimate_forward_memory(m, 1, static_cast<int64_t>(ids.size()), spec, true);
    e.add("ablate: the clean run's logits and the mean references", Tn * V * 4 * 2);
    if (auto rc = vocablens::cli::check_memory("ablate", fmt::format("ablating over {} tokens of {}", ids.size(), m.source()), e, o.dry_run, "shorten --prompt (and the --mean-over texts)"))
      return *rc;
  }
  auto a = vocablens::ablate(m, ids, ao);
  auto r = a.to_result(tok.get(), vocablens::entries::prompt_text(q, ids));
  vocablens::cli::fill_provenance(r, m);
  r.provenance["tokenizer"] = tok->source();
  vocablens::cli::emit(r, o.out, [&] { print_ablation(a, *tok, vocablens::cli::use_color(o.out)); });
  return 0;
}

vocablens::cli::Register registered_cmd_ablate{
    "ablate", vocablens::find_analysis("ablate").decl.summary,
    [](CLI::App& sub) -> vocablens::cli::Runner {
      auto o = std::make_shared<AblateCliOptions>();
      sub.add_option("MODEL", o->model, vocablens::cli::kModelHelp)->required();
      o->flags = std::make_shared<vocablens::cli::DeclaredFlags>(vocablens::find_analysis("ablate").decl);
      o->flags->add_to(sub);
      sub.add_option("--tokenizer", o->tokenizer, "Tokenizer file or directory (default: found beside the model)");
      sub.add_flag("--dry-run", o->dry_run, vocablens::cli::kDryRunHelp);
      vocablens::cli::add_output_options(sub, o->out);
      return [o] { return run_ablate(*o); };
    }};

}  // namespace

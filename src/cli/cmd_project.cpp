// `vocablens project MODEL --prompt TEXT --hook resid_post.2 [--top-k 10]`: hidden states at a hook point
// projected to tokens (Dar et al.'s hE: x W_U, no final norm unless --final-norm; see vocablens/unembed.hpp).
// The flags come from the analysis's declaration (analyses/project_entry.cpp), --prompt-ids among them.
#include <fmt/color.h>
#include <fmt/format.h>

#include <memory>
#include <optional>

#include "cli/command.hpp"
#include "cli/declared_flags.hpp"
#include "cli/memory_check.hpp"
#include "cli/output.hpp"
#include "cli/token_filter_options.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/detail/atomic_file.hpp"
#include "vocablens/declared_options.hpp"
#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/project.hpp"
#include "vocablens/tokenizer.hpp"
#include "vocablens/unembed.hpp"

namespace {

using vocablens::UsageError;

struct ProjectCliOptions {
  std::string model, tokenizer;
  std::shared_ptr<vocablens::cli::DeclaredFlags> flags;
  bool dry_run = false;
  vocablens::cli::OutputOptions out;
};

void print_projection(const vocablens::HiddenProjection& p, const vocablens::Tokenizer& tok, const vocablens::Model& m,
                      bool color) {
  auto style = [&](const std::string& s, fmt::text_style st) { return color ? fmt::format(st, "{}", s) : s; };
  const auto& o = p.options;
  fmt::print("{}\n",
             style(fmt::format("projection · {} · {} · {} · top {}", m.source(), o.hook,
                               o.read ? std::string("read through ") + vocablens::to_string(o.inverse) : "x W_U",
                               o.top_k) +
                       (o.apply_final_norm ? " · final norm applied" : ""),
                   fmt::emphasis::bold));
  for (size_t l = 0; l < p.layers.size(); ++l) {
    if (p.layers[l] >= 0) fmt::print("\n{}\n", style(fmt::format("{}.{}", o.hook, p.layers[l]), fmt::emphasis::bold));
    for (size_t q = 0; q < p.positions.size(); ++q) {
      std::string line = fmt::format("  {:>4} {:<12} ‖x‖ {:>8.3f} →", p.positions[q],
                                     tok.display(p.ids[static_cast<size_t>(p.positions[q])]), p.norms[l][q]);
      for (const auto& e : p.top[l][q]) line += fmt::format("  {} {:.3g}", tok.display(e.j), e.value);
      fmt::print("{}\n", line);
    }
  }
}

int run_project(const ProjectCliOptions& co) {
  nlohmann::json given = co.flags->given();
  // --prompt-ids (declared with --prompt, DeclaredFlags) arrives as the prompt's ids.
  if (!given.contains("prompt")) throw UsageError("give --prompt TEXT (at least one character) or --prompt-ids IDS");
  const bool as_ids = given["prompt"].is_array();
  const auto& decl = vocablens::find_analysis("project").decl;
  const nlohmann::json resolved = vocablens::resolve_options(decl, given, vocablens::Surface::Cli);
  if (!co.out.out_dir.empty()) vocablens::ensure_directory(co.out.out_dir);

  vocablens::Model m = vocablens::load_model(co.model);
  vocablens::adapt_threads_to(m);
  vocablens::cli::TokenFilterFlags tf;
  tf.tokenizer = co.tokenizer;
  auto tok = vocablens::cli::load_tokenizer(co.model, tf, /*required=*/true);  // the prompt needs it
  const vocablens::AnalysisRequest q{m, tok.get(), resolved, {}, nullptr, vocablens::Surface::Cli, &decl};
  const vocablens::HiddenProjectionOptions o = vocablens::entries::projection_options(q);
  const std::vector<int64_t> ids = vocablens::entries::prompt_ids(q);
  {
    const auto& cf = m.config();
    const double d = static_cast<double>(cf.d_model), V = static_cast<double>(cf.vocab_size);
    (void)d; (void)V;
    const double Tn = static_cast<double>(ids.size());
    (void)Tn;
    vocablens::CacheSpec spec = [] { vocablens::CacheSpec s; s.resid_pre = s.resid_mid = s.resid_post = s.attn_out = s.mlp_out = true; return s; }();
    auto e = vocablens::estimate_forward_memory(m, 1, static_cast<int64_t>(ids.size()), spec, false);
    e.add_phase("project: the read side (E+ or W_U) and the positions' logits", (2 * d * V + Tn * V) * 4);
    if (auto rc = vocablens::cli::check_memory("project", fmt::format("the projection of {} tokens of {}", ids.size(), m.source()), e, co.dry_run, "shorten the prompt, or --position (fewer positions)"))
      return *rc;
  }
  auto p = vocablens::project_hidden(m, ids, o, tok.get());
  auto r = p.to_result(tok.get());
  r.settings["prompt"] = vocablens::entries::prompt_text(q, ids);
  if (as_ids) r.settings["prompt_ids"] = ids;
  vocablens::cli::fill_provenance(r, m);
  r.provenance["tokenizer"] = tok->source();
  const bool color = vocablens::cli::use_color(co.out);
  vocablens::cli::emit(r, co.out, [&] { print_projection(p, *tok, m, color); });
  return 0;
}

vocablens::cli::Register registered_cmd_project{
    "project", vocablens::find_analysis("project").decl.summary,
    [](CLI::App& sub) -> vocablens::cli::Runner {
      auto o = std::make_shared<ProjectCliOptions>();
      sub.add_option("MODEL", o->model, vocablens::cli::kModelHelp)->required();
      o->flags = std::make_shared<vocablens::cli::DeclaredFlags>(vocablens::find_analysis("project").decl);
      o->flags->add_to(sub, {"prompt"});  // or --prompt-ids (declared with it)
      sub.add_option("--tokenizer", o->tokenizer, "Tokenizer file or directory (default: found beside the model)");
      sub.add_flag("--dry-run", o->dry_run, vocablens::cli::kDryRunHelp);
      vocablens::cli::add_output_options(sub, o->out);
      return [o] { return run_project(*o); };
    }};

}  // namespace

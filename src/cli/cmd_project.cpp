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
#include "vocablens/analysis_estimate.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/result.hpp"
#include "vocablens/detail/atomic_file.hpp"
#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/tokenizer.hpp"

namespace {

using vocablens::UsageError;

struct ProjectCliOptions {
  std::string model, tokenizer;
  std::shared_ptr<vocablens::cli::DeclaredFlags> flags;
  bool dry_run = false;
  vocablens::cli::OutputOptions out;
};

// The table, read from the Result every surface gets (settings, summary.input, summary.layers).
void print_projection(const vocablens::Result& r, const vocablens::Tokenizer& tok, bool color) {
  auto style = [&](const std::string& s, fmt::text_style st) { return color ? fmt::format(st, "{}", s) : s; };
  const auto& st = r.settings;
  const std::string hook = st.at("hook").get<std::string>();
  const bool read = st.at("space").get<std::string>() == "read";
  fmt::print("{}\n", style(fmt::format("projection · {} · {} · {} · top {}", r.provenance.value("model_path", std::string()),
                                       hook, read ? "read through " + st.at("inverse").get<std::string>() : std::string("x W_U"),
                                       st.at("top_k").get<int64_t>()) +
                               (st.at("apply_final_norm").get<bool>() ? " · final norm applied" : ""),
                           fmt::emphasis::bold));
  const auto& input = r.summary.at("input");
  for (const auto& jl : r.summary.at("layers")) {
    const int64_t layer = jl.at("layer").get<int64_t>();
    if (layer >= 0) fmt::print("\n{}\n", style(fmt::format("{}.{}", hook, layer), fmt::emphasis::bold));
    for (const auto& jp : jl.at("positions")) {
      const int64_t pos = jp.at("position").get<int64_t>();
      std::string line =
          fmt::format("  {:>4} {:<12} ‖x‖ {:>8.3f} →", pos,
                      tok.display(input.at(static_cast<size_t>(pos)).at("id").get<int64_t>()), jp.at("norm").get<double>());
      for (const auto& e : jp.at("top"))
        line += fmt::format("  {} {:.3g}", tok.display(e.at("id").get<int64_t>()), e.at("score").get<double>());
      fmt::print("{}\n", line);
    }
  }
}

int run_project(const ProjectCliOptions& co) {
  const auto& a = vocablens::find_analysis("project");
  const nlohmann::json given = co.flags->given();
  // --prompt-ids (declared with --prompt, DeclaredFlags) arrives as the prompt's ids.
  if (!given.contains("prompt")) throw UsageError("give --prompt TEXT (at least one character) or --prompt-ids IDS");
  vocablens::resolve_options(a.decl, given, vocablens::Surface::Cli);  // a wrong flag costs no model load
  if (!co.out.out_dir.empty()) vocablens::ensure_directory(co.out.out_dir);

  vocablens::Model m = vocablens::load_model(co.model);
  vocablens::adapt_threads_to(m);
  vocablens::cli::TokenFilterFlags tf;
  tf.tokenizer = co.tokenizer;
  auto tok = vocablens::cli::load_tokenizer(co.model, tf, /*required=*/true);  // the prompt needs it
  const auto est = vocablens::estimate_analysis(a, m, tok.get(), given, vocablens::Surface::Cli);
  if (auto rc = vocablens::cli::check_memory("project", est, co.dry_run)) return *rc;
  auto r = vocablens::run_analysis(a, m, tok.get(), given, vocablens::Surface::Cli);
  vocablens::cli::fill_provenance(r, m);
  const bool color = vocablens::cli::use_color(co.out);
  vocablens::cli::emit(r, co.out, [&] { print_projection(r, *tok, color); });
  return 0;
}

vocablens::cli::Register registered_cmd_project{
    "project", vocablens::find_analysis("project").decl.summary, [](CLI::App& sub) -> vocablens::cli::Runner {
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

// `vocablens experts MODEL --prompt TEXT | --corpus FILE [--layers 0,1] [--ablate-expert L.E]`: each expert of a
// mixture of experts in vocabulary space (see vocablens/experts.hpp). The flags come from the analysis's
// declaration (analyses/experts_entry.cpp).
#include <fmt/color.h>
#include <fmt/format.h>

#include <cmath>
#include <functional>
#include <memory>

#include "cli/command.hpp"
#include "cli/declared_flags.hpp"
#include "cli/memory_check.hpp"
#include "cli/output.hpp"
#include "cli/progress.hpp"
#include "vocablens/analysis_estimate.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/detail/atomic_file.hpp"
#include "vocablens/dist.hpp"
#include "vocablens/model.hpp"
#include "vocablens/tokenizer.hpp"

namespace {

struct ExpertsCli {
  std::string model, tokenizer;
  std::shared_ptr<vocablens::cli::DeclaredFlags> flags;
  bool dry_run = false;
  vocablens::cli::OutputOptions out;
};

std::string joined(const nlohmann::json& a) {
  std::string s;
  for (const auto& t : a) s += (s.empty() ? "" : " ") + t.get<std::string>();
  return s;
}

// The table view, read back from the Result (what --format json prints), so every surface shows one thing.
void print_experts(const vocablens::Result& r, bool color) {
  auto style = [&](const std::string& s, fmt::text_style st) { return color ? fmt::format(st, "{}", s) : s; };
  const auto& S = r.summary;
  const auto& set = r.settings;
  std::string what = set.contains("corpus") ? "corpus " + set["corpus"].get<std::string>()
                                            : "prompt \"" + set.value("prompt", std::string()) + "\"";
  fmt::print("{}\n",
             style(fmt::format("experts · {} · {} · {} positions · top {} of {} experts per token", S["model"].get<std::string>(),
                               what, S["positions"].get<int64_t>(), S["k"].get<int64_t>(), S["n_experts"].get<int64_t>()),
                   fmt::emphasis::bold));
  if (!set["ablate"].empty()) fmt::print("ablated ({}): {}\n", set["ablate_mode"].get<std::string>(), set["ablate"].dump());
  // A scaled expert is an edit of the forward as an ablation is: the "ablated" lines below read that forward.
  if (set.contains("scale_expert") && !set["scale_expert"].empty())
    fmt::print("scaled (router weight times the factor where chosen): {}\n", set["scale_expert"].dump());
  for (const auto& L : S["layers"]) {
    fmt::print("\n{}\n", style(fmt::format("layer {}", L["layer"].get<int64_t>()), fmt::emphasis::bold));
    fmt::print("{:>6} {:>7} {:>7} {:>7}  {:<28} {:<30} {}\n", "expert", "routed", "load", "weight", "routed tokens",
               "writes (top)", "writes (bottom)");
    for (const auto& e : L["experts"]) {
      const std::string w = e["mean_weight"].is_null() ? "-" : fmt::format("{:.3f}", e["mean_weight"].get<double>());
      fmt::print("{:>6} {:>7} {:>7.3f} {:>7}  {:<28} {:<30} {}\n", e["expert"].get<int64_t>(), e["routed"].get<int64_t>(),
                 e["load"].get<double>(), w, joined(e["routed_tokens"]), joined(e["writes_top"]), joined(e["writes_bottom"]));
    }
  }
  if (S.contains("next_token")) {
    const auto& n = S["next_token"];
    fmt::print("\nnext token, unablated: {}\nnext token, ablated:   {}\nlargest |logit change| over all positions: {:.4g}\n",
               joined(n["unablated"]), joined(n["ablated"]), n["max_logit_change"].get<double>());
  }
}

int run_experts(const ExpertsCli& c) {
  const auto& a = vocablens::find_analysis("experts");
  const nlohmann::json given = c.flags->given();
  // Checked before the model loads: a wrong flag costs nothing.
  vocablens::resolve_options(a.decl, given, vocablens::Surface::Cli);
  if (!c.out.out_dir.empty()) vocablens::ensure_directory(c.out.out_dir);
  vocablens::Model m = vocablens::load_model(c.model);
  vocablens::adapt_threads_to(m);
  auto tok = vocablens::load_tokenizer_for(c.model, c.tokenizer);
  const auto est = vocablens::estimate_analysis(a, m, tok.get(), given, vocablens::Surface::Cli);
  if (auto rc = vocablens::cli::check_memory("experts", est, c.dry_run)) return *rc;
  // Under mpirun a corpus's windows are shared over the ranks (a prompt is run by each); rank 0 reports.
  vocablens::dist::init();
  vocablens::cli::ProgressBar bar("experts", "tokens");
  std::function<void(int64_t, int64_t)> progress;
  if (vocablens::dist::rank() == 0) progress = bar.callback();
  auto r = vocablens::run_analysis(a, m, tok.get(), given, vocablens::Surface::Cli, progress);
  bar.finish();
  if (vocablens::dist::rank() != 0) return 0;
  vocablens::cli::fill_provenance(r, m);
  vocablens::cli::emit(r, c.out, [&] { print_experts(r, vocablens::cli::use_color(c.out)); });
  return 0;
}

vocablens::cli::Register registered_cmd_experts{
    "experts", vocablens::find_analysis("experts").decl.summary, [](CLI::App& sub) -> vocablens::cli::Runner {
      auto c = std::make_shared<ExpertsCli>();
      c->flags = std::make_shared<vocablens::cli::DeclaredFlags>(vocablens::find_analysis("experts").decl);
      sub.add_option("MODEL", c->model, vocablens::cli::kModelHelp)->required();
      c->flags->add_to(sub);
      sub.add_option("--tokenizer", c->tokenizer, "Tokenizer file or directory (default: found beside the model)");
      sub.add_flag("--dry-run", c->dry_run, vocablens::cli::kDryRunHelp);
      vocablens::cli::add_output_options(sub, c->out);
      return [c] { return run_experts(*c); };
    }};

}  // namespace

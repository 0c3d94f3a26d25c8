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
#include "vocablens/analysis_estimate.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/result.hpp"
#include "vocablens/detail/atomic_file.hpp"
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

// The table, read from the Result every surface gets (settings, summary.before / after).
void print_ablation(const vocablens::Result& r, const vocablens::Tokenizer& tok, bool color) {
  auto style = [&](const std::string& s, fmt::text_style st) { return color ? fmt::format(st, "{}", s) : s; };
  const auto& st = r.settings;
  const auto& sm = r.summary;
  std::string sites;
  for (const auto& s : st.at("sites")) sites += (sites.empty() ? "" : ", ") + s.at("site").get<std::string>();
  fmt::print("{}\n", style(fmt::format("ablation ({}) of {} · {} · position {}", st.at("mode").get<std::string>(), sites,
                                       sm.at("model").get<std::string>(), st.at("position").get<int64_t>()),
                           fmt::emphasis::bold));
  const auto& b = sm.at("before");
  const auto& a = sm.at("after");
  fmt::print("target {}: logit {:.4f} -> {:.4f} ({:+.4f}), p {:.4f} -> {:.4f}, rank {} -> {}\n",
             tok.display(st.at("target").at("id").get<int64_t>()), b.at("target_logit").get<double>(),
             a.at("target_logit").get<double>(), sm.at("target_logit_change").get<double>(), b.at("target_prob").get<double>(),
             a.at("target_prob").get<double>(), b.at("target_rank").get<int64_t>(), a.at("target_rank").get<int64_t>());
  fmt::print("KL(before || after) {:.5f} nats · largest logit change {:.4f}\n", sm.at("kl_before_after").get<double>(),
             sm.at("max_logit_change").get<double>());
  fmt::print("{}\n",
             style(fmt::format("{:>4}  {:<20} {:>7}   {:<20} {:>7}", "rank", "before", "p", "after", "p"), fmt::emphasis::bold));
  for (size_t j = 0; j < std::max(b.at("top").size(), a.at("top").size()); ++j) {
    auto col = [&](const nlohmann::json& p) {
      if (j >= p.at("top").size()) return fmt::format("{:<20} {:>7}", "", "");
      const auto& e = p.at("top").at(j);
      std::string t = vocablens::cli::first_columns(tok.display(e.at("id").get<int64_t>()), 20);
      size_t cols = 0;
      for (unsigned char ch : t) cols += (ch & 0xC0) != 0x80;
      return t + std::string(21 - cols, ' ') + fmt::format("{:>7.4f}", e.at("prob").get<double>());
    };
    fmt::print("{:>4}  {}   {}\n", j + 1, col(b), col(a));
  }
}

int run_ablate(const AblateCliOptions& o) {
  const auto& a = vocablens::find_analysis("ablate");
  const nlohmann::json given = o.flags->given();
  vocablens::resolve_options(a.decl, given, vocablens::Surface::Cli);  // a wrong flag costs no model load
  if (!o.out.out_dir.empty()) vocablens::ensure_directory(o.out.out_dir);
  vocablens::Model m = vocablens::load_model(o.model);
  vocablens::adapt_threads_to(m);
  auto tok = vocablens::load_tokenizer_for(o.model, o.tokenizer);
  const auto est = vocablens::estimate_analysis(a, m, tok.get(), given, vocablens::Surface::Cli);
  if (auto rc = vocablens::cli::check_memory("ablate", est, o.dry_run)) return *rc;
  auto r = vocablens::run_analysis(a, m, tok.get(), given, vocablens::Surface::Cli);
  vocablens::cli::fill_provenance(r, m);
  vocablens::cli::emit(r, o.out, [&] { print_ablation(r, *tok, vocablens::cli::use_color(o.out)); });
  return 0;
}

vocablens::cli::Register registered_cmd_ablate{
    "ablate", vocablens::find_analysis("ablate").decl.summary, [](CLI::App& sub) -> vocablens::cli::Runner {
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

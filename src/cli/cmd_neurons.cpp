// `vocablens neurons MODEL --layer L [--neurons 0,5-9] [--top-k 30]`: MLP neurons in vocabulary space
// (see vocablens/neurons.hpp): top tokens of each key (column of W_in), gate (W_gate) and value (row of W_out).
// The flags come from the analysis's declaration (analyses/neurons_entry.cpp).
#include <fmt/color.h>
#include <fmt/format.h>

#include <map>
#include <memory>

#include "cli/command.hpp"
#include "cli/memory_check.hpp"
#include "cli/declared_flags.hpp"
#include "cli/output.hpp"
#include "cli/progress.hpp"
#include "cli/token_filter_options.hpp"
#include "vocablens/detail/atomic_file.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/model.hpp"
#include "vocablens/tokenizer.hpp"

namespace {

struct NeuronsCli {
  std::string model;
  std::string tokenizer;
  std::shared_ptr<vocablens::cli::DeclaredFlags> flags;
  bool dry_run = false;
  vocablens::cli::OutputOptions out;
};

// The table view, read back from the Result (what --format json prints), so every surface shows one thing.
void print_neurons(const vocablens::Result& r, const vocablens::Model& m, bool color) {
  auto style = [&](const std::string& s, fmt::text_style st) { return color ? fmt::format(st, "{}", s) : s; };
  const auto& set = r.settings;
  const bool gated = r.summary.value("gated", false);
  const auto n_neurons = r.summary["neurons"].size();
  fmt::print("{}\n", style(fmt::format("neurons · {} · layer {} · {} of {} neurons · top {} · keys{} via {}", m.source(),
                                       set["layer"].get<int64_t>(), n_neurons, r.summary["d_mlp"].get<int64_t>(),
                                       set["top_k"].get<int64_t>(), gated ? "/gates" : "", set["inverse"].get<std::string>()),
                           fmt::emphasis::bold));
  const vocablens::Table* top = nullptr;
  const vocablens::Table* norms = nullptr;
  for (const auto& t : r.tables) {
    if (t.name == "top_k") top = &t;
    if (t.name == "norms") norms = &t;
  }
  if (!top || !norms) return;
  // neuron -> vector/direction -> tokens, in the table's rank order
  std::map<int64_t, std::map<std::string, std::vector<std::string>>> lists;
  for (const auto& row : top->rows) {  // layer, neuron, vector, direction, rank, token_id, token, score
    const std::string label = row[2].get<std::string>() + (row[3].get<std::string>() == "bottom" ? "-" : "");
    lists[row[1].get<int64_t>()][label].push_back(row[6].get<std::string>());
  }
  for (const auto& row : norms->rows) {  // layer, neuron, key_norm, gate_norm, value_norm
    const int64_t n = row[1].get<int64_t>();
    std::string line;
    if (!row[2].is_null()) line += fmt::format(" · ‖key‖ {:.4g}", row[2].get<double>());
    if (!row[3].is_null()) line += fmt::format(" · ‖gate‖ {:.4g}", row[3].get<double>());
    if (!row[4].is_null()) line += fmt::format(" · ‖value‖ {:.4g}", row[4].get<double>());
    fmt::print("{}{}\n", style(fmt::format("neuron {}", n), fmt::emphasis::bold), line);
    for (const char* label : {"key", "key-", "gate", "gate-", "value", "value-"}) {
      auto it = lists[n].find(label);
      if (it == lists[n].end()) continue;
      std::string s = fmt::format("  {:<7}", label);
      for (const auto& t : it->second) s += "  " + t;
      fmt::print("{}\n", s);
    }
  }
}

int run_neurons(const NeuronsCli& c) {
  const auto& a = vocablens::find_analysis("neurons");
  const nlohmann::json given = c.flags->given();
  // Checked before the model loads: a wrong flag costs nothing.
  const nlohmann::json resolved = vocablens::resolve_options(a.decl, given, vocablens::Surface::Cli);
  if (!c.out.out_dir.empty()) vocablens::ensure_directory(c.out.out_dir);

  vocablens::Model m = vocablens::load_model(c.model);
  vocablens::cli::TokenFilterFlags tf;
  tf.tokenizer = c.tokenizer;
  tf.alpha_only = resolved["alpha_only"].get<bool>();
  auto tok = vocablens::cli::load_tokenizer(c.model, tf, false);
  if (auto rc = vocablens::cli::check_memory(
          "neurons", vocablens::estimate_analysis(a, m, tok.get(), given, vocablens::Surface::Cli), c.dry_run))
    return *rc;
  vocablens::cli::ProgressBar bar("neurons", "vectors");
  auto r = vocablens::run_analysis(a, m, tok.get(), given, vocablens::Surface::Cli, bar.callback());
  bar.finish();
  vocablens::cli::fill_provenance(r, m);
  if (tok) r.provenance["tokenizer"] = tok->source();
  const bool color = vocablens::cli::use_color(c.out);
  vocablens::cli::emit(r, c.out, [&] { print_neurons(r, m, color); });
  return 0;
}

vocablens::cli::Register registered_cmd_neurons{
    "neurons", vocablens::find_analysis("neurons").decl.summary, [](CLI::App& sub) -> vocablens::cli::Runner {
      auto c = std::make_shared<NeuronsCli>();
      c->flags = std::make_shared<vocablens::cli::DeclaredFlags>(vocablens::find_analysis("neurons").decl);
      sub.add_option("MODEL", c->model, vocablens::cli::kModelHelp)->required();
      c->flags->add_to(sub);
      sub.add_option("--tokenizer", c->tokenizer, "Tokenizer file or directory (default: found beside the model)");
      sub.add_flag("--dry-run", c->dry_run, vocablens::cli::kDryRunHelp);
      vocablens::cli::add_output_options(sub, c->out);
      return [c] { return run_neurons(*c); };
    }};

}  // namespace

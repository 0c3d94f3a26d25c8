// `vocablens graph MODEL --transcoders DIR --prompt TEXT [--out RUN]`: the attribution graph of a prompt
// through transcoders, per-layer or cross-layer (vocablens/graph.hpp). The flags come from the analysis's declaration
// (analyses/graph_entry.cpp); with --out, Neuronpedia's graph JSON is written beside the result as
// graph.neuronpedia.json.
#include <fmt/color.h>
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "cli/command.hpp"
#include "cli/declared_flags.hpp"
#include "cli/memory_check.hpp"
#include "cli/output.hpp"
#include "cli/progress.hpp"
#include "cli/token_filter_options.hpp"
#include "vocablens/analysis_estimate.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/detail/atomic_file.hpp"
#include "vocablens/model.hpp"
#include "vocablens/tokenizer.hpp"

namespace {

struct GraphCli {
  std::string model;
  std::string tokenizer;
  std::shared_ptr<vocablens::cli::DeclaredFlags> flags;
  bool dry_run = false;
  vocablens::cli::OutputOptions out;
};

// The table view, read back from the Result: the logits, the scores, the kept nodes by influence.
void print_graph(const vocablens::Result& r, const vocablens::Model& m, bool color) {
  auto bold = [&](const std::string& s) { return color ? fmt::format(fmt::emphasis::bold, "{}", s) : s; };
  const auto& s = r.summary;
  fmt::print("{}\n", bold(fmt::format("graph · {} · {} tokens · {} active features ({} with rows) · {} logits", m.source(),
                                      s["n_pos"].get<int64_t>(), s["n_active"].get<int64_t>(), s["n_selected"].get<int64_t>(),
                                      s["n_logits"].get<int64_t>())));
  fmt::print("replacement score {:.4f} · completeness score {:.4f} · kept {} nodes, {} edges\n",
             s["replacement_score"].get<double>(), s["completeness_score"].get<double>(), s["kept_nodes"].get<int64_t>(),
             s["kept_edges"].get<int64_t>());
  std::string logits;
  for (const auto& l : s["logits"]) logits += fmt::format("  {} {:.3g}", l["token"].get<std::string>(), l["prob"].get<double>());
  fmt::print("logits:{}\n", logits);
  for (const auto& t : r.tables) {
    if (t.name != "nodes") continue;
    // node, node_id, kind, layer, position, feature, token_id, activation, influence, cumulative, label
    std::vector<const std::vector<nlohmann::json>*> rows;
    for (const auto& row : t.rows)
      if (row[2] == "feature" || row[2] == "error") rows.push_back(&row);
    std::sort(rows.begin(), rows.end(), [](const std::vector<nlohmann::json>* a, const std::vector<nlohmann::json>* b) {
      return (*a)[8].get<double>() > (*b)[8].get<double>();
    });
    fmt::print("{}\n", bold(fmt::format("{:<16} {:>5} {:>4} {:>10} {:>10}  {}", "node", "layer", "pos", "activation", "influence",
                                        "label")));
    for (size_t i = 0; i < rows.size() && i < 30; ++i) {
      const auto& row = *rows[i];
      // Significant digits: the influences of a small model are ~1e-4, which four decimals print as 0.0000.
      fmt::print("{:<16} {:>5} {:>4} {:>10} {:>10.3g}  {}\n", row[1].get<std::string>(), row[3].get<int64_t>(),
                 row[4].get<int64_t>(), row[7].is_null() ? std::string("-") : fmt::format("{:.4g}", row[7].get<double>()),
                 row[8].get<double>(), row[10].get<std::string>());
    }
  }
}

int run_graph(const GraphCli& c) {
  const auto& a = vocablens::find_analysis("graph");
  const nlohmann::json given = c.flags->given();
  // Checked before the model loads: a wrong flag costs nothing.
  vocablens::resolve_options(a.decl, given, vocablens::Surface::Cli);
  if (!c.out.out_dir.empty()) vocablens::ensure_directory(c.out.out_dir);

  vocablens::Model m = vocablens::load_model(c.model);
  vocablens::cli::TokenFilterFlags tf;
  tf.tokenizer = c.tokenizer;
  auto tok = vocablens::cli::load_tokenizer(c.model, tf, false);
  const auto est = vocablens::estimate_analysis(a, m, tok.get(), given, vocablens::Surface::Cli);
  if (auto rc = vocablens::cli::check_memory("graph", est, c.dry_run)) return *rc;
  vocablens::cli::ProgressBar bar("graph", "rows");
  auto r = vocablens::run_analysis(a, m, tok.get(), given, vocablens::Surface::Cli, bar.callback());
  bar.finish();
  vocablens::cli::fill_provenance(r, m);
  if (tok) r.provenance["tokenizer"] = tok->source();
  // Neuronpedia's file beside the result, written before the result so that a complete run has both
  const nlohmann::json np = r.summary["neuronpedia"];
  if (!c.out.out_dir.empty()) vocablens::write_file_atomic(c.out.out_dir + "/graph.neuronpedia.json", np.dump(2));
  const bool color = vocablens::cli::use_color(c.out);
  vocablens::cli::emit(r, c.out, [&] { print_graph(r, m, color); });
  return 0;
}

vocablens::cli::Register registered_cmd_graph{
    "graph", vocablens::find_analysis("graph").decl.summary, [](CLI::App& sub) -> vocablens::cli::Runner {
      auto c = std::make_shared<GraphCli>();
      c->flags = std::make_shared<vocablens::cli::DeclaredFlags>(vocablens::find_analysis("graph").decl);
      sub.add_option("MODEL", c->model, vocablens::cli::kModelHelp)->required();
      c->flags->add_to(sub);
      sub.add_option("--tokenizer", c->tokenizer, "Tokenizer file or directory (default: found beside the model)");
      sub.add_flag("--dry-run", c->dry_run, vocablens::cli::kDryRunHelp);
      vocablens::cli::add_output_options(sub, c->out);
      return [c] { return run_graph(*c); };
    }};

}  // namespace

// The command of a declared analysis that has no src/cli/cmd_X.cpp: made from its declaration, so that a new
// analysis reaches the command line with no file of its own there. `vocablens <command> MODEL [declared flags]
// [--tokenizer] [--dry-run] [--out/--format/--report]`: resolve_options, the declared estimate (--dry-run and
// the up-front refusal), run_analysis, and a table printer that reads the Result's tables as they are.
#include <fmt/color.h>
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <set>

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

namespace vocablens::cli {
namespace {

struct DeclaredCli {
  std::string model, tokenizer;
  std::shared_ptr<DeclaredFlags> flags;
  bool dry_run = false;
  OutputOptions out;
};

std::string declared_cell(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) return fmt::format("{:.4g}", v.get<double>());
  return v.dump();
}

// Every table of the Result, its columns aligned: the view --format csv gives, for reading on a terminal.
void print_declared_tables(const Result& r, const Model& m, bool color) {
  auto bold = [&](const std::string& s) { return color ? fmt::format(fmt::emphasis::bold, "{}", s) : s; };
  fmt::print("{}\n", bold(fmt::format("{} · {}", r.kind, m.source())));
  for (const auto& t : r.tables) {
    std::vector<std::vector<std::string>> cells{t.columns};
    for (const auto& row : t.rows) {
      std::vector<std::string> line;
      for (const auto& v : row) line.push_back(declared_cell(v));
      cells.push_back(std::move(line));
    }
    std::vector<size_t> width(t.columns.size(), 0);
    for (const auto& line : cells)
      for (size_t c = 0; c < line.size() && c < width.size(); ++c) width[c] = std::max(width[c], line[c].size());
    fmt::print("{}\n", bold(t.name));
    for (size_t i = 0; i < cells.size(); ++i) {
      std::string s;
      for (size_t c = 0; c < cells[i].size() && c < width.size(); ++c)
        s += fmt::format("{}{:<{}}", c ? "  " : "", cells[i][c], width[c]);
      while (!s.empty() && s.back() == ' ') s.pop_back();
      fmt::print("{}\n", i == 0 ? bold(s) : s);
    }
  }
}

int run_declared_command(const DeclaredAnalysis& a, const DeclaredCli& c) {
  const nlohmann::json given = c.flags->given();
  const nlohmann::json resolved = resolve_options(a.decl, given, Surface::Cli);  // before the model loads
  if (!c.out.out_dir.empty()) ensure_directory(c.out.out_dir);
  Model m = load_model(c.model);
  TokenFilterFlags tf;
  tf.tokenizer = c.tokenizer;
  tf.alpha_only = resolved.contains("alpha_only") && resolved["alpha_only"].get<bool>();
  auto tok = load_tokenizer(c.model, tf, false);
  if (auto rc = check_memory(a.decl.command, estimate_analysis(a, m, tok.get(), given, Surface::Cli), c.dry_run)) return *rc;
  ProgressBar bar(a.decl.command, "steps");
  auto r = run_analysis(a, m, tok.get(), given, Surface::Cli, bar.callback());
  bar.finish();
  fill_provenance(r, m);
  if (tok) r.provenance["tokenizer"] = tok->source();
  const bool color = use_color(c.out);
  emit(r, c.out, [&] { print_declared_tables(r, m, color); });
  return 0;
}

}  // namespace

void add_declared_commands(std::vector<CommandInfo>& commands) {
  std::set<std::string> taken;
  for (const auto& c : commands) taken.insert(c.name);
  for (const auto& a : analysis_registry().all()) {
    const std::string& name = a.decl.command;
    // A command of its own, one of several forms of a command (`lens --corpus`), a sub-subcommand
    // (`tuned-lens eval`) or none at all (`steer`, through `generate --steer`) is not made here.
    if (name.empty() || name.find(' ') != std::string::npos || !taken.insert(name).second) continue;
    const DeclaredAnalysis* analysis = &a;
    commands.push_back({name, a.decl.summary, [analysis](CLI::App& sub) -> Runner {
                          auto c = std::make_shared<DeclaredCli>();
                          c->flags = std::make_shared<DeclaredFlags>(analysis->decl);
                          sub.add_option("MODEL", c->model, kModelHelp)->required();
                          c->flags->add_to(sub);
                          sub.add_option("--tokenizer", c->tokenizer,
                                         "Tokenizer file or directory (default: found beside the model)");
                          sub.add_flag("--dry-run", c->dry_run, kDryRunHelp);
                          add_output_options(sub, c->out);
                          return [analysis, c] { return run_declared_command(*analysis, *c); };
                        }});
  }
}

}  // namespace vocablens::cli

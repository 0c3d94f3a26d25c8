// `vocablens attribute MODEL --prompt TEXT --target TOKEN [--wrong TOKEN]`: direct logit attribution
// (see vocablens/attribution.hpp).
#include <fmt/color.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "cli/command.hpp"
#include "cli/memory_check.hpp"
#include "cli/output.hpp"
#include "cli/declared_flags.hpp"
#include "vocablens/analysis_estimate.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/result.hpp"
#include "vocablens/detail/atomic_file.hpp"
#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/tokenizer.hpp"

namespace {

using vocablens::UsageError;

// The analysis's options come from its declaration (analyses/attribution_entry.cpp); these are the command's
// own (--show only shapes the table).
struct AttributeCliOptions {
  std::string model, tokenizer;
  std::shared_ptr<vocablens::cli::DeclaredFlags> flags;
  int64_t show = 20;
  bool dry_run = false;
  vocablens::cli::OutputOptions out;
};

// The table, read from the Result every surface gets (settings, summary, the components table).
void print_attribution(const vocablens::Result& r, const vocablens::Tokenizer& tok, int64_t show, bool color) {
  auto style = [&](const std::string& s, fmt::text_style st) { return color ? fmt::format(st, "{}", s) : s; };
  const auto& st = r.settings;
  const auto& sm = r.summary;
  const int64_t position = st.at("position").get<int64_t>(), layer = st.at("layer").get<int64_t>();
  const int64_t n_layers = sm.at("n_layers").get<int64_t>(), n_heads = sm.at("n_heads").get<int64_t>();
  const std::string target = tok.display(st.at("target").at("id").get<int64_t>());
  const std::string metric = st.at("wrong").is_null()
                                 ? "logit(" + target + ")"
                                 : "logit(" + target + ") - logit(" + tok.display(st.at("wrong").at("id").get<int64_t>()) + ")";
  const int64_t pos_id = sm.at("tokens").at(static_cast<size_t>(position)).at("id").get<int64_t>();
  fmt::print("{}\n", style(fmt::format("logit attribution · {} · {} at position {} ({})", sm.at("model").get<std::string>(),
                                       metric, position, tok.display(pos_id)),
                           fmt::emphasis::bold));
  if (layer < n_layers)
    fmt::print("{}: {}\n", st.at("residual").get<std::string>(),
               layer == 0 ? "no block is a part" : fmt::format("blocks 0..{} are the parts", layer - 1));
  fmt::print("{} {:.6f} · sum of parts {:.6f} · |difference| {:.2e} · final norm scale frozen at {:.6f}\n",
             layer < n_layers ? "lens" : "model", sm.at("model_value").get<double>(), sm.at("sum").get<double>(),
             sm.at("check").get<double>(), sm.at("norm_scale").get<double>());
  struct Part {
    std::string name, kind;
    int64_t layer = -1, head = -1;
    double value = 0;
  };
  std::vector<Part> parts;
  for (const auto& t : r.tables)
    if (t.name == "components")
      for (const auto& row : t.rows)
        parts.push_back({row[0].get<std::string>(), row[1].get<std::string>(), row[2].is_null() ? -1 : row[2].get<int64_t>(),
                         row[3].is_null() ? -1 : row[3].get<int64_t>(), row[4].get<double>()});
  std::vector<size_t> order(parts.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return std::fabs(parts[x].value) > std::fabs(parts[y].value); });
  double mx = 0;
  for (const auto& c : parts) mx = std::max(mx, std::fabs(c.value));
  fmt::print("{}\n", style(fmt::format("{:<16} {:>10}", "part", "value"), fmt::emphasis::bold));
  for (size_t i = 0; i < order.size() && static_cast<int64_t>(i) < show; ++i) {
    const auto& c = parts[order[i]];
    const int w = mx > 0 ? static_cast<int>(std::lround(std::fabs(c.value) / mx * 30)) : 0;
    std::string bar(static_cast<size_t>(w), '#');
    if (color) bar = fmt::format(fmt::fg(c.value >= 0 ? fmt::terminal_color::green : fmt::terminal_color::red), "{}", bar);
    fmt::print("{:<16} {:>10.4f}  {}\n", c.name, c.value, bar);
  }
  if (static_cast<int64_t>(order.size()) > show)
    fmt::print("({} more parts; --show N, or --format csv / --out for all)\n", order.size() - static_cast<size_t>(show));
  // per-head grid of the blocks that are parts
  std::vector<double> heads(static_cast<size_t>(layer * n_heads), 0.0), mlps(static_cast<size_t>(layer), 0.0);
  for (const auto& c : parts) {
    if (c.kind == "head") heads[static_cast<size_t>(c.layer * n_heads + c.head)] = c.value;
    if (c.kind == "mlp" || c.kind == "expert") mlps[static_cast<size_t>(c.layer)] += c.value;  // experts: the layer's sum
  }
  fmt::print("\n{}\n", style("heads (rows: layer, columns: head)", fmt::emphasis::bold));
  std::string line = fmt::format("{:<6}", "");
  for (int64_t h = 0; h < n_heads; ++h) line += fmt::format(" {:>7}", "H" + std::to_string(h));
  line += fmt::format(" {:>8}", "MLP");
  fmt::print("{}\n", line);
  for (int64_t l = 0; l < layer; ++l) {
    line = fmt::format("{:<6}", "L" + std::to_string(l));
    for (int64_t h = 0; h < n_heads; ++h) line += fmt::format(" {:>7.3f}", heads[static_cast<size_t>(l * n_heads + h)]);
    line += fmt::format(" {:>8.3f}", mlps[static_cast<size_t>(l)]);
    fmt::print("{}\n", line);
  }
}

int run_attribute(const AttributeCliOptions& o) {
  const auto& a = vocablens::find_analysis("attribute");
  const nlohmann::json given = o.flags->given();
  vocablens::resolve_options(a.decl, given, vocablens::Surface::Cli);  // a wrong flag costs no model load
  if (o.show < 0) throw UsageError("--show must be >= 0");
  if (!o.out.out_dir.empty()) vocablens::ensure_directory(o.out.out_dir);
  vocablens::Model m = vocablens::load_model(o.model);
  vocablens::adapt_threads_to(m);
  auto tok = vocablens::load_tokenizer_for(o.model, o.tokenizer);
  const auto est = vocablens::estimate_analysis(a, m, tok.get(), given, vocablens::Surface::Cli);
  if (auto rc = vocablens::cli::check_memory("attribute", est, o.dry_run)) return *rc;
  auto r = vocablens::run_analysis(a, m, tok.get(), given, vocablens::Surface::Cli);
  vocablens::cli::fill_provenance(r, m);
  vocablens::cli::emit(r, o.out, [&] { print_attribution(r, *tok, o.show, vocablens::cli::use_color(o.out)); });
  return 0;
}

vocablens::cli::Register registered_cmd_attribute{
    "attribute", vocablens::find_analysis("attribute").decl.summary, [](CLI::App& sub) -> vocablens::cli::Runner {
      auto o = std::make_shared<AttributeCliOptions>();
      o->flags = std::make_shared<vocablens::cli::DeclaredFlags>(vocablens::find_analysis("attribute").decl);
      sub.add_option("MODEL", o->model, vocablens::cli::kModelHelp)->required();
      o->flags->add_to(sub);
      sub.add_option("--show", o->show, "Parts listed in the table, largest |value| first (default 20)");
      sub.add_option("--tokenizer", o->tokenizer, "Tokenizer file or directory (default: found beside the model)");
      sub.add_flag("--dry-run", o->dry_run, vocablens::cli::kDryRunHelp);
      vocablens::cli::add_output_options(sub, o->out);
      return [o] { return run_attribute(*o); };
    }};

}  // namespace

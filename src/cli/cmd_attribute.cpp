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
#include "vocablens/analysis_registry.hpp"
#include "vocablens/detail/atomic_file.hpp"
#include "vocablens/declared_options.hpp"
#include "vocablens/attribution.hpp"
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

void print_attribution(const vocablens::AttributionResult& a, const vocablens::Tokenizer& tok, int64_t show, bool color) {
  auto style = [&](const std::string& s, fmt::text_style st) { return color ? fmt::format(st, "{}", s) : s; };
  const std::string metric = a.options.wrong >= 0 ? "logit(" + tok.display(a.options.target) + ") - logit(" +
                                                        tok.display(a.options.wrong) + ")"
                                                  : "logit(" + tok.display(a.options.target) + ")";
  fmt::print("{}\n", style(fmt::format("logit attribution · {} · {} at position {} ({})", a.model_source, metric,
                                       a.position, tok.display(a.tokens[static_cast<size_t>(a.position)])),
                           fmt::emphasis::bold));
  if (a.layer == 0)
    fmt::print("the embedding alone (the logit lens's row 'embed'): no block is a part\n");
  else if (a.layer < a.n_layers)
    fmt::print("the residual after block {} (the logit lens's row '{}'): blocks 0..{} are the parts\n", a.layer - 1,
               a.layer - 1, a.layer - 1);
  fmt::print("{} {:.6f} · sum of parts {:.6f} · |difference| {:.2e} · final norm scale frozen at {:.6f}\n",
             a.layer < a.n_layers ? "lens" : "model", a.model_value, a.sum, a.check, a.norm_scale);
  std::vector<size_t> order(a.components.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    return std::fabs(a.components[x].value) > std::fabs(a.components[y].value);
  });
  double mx = 0;
  for (const auto& c : a.components) mx = std::max(mx, std::fabs(c.value));
  fmt::print("{}\n", style(fmt::format("{:<16} {:>10}", "part", "value"), fmt::emphasis::bold));
  for (size_t i = 0; i < order.size() && static_cast<int64_t>(i) < show; ++i) {
    const auto& c = a.components[order[i]];
    const int w = mx > 0 ? static_cast<int>(std::lround(std::fabs(c.value) / mx * 30)) : 0;
    std::string bar(static_cast<size_t>(w), '#');
    if (color) bar = fmt::format(fmt::fg(c.value >= 0 ? fmt::terminal_color::green : fmt::terminal_color::red), "{}", bar);
    fmt::print("{:<16} {:>10.4f}  {}\n", c.name, c.value, bar);
  }
  if (static_cast<int64_t>(order.size()) > show)
    fmt::print("({} more parts; --show N, or --format csv / --out for all)\n", order.size() - static_cast<size_t>(show));
  // per-head grid
  fmt::print("\n{}\n", style("heads (rows: layer, columns: head)", fmt::emphasis::bold));
  std::string line = fmt::format("{:<6}", "");
  for (int64_t h = 0; h < a.n_heads; ++h) line += fmt::format(" {:>7}", "H" + std::to_string(h));
  line += fmt::format(" {:>8}", "MLP");
  fmt::print("{}\n", line);
  for (int64_t l = 0; l < a.layer; ++l) {
    line = fmt::format("{:<6}", "L" + std::to_string(l));
    for (int64_t h = 0; h < a.n_heads; ++h) line += fmt::format(" {:>7.3f}", a.heads[static_cast<size_t>(l * a.n_heads + h)]);
    line += fmt::format(" {:>8.3f}", a.mlps[static_cast<size_t>(l)]);
    fmt::print("{}\n", line);
  }
}

int run_attribute(const AttributeCliOptions& o) {
  const auto& decl = vocablens::find_analysis("attribute").decl;
  const nlohmann::json resolved = vocablens::resolve_options(decl, o.flags->given(), vocablens::Surface::Cli);
  if (o.show < 0) throw UsageError("--show must be >= 0");
  if (!o.out.out_dir.empty()) vocablens::ensure_directory(o.out.out_dir);
  vocablens::Model m = vocablens::load_model(o.model);
  vocablens::adapt_threads_to(m);
  auto tok = vocablens::load_tokenizer_for(o.model, o.tokenizer);
  const vocablens::AnalysisRequest q{m, tok.get(), resolved, {}, nullptr, vocablens::Surface::Cli, &decl};
  const auto ids = vocablens::entries::prompt_ids(q);
  {
    const auto& cf = m.config();
    const double d = static_cast<double>(cf.d_model);
    vocablens::CacheSpec spec = [] { vocablens::CacheSpec s; s.resid_pre = s.resid_mid = s.resid_post = s.attn_out = s.mlp_out = true; return s; }();
    auto e = vocablens::estimate_forward_memory(m, 1, static_cast<int64_t>(ids.size()), spec, true);
    e.add("attribute: per-head outputs at the position", static_cast<double>(cf.n_layers * cf.n_heads) * d * 4);
    if (auto rc = vocablens::cli::check_memory("attribute", fmt::format("the attribution of {} tokens of {}", ids.size(), m.source()), e, o.dry_run, "shorten --prompt"))
      return *rc;
  }
  auto a = vocablens::attribute_logit(m, ids, vocablens::entries::attribution_options(q));
  auto r = a.to_result(tok.get(), vocablens::entries::prompt_text(q, ids));
  vocablens::cli::fill_provenance(r, m);
  r.provenance["tokenizer"] = tok->source();
  vocablens::cli::emit(r, o.out, [&] { print_attribution(a, *tok, o.show, vocablens::cli::use_color(o.out)); });
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

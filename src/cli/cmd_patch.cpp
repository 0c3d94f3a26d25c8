// `vocablens patch MODEL --clean TEXT --corrupt TEXT --target TOKEN [--wrong TOKEN] --over resid|attn|mlp|heads`:
// activation patching (see vocablens/patching.hpp). The flags come from the analysis's declaration
// (analyses/interventions_entry.cpp).
#include <fmt/color.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <vector>

#include "cli/command.hpp"
#include "cli/declared_flags.hpp"
#include "cli/memory_check.hpp"
#include "cli/output.hpp"
#include "cli/token_arg.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/detail/atomic_file.hpp"
#include "vocablens/declared_options.hpp"
#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/patching.hpp"
#include "vocablens/tokenizer.hpp"

namespace {

using vocablens::UsageError;

struct PatchCliOptions {
  std::string model, tokenizer;
  std::shared_ptr<vocablens::cli::DeclaredFlags> flags;
  bool dry_run = false;
  vocablens::cli::OutputOptions out;
};

std::string cell(double v) {
  if (std::isnan(v)) return "    -";
  return fmt::format("{:5.2f}", v);
}

void print_patch(const vocablens::PatchResult& p, const vocablens::Tokenizer& tok, bool color) {
  auto style = [&](const std::string& s, fmt::text_style st) { return color ? fmt::format(st, "{}", s) : s; };
  const bool heads = p.options.over == vocablens::PatchOver::Heads;
  fmt::print("{}\n", style(fmt::format("activation patching · {} · over {} · metric {} at position {}", p.model_source,
                                       vocablens::patch_over_name(p.options.over),
                                       p.options.wrong >= 0 ? "logit(" + tok.display(p.options.target) + ") - logit(" +
                                                                  tok.display(p.options.wrong) + ")"
                                                            : "logit(" + tok.display(p.options.target) + ")",
                                       p.position),
                           fmt::emphasis::bold));
  fmt::print("clean {:.4f} · corrupt {:.4f}; cells: (patched - corrupt) / (clean - corrupt), 0 = corrupt, 1 = clean\n",
             p.clean_metric, p.corrupt_metric);
  if (p.degenerate)
    fmt::print("the clean and corrupt runs give the same metric: the normalisation is undefined (cells '-'); "
               "raw values are in the JSON/CSV output\n");
  // Columns as wide as the longest token label (up to 16 columns), so " Tower" is not cut to " Towe".
  auto width_of = [](const std::string& t) {
    size_t cols = 0;
    for (unsigned char ch : t) cols += (ch & 0xC0) != 0x80;
    return cols;
  };
  size_t W = 5;
  std::vector<std::string> labels;
  if (!heads)
    for (int64_t c = 0; c < p.cols; ++c) {
      labels.push_back(vocablens::cli::first_columns(tok.display(p.clean_tokens[static_cast<size_t>(c)]), 16));
      W = std::max(W, width_of(labels.back()));
    }
  auto pad = [&](const std::string& t) { return " " + std::string(W - std::min(W, width_of(t)), ' ') + t; };
  std::string line = fmt::format("{:<8}", heads ? "layer" : "layer\\pos");
  for (int64_t c = 0; c < p.cols; ++c) line += pad(heads ? "H" + std::to_string(c) : std::to_string(c));
  fmt::print("{}\n", style(line, fmt::emphasis::bold));
  if (!heads) {
    line = fmt::format("{:<8}", "token");
    for (const auto& t : labels) line += pad(t);
    fmt::print("{}\n", line);
  }
  for (int64_t l = 0; l < p.rows; ++l) {
    line = fmt::format("{:<8}", l);
    for (int64_t c = 0; c < p.cols; ++c) {
      const double v = p.restored[p.at(l, c)];
      std::string s = cell(v);
      if (color && !std::isnan(v)) {
        if (v >= 0.5) s = fmt::format(fmt::fg(fmt::terminal_color::green) | fmt::emphasis::bold, "{}", s);
        else if (v >= 0.1) s = fmt::format(fmt::fg(fmt::terminal_color::green), "{}", s);
        else if (v <= -0.1) s = fmt::format(fmt::fg(fmt::terminal_color::red), "{}", s);
        else s = fmt::format(fmt::emphasis::faint, "{}", s);
      }
      line += " " + std::string(W - 5, ' ') + s;
    }
    fmt::print("{}\n", line);
  }
  fmt::print("(rows: {} of each layer{})\n", p.row_hooks.empty() ? "" : p.row_hooks[0].substr(p.row_hooks[0].find(".hook") + 1),
             heads ? ", one head's z at every position" : ", one position");
}

constexpr double kMinMeaningfulDiff = 0.25;

int run_patch(const PatchCliOptions& o) {
  const auto& a = vocablens::find_analysis("patch");
  const nlohmann::json resolved = vocablens::resolve_options(a.decl, o.flags->given(), vocablens::Surface::Cli);
  if (!o.out.out_dir.empty()) vocablens::ensure_directory(o.out.out_dir);
  vocablens::Model m = vocablens::load_model(o.model);
  vocablens::adapt_threads_to(m);
  auto tok = vocablens::load_tokenizer_for(o.model, o.tokenizer);
  const vocablens::AnalysisRequest q{m, tok.get(), resolved, {}, nullptr, vocablens::Surface::Cli, &a.decl};
  const auto [clean, corrupt] = vocablens::entries::patch_prompts(q);
  vocablens::PatchOptions po = vocablens::entries::patch_options(q);
  {
    const auto& cf = m.config();
    const double d = static_cast<double>(cf.d_model), V = static_cast<double>(cf.vocab_size);
    (void)d; (void)V;
    const double Tn = static_cast<double>(clean.size());
    (void)Tn;
    vocablens::CacheSpec spec = [] { vocablens::CacheSpec s; s.resid_pre = s.resid_mid = s.resid_post = s.attn_out = s.mlp_out = true; return s; }();
    auto e = vocablens::estimate_forward_memory(m, 1, static_cast<int64_t>(clean.size()), spec, true);
    e.add("patch: the corrupt run's logits and one patched run's", Tn * V * 4 * 2);
    if (auto rc = vocablens::cli::check_memory("patch", fmt::format("patching over {} tokens of {}", clean.size(), m.source()), e, o.dry_run, "shorten --clean and --corrupt"))
      return *rc;
  }
  const bool bar = ::isatty(STDERR_FILENO) == 1;
  if (bar)
    po.progress = [](int64_t done, int64_t total) {
      fmt::print(stderr, "\rpatching layer {}/{}", done, total);
      std::fflush(stderr);
    };
  auto p = vocablens::activation_patching(m, clean, corrupt, po);
  if (bar) fmt::print(stderr, "\r{}\r", std::string(40, ' '));
  // Every cell is divided by (clean - corrupt): when the corruption barely moves the metric, float noise and
  // tiny effects become "restored 0.45". Below a quarter of a logit (the answer's odds change by < 1.3x) the
  // table is reported with a warning, not silently.
  const double diff = p.clean_metric - p.corrupt_metric;
  if (!p.degenerate && std::abs(diff) < kMinMeaningfulDiff)
    fmt::print(stderr,
               "vocablens: warning: the clean and corrupt runs differ by only {:.4f} in the metric (clean {:.4f}, corrupt "
               "{:.4f}); every cell is divided by this difference, so the table mostly shows noise. Choose a corruption "
               "that changes the answer more (|clean - corrupt| >= {:g})\n",
               diff, p.clean_metric, p.corrupt_metric, kMinMeaningfulDiff);
  auto r = p.to_result(tok.get(), resolved["clean"].get<std::string>(), resolved["corrupt"].get<std::string>());
  vocablens::cli::fill_provenance(r, m);
  r.provenance["tokenizer"] = tok->source();
  vocablens::cli::emit(r, o.out, [&] { print_patch(p, *tok, vocablens::cli::use_color(o.out)); });
  return 0;
}

vocablens::cli::Register registered_cmd_patch{
    "patch", vocablens::find_analysis("patch").decl.summary,
    [](CLI::App& sub) -> vocablens::cli::Runner {
      auto o = std::make_shared<PatchCliOptions>();
      sub.add_option("MODEL", o->model, vocablens::cli::kModelHelp)->required();
      o->flags = std::make_shared<vocablens::cli::DeclaredFlags>(vocablens::find_analysis("patch").decl);
      o->flags->add_to(sub);
      sub.add_option("--tokenizer", o->tokenizer, "Tokenizer file or directory (default: found beside the model)");
      sub.add_flag("--dry-run", o->dry_run, vocablens::cli::kDryRunHelp);
      vocablens::cli::add_output_options(sub, o->out);
      return [o] { return run_patch(*o); };
    }};

}  // namespace

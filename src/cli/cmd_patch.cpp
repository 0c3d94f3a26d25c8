// `vocablens patch MODEL --clean TEXT --corrupt TEXT --target TOKEN [--wrong TOKEN] --over resid|attn|mlp|heads`:
// activation patching (see vocablens/patching.hpp). The flags come from the analysis's declaration
// (analyses/interventions_entry.cpp).
#include <fmt/color.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

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

// The table, read from the Result every surface gets (settings, summary, the sites table).
void print_patch(const vocablens::Result& r, const vocablens::Tokenizer& tok, bool color) {
  auto style = [&](const std::string& s, fmt::text_style st) { return color ? fmt::format(st, "{}", s) : s; };
  const auto& st = r.settings;
  const auto& sm = r.summary;
  const bool heads = sm.at("column_kind").get<std::string>() == "head";
  const std::string target = tok.display(st.at("target").at("id").get<int64_t>());
  fmt::print("{}\n", style(fmt::format("activation patching · {} · over {} · metric {} at position {}",
                                       sm.at("model").get<std::string>(), st.at("over").get<std::string>(),
                                       st.at("wrong").is_null() ? "logit(" + target + ")"
                                                                : "logit(" + target + ") - logit(" +
                                                                      tok.display(st.at("wrong").at("id").get<int64_t>()) + ")",
                                       st.at("position").get<int64_t>()),
                           fmt::emphasis::bold));
  fmt::print("clean {:.4f} · corrupt {:.4f}; cells: (patched - corrupt) / (clean - corrupt), 0 = corrupt, 1 = clean\n",
             sm.at("clean_metric").get<double>(), sm.at("corrupt_metric").get<double>());
  if (sm.at("degenerate").get<bool>())
    fmt::print(
        "the clean and corrupt runs give the same metric: the normalisation is undefined (cells '-'); "
        "raw values are in the JSON/CSV output\n");
  const auto rows = static_cast<int64_t>(sm.at("rows").size()), cols = static_cast<int64_t>(sm.at("columns").size());
  std::vector<double> restored(static_cast<size_t>(rows * cols), std::nan(""));
  for (const auto& t : r.tables)
    if (t.name == "sites")
      for (const auto& row : t.rows)
        if (!row[5].is_null())
          restored[static_cast<size_t>(row[0].get<int64_t>() * cols + row[2].get<int64_t>())] = row[5].get<double>();
  // Columns as wide as the longest token label (up to 16 columns), so " Tower" is not cut to " Towe".
  auto width_of = [](const std::string& t) {
    size_t cols = 0;
    for (unsigned char ch : t) cols += (ch & 0xC0) != 0x80;
    return cols;
  };
  size_t W = 5;
  std::vector<std::string> labels;
  if (!heads)
    for (int64_t c = 0; c < cols; ++c) {
      const auto id = sm.at("tokens").at(static_cast<size_t>(c)).at("clean_id").get<int64_t>();
      labels.push_back(vocablens::cli::first_columns(tok.display(id), 16));
      W = std::max(W, width_of(labels.back()));
    }
  auto pad = [&](const std::string& t) { return " " + std::string(W - std::min(W, width_of(t)), ' ') + t; };
  std::string line = fmt::format("{:<8}", heads ? "layer" : "layer\\pos");
  for (int64_t c = 0; c < cols; ++c) line += pad(heads ? "H" + std::to_string(c) : std::to_string(c));
  fmt::print("{}\n", style(line, fmt::emphasis::bold));
  if (!heads) {
    line = fmt::format("{:<8}", "token");
    for (const auto& t : labels) line += pad(t);
    fmt::print("{}\n", line);
  }
  for (int64_t l = 0; l < rows; ++l) {
    line = fmt::format("{:<8}", l);
    for (int64_t c = 0; c < cols; ++c) {
      const double v = restored[static_cast<size_t>(l * cols + c)];
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
  const std::string hook0 = rows > 0 ? sm.at("rows").at(0).get<std::string>() : std::string();
  fmt::print("(rows: {} of each layer{})\n", hook0.empty() ? "" : hook0.substr(hook0.find(".hook") + 1),
             heads ? ", one head's z at every position" : ", one position");
}

constexpr double kMinMeaningfulDiff = 0.25;

int run_patch(const PatchCliOptions& o) {
  const auto& a = vocablens::find_analysis("patch");
  const nlohmann::json given = o.flags->given();
  vocablens::resolve_options(a.decl, given, vocablens::Surface::Cli);  // a wrong flag costs no model load
  if (!o.out.out_dir.empty()) vocablens::ensure_directory(o.out.out_dir);
  vocablens::Model m = vocablens::load_model(o.model);
  vocablens::adapt_threads_to(m);
  auto tok = vocablens::load_tokenizer_for(o.model, o.tokenizer);
  const auto est = vocablens::estimate_analysis(a, m, tok.get(), given, vocablens::Surface::Cli);
  if (auto rc = vocablens::cli::check_memory("patch", est, o.dry_run)) return *rc;
  const bool bar = ::isatty(STDERR_FILENO) == 1;
  std::function<void(int64_t, int64_t)> progress;
  if (bar)
    progress = [](int64_t done, int64_t total) {
      fmt::print(stderr, "\rpatching layer {}/{}", done, total);
      std::fflush(stderr);
    };
  auto r = vocablens::run_analysis(a, m, tok.get(), given, vocablens::Surface::Cli, progress);
  if (bar) fmt::print(stderr, "\r{}\r", std::string(40, ' '));
  // Every cell is divided by (clean - corrupt): when the corruption barely moves the metric, float noise and
  // tiny effects become "restored 0.45". Below a quarter of a logit (the answer's odds change by < 1.3x) the
  // table is reported with a warning, not silently.
  const double clean = r.summary.at("clean_metric").get<double>(), corrupt = r.summary.at("corrupt_metric").get<double>();
  const double diff = clean - corrupt;
  if (!r.summary.at("degenerate").get<bool>() && std::abs(diff) < kMinMeaningfulDiff)
    fmt::print(stderr,
               "vocablens: warning: the clean and corrupt runs differ by only {:.4f} in the metric (clean {:.4f}, corrupt "
               "{:.4f}); every cell is divided by this difference, so the table mostly shows noise. Choose a corruption "
               "that changes the answer more (|clean - corrupt| >= {:g})\n",
               diff, clean, corrupt, kMinMeaningfulDiff);
  vocablens::cli::fill_provenance(r, m);
  vocablens::cli::emit(r, o.out, [&] { print_patch(r, *tok, vocablens::cli::use_color(o.out)); });
  return 0;
}

vocablens::cli::Register registered_cmd_patch{
    "patch", vocablens::find_analysis("patch").decl.summary, [](CLI::App& sub) -> vocablens::cli::Runner {
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

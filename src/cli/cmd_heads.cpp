// `vocablens heads MODEL [--layer L --head H] [--kind ov|qk] [--top-k 50]`: attention heads in vocabulary
// space (see vocablens/heads.hpp): exact top-k (token, token) pairs of each head's OV / QK circuit,
// per-token lists, singular values, eigenvalues and copying scores.
#include <limits>
#include <fmt/color.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <memory>

#include "cli/command.hpp"
#include "cli/declared_flags.hpp"
#include "cli/memory_check.hpp"
#include "cli/output.hpp"
#include "cli/text_fit.hpp"
#include "cli/progress.hpp"
#include "cli/token_filter_options.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/detail/atomic_file.hpp"
#include "vocablens/error.hpp"
#include "vocablens/heads.hpp"
#include "vocablens/model.hpp"
#include "vocablens/tokenizer.hpp"

namespace {

using vocablens::cli::columns;
using vocablens::cli::fit;

using vocablens::UsageError;

// The analysis's options come from its declaration (analyses/heads_entry.cpp); these are the command's own.
struct HeadsCliOptions {
  std::string model;
  std::string tokenizer;
  std::shared_ptr<vocablens::cli::DeclaredFlags> flags;
  std::vector<int64_t> token_ids;  // --token-id N: the same as --token '#N'
  bool verbose = false;
  bool dry_run = false;
  vocablens::cli::OutputOptions out;
};

// The table view, read back from the Result (kind "heads", vocablens/heads.hpp): circuits in the order of
// circuit_index, their pairs from pair_ids / pair_values and the per-token lists from per_token_ids (-1 pads a
// shorter list), the spectra's figures from the circuits table.
void print_heads(const vocablens::Result& r, const vocablens::Tokenizer* tok, const vocablens::Model& m, bool color,
                 bool verbose) {
  auto style = [&](const std::string& s, fmt::text_style st) { return color ? fmt::format(st, "{}", s) : s; };
  auto text = [&](int64_t id) { return tok ? tok->display(id) : "#" + std::to_string(id); };
  auto number = [](const nlohmann::json& v) {  // a NaN went into the table as null
    return v.is_null() ? std::numeric_limits<double>::quiet_NaN() : v.get<double>();
  };
  const auto& set = r.settings;
  const int64_t top_k = set["top_k"].get<int64_t>(), allowed = set["allowed_tokens"].get<int64_t>();
  const int64_t vocab = r.summary["vocab_size"].get<int64_t>();
  const auto& index = r.arrays.at("circuit_index");
  const int64_t C = index.shape[0];
  const bool spectra = r.arrays.count("copying_score") > 0;
  const int64_t* circuit = vocablens::cli::array_values<int64_t>(r, "circuit_index");
  const int64_t* pair_ids = vocablens::cli::array_values<int64_t>(r, "pair_ids");
  const double* pair_values = vocablens::cli::array_values<double>(r, "pair_values");
  const int64_t* per_ids = vocablens::cli::array_values<int64_t>(r, "per_token_ids");
  const double* per_values = vocablens::cli::array_values<double>(r, "per_token_values");
  const auto& sources = set["source_tokens"];
  const int64_t S = per_ids ? static_cast<int64_t>(sources.size()) : 0;
  const int64_t pk = per_ids ? r.arrays.at("per_token_ids").shape[2] : 0;
  const vocablens::Table* table = nullptr;  // circuits: copying scores, σ₁, the streamed work
  for (const auto& t : r.tables)
    if (t.name == "circuits") table = &t;
  fmt::print("{}\n", style(fmt::format("heads · {} · inverse {} · {} circuit{} · top {}{}", m.source(),
                                       set["inverse"].get<std::string>(), C, C == 1 ? "" : "s", top_k,
                                       allowed < vocab ? fmt::format(" · {} of {} tokens allowed", allowed, vocab) : ""),
                           fmt::emphasis::bold));
  fmt::print("ov: src = attended token, dst = token whose logit it raises · qk: src = query token, dst = key token\n");
  const bool compact = C > 4;
  const int64_t shown = compact ? std::min<int64_t>(top_k, 6) : top_k;
  for (int64_t c = 0; c < C; ++c) {
    const bool ov = circuit[c * 3 + 2] == 0;
    const auto& row = table->rows[static_cast<size_t>(c)];  // ..., copying_score, weight_copying_score, sigma_1, ...
    std::string head = fmt::format("layer {} head {} · {}", circuit[c * 3], circuit[c * 3 + 1], ov ? "ov" : "qk");
    std::string spec = spectra ? fmt::format(" · copying score {:+.3f} (W_{} {:+.3f}) · σ₁ {:.4g}", number(row[3]),
                                             ov ? "VO" : "QK", number(row[4]), number(row[5]))
                               : "";
    fmt::print("\n{}{}\n", style(head, fmt::emphasis::bold), spec);
    const int64_t* ids = pair_ids + c * top_k * 2;
    const double* values = pair_values + c * top_k;
    int64_t pairs = 0;
    while (pairs < top_k && ids[pairs * 2] >= 0) ++pairs;
    if (compact) {
      std::string line;
      for (int64_t q = 0; q < shown && q < pairs; ++q)
        line += "  " + text(ids[q * 2]) + "→" + text(ids[q * 2 + 1]) + fmt::format(" {:.3g}", values[q]);
      fmt::print("{}\n", line);
    } else {
      for (int64_t q = 0; q < pairs; ++q)
        // 4 significant digits ({:.4f} printed 0.0003 on every row of a small circuit).
        fmt::print("  {:>4}  {} → {} {:>10.4g}\n", q + 1, fit(text(ids[q * 2]), 16), fit(text(ids[q * 2 + 1]), 16), values[q]);
    }
    for (int64_t s = 0; s < S; ++s) {
      std::string line =
          fmt::format("  {} {} →", ov ? "from" : "query",
                      style(text(sources[static_cast<size_t>(s)].get<int64_t>()), fmt::fg(fmt::terminal_color::cyan)));
      for (int64_t q = 0; q < pk && per_ids[(c * S + s) * pk + q] >= 0; ++q)
        line += fmt::format("  {} {:.3g}", text(per_ids[(c * S + s) * pk + q]), per_values[(c * S + s) * pk + q]);
      fmt::print("{}\n", line);
    }
  }
  if (compact && shown < top_k)
    fmt::print("\n(first {} of {} pairs per circuit shown; --format csv/json or --out DIR for all)\n", shown, top_k);
  if (verbose) {
    double dense = 0, gemm = 0, secs = 0;
    for (const auto& row : table->rows) {  // ..., seconds, dense_flops, gemm_flops
      secs += row[8].get<double>();
      dense += row[9].get<double>();
      gemm += row[10].get<double>();
    }
    fmt::print("\nstreamed {:.3g} dense GFLOP ({:.1f}% multiplied after norm-bound pruning) in {:.2f} s\n", dense / 1e9,
               dense > 0 ? 100 * gemm / dense : 0.0, secs);
  }
}

int run_heads(const HeadsCliOptions& co) {
  const auto& a = vocablens::find_analysis("heads");
  nlohmann::json given = co.flags->given();
  for (int64_t id : co.token_ids) given["tokens"].push_back(id);
  // Checked before the model loads: a wrong flag costs nothing.
  const nlohmann::json resolved = vocablens::resolve_options(a.decl, given, vocablens::Surface::Cli);
  if (!co.out.out_dir.empty()) vocablens::ensure_directory(co.out.out_dir);

  vocablens::Model m = vocablens::load_model(co.model);
  vocablens::cli::TokenFilterFlags tf;
  tf.tokenizer = co.tokenizer;
  tf.alpha_only = resolved["alpha_only"].get<bool>();
  bool token_text = resolved["drop_same_word"].get<bool>();  // text of tokens needs the tokenizer
  if (resolved["tokens"].is_array())
    for (const auto& t : resolved["tokens"]) token_text = token_text || t.is_string();
  auto tok = vocablens::cli::load_tokenizer(co.model, tf, token_text);
  if (auto rc = vocablens::cli::check_memory(
          "heads", vocablens::estimate_analysis(a, m, tok.get(), given, vocablens::Surface::Cli), co.dry_run))
    return *rc;
  vocablens::cli::ProgressBar bar("heads", "circuits");
  auto r = vocablens::run_analysis(a, m, tok.get(), given, vocablens::Surface::Cli, bar.callback());
  bar.finish();
  vocablens::cli::fill_provenance(r, m);
  const bool color = vocablens::cli::use_color(co.out);
  vocablens::cli::emit(r, co.out, [&] { print_heads(r, tok.get(), m, color, co.verbose); });
  return 0;
}

vocablens::cli::Register registered_cmd_heads{
    "heads", vocablens::find_analysis("heads").decl.summary, [](CLI::App& sub) -> vocablens::cli::Runner {
      auto o = std::make_shared<HeadsCliOptions>();
      o->flags = std::make_shared<vocablens::cli::DeclaredFlags>(vocablens::find_analysis("heads").decl);
      sub.add_option("MODEL", o->model, vocablens::cli::kModelHelp)->required();
      o->flags->add_to(sub);
      sub.add_option("--token-id", o->token_ids, "Like --token, by id (repeatable)");
      sub.add_option("--tokenizer", o->tokenizer, "Tokenizer file or directory (default: found beside the model)");
      sub.add_flag("--verbose", o->verbose, "Report the streamed work and time");
      sub.add_flag("--dry-run", o->dry_run, vocablens::cli::kDryRunHelp);
      vocablens::cli::add_output_options(sub, o->out);
      return [o] { return run_heads(*o); };
    }};

}  // namespace

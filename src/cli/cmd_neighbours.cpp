// `vocablens neighbours MODEL QUERY`: nearest tokens by cosine to a token, a word, or an expression such
// as "king - man + woman" (see vocablens/neighbours.hpp).
#include <fmt/color.h>
#include <fmt/format.h>

#include <memory>
#include <optional>

#include "cli/command.hpp"
#include "cli/declared_flags.hpp"
#include "cli/memory_check.hpp"
#include "cli/output.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/detail/atomic_file.hpp"
#include "analyses/declared_options.hpp"
#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/neighbours.hpp"
#include "vocablens/tokenizer.hpp"
#include "vocablens/train.hpp"

namespace {

using vocablens::UsageError;

// The analysis's options come from its declaration (analyses/neighbours_entry.cpp); these are the command's own.
struct NeighboursCliOptions {
  std::string model;
  std::string tokenizer;
  std::shared_ptr<vocablens::cli::DeclaredFlags> flags;
  bool dry_run = false;
  vocablens::cli::OutputOptions out;
};

// The table view, read back from the Result (kind "neighbours", vocablens/neighbours.hpp).
void print_neighbours(const vocablens::Result& r, bool color) {
  auto bold = [&](const std::string& t) { return color ? fmt::format(fmt::emphasis::bold, "{}", t) : t; };
  const auto& s = r.summary;
  fmt::print("{}\n", bold(fmt::format("neighbours of {} · {} in {}-space · cosine (float64)", s["query"].get<std::string>(),
                                      s["matrix"].get<std::string>(), s["space"].get<std::string>())));
  const std::string compose = r.settings["compose"].get<std::string>();
  for (const auto& t : s["terms"]) {
    const auto& ps = t["pieces"];
    std::string pieces;
    for (size_t i = 0; i < ps.size(); ++i)
      pieces +=
          fmt::format("{}{} #{}", i ? " + " : "",
                      ps.size() > 1 ? fmt::format("{:.3g}·{}", ps[i]["weight"].get<double>(), ps[i]["token"].get<std::string>())
                                    : ps[i]["token"].get<std::string>(),
                      ps[i]["id"].get<int64_t>());
    fmt::print("  {:+g} × {}  = {}{}\n", t["weight"].get<double>(),
               t.contains("id") ? "#" + std::to_string(t["id"].get<int64_t>()) : "'" + t["text"].get<std::string>() + "'", pieces,
               ps.size() > 1 ? fmt::format("  ({} of {} pieces)", compose, ps.size()) : "");
  }
  const size_t excluded = s["excluded"].size();
  if (excluded) fmt::print("  (the query's own {} token{} left out)\n", excluded, excluded == 1 ? "" : "s");
  fmt::print("{}\n", bold(fmt::format("{:>4}  {:<24} {:>7}  {:>9}", "rank", "token", "id", "cosine")));
  for (const auto& n : s["neighbours"])
    fmt::print("{:>4}  {:<24} {:>7}  {:>9.6f}\n", n["rank"].get<int64_t>(), n["token"].get<std::string>(), n["id"].get<int64_t>(),
               n["cosine"].get<double>());
}

int run_neighbours(const NeighboursCliOptions& o) {
  const auto& a = vocablens::find_analysis("neighbours");
  const nlohmann::json given = o.flags->given();
  const nlohmann::json resolved = vocablens::resolve_options(a.decl, given, vocablens::Surface::Cli);
  vocablens::parse_expression(resolved["query"].get<std::string>());  // fail on a malformed query before loading anything
  if (!o.out.out_dir.empty()) vocablens::ensure_directory(o.out.out_dir);

  vocablens::Result res;
  // A directory of `train --model embed-lm | skipgram | cbow | glove`: its vectors, E space only, and no Model to
  // run the analysis on: the entry's computation over those vectors.
  if (vocablens::is_embedding_directory(o.model)) {
    if (vocablens::vector_space_from_string(resolved["space"].get<std::string>()) != vocablens::VectorSpace::Embedding)
      throw UsageError(o.model + " holds word vectors without a transformer: --space E only");
    auto tok = vocablens::load_tokenizer_for(o.model, o.tokenizer);
    res = vocablens::entries::neighbours_of_vectors(
        vocablens::load_embedding_matrix(o.model, resolved["matrix"].get<std::string>()), tok.get(), resolved);
  } else {
    vocablens::Model m = vocablens::load_model(o.model);
    auto tok = vocablens::load_tokenizer_for(o.model, o.tokenizer);
    if (auto rc = vocablens::cli::check_memory(
            "neighbours", vocablens::estimate_analysis(a, m, tok.get(), given, vocablens::Surface::Cli), o.dry_run))
      return *rc;
    res = vocablens::run_analysis(a, m, tok.get(), given, vocablens::Surface::Cli);
    vocablens::cli::fill_provenance(res, m);
  }
  vocablens::cli::emit(res, o.out, [&] { print_neighbours(res, vocablens::cli::use_color(o.out)); });
  return 0;
}

vocablens::cli::Register registered_cmd_neighbours{
    "neighbours", vocablens::find_analysis("neighbours").decl.summary, [](CLI::App& sub) -> vocablens::cli::Runner {
      auto o = std::make_shared<NeighboursCliOptions>();
      o->flags = std::make_shared<vocablens::cli::DeclaredFlags>(vocablens::find_analysis("neighbours").decl);
      sub.add_option("MODEL", o->model, vocablens::cli::kModelHelp)->required();
      o->flags->add_to(sub);
      sub.add_option("--tokenizer", o->tokenizer, "Tokenizer file or directory (default: found beside MODEL)");
      sub.add_flag("--dry-run", o->dry_run, vocablens::cli::kDryRunHelp);
      vocablens::cli::add_output_options(sub, o->out);
      return [o] { return run_neighbours(*o); };
    }};

}  // namespace

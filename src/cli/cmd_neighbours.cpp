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
#include "vocablens/declared_options.hpp"
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

void print_neighbours(const vocablens::NeighbourResult& r, const vocablens::Tokenizer& tok, bool color) {
  auto bold = [&](const std::string& t) { return color ? fmt::format(fmt::emphasis::bold, "{}", t) : t; };
  fmt::print("{}\n", bold(fmt::format("neighbours of {} · {} in {}-space · cosine (float64)", r.query, r.matrix, r.space)));
  for (const auto& t : r.terms) {
    std::string pieces;
    for (size_t i = 0; i < t.pieces.size(); ++i)
      pieces += fmt::format("{}{} #{}", i ? " + " : "",
                            t.pieces.size() > 1 ? fmt::format("{:.3g}·{}", t.piece_weights[i], tok.display(t.pieces[i]))
                                                : tok.display(t.pieces[i]),
                            t.pieces[i]);
    fmt::print("  {:+g} × {}  = {}{}\n", t.term.weight, t.term.id >= 0 ? "#" + std::to_string(t.term.id) : "'" + t.term.text + "'",
               pieces, t.pieces.size() > 1 ? fmt::format("  ({} of {} pieces)", to_string(r.options.compose), t.pieces.size()) : "");
  }
  if (!r.excluded.empty()) fmt::print("  (the query's own {} token{} left out)\n", r.excluded.size(), r.excluded.size() == 1 ? "" : "s");
  fmt::print("{}\n", bold(fmt::format("{:>4}  {:<24} {:>7}  {:>9}", "rank", "token", "id", "cosine")));
  for (size_t i = 0; i < r.neighbours.size(); ++i) {
    const auto& n = r.neighbours[i];
    fmt::print("{:>4}  {:<24} {:>7}  {:>9.6f}\n", i + 1, tok.display(n.id), n.id, n.cosine);
  }
}

int run_neighbours(const NeighboursCliOptions& o) {
  const auto& decl = vocablens::find_analysis("neighbours").decl;
  const nlohmann::json resolved = vocablens::resolve_options(decl, o.flags->given(), vocablens::Surface::Cli);
  const std::string query = resolved["query"].get<std::string>();
  const std::string matrix = resolved["matrix"].get<std::string>();
  const vocablens::VectorSpace space = vocablens::vector_space_from_string(resolved["space"].get<std::string>());
  vocablens::parse_expression(query);  // fail on a malformed query before loading anything
  if (!o.out.out_dir.empty()) vocablens::ensure_directory(o.out.out_dir);

  // A directory of `train --model embed-lm | skipgram | cbow | glove`: its vectors, E space only.
  const bool vectors_only = vocablens::is_embedding_directory(o.model);
  if (vectors_only && space != vocablens::VectorSpace::Embedding)
    throw UsageError(o.model + " holds word vectors without a transformer: --space E only");
  std::optional<vocablens::Model> m;
  if (!vectors_only) m.emplace(vocablens::load_model(o.model));
  auto tok = vocablens::load_tokenizer_for(o.model, o.tokenizer);
  at::Tensor X = vectors_only ? vocablens::load_embedding_matrix(o.model, matrix) : vocablens::space_vectors(*m, space, matrix);
  if (m) {
    if (auto rc = vocablens::cli::check_memory(
            "neighbours", vocablens::estimate_analysis(vocablens::find_analysis("neighbours"), *m, tok.get(),
                                                       o.flags->given(), vocablens::Surface::Cli),
            o.dry_run))
      return *rc;
  }
  auto r = vocablens::neighbours(X, tok.get(), query, vocablens::entries::neighbour_options(resolved));
  r.matrix = matrix;
  r.space = vocablens::to_string(space);
  vocablens::Result res = r.to_result(tok.get());
  if (m) vocablens::cli::fill_provenance(res, *m);
  vocablens::cli::emit(res, o.out, [&] { print_neighbours(r, *tok, vocablens::cli::use_color(o.out)); });
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

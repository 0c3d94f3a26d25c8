// `vocablens neighbours MODEL QUERY`: nearest tokens by cosine to a token, a word, or an expression such
// as "king - man + woman" (see vocablens/neighbours.hpp).
#include <fmt/color.h>
#include <fmt/format.h>

#include <memory>
#include <optional>

#include "cli/command.hpp"
#include "cli/memory_check.hpp"
#include "cli/output.hpp"
#include "vocablens/atomic_file.hpp"
#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/neighbours.hpp"
#include "vocablens/tokenizer.hpp"
#include "vocablens/train.hpp"

namespace {

using vocablens::UsageError;

struct NeighboursCliOptions {
  std::string model;
  std::string query;
  std::string tokenizer;
  std::string matrix = "W_E";
  std::string space = "E";
  std::string compose = "mean";
  int64_t k = 20;
  bool raw = false;
  bool include_inputs = false;
  bool prefix_space = false;
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
  if (o.k < 1) throw UsageError("--k must be at least 1");
  vocablens::NeighbourOptions no;
  no.k = o.k;
  no.compose = vocablens::compose_from_string(o.compose);
  no.normalise_terms = !o.raw;
  no.exclude_inputs = !o.include_inputs;
  no.prefix_space = o.prefix_space;
  const vocablens::VectorSpace space = vocablens::vector_space_from_string(o.space);
  vocablens::parse_expression(o.query);  // fail on a malformed query before loading anything
  if (!o.out.out_dir.empty()) vocablens::ensure_directory(o.out.out_dir);

  // A directory of `train --model embed-lm | skipgram | cbow | glove`: its vectors, E space only.
  const bool vectors_only = vocablens::is_embedding_directory(o.model);
  if (vectors_only && space != vocablens::VectorSpace::Embedding)
    throw UsageError(o.model + " holds word vectors without a transformer: --space E only");
  std::optional<vocablens::Model> m;
  if (!vectors_only) m.emplace(vocablens::load_model(o.model));
  auto tok = vocablens::load_tokenizer_for(o.model, o.tokenizer);
  at::Tensor X = vectors_only ? vocablens::load_embedding_matrix(o.model, o.matrix) : vocablens::space_vectors(*m, space, o.matrix);
  if (m) {
    const auto& cf = (*m).config();
    const double d = static_cast<double>(cf.d_model), V = static_cast<double>(cf.vocab_size);
    (void)d; (void)V;
    auto e = vocablens::cli::model_memory(*m);
    e.add_phase("neighbours: the vectors and their normalised copy, one row of similarities", (2 * static_cast<double>(X.numel()) + static_cast<double>(X.size(0))) * 4);
    if (auto rc = vocablens::cli::check_memory("neighbours", "the neighbours of '" + o.query + "' in " + m->source(), e, o.dry_run, "--matrix (a smaller matrix; nothing else reduces it)"))
      return *rc;
  }
  auto r = vocablens::neighbours(X, tok.get(), o.query, no);
  r.matrix = o.matrix;
  r.space = vocablens::to_string(space);
  vocablens::Result res = r.to_result(tok.get());
  if (m) vocablens::cli::fill_provenance(res, *m);
  vocablens::cli::emit(res, o.out, [&] { print_neighbours(r, *tok, vocablens::cli::use_color(o.out)); });
  return 0;
}

vocablens::cli::Register reg{
    "neighbours",
    "Nearest tokens by cosine to a token, word or expression (\"king - man + woman\") in E- or E+-space",
    [](CLI::App& sub) -> vocablens::cli::Runner {
      auto o = std::make_shared<NeighboursCliOptions>();
      sub.add_option("MODEL", o->model, vocablens::cli::kModelHelp)->required();
      sub.add_option("QUERY", o->query,
                     "A token, word or expression: terms joined by ' + ' / ' - ', weights as 0.5*term, #123 for "
                     "a token id, quotes for text with spaces (' king', 'New York'); put -- before a query "
                     "that starts with '-'")
          ->required();
      sub.add_option("--k", o->k, "Number of neighbours (default 20)");
      sub.add_option("--space", o->space, "E (embedding rows, default) or E+ (rows of pinv(W_E)^T)")
          ->check(CLI::IsMember({"E", "E+", "embedding", "pinv"}));
      sub.add_option("--matrix", o->matrix, "W_E (default) or W_U (output token directions)")
          ->check(CLI::IsMember({"W_E", "W_U"}));
      sub.add_option("--compose", o->compose, "How a multi-token word combines its pieces: mean (default), sum, "
                                              "weighted (by byte length)")
          ->check(CLI::IsMember({"sum", "mean", "weighted"}));
      sub.add_flag("--raw", o->raw, "Combine raw rows instead of unit-normalised ones");
      sub.add_flag("--include-inputs", o->include_inputs, "Keep the query's own tokens in the list");
      sub.add_flag("--prefix-space", o->prefix_space, "Look words up with a leading space (GPT-2 word-initial tokens)");
      sub.add_option("--tokenizer", o->tokenizer, "Tokenizer file or directory (default: found beside MODEL)");
      sub.add_flag("--dry-run", o->dry_run, vocablens::cli::kDryRunHelp);
      vocablens::cli::add_output_options(sub, o->out);
      return [o] { return run_neighbours(*o); };
    }};

}  // namespace

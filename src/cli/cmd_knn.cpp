// `vocablens knn MODEL --out DIR`: the exact k-NN graph of the whole vocabulary by cosine (see
// vocablens/neighbours.hpp): indices and scores as .npy, hubs, optionally every edge as CSV.
#include <fmt/color.h>
#include <fmt/format.h>

#include <memory>

#include "cli/command.hpp"
#include "cli/declared_flags.hpp"
#include "cli/memory_check.hpp"
#include "cli/output.hpp"
#include "cli/progress.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/detail/atomic_file.hpp"
#include "vocablens/declared_options.hpp"
#include "vocablens/error.hpp"
#include "vocablens/knn.hpp"
#include "vocablens/model.hpp"
#include "vocablens/neighbours.hpp"
#include "vocablens/tokenizer.hpp"

namespace {

using vocablens::UsageError;

// The analysis's options come from its declaration (analyses/knn_entry.cpp); these are the command's own.
struct KnnCliOptions {
  std::string model;
  std::string tokenizer;
  std::shared_ptr<vocablens::cli::DeclaredFlags> flags;
  bool dry_run = false;
  vocablens::cli::OutputOptions out;
};

std::string name(const vocablens::Tokenizer* tok, int64_t id) {
  return tok ? tok->display(id) : "#" + std::to_string(id);
}

void print_knn(const vocablens::KnnGraph& g, const vocablens::Tokenizer* tok, bool color, bool saved) {
  auto bold = [&](const std::string& t) { return color ? fmt::format(fmt::emphasis::bold, "{}", t) : t; };
  fmt::print("{}\n", bold(fmt::format("k-NN graph · {} rows of {} in {}-space · k = {} · {:.2f} s", g.n, g.matrix, g.space,
                                      g.k, g.seconds)));
  fmt::print("exact: float32 GEMM candidates within {:.2g} of each row's k-th score re-scored in float64 "
             "({} candidates, {} rows recomputed over all rows)\n",
             g.margin, g.rescored, g.fallback_rows);
  double first = 0, kth = 0;
  for (int64_t i = 0; i < g.n; ++i) {
    first += g.scores[static_cast<size_t>(i * g.k)];
    kth += g.scores[static_cast<size_t>(i * g.k + g.k - 1)];
  }
  fmt::print("mean cosine of the nearest neighbour {:.4f}, of the k-th {:.4f} · mutual edges {:.1f}% · "
             "in-degree skewness {:.2f} · {} rows are nobody's neighbour\n",
             first / static_cast<double>(g.n), kth / static_cast<double>(g.n), 100 * g.mutual_fraction,
             g.in_degree_skewness, g.anti_hubs);
  std::vector<int64_t> order(static_cast<size_t>(g.n));
  for (int64_t i = 0; i < g.n; ++i) order[static_cast<size_t>(i)] = i;
  const size_t top = std::min<size_t>(12, order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(top), order.end(), [&](int64_t a, int64_t b) {
    return g.in_degree[static_cast<size_t>(a)] > g.in_degree[static_cast<size_t>(b)] ||
           (g.in_degree[static_cast<size_t>(a)] == g.in_degree[static_cast<size_t>(b)] && a < b);
  });
  std::string hubs;
  for (size_t i = 0; i < top; ++i)
    hubs += fmt::format("{}{} ({})", i ? "  " : "", name(tok, order[i]), g.in_degree[static_cast<size_t>(order[i])]);
  fmt::print("hubs (in-degree): {}\n", hubs);
  fmt::print("{}\n", bold("first rows"));
  for (int64_t i = 0; i < std::min<int64_t>(g.n, 5); ++i) {
    std::string nb;
    for (int64_t t = 0; t < std::min<int64_t>(g.k, 6); ++t)
      nb += fmt::format("{}{} {:.3f}", t ? "  " : "", name(tok, g.indices[static_cast<size_t>(i * g.k + t)]),
                        g.scores[static_cast<size_t>(i * g.k + t)]);
    fmt::print("  {:<16} → {}\n", name(tok, i), nb);
  }
  if (!saved) fmt::print("(use --out DIR to save the graph: knn.indices.npy, knn.scores.npy{})\n", "");
}

int run_knn(const KnnCliOptions& o) {
  const auto& decl = vocablens::find_analysis("knn").decl;
  const nlohmann::json resolved = vocablens::resolve_options(decl, o.flags->given(), vocablens::Surface::Cli);
  const vocablens::VectorSpace space = vocablens::vector_space_from_string(resolved["space"].get<std::string>());
  const std::string matrix = resolved["matrix"].get<std::string>();
  if (!o.out.out_dir.empty()) vocablens::ensure_directory(o.out.out_dir);
  vocablens::Model m = vocablens::load_model(o.model);
  std::unique_ptr<vocablens::Tokenizer> tok;
  try {
    tok = vocablens::load_tokenizer_for(o.model, o.tokenizer);
  } catch (const vocablens::Error& e) {
    if (!o.tokenizer.empty()) throw;
    fmt::print(stderr, "vocablens: warning: no tokenizer ({}); tokens are shown as #id\n", e.what());
  }
  if (auto rc = vocablens::cli::check_memory(
          "knn", vocablens::estimate_analysis(vocablens::find_analysis("knn"), m, tok.get(), o.flags->given(),
                                              vocablens::Surface::Cli),
          o.dry_run))
    return *rc;
  at::Tensor X = vocablens::space_vectors(m, space, matrix);
  vocablens::KnnOptions ko = vocablens::entries::knn_options(resolved);
  vocablens::cli::ProgressBar bar("knn", "rows");
  ko.progress = bar.callback();
  auto g = vocablens::knn_graph(X, ko);
  bar.finish();
  g.matrix = matrix;
  g.space = vocablens::to_string(space);
  vocablens::Result r = g.to_result(tok.get(), resolved["edges"].get<bool>());
  vocablens::cli::fill_provenance(r, m);
  vocablens::cli::emit(r, o.out, [&] { print_knn(g, tok.get(), vocablens::cli::use_color(o.out), !o.out.out_dir.empty()); });
  return 0;
}

vocablens::cli::Register registered_cmd_knn{
    "knn", vocablens::find_analysis("knn").decl.summary, [](CLI::App& sub) -> vocablens::cli::Runner {
      auto o = std::make_shared<KnnCliOptions>();
      o->flags = std::make_shared<vocablens::cli::DeclaredFlags>(vocablens::find_analysis("knn").decl);
      sub.add_option("MODEL", o->model, vocablens::cli::kModelHelp)->required();
      o->flags->add_to(sub);
      sub.add_option("--tokenizer", o->tokenizer, "Tokenizer file or directory (default: found beside MODEL)");
      sub.add_flag("--dry-run", o->dry_run, vocablens::cli::kDryRunHelp);
      vocablens::cli::add_output_options(sub, o->out);
      return [o] { return run_knn(*o); };
    }};

}  // namespace

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

std::string name(const vocablens::Tokenizer* tok, int64_t id) { return tok ? tok->display(id) : "#" + std::to_string(id); }

// The graph from its Result (kind "knn", vocablens/knn.hpp): the summary's figures, the in_degree, indices and
// scores arrays.
void print_knn(const vocablens::Result& r, const vocablens::Tokenizer* tok, bool color, bool saved) {
  auto bold = [&](const std::string& t) { return color ? fmt::format(fmt::emphasis::bold, "{}", t) : t; };
  const auto& s = r.summary;
  const int64_t n = s["rows"].get<int64_t>(), k = s["k"].get<int64_t>();
  fmt::print("{}\n",
             bold(fmt::format("k-NN graph · {} rows of {} in {}-space · k = {} · {:.2f} s", n, s["matrix"].get<std::string>(),
                              s["space"].get<std::string>(), k, s["seconds"].get<double>())));
  fmt::print(
      "exact: float32 GEMM candidates within {:.2g} of each row's k-th score re-scored in float64 "
      "({} candidates, {} rows recomputed over all rows)\n",
      s["candidate_margin"].get<double>(), s["rescored_candidates"].get<int64_t>(), s["fallback_rows"].get<int64_t>());
  fmt::print(
      "mean cosine of the nearest neighbour {:.4f}, of the k-th {:.4f} · mutual edges {:.1f}% · "
      "in-degree skewness {:.2f} · {} rows are nobody's neighbour\n",
      s["mean_top1_cosine"].get<double>(), s["mean_kth_cosine"].get<double>(), 100 * s["mutual_fraction"].get<double>(),
      s["in_degree_skewness"].get<double>(), s["anti_hubs"].get<int64_t>());
  const auto& deg = r.arrays.at("in_degree");
  const int64_t* in_degree = reinterpret_cast<const int64_t*>(deg.bytes.data());
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  const size_t top = std::min<size_t>(12, order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(top), order.end(),
                    [&](int64_t a, int64_t b) { return in_degree[a] > in_degree[b] || (in_degree[a] == in_degree[b] && a < b); });
  std::string hubs;
  for (size_t i = 0; i < top; ++i) hubs += fmt::format("{}{} ({})", i ? "  " : "", name(tok, order[i]), in_degree[order[i]]);
  fmt::print("hubs (in-degree): {}\n", hubs);
  fmt::print("{}\n", bold("first rows"));
  const int64_t* indices = reinterpret_cast<const int64_t*>(r.arrays.at("indices").bytes.data());
  const float* scores = reinterpret_cast<const float*>(r.arrays.at("scores").bytes.data());
  for (int64_t i = 0; i < std::min<int64_t>(n, 5); ++i) {
    std::string nb;
    for (int64_t t = 0; t < std::min<int64_t>(k, 6); ++t)
      nb += fmt::format("{}{} {:.3f}", t ? "  " : "", name(tok, indices[i * k + t]), scores[i * k + t]);
    fmt::print("  {:<16} → {}\n", name(tok, i), nb);
  }
  if (!saved) fmt::print("(use --out DIR to save the graph: knn.indices.npy, knn.scores.npy{})\n", "");
}

int run_knn(const KnnCliOptions& o) {
  const auto& a = vocablens::find_analysis("knn");
  const nlohmann::json given = o.flags->given();
  vocablens::resolve_options(a.decl, given, vocablens::Surface::Cli);  // a wrong flag costs nothing
  if (!o.out.out_dir.empty()) vocablens::ensure_directory(o.out.out_dir);
  vocablens::Model m = vocablens::load_model(o.model);
  std::unique_ptr<vocablens::Tokenizer> tok;
  try {
    tok = vocablens::load_tokenizer_for(o.model, o.tokenizer);
  } catch (const vocablens::Error& e) {
    if (!o.tokenizer.empty()) throw;
    fmt::print(stderr, "vocablens: warning: no tokenizer ({}); tokens are shown as #id\n", e.what());
  }
  if (auto rc = vocablens::cli::check_memory("knn", vocablens::estimate_analysis(a, m, tok.get(), given, vocablens::Surface::Cli),
                                             o.dry_run))
    return *rc;
  vocablens::cli::ProgressBar bar("knn", "rows");
  vocablens::Result r = vocablens::run_analysis(a, m, tok.get(), given, vocablens::Surface::Cli, bar.callback());
  bar.finish();
  vocablens::cli::fill_provenance(r, m);
  vocablens::cli::emit(r, o.out, [&] { print_knn(r, tok.get(), vocablens::cli::use_color(o.out), !o.out.out_dir.empty()); });
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

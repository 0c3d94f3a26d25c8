// `vocablens compare-embeddings MODEL_A MODEL_B`: two embedding spaces compared on their shared tokens
// (Procrustes, linear CKA, k-NN agreement, moved tokens, both spectra; see vocablens/compare_embeddings.hpp).
// The flags come from the analysis's declaration (analyses/compare_embeddings_entry.cpp; MODEL_B is its model_b);
// the command keeps MODEL_A and the two tokenizers, as every command keeps MODEL and --tokenizer.
#include <fmt/color.h>
#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "cli/command.hpp"
#include "cli/declared_flags.hpp"
#include "cli/memory_check.hpp"
#include "cli/output.hpp"
#include "vocablens/analysis_estimate.hpp"
#include "vocablens/analysis_inputs.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/detail/atomic_file.hpp"
#include "vocablens/compare_embeddings.hpp"
#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/tokenizer.hpp"

namespace {

using vocablens::UsageError;

struct CompareEmbeddingsCliOptions {
  std::string model_a;
  std::string tokenizer_a, tokenizer_b;
  std::shared_ptr<vocablens::cli::DeclaredFlags> flags;
  bool dry_run = false;
  vocablens::cli::OutputOptions out;
};

// The table view, read back from the Result (kind "compare_embeddings", vocablens/compare_embeddings.hpp).
void print_compare(const vocablens::Result& r, const vocablens::Tokenizer& tok, bool color) {
  auto bold = [&](const std::string& t) { return color ? fmt::format(fmt::emphasis::bold, "{}", t) : t; };
  const auto& s = r.summary;
  const auto& set = r.settings;
  fmt::print("{}\n", bold(fmt::format("compare-embeddings · {} · A {} [{} × {}] · B {} [{} × {}] · {:.2f} s",
                                      set["matrix"].get<std::string>(), set["model_a"].get<std::string>(),
                                      s["rows_a"].get<int64_t>(), s["dim_a"].get<int64_t>(), set["model_b"].get<std::string>(),
                                      s["rows_b"].get<int64_t>(), s["dim_b"].get<int64_t>(), s["seconds"].get<double>())));
  const int64_t shared = s["shared_tokens"].get<int64_t>();
  fmt::print("shared tokens (equal bytes): {}\n", shared);
  fmt::print("orthogonal Procrustes A→B: relative residual ‖AR−B‖/‖B‖ = {:.4f} · with best scale s = {:.4g}: {:.4f}\n",
             s["procrustes_residual"].get<double>(), s["scale"].get<double>(), s["scaled_residual"].get<double>());
  fmt::print("linear CKA (centred): {:.4f}\n", s["cka"].get<double>());
  fmt::print("k-NN agreement (k = {}, among shared tokens, cosine): mean share {:.2f}%\n", s["k"].get<int64_t>(),
             100 * s["knn_overlap_mean"].get<double>());
  std::string hist;
  const auto& histogram = s["knn_overlap_histogram"];
  for (size_t a = 0; a < histogram.size(); ++a) hist += fmt::format("  {}:{}", a, histogram[a].get<int64_t>());
  fmt::print("  tokens by agreeing neighbours{}\n", hist);
  if (s.contains("effective_rank_a"))
    fmt::print("effective rank A {:.2f} (centred {:.2f}) · B {:.2f} (centred {:.2f})\n", s["effective_rank_a"].get<double>(),
               s["effective_rank_centred_a"].get<double>(), s["effective_rank_b"].get<double>(),
               s["effective_rank_centred_b"].get<double>());
  const double* cosine = vocablens::cli::array_values<double>(r, "aligned_cosine");
  const double* distance = vocablens::cli::array_values<double>(r, "aligned_distance");
  const double* overlap = vocablens::cli::array_values<double>(r, "knn_overlap");
  const int64_t* ids_b = vocablens::cli::array_values<int64_t>(r, "ids_b");
  std::vector<size_t> order(static_cast<size_t>(shared));
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return cosine[x] < cosine[y]; });
  fmt::print("\n{}\n", bold("tokens that moved most after alignment (lowest cos(a·R, b))"));
  fmt::print("{}\n", bold(fmt::format("{:>4} {:<16} {:>9} {:>9} {:>8}", "#", "token", "cos", "dist", "kNN")));
  for (size_t t = 0; t < std::min<size_t>(12, order.size()); ++t) {
    size_t i = order[t];
    fmt::print("{:>4} {:<16} {:>9.4f} {:>9.4f} {:>7.0f}%\n", t + 1, tok.display(ids_b[i]), cosine[i], distance[i],
               100 * overlap[i]);
  }
}

int run_compare_embeddings(const CompareEmbeddingsCliOptions& o) {
  const auto& a = vocablens::find_analysis("compare_embeddings");
  const nlohmann::json given = o.flags->given();
  const nlohmann::json resolved = vocablens::resolve_options(a.decl, given, vocablens::Surface::Cli);
  if (!o.out.out_dir.empty()) vocablens::ensure_directory(o.out.out_dir);
  const std::string model_b = resolved["model_b"].get<std::string>();
  vocablens::Model ma = vocablens::load_model(o.model_a);
  vocablens::Model mb = vocablens::load_model(model_b);
  vocablens::AnalysisInputs in;  // the second model as loaded here, with the tokenizer --tokenizer-b names
  in.models["model_b"] = {&mb, nullptr};
  if (auto rc = vocablens::cli::check_memory(
          "compare-embeddings", vocablens::estimate_analysis(a, ma, nullptr, given, vocablens::Surface::Cli, &in), o.dry_run))
    return *rc;
  auto ta = vocablens::load_tokenizer_for(o.model_a, o.tokenizer_a);
  auto tb = vocablens::load_tokenizer_for(model_b, o.tokenizer_b);
  in.models["model_b"].tok = tb.get();
  vocablens::Result r = vocablens::run_analysis(a, ma, ta.get(), given, vocablens::Surface::Cli, {}, nullptr, &in);
  vocablens::cli::fill_provenance(r, ma);  // the first model, as the Python module (its run is of model A)
  vocablens::cli::emit(r, o.out, [&] { print_compare(r, *tb, vocablens::cli::use_color(o.out)); });
  return 0;
}

vocablens::cli::Register registered_cmd_compare_embeddings{
    "compare-embeddings", vocablens::find_analysis("compare_embeddings").decl.summary,
    [](CLI::App& sub) -> vocablens::cli::Runner {
      auto o = std::make_shared<CompareEmbeddingsCliOptions>();
      sub.add_option("MODEL_A", o->model_a, std::string("First model (aligned onto B): ") + vocablens::cli::kModelHelp)
          ->required();
      o->flags = std::make_shared<vocablens::cli::DeclaredFlags>(vocablens::find_analysis("compare_embeddings").decl);
      o->flags->add_to(sub);
      sub.add_option("--tokenizer-a", o->tokenizer_a, "Tokenizer of MODEL_A (default: found beside it)");
      sub.add_option("--tokenizer-b", o->tokenizer_b, "Tokenizer of MODEL_B (default: found beside it)");
      sub.footer(
          "Tokens are matched by their bytes (special tokens left out). Fewer shared tokens than the dimension is an "
          "error. Neighbours are searched among the shared tokens, by cosine, in each space.");
      sub.add_flag("--dry-run", o->dry_run, vocablens::cli::kDryRunHelp);
      vocablens::cli::add_output_options(sub, o->out);
      return [o] { return run_compare_embeddings(*o); };
    }};

}  // namespace

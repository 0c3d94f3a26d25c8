// `vocablens compare-embeddings MODEL_A MODEL_B`: two embedding spaces compared on their shared tokens
// (Procrustes, linear CKA, k-NN agreement, moved tokens, both spectra; see vocablens/compare_embeddings.hpp).
#include <fmt/color.h>
#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "cli/command.hpp"
#include "cli/memory_check.hpp"
#include "cli/output.hpp"
#include "vocablens/detail/atomic_file.hpp"
#include "vocablens/compare_embeddings.hpp"
#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/spectrum.hpp"
#include "vocablens/tokenizer.hpp"

namespace {

using vocablens::UsageError;

struct CompareEmbeddingsCliOptions {
  std::string model_a, model_b;
  std::string matrix = "W_E";
  std::string tokenizer_a, tokenizer_b;
  int64_t k = 10;
  int64_t moved = 50;
  int64_t spectrum_k = 32;
  bool no_spectra = false;
  bool dry_run = false;
  vocablens::cli::OutputOptions out;
};

void print_compare(const vocablens::CompareEmbeddingsResult& c, const vocablens::Tokenizer& tok, bool color) {
  auto bold = [&](const std::string& t) { return color ? fmt::format(fmt::emphasis::bold, "{}", t) : t; };
  fmt::print("{}\n", bold(fmt::format("compare-embeddings · {} · A {} [{} × {}] · B {} [{} × {}] · {:.2f} s", c.matrix,
                                      c.model_a, c.rows_a, c.dim_a, c.model_b, c.rows_b, c.dim_b, c.seconds)));
  fmt::print("shared tokens (equal bytes): {}\n", c.shared);
  fmt::print("orthogonal Procrustes A→B: relative residual ‖AR−B‖/‖B‖ = {:.4f} · with best scale s = {:.4g}: {:.4f}\n",
             c.procrustes_residual, c.scale, c.scaled_residual);
  fmt::print("linear CKA (centred): {:.4f}\n", c.cka);
  fmt::print("k-NN agreement (k = {}, among shared tokens, cosine): mean share {:.2f}%\n", c.k, 100 * c.knn_overlap_mean);
  std::string hist;
  for (size_t a = 0; a < c.knn_overlap_histogram.size(); ++a) hist += fmt::format("  {}:{}", a, c.knn_overlap_histogram[a]);
  fmt::print("  tokens by agreeing neighbours{}\n", hist);
  if (c.has_spectra)
    fmt::print("effective rank A {:.2f} (centred {:.2f}) · B {:.2f} (centred {:.2f})\n", c.spectrum_a.effective_rank,
               c.spectrum_a.effective_rank_centred, c.spectrum_b.effective_rank, c.spectrum_b.effective_rank_centred);
  std::vector<size_t> order(c.aligned_cosine.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return c.aligned_cosine[x] < c.aligned_cosine[y]; });
  fmt::print("\n{}\n", bold("tokens that moved most after alignment (lowest cos(a·R, b))"));
  fmt::print("{}\n", bold(fmt::format("{:>4} {:<16} {:>9} {:>9} {:>8}", "#", "token", "cos", "dist", "kNN")));
  for (size_t t = 0; t < std::min<size_t>(12, order.size()); ++t) {
    size_t i = order[t];
    fmt::print("{:>4} {:<16} {:>9.4f} {:>9.4f} {:>7.0f}%\n", t + 1, tok.display(c.ids_b[i]), c.aligned_cosine[i],
               c.aligned_distance[i], 100 * c.knn_overlap[i]);
  }
}

int run_compare_embeddings(const CompareEmbeddingsCliOptions& o) {
  if (o.k < 1) throw UsageError("--k must be at least 1");
  if (o.moved < 0) throw UsageError("--moved must be >= 0");
  if (!o.out.out_dir.empty()) vocablens::ensure_directory(o.out.out_dir);
  vocablens::Model ma = vocablens::load_model(o.model_a);
  vocablens::Model mb = vocablens::load_model(o.model_b);
  {
    const auto& cf = ma.config();
    const double d = static_cast<double>(cf.d_model), V = static_cast<double>(cf.vocab_size);
    (void)d; (void)V;
    auto e = vocablens::cli::model_memory(ma);
    e.add("weights of the second model", vocablens::cli::model_memory(mb).items.back().bytes);
    e.add_phase("compare-embeddings: both matrices normalised, one block of similarities", (4 * d * V + 2048 * V) * 4);
    if (auto rc = vocablens::cli::check_memory("compare-embeddings", "the comparison of " + ma.source() + " and " + mb.source(), e,
                                               o.dry_run, "--matrix (one matrix at a time; nothing smaller)"))
      return *rc;
  }
  std::string kind_a, kind_b;
  at::Tensor Ea = vocablens::model_matrix(ma, o.matrix, &kind_a);
  at::Tensor Eb = vocablens::model_matrix(mb, o.matrix, &kind_b);
  if (kind_a != "token" || kind_b != "token")
    throw UsageError(fmt::format("--matrix {}: rows are {}s, not tokens; compare-embeddings matches rows by token "
                                 "(use W_E or W_U)", o.matrix, kind_a != "token" ? kind_a : kind_b));
  auto ta = vocablens::load_tokenizer_for(o.model_a, o.tokenizer_a);
  auto tb = vocablens::load_tokenizer_for(o.model_b, o.tokenizer_b);
  auto pairs = vocablens::shared_tokens(*ta, *tb);
  pairs.erase(std::remove_if(pairs.begin(), pairs.end(),
                             [&](const auto& p) { return p.first >= Ea.size(0) || p.second >= Eb.size(0); }),
              pairs.end());
  vocablens::CompareEmbeddingsOptions co;
  co.k = o.k;
  co.moved = o.moved;
  co.spectra = !o.no_spectra;
  co.spectrum.k = o.spectrum_k;
  auto c = vocablens::compare_embeddings(Ea, Eb, pairs, co);
  c.matrix = o.matrix;
  c.model_a = ma.source();
  c.model_b = mb.source();
  vocablens::Result r = c.to_result(tb.get());
  vocablens::cli::fill_provenance(r, ma);  // the first model, as the Python module (its run is of model A)
  r.provenance["model_a"] = ma.source();
  r.provenance["model_b"] = mb.source();
  vocablens::cli::emit(r, o.out, [&] { print_compare(c, *tb, vocablens::cli::use_color(o.out)); });
  return 0;
}

vocablens::cli::Register reg{
    "compare-embeddings",
    "Two embedding spaces on their shared tokens: Procrustes alignment, linear CKA, k-NN agreement, moved tokens, spectra",
    [](CLI::App& sub) -> vocablens::cli::Runner {
      auto o = std::make_shared<CompareEmbeddingsCliOptions>();
      sub.add_option("MODEL_A", o->model_a, std::string("First model (aligned onto B): ") + vocablens::cli::kModelHelp)->required();
      sub.add_option("MODEL_B", o->model_b, "Second model, or a later checkpoint of the same run")->required();
      sub.add_option("--matrix", o->matrix, "W_E (default) or W_U (rows are tokens; as `spectrum --matrix`)")->type_name("NAME");
      sub.add_option("--k", o->k, "Nearest neighbours per token for the agreement (default 10)");
      sub.add_option("--moved", o->moved, "Tokens listed in the 'moved' table (default 50)");
      sub.add_option("--spectrum-k", o->spectrum_k, "Top singular values of each matrix (default 32; all are kept when d <= 4096)");
      sub.add_flag("--no-spectra", o->no_spectra, "Skip both spectra");
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

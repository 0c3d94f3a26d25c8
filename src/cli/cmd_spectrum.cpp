// `vocablens spectrum MODEL`: singular spectrum, PCA, effective rank, norms, loadings and anisotropy of an
// embedding matrix (see vocablens/spectrum.hpp, vocablens/anisotropy.hpp).
#include <fmt/color.h>
#include <fmt/format.h>

#include <cmath>
#include <memory>
#include <optional>

#include "cli/command.hpp"
#include "cli/memory_check.hpp"
#include "cli/output.hpp"
#include "vocablens/anisotropy.hpp"
#include "vocablens/detail/atomic_file.hpp"
#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/spectrum.hpp"
#include "vocablens/tokenizer.hpp"
#include "vocablens/train.hpp"

namespace {

using vocablens::UsageError;

struct SpectrumCliOptions {
  std::string model;
  std::string matrix = "W_E";
  std::string tokenizer;
  std::string method = "auto";
  int64_t k = 32;
  int64_t ncv = 0;
  int64_t loadings = 10;
  bool left_vectors = false;
  bool no_anisotropy = false;
  std::vector<int64_t> remove_top = {1, 2, 3, 5, 10};
  bool dry_run = false;
  vocablens::cli::OutputOptions out;
};

std::string name_of(const vocablens::Tokenizer* tok, const std::string& kind, int64_t i) {
  if (kind == "token") return tok ? tok->display(i) : "#" + std::to_string(i);
  return kind + " " + std::to_string(i);
}

void print_spectrum(const vocablens::SpectrumResult& s, const vocablens::AnisotropyResult* a,
                    const vocablens::Tokenizer* tok, const std::string& model, bool color) {
  auto bold = [&](const std::string& t) { return color ? fmt::format(fmt::emphasis::bold, "{}", t) : t; };
  fmt::print("{}\n", bold(fmt::format("spectrum · {} [{} × {}] · {} · solver {} ({} operator products) · {:.2f} s",
                                      s.matrix, s.rows, s.cols, model, s.solver, s.operator_products,
                                      s.seconds_gram + s.seconds_solve)));
  fmt::print("{}\n", bold(fmt::format("{:>4} {:>12} {:>9} {:>9}", "j", "σ_j", "energy", "cum")));
  double cum = 0;
  const int64_t show = std::min<int64_t>(s.k, 16);
  for (int64_t j = 0; j < show; ++j) {
    cum += s.energy_ratio[static_cast<size_t>(j)];
    fmt::print("{:>4} {:>12.6g} {:>8.3f}% {:>8.3f}%\n", j + 1, s.singular_values[static_cast<size_t>(j)],
               100 * s.energy_ratio[static_cast<size_t>(j)], 100 * cum);
  }
  if (s.k > show) fmt::print("({} more singular values in --format json / --out)\n", s.k - show);
  fmt::print("\neffective rank {:.2f} (centred {:.2f}) · participation ratio {:.2f} (centred {:.2f}) · of {}\n",
             s.effective_rank, s.effective_rank_centred, s.participation_ratio, s.participation_ratio_centred,
             std::min(s.rows, s.cols));
  if (!s.cumulative_explained_variance.empty()) {
    std::string ev;
    for (int64_t c : {1, 2, 3, 5, 10, 20, 50, 100})
      if (c <= s.cols) ev += fmt::format("  {}: {:.1f}%", c, 100 * s.cumulative_explained_variance[static_cast<size_t>(c - 1)]);
    fmt::print("explained variance (centred PCA, cumulative){}\n", ev);
    std::string need;
    for (double q : {0.5, 0.9, 0.99}) {
      int64_t c = 0;
      while (c < s.cols && s.cumulative_explained_variance[static_cast<size_t>(c)] < q) ++c;
      need += fmt::format("  {:.0f}%: {}", q * 100, std::min(c + 1, s.cols));
    }
    fmt::print("components needed for{}\n", need);
  }
  fmt::print("mean row ‖μ‖ = {:.4g} · total variance {:.4g}\n", s.mean_row_norm, s.total_variance);
  const auto& n = s.norms;
  fmt::print("row norms: mean {:.4g} ± {:.4g} · min {:.4g} ({}) · median {:.4g} · max {:.4g} ({}){}\n", n.mean, n.std,
             n.min, name_of(tok, s.row_kind, n.argmin), n.median, n.max, name_of(tok, s.row_kind, n.argmax),
             n.zero_rows ? fmt::format(" · {} zero rows", n.zero_rows) : "");
  if (a) {
    std::string rem;
    for (size_t t = 0; t < a->removed.size(); ++t)
      rem += fmt::format(" · −{} PC{}: {:.4g}", a->removed[t], a->removed[t] == 1 ? "" : "s", a->mean_cosine_removed[t]);
    fmt::print("anisotropy (mean cosine over pairs i≠j): raw {:.4g} · centred {:.4g}{}\n", a->mean_cosine,
               a->mean_cosine_centred, rem);
    fmt::print("  common mean direction holds {:.1f}% of the second moment; mean cos(row, μ) {:.4f}\n",
               100 * a->mean_vector_share, a->mean_cosine_to_mean);
  }
  if (!s.top_positive.empty()) {
    fmt::print("\n{}\n", bold("rows loading most on each singular direction (projection m_i·v_j)"));
    const int64_t dirs = std::min<int64_t>(s.k, 8);
    const size_t per = std::min<size_t>(6, s.top_positive[0].size());
    for (int64_t j = 0; j < dirs; ++j) {
      std::string pos, neg;
      for (size_t t = 0; t < per; ++t) {
        pos += (t ? "  " : "") + name_of(tok, s.row_kind, s.top_positive[static_cast<size_t>(j)][t].row);
        neg += (t ? "  " : "") + name_of(tok, s.row_kind, s.top_negative[static_cast<size_t>(j)][t].row);
      }
      fmt::print("v{:<3} + {}\n     − {}\n", j + 1, pos, neg);
    }
  }
}

int run_spectrum(const SpectrumCliOptions& o) {
  if (o.k < 1) throw UsageError("--k must be at least 1");
  if (o.loadings < 0) throw UsageError("--loadings must be >= 0");
  vocablens::SpectrumOptions so;
  so.k = o.k;
  so.ncv = o.ncv;
  so.method = vocablens::spectrum_method_from_string(o.method);
  so.loadings = o.loadings;
  so.keep_left_vectors = o.left_vectors;
  if (!o.out.out_dir.empty()) vocablens::ensure_directory(o.out.out_dir);

  // A directory of `train --model embed-lm | skipgram | cbow | glove` has no transformer: its W_E / W_U.
  const bool vectors_only = vocablens::is_embedding_directory(o.model);
  std::optional<vocablens::Model> m;
  std::string kind = "token";
  at::Tensor M;
  if (vectors_only) {
    M = vocablens::load_embedding_matrix(o.model, o.matrix);
  } else {
    m.emplace(vocablens::load_model(o.model));
    M = vocablens::model_matrix(*m, o.matrix, &kind);
  }
  if (m) {
    const auto& cf = (*m).config();
    const double d = static_cast<double>(cf.d_model), V = static_cast<double>(cf.vocab_size);
    (void)d; (void)V;
    auto e = vocablens::cli::model_memory(*m);
    // The basis is at most min(rows, cols) wide: a larger --k is the analysis's own error, not memory.
    e.add_phase("spectrum: the matrix, its centred copy and the Lanczos basis", (2 * static_cast<double>(M.numel()) + static_cast<double>(M.size(0) + M.size(1)) * static_cast<double>(std::min<int64_t>(std::max<int64_t>(o.ncv, 2 * o.k + 1), std::min(M.size(0), M.size(1))))) * 4);
    if (auto rc = vocablens::cli::check_memory("spectrum", "the spectrum of " + o.matrix + " of " + m->source(), e, o.dry_run, "--k (fewer singular values)"))
      return *rc;
  }
  std::unique_ptr<vocablens::Tokenizer> tok;
  if (kind == "token") {
    try {
      tok = vocablens::load_tokenizer_for(o.model, o.tokenizer);
    } catch (const vocablens::Error& e) {
      if (!o.tokenizer.empty()) throw;
      fmt::print(stderr, "vocablens: warning: no tokenizer ({}); tokens are shown as #id\n", e.what());
    }
  }
  auto s = vocablens::matrix_spectrum(M, so, o.matrix, kind);
  vocablens::Result r = s.to_result(tok.get());
  std::unique_ptr<vocablens::AnisotropyResult> a;
  if (!o.no_anisotropy) {
    vocablens::AnisotropyOptions ao;
    ao.remove_top = o.remove_top;
    a = std::make_unique<vocablens::AnisotropyResult>(vocablens::anisotropy(M, ao, o.matrix));
    vocablens::Result ar = a->to_result();
    r.summary["anisotropy"] = ar.summary;
    for (auto& t : ar.tables) {
      t.name = "anisotropy";
      r.tables.push_back(std::move(t));
    }
  }
  r.settings["method"] = o.method;
  if (m) vocablens::cli::fill_provenance(r, *m);
  vocablens::cli::emit(r, o.out, [&] {
    print_spectrum(s, a.get(), tok.get(), m ? m->source() : o.model, vocablens::cli::use_color(o.out));
  });
  return 0;
}

vocablens::cli::Register reg{
    "spectrum",
    "Singular spectrum, PCA, effective rank, norms, loadings and anisotropy of W_E (or W_U, W_pos, ...)",
    [](CLI::App& sub) -> vocablens::cli::Runner {
      auto o = std::make_shared<SpectrumCliOptions>();
      sub.add_option("MODEL", o->model, vocablens::cli::kModelHelp)->required();
      sub.add_option("--matrix", o->matrix,
                     "W_E (default), W_U, W_pos, W_in.L, W_gate.L, W_out.L, or a 2-D .npy file")
          ->type_name("NAME");
      sub.add_option("--k", o->k, "Top singular values / directions (default 32)");
      sub.add_option("--method", o->method,
                     "auto (default: gram), gram (Spectra on the float64 Gram), lanczos (Spectra, matrix-free "
                     "x -> M^T(Mx)), dense")
          ->check(CLI::IsMember({"auto", "gram", "lanczos", "dense"}));
      sub.add_option("--ncv", o->ncv, "Spectra's Lanczos basis size (default min(n, max(2k+1, k+20)))");
      sub.add_option("--loadings", o->loadings, "Rows listed per direction and sign (default 10)");
      sub.add_flag("--left-vectors", o->left_vectors, "Also export U_k [rows, k]");
      sub.add_option("--remove-top", o->remove_top, "Anisotropy after removing these numbers of top PCs (default 1,2,3,5,10)")
          ->delimiter(',');
      sub.add_flag("--no-anisotropy", o->no_anisotropy, "Skip the anisotropy section");
      sub.add_option("--tokenizer", o->tokenizer, "Tokenizer file or directory (default: found beside MODEL)");
      sub.add_flag("--dry-run", o->dry_run, vocablens::cli::kDryRunHelp);
      vocablens::cli::add_output_options(sub, o->out);
      return [o] { return run_spectrum(*o); };
    }};

}  // namespace

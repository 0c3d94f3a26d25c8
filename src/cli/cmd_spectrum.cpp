// `vocablens spectrum MODEL`: singular spectrum, PCA, effective rank, norms, loadings and anisotropy of an
// embedding matrix (see vocablens/spectrum.hpp, vocablens/anisotropy.hpp). The flags come from the analysis's
// declaration (analyses/spectrum_entry.cpp); MODEL may also be a directory of `vocablens train` word vectors.
#include <fmt/color.h>
#include <fmt/format.h>

#include <cmath>
#include <memory>
#include <optional>

#include "cli/command.hpp"
#include "cli/declared_flags.hpp"
#include "cli/memory_check.hpp"
#include "cli/output.hpp"
#include "vocablens/anisotropy.hpp"
#include "vocablens/analysis_estimate.hpp"
#include "vocablens/analysis_inputs.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/detail/atomic_file.hpp"
#include "vocablens/declared_options.hpp"
#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/spectrum.hpp"
#include "vocablens/tokenizer.hpp"
#include "vocablens/train.hpp"

namespace {

using vocablens::UsageError;

struct SpectrumCliOptions {
  std::string model;
  std::string tokenizer;
  std::shared_ptr<vocablens::cli::DeclaredFlags> flags;
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
  const auto& decl = vocablens::find_analysis("spectrum").decl;
  const nlohmann::json resolved = vocablens::resolve_options(decl, o.flags->given(), vocablens::Surface::Cli);
  const vocablens::SpectrumOptions so = vocablens::entries::spectrum_options(resolved);
  const std::string matrix = resolved["matrix"].get<std::string>();
  if (!o.out.out_dir.empty()) vocablens::ensure_directory(o.out.out_dir);

  // A directory of `train --model embed-lm | skipgram | cbow | glove` has no transformer: its W_E / W_U.
  const bool vectors_only = vocablens::is_embedding_directory(o.model);
  std::optional<vocablens::Model> m;
  std::string kind = "token";
  at::Tensor M;
  if (vectors_only) {
    M = vocablens::load_embedding_matrix(o.model, matrix);
  } else {
    m.emplace(vocablens::load_model(o.model));
    M = vocablens::model_matrix(*m, matrix, &kind);
  }
  if (m) {
    vocablens::AnalysisInputs in;  // the matrix already read: its shape, not a second copy
    in.tensors["matrix"] = M;
    if (auto rc = vocablens::cli::check_memory(
            "spectrum",
            vocablens::estimate_analysis(vocablens::find_analysis("spectrum"), *m, nullptr, o.flags->given(),
                                         vocablens::Surface::Cli, &in),
            o.dry_run))
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
  auto s = vocablens::matrix_spectrum(M, so, matrix, kind);
  std::unique_ptr<vocablens::AnisotropyResult> a;
  if (resolved["anisotropy"].get<bool>())
    a = std::make_unique<vocablens::AnisotropyResult>(
        vocablens::anisotropy(M, vocablens::entries::anisotropy_options(resolved), matrix));
  vocablens::Result r = vocablens::entries::spectrum_result(s, a.get(), tok.get(), resolved);
  if (m) vocablens::cli::fill_provenance(r, *m);
  vocablens::cli::emit(r, o.out, [&] {
    print_spectrum(s, a.get(), tok.get(), m ? m->source() : o.model, vocablens::cli::use_color(o.out));
  });
  return 0;
}

vocablens::cli::Register registered_cmd_spectrum{
    "spectrum", vocablens::find_analysis("spectrum").decl.summary,
    [](CLI::App& sub) -> vocablens::cli::Runner {
      auto o = std::make_shared<SpectrumCliOptions>();
      sub.add_option("MODEL", o->model, vocablens::cli::kModelHelp)->required();
      o->flags = std::make_shared<vocablens::cli::DeclaredFlags>(vocablens::find_analysis("spectrum").decl);
      o->flags->add_to(sub);
      sub.add_option("--tokenizer", o->tokenizer, "Tokenizer file or directory (default: found beside MODEL)");
      sub.add_flag("--dry-run", o->dry_run, vocablens::cli::kDryRunHelp);
      vocablens::cli::add_output_options(sub, o->out);
      return [o] { return run_spectrum(*o); };
    }};

}  // namespace

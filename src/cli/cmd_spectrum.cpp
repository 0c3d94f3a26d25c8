// `vocablens spectrum MODEL`: singular spectrum, PCA, effective rank, norms, loadings and anisotropy of an
// embedding matrix (see vocablens/spectrum.hpp, vocablens/anisotropy.hpp). The flags come from the analysis's
// declaration (analyses/spectrum_entry.cpp); MODEL may also be a directory of `vocablens train` word vectors.
#include <fmt/color.h>
#include <fmt/format.h>

#include <cmath>
#include <memory>

#include "cli/command.hpp"
#include "cli/declared_flags.hpp"
#include "cli/memory_check.hpp"
#include "cli/output.hpp"
#include "vocablens/analysis_estimate.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/detail/atomic_file.hpp"
#include "analyses/declared_options.hpp"
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

// The table view, read back from the Result (kind "spectrum", vocablens/spectrum.hpp; its anisotropy as
// summary.anisotropy). A token row is named as the Result names it, any other by its kind and index.
void print_spectrum(const vocablens::Result& r, const std::string& model, bool color) {
  auto bold = [&](const std::string& t) { return color ? fmt::format(fmt::emphasis::bold, "{}", t) : t; };
  const auto& s = r.summary;
  const std::string kind = s["row_kind"].get<std::string>();
  auto name_of = [&](int64_t i, const nlohmann::json& name) {
    return kind == "token" ? name.get<std::string>() : kind + " " + std::to_string(i);
  };
  const int64_t rows = s["shape"][0].get<int64_t>(), cols = s["shape"][1].get<int64_t>();
  const auto& sv = s["singular_values"];
  const auto& energy = s["energy_ratio"];
  const int64_t k = static_cast<int64_t>(sv.size());
  fmt::print("{}\n", bold(fmt::format("spectrum · {} [{} × {}] · {} · solver {} ({} operator products) · {:.2f} s",
                                      s["matrix"].get<std::string>(), rows, cols, model, s["solver"].get<std::string>(),
                                      s["operator_products"].get<int64_t>(),
                                      s["seconds"]["gram"].get<double>() + s["seconds"]["solve"].get<double>())));
  fmt::print("{}\n", bold(fmt::format("{:>4} {:>12} {:>9} {:>9}", "j", "σ_j", "energy", "cum")));
  double cum = 0;
  const int64_t show = std::min<int64_t>(k, 16);
  for (int64_t j = 0; j < show; ++j) {
    const double e = energy[static_cast<size_t>(j)].get<double>();
    cum += e;
    fmt::print("{:>4} {:>12.6g} {:>8.3f}% {:>8.3f}%\n", j + 1, sv[static_cast<size_t>(j)].get<double>(), 100 * e, 100 * cum);
  }
  if (k > show) fmt::print("({} more singular values in --format json / --out)\n", k - show);
  fmt::print("\neffective rank {:.2f} (centred {:.2f}) · participation ratio {:.2f} (centred {:.2f}) · of {}\n",
             s["effective_rank"].get<double>(), s["effective_rank_centred"].get<double>(), s["participation_ratio"].get<double>(),
             s["participation_ratio_centred"].get<double>(), std::min(rows, cols));
  if (s.contains("cumulative_explained_variance")) {
    std::string ev;
    for (const char* c : {"1", "2", "3", "5", "10", "20", "50", "100"})
      if (s["cumulative_explained_variance"].contains(c))
        ev += fmt::format("  {}: {:.1f}%", c, 100 * s["cumulative_explained_variance"][c].get<double>());
    fmt::print("explained variance (centred PCA, cumulative){}\n", ev);
    std::vector<double> cumulative;  // the whole curve: the table's `cumulative` column
    for (const auto& t : r.tables)
      if (t.name == "explained_variance")
        for (const auto& row : t.rows) cumulative.push_back(row[3].get<double>());
    std::string need;
    for (double q : {0.5, 0.9, 0.99}) {
      int64_t c = 0;
      while (c < cols && c < static_cast<int64_t>(cumulative.size()) && cumulative[static_cast<size_t>(c)] < q) ++c;
      need += fmt::format("  {:.0f}%: {}", q * 100, std::min(c + 1, cols));
    }
    fmt::print("components needed for{}\n", need);
  }
  fmt::print("mean row ‖μ‖ = {:.4g} · total variance {:.4g}\n", s["mean_row_norm"].get<double>(),
             s["total_variance"].get<double>());
  const auto& n = s["row_norms"];
  const int64_t zero_rows = n["zero_rows"].get<int64_t>();
  fmt::print("row norms: mean {:.4g} ± {:.4g} · min {:.4g} ({}) · median {:.4g} · max {:.4g} ({}){}\n", n["mean"].get<double>(),
             n["std"].get<double>(), n["min"].get<double>(), name_of(n["argmin"].get<int64_t>(), n["argmin_name"]),
             n["median"].get<double>(), n["max"].get<double>(), name_of(n["argmax"].get<int64_t>(), n["argmax_name"]),
             zero_rows ? fmt::format(" · {} zero rows", zero_rows) : "");
  if (s.contains("anisotropy")) {
    const auto& a = s["anisotropy"];
    std::string rem;
    for (const auto& t : a["after_removing_top_components"]) {
      const int64_t removed = t["removed_components"].get<int64_t>();
      rem += fmt::format(" · −{} PC{}: {:.4g}", removed, removed == 1 ? "" : "s", t["mean_cosine"].get<double>());
    }
    fmt::print("anisotropy (mean cosine over pairs i≠j): raw {:.4g} · centred {:.4g}{}\n", a["mean_cosine"].get<double>(),
               a["mean_cosine_centred"].get<double>(), rem);
    fmt::print("  common mean direction holds {:.1f}% of the second moment; mean cos(row, μ) {:.4f}\n",
               100 * a["mean_vector_share"].get<double>(), a["mean_cosine_to_mean"].get<double>());
  }
  const auto& loadings = s["loadings"];
  if (!loadings.empty()) {
    fmt::print("\n{}\n", bold("rows loading most on each singular direction (projection m_i·v_j)"));
    const int64_t dirs = std::min<int64_t>({k, 8, static_cast<int64_t>(loadings.size())});
    const size_t per = std::min<size_t>(6, loadings[0]["positive"].size());
    for (int64_t j = 0; j < dirs; ++j) {
      const auto& l = loadings[static_cast<size_t>(j)];
      std::string pos, neg;
      for (size_t t = 0; t < per; ++t) {
        pos += (t ? "  " : "") + name_of(l["positive"][t]["row"].get<int64_t>(), l["positive"][t]["name"]);
        neg += (t ? "  " : "") + name_of(l["negative"][t]["row"].get<int64_t>(), l["negative"][t]["name"]);
      }
      fmt::print("v{:<3} + {}\n     − {}\n", j + 1, pos, neg);
    }
  }
}

// A token matrix's tokenizer: the one --tokenizer names, else the one beside MODEL, else none (rows as #id).
std::unique_ptr<vocablens::Tokenizer> row_tokenizer(const std::string& model, const std::string& tokenizer) {
  try {
    return vocablens::load_tokenizer_for(model, tokenizer);
  } catch (const vocablens::Error& e) {
    if (!tokenizer.empty()) throw;
    fmt::print(stderr, "vocablens: warning: no tokenizer ({}); tokens are shown as #id\n", e.what());
  }
  return nullptr;
}

int run_spectrum(const SpectrumCliOptions& o) {
  const auto& a = vocablens::find_analysis("spectrum");
  const nlohmann::json given = o.flags->given();
  const nlohmann::json resolved = vocablens::resolve_options(a.decl, given, vocablens::Surface::Cli);
  const std::string matrix = resolved["matrix"].get<std::string>();
  if (!o.out.out_dir.empty()) vocablens::ensure_directory(o.out.out_dir);

  vocablens::Result r;
  std::string source = o.model;
  // A directory of `train --model embed-lm | skipgram | cbow | glove` has no transformer, so no Model to run the
  // analysis on: the entry's computation over its W_E / W_U, whose rows are tokens.
  if (vocablens::is_embedding_directory(o.model)) {
    const at::Tensor M = vocablens::load_embedding_matrix(o.model, matrix);
    auto tok = row_tokenizer(o.model, o.tokenizer);
    r = vocablens::entries::spectrum_of_matrix(M, matrix, "token", tok.get(), resolved);
  } else {
    vocablens::Model m = vocablens::load_model(o.model);
    source = m.source();
    if (auto rc = vocablens::cli::check_memory(
            "spectrum", vocablens::estimate_analysis(a, m, nullptr, given, vocablens::Surface::Cli), o.dry_run))
      return *rc;
    std::unique_ptr<vocablens::Tokenizer> tok;
    if (vocablens::token_matrix(matrix)) tok = row_tokenizer(o.model, o.tokenizer);
    r = vocablens::run_analysis(a, m, tok.get(), given, vocablens::Surface::Cli);
    vocablens::cli::fill_provenance(r, m);
  }
  vocablens::cli::emit(r, o.out, [&] { print_spectrum(r, source, vocablens::cli::use_color(o.out)); });
  return 0;
}

vocablens::cli::Register registered_cmd_spectrum{
    "spectrum", vocablens::find_analysis("spectrum").decl.summary, [](CLI::App& sub) -> vocablens::cli::Runner {
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

// `vocablens positions MODEL`: spectrum, position×position cosines and periodic principal components of the
// model's positional encoding — learned W_pos, or sinusoidal / rotary computed analytically (see
// vocablens/positions.hpp).
#include <fmt/color.h>
#include <fmt/format.h>

#include <cmath>
#include <memory>

#include "cli/command.hpp"
#include "cli/declared_flags.hpp"
#include "cli/memory_check.hpp"
#include "cli/output.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/detail/atomic_file.hpp"
#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/positions.hpp"

namespace {

using vocablens::UsageError;

// The analysis's options come from its declaration (analyses/positions_entry.cpp); these are the command's own.
struct PositionsCliOptions {
  std::string model;
  std::shared_ptr<vocablens::cli::DeclaredFlags> flags;
  bool dry_run = false;
  vocablens::cli::OutputOptions out;
};

// A coarse picture of the cosine matrix (the Result's `cosine` array, [n, n]): `cells` × `cells` blocks, each the
// mean of its entries.
void print_heatmap(const vocablens::Result& r, int64_t n, int64_t cells) {
  const float* cosine = vocablens::cli::array_values<float>(r, "cosine");
  cells = std::min(cells, n);
  static const char* shades[] = {" ", "·", ":", "-", "=", "+", "*", "#", "%", "@"};
  fmt::print("cosine(p, q), {}×{} blocks of ~{} positions (' ' ≤ 0 … '@' ≈ 1):\n", cells, cells, (n + cells - 1) / cells);
  for (int64_t a = 0; a < cells; ++a) {
    std::string line = "  ";
    for (int64_t b = 0; b < cells; ++b) {
      int64_t p0 = a * n / cells, p1 = (a + 1) * n / cells, q0 = b * n / cells, q1 = (b + 1) * n / cells;
      double s = 0;
      for (int64_t p = p0; p < p1; ++p)
        for (int64_t q = q0; q < q1; ++q) s += cosine[p * n + q];
      s /= static_cast<double>((p1 - p0) * (q1 - q0));
      int idx = s <= 0 ? 0 : std::min(9, static_cast<int>(std::ceil(s * 9)));
      line += shades[idx];
      line += shades[idx];
    }
    fmt::print("{}\n", line);
  }
}

// The table view, read back from the Result (kind "positions", vocablens/positions.hpp).
void print_positions(const vocablens::Result& r, const std::string& model, bool color) {
  auto bold = [&](const std::string& t) { return color ? fmt::format(fmt::emphasis::bold, "{}", t) : t; };
  const auto& s = r.summary;
  const int64_t n = s["n_positions"].get<int64_t>();
  const double base = s.value("base", 0.0);
  const std::string scaling = s.value("rope_scaling", std::string());
  fmt::print("{}\n", bold(fmt::format(
                         "positions · {} · {} encoding{} · {} positions × {} dims", model, s["source"].get<std::string>(),
                         base > 0 ? fmt::format(" (base {:g}{})", base, scaling.empty() ? "" : ", " + scaling + " scaling") : "",
                         n, s["dim"].get<int64_t>())));
  std::string sv;
  const auto& singular = s["singular_values"];
  for (size_t j = 0; j < std::min<size_t>(8, singular.size()); ++j) sv += fmt::format(" {:.4g}", singular[j].get<double>());
  fmt::print("singular values:{}\n", sv);
  std::string ev;
  for (const char* c : {"1", "2", "3", "4", "5", "10", "20"})
    if (s["cumulative_explained_variance"].contains(c))
      ev += fmt::format("  {}: {:.1f}%", c, 100 * s["cumulative_explained_variance"][c].get<double>());
  fmt::print("explained variance (centred, cumulative){}\n", ev);
  fmt::print("effective rank {:.2f} (centred {:.2f})\n", s["effective_rank"].get<double>(),
             s["effective_rank_centred"].get<double>());
  fmt::print("\n{}\n", bold(fmt::format("{:>4} {:>9} {:>10} {:>8}", "PC", "variance", "frequency", "power")));
  for (const auto& c : s["components"])
    fmt::print("{:>4} {:>8.2f}% {:>10} {:>7.1f}%\n", c["component"].get<int64_t>() + 1, 100 * c["variance_ratio"].get<double>(),
               c["dominant_frequency"].get<int64_t>(), 100 * c["power_fraction"].get<double>());
  fmt::print(
      "(frequency: cycles over the {} positions of the component's score series; power: its share of the "
      "series' non-constant power — a helix shows as pairs of components at the same low frequency)\n",
      n);
  const double* by_offset = vocablens::cli::array_values<double>(r, "cosine_by_offset");
  std::string offs;
  for (int64_t dl : {1, 2, 4, 8, 16, 32, 64, 128, 256, 512})
    if (dl < n) offs += fmt::format("  Δ{}: {:.3f}", dl, by_offset[dl]);
  fmt::print("\nmean cos(p, p+Δ):{}\n", offs);
  fmt::print("largest departure from a function of |p−q| alone (Toeplitz): {:.3g}\n", s["toeplitz_deviation"].get<double>());
  print_heatmap(r, n, 24);
}

// The segment embeddings' part of the Result (summary "segments", arrays segment_*), when the model has them.
void print_segments(const vocablens::Result& r) {
  if (!r.summary.contains("segments")) return;
  const auto& s = r.summary["segments"];
  const int64_t n_segments = s["n_segments"].get<int64_t>(), directions = s["token_directions"].get<int64_t>();
  fmt::print("\nsegment embeddings W_seg [{} × {}] (summed with token and position embeddings)\n", n_segments,
             s["dim"].get<int64_t>());
  std::string norms;
  for (size_t i = 0; i < s["norms"].size(); ++i) norms += fmt::format("  W_seg[{}]: {:.4g}", i, s["norms"][i].get<double>());
  fmt::print("norms:{}   (mean ‖W_E row‖ {:.4g}, mean ‖position‖ {:.4g})\n", norms, s["mean_token_norm"].get<double>(),
             s["mean_position_norm"].get<double>());
  if (n_segments >= 2)
    fmt::print(
        "cos(W_seg[0], W_seg[1]) {:.3f} · ‖Δ = W_seg[1] − W_seg[0]‖ {:.4g}, {:.1f}% of ‖Δ‖² in the span of W_E's top {} "
        "principal directions\n",
        vocablens::cli::array_values<double>(r, "segment_cosine")[1], s["difference_norm"].get<double>(),
        100 * s["difference_in_token_subspace"].get<double>(), directions);
  const auto& pcs = r.arrays.at("segment_cos_to_token_pcs");
  const double* cos_to_pcs = vocablens::cli::array_values<double>(r, "segment_cos_to_token_pcs");
  for (int64_t i = 0; i < pcs.shape[0]; ++i) {
    std::string c;
    for (int64_t k = 0; k < std::min<int64_t>(directions, 8); ++k) c += fmt::format(" {:.2f}", cos_to_pcs[i * directions + k]);
    fmt::print("  |cos| with W_E PC1..{} of {:<18}{}\n", std::min<int64_t>(directions, 8),
               i == n_segments ? std::string("Δ") : fmt::format("W_seg[{}]", i), c);
  }
  const auto& share = s["share_of_embedding_variance"];
  fmt::print(
      "share of the embedding residual's variance (independent uniform token, position, segment): token {:.2f}% · "
      "position {:.2f}% · segment {:.3f}%\n",
      100 * share["token"].get<double>(), 100 * share["position"].get<double>(), 100 * share["segment"].get<double>());
}

int run_positions(const PositionsCliOptions& o) {
  const auto& a = vocablens::find_analysis("positions");
  const nlohmann::json given = o.flags->given();
  vocablens::resolve_options(a.decl, given, vocablens::Surface::Cli);  // a wrong flag costs nothing
  if (!o.out.out_dir.empty()) vocablens::ensure_directory(o.out.out_dir);
  vocablens::Model m = vocablens::load_model(o.model);
  if (auto rc = vocablens::cli::check_memory(
          "positions", vocablens::estimate_analysis(a, m, nullptr, given, vocablens::Surface::Cli), o.dry_run))
    return *rc;
  vocablens::Result r = vocablens::run_analysis(a, m, nullptr, given, vocablens::Surface::Cli);
  vocablens::cli::fill_provenance(r, m);
  vocablens::cli::emit(r, o.out, [&] {
    print_positions(r, m.source(), vocablens::cli::use_color(o.out));
    print_segments(r);
  });
  return 0;
}

vocablens::cli::Register registered_cmd_positions{
    "positions", vocablens::find_analysis("positions").decl.summary, [](CLI::App& sub) -> vocablens::cli::Runner {
      auto o = std::make_shared<PositionsCliOptions>();
      o->flags = std::make_shared<vocablens::cli::DeclaredFlags>(vocablens::find_analysis("positions").decl);
      sub.add_option("MODEL", o->model, vocablens::cli::kModelHelp)->required();
      o->flags->add_to(sub);
      sub.add_flag("--dry-run", o->dry_run, vocablens::cli::kDryRunHelp);
      vocablens::cli::add_output_options(sub, o->out);
      return [o] { return run_positions(*o); };
    }};

}  // namespace

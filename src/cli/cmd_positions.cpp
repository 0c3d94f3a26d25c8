// `vocablens positions MODEL`: spectrum, position×position cosines and periodic principal components of the
// model's positional encoding — learned W_pos, or sinusoidal / rotary computed analytically (see
// vocablens/positions.hpp).
#include <fmt/color.h>
#include <fmt/format.h>

#include <cmath>
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

// A coarse picture of the cosine matrix: `cells` × `cells` blocks, each the mean of its entries.
void print_heatmap(const vocablens::PositionResult& r, int64_t cells) {
  const int64_t n = r.n_positions;
  cells = std::min(cells, n);
  static const char* shades[] = {" ", "·", ":", "-", "=", "+", "*", "#", "%", "@"};
  fmt::print("cosine(p, q), {}×{} blocks of ~{} positions (' ' ≤ 0 … '@' ≈ 1):\n", cells, cells, (n + cells - 1) / cells);
  for (int64_t a = 0; a < cells; ++a) {
    std::string line = "  ";
    for (int64_t b = 0; b < cells; ++b) {
      int64_t p0 = a * n / cells, p1 = (a + 1) * n / cells, q0 = b * n / cells, q1 = (b + 1) * n / cells;
      double s = 0;
      for (int64_t p = p0; p < p1; ++p)
        for (int64_t q = q0; q < q1; ++q) s += r.cosine[static_cast<size_t>(p * n + q)];
      s /= static_cast<double>((p1 - p0) * (q1 - q0));
      int idx = s <= 0 ? 0 : std::min(9, static_cast<int>(std::ceil(s * 9)));
      line += shades[idx];
      line += shades[idx];
    }
    fmt::print("{}\n", line);
  }
}

void print_positions(const vocablens::PositionResult& r, const std::string& model, bool color) {
  auto bold = [&](const std::string& t) { return color ? fmt::format(fmt::emphasis::bold, "{}", t) : t; };
  fmt::print("{}\n", bold(fmt::format("positions · {} · {} encoding{} · {} positions × {} dims", model, r.source,
                                      r.base > 0 ? fmt::format(" (base {:g}{})", r.base, r.scaling.empty() ? "" : ", " + r.scaling + " scaling") : "",
                                      r.n_positions, r.dim)));
  std::string sv;
  for (size_t j = 0; j < std::min<size_t>(8, r.spectrum.singular_values.size()); ++j)
    sv += fmt::format(" {:.4g}", r.spectrum.singular_values[j]);
  fmt::print("singular values:{}\n", sv);
  const auto& cev = r.spectrum.cumulative_explained_variance;
  std::string ev;
  for (int64_t c : {1, 2, 3, 4, 5, 10, 20})
    if (c <= static_cast<int64_t>(cev.size())) ev += fmt::format("  {}: {:.1f}%", c, 100 * cev[static_cast<size_t>(c - 1)]);
  fmt::print("explained variance (centred, cumulative){}\n", ev);
  fmt::print("effective rank {:.2f} (centred {:.2f})\n", r.spectrum.effective_rank, r.spectrum.effective_rank_centred);
  fmt::print("\n{}\n", bold(fmt::format("{:>4} {:>9} {:>10} {:>8}", "PC", "variance", "frequency", "power")));
  for (const auto& c : r.components)
    fmt::print("{:>4} {:>8.2f}% {:>10} {:>7.1f}%\n", c.index + 1, 100 * c.variance_ratio, c.dominant_frequency, 100 * c.power_fraction);
  fmt::print("(frequency: cycles over the {} positions of the component's score series; power: its share of the "
             "series' non-constant power — a helix shows as pairs of components at the same low frequency)\n",
             r.n_positions);
  std::string offs;
  for (int64_t dl : {1, 2, 4, 8, 16, 32, 64, 128, 256, 512})
    if (dl < r.n_positions) offs += fmt::format("  Δ{}: {:.3f}", dl, r.cosine_by_offset[static_cast<size_t>(dl)]);
  fmt::print("\nmean cos(p, p+Δ):{}\n", offs);
  fmt::print("largest departure from a function of |p−q| alone (Toeplitz): {:.3g}\n", r.toeplitz_deviation);
  print_heatmap(r, 24);
}

void print_segments(const vocablens::SegmentResult& s) {
  fmt::print("\nsegment embeddings W_seg [{} × {}] (summed with token and position embeddings)\n", s.n_segments, s.dim);
  std::string norms;
  for (size_t i = 0; i < s.norms.size(); ++i) norms += fmt::format("  W_seg[{}]: {:.4g}", i, s.norms[i]);
  fmt::print("norms:{}   (mean ‖W_E row‖ {:.4g}, mean ‖position‖ {:.4g})\n", norms, s.mean_token_norm, s.mean_position_norm);
  if (s.n_segments >= 2)
    fmt::print("cos(W_seg[0], W_seg[1]) {:.3f} · ‖Δ = W_seg[1] − W_seg[0]‖ {:.4g}, {:.1f}% of ‖Δ‖² in the span of W_E's top {} "
               "principal directions\n",
               s.cosine[1], s.difference_norm, 100 * s.difference_in_token_subspace, s.directions);
  const int64_t rows = static_cast<int64_t>(s.cos_to_token_pcs.size()) / std::max<int64_t>(1, s.directions);
  for (int64_t i = 0; i < rows; ++i) {
    std::string c;
    for (int64_t k = 0; k < std::min<int64_t>(s.directions, 8); ++k)
      c += fmt::format(" {:.2f}", s.cos_to_token_pcs[static_cast<size_t>(i * s.directions + k)]);
    fmt::print("  |cos| with W_E PC1..{} of {:<18}{}\n", std::min<int64_t>(s.directions, 8),
               i == s.n_segments ? std::string("Δ") : fmt::format("W_seg[{}]", i), c);
  }
  fmt::print("share of the embedding residual's variance (independent uniform token, position, segment): token {:.2f}% · "
             "position {:.2f}% · segment {:.3f}%\n",
             100 * s.share_token, 100 * s.share_position, 100 * s.share_segment);
}

int run_positions(const PositionsCliOptions& o) {
  const auto& decl = vocablens::find_analysis("positions").decl;
  const nlohmann::json resolved = vocablens::resolve_options(decl, o.flags->given(), vocablens::Surface::Cli);
  const vocablens::PositionOptions po = vocablens::entries::position_options(resolved);
  if (!o.out.out_dir.empty()) vocablens::ensure_directory(o.out.out_dir);
  vocablens::Model m = vocablens::load_model(o.model);
  if (auto rc = vocablens::cli::check_memory(
          "positions", vocablens::estimate_analysis(vocablens::find_analysis("positions"), m, nullptr, o.flags->given(),
                                                    vocablens::Surface::Cli),
          o.dry_run))
    return *rc;
  auto r = vocablens::position_structure(m, po);
  vocablens::Result res = r.to_result();
  std::optional<vocablens::SegmentResult> seg;  // segment embeddings, beside the positions
  if (m.W_seg().defined()) {
    seg = vocablens::segment_structure(m, 8);
    seg->add_to(res);
  }
  vocablens::cli::fill_provenance(res, m);
  vocablens::cli::emit(res, o.out, [&] {
    print_positions(r, m.source(), vocablens::cli::use_color(o.out));
    if (seg) print_segments(*seg);
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

// vocablens/positions.hpp — the geometry of positional encodings: learned W_pos, sinusoidal, rotary.
//
// For a position matrix P [n_positions, dim] (one row per position):
//  - its singular spectrum and PCA (vocablens::matrix_spectrum, rows = positions);
//  - the position × position cosine matrix (float64 from the float32 rows, stored as float32) and its
//    mean by offset Δ = |p − q| (exactly Toeplitz for sinusoidal and rotary encodings; learned ones only
//    approximately);
//  - periodicity of the top principal components: the scores of the centred rows on each component as
//    a series over positions, its dominant DFT frequency (cycles over the n positions, DC excluded) and
//    the share of the series' power at that frequency. GPT-2's learned positions lie close to a
//    low-dimensional helix: the top components are near-sinusoids of low frequency.
//
// Analytic encodings:
//  - sinusoidal (Vaswani et al.; as the runner adds them): P[p, 2i] = sin(p ω_i), P[p, 2i+1] = cos(p ω_i),
//    ω_i = base^(−2i/d). cos(P_p, P_q) = mean_i cos((p − q) ω_i) when d is even.
//  - rotary (RoPE): there is no added vector; what positions do to attention is the rotation R_p of each
//    (q, k) feature pair by p θ_i, θ_i = theta^(−2i/d_head). For an isotropic query/key x,
//    E[cos(R_p x, R_q x)] = mean_i cos((p − q) θ_i), which is the Gram of the unit rows
//    P[p] = [cos(p θ_0..), sin(p θ_0..)] / sqrt(d_head/2). These rows are analysed as the "positions".
//    (The pairing convention — interleaved or rotate_half — permutes features and changes nothing here.)
//
//   auto r = vocablens::position_structure(model, {});   // learned / sinusoidal / rotary, as configured
//   r.components[0].dominant_frequency;                   // cycles over the context
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "vocablens/result.hpp"
#include "vocablens/spectrum.hpp"

namespace vocablens {

class Model;

enum class PositionSource { Auto, Learned, Sinusoidal, Rotary };
const char* to_string(PositionSource s);                       ///< "auto", "learned", "sinusoidal", "rotary"
PositionSource position_source_from_string(const std::string& s);  ///< throws UsageError

struct PositionOptions {
  PositionSource source = PositionSource::Auto;   ///< Auto: what the model uses
  int64_t max_positions = 2048;   ///< analyse positions 0 .. min(n_ctx, max_positions) − 1 (0 = all)
  int64_t k = 16;                 ///< singular values reported
  int64_t components = 8;         ///< principal components analysed for periodicity
  double sinusoidal_base = 10000.0;
};

/// One principal component of the centred position rows, seen as a series over positions.
struct PositionComponent {
  int64_t index = 0;
  double variance_ratio = 0;      ///< its share of the total variance
  int64_t dominant_frequency = 0; ///< cycles over the analysed positions (1 .. n/2)
  double power_fraction = 0;      ///< share of the series' non-DC power at that frequency
};

struct PositionResult {
  std::string source;             ///< "learned", "sinusoidal", "rotary"
  int64_t n_positions = 0, dim = 0;
  double base = 0;                ///< sinusoidal base or RoPE theta (0 for learned)
  SpectrumResult spectrum;        ///< of P (rows = positions)
  std::vector<float> cosine;      ///< [n, n]
  std::vector<double> cosine_by_offset;   ///< [n] mean of cos(p, p + Δ) over p
  double toeplitz_deviation = 0;  ///< max |cos(p, q) − cosine_by_offset[|p − q|]|
  std::vector<PositionComponent> components;
  std::vector<double> pc_scores;  ///< [n, components.size()] centred rows on the top components
  std::vector<double> explained_variance_ratio;  ///< [dim] PCA of the centred rows

  /// kind "positions": summary (source, sizes, top singular values, explained variance, components,
  /// Toeplitz deviation, cosine at a few offsets); arrays cosine [n, n] (float32), cosine_by_offset,
  /// singular_values, explained_variance_ratio, pc_scores; tables "components", "offsets".
  Result to_result() const;
};

/// Sinusoidal position table [n, d] (float32), identical to what the runner adds.
at::Tensor sinusoidal_positions(int64_t n, int64_t d, double base = 10000.0);

/// Rotary "position rows" [n, d_head] (float32): [cos(p θ_i) | sin(p θ_i)] / sqrt(d_head/2), θ_i =
/// theta^(−2i/d_head). d_head must be even.
at::Tensor rotary_position_features(int64_t n, int64_t d_head, double theta = 10000.0);

/// Analyses an explicit position matrix P [n, dim].
PositionResult position_structure(const at::Tensor& P, const std::string& source, const PositionOptions& opts = {},
                                  double base = 0.0);

/// The model's positions: W_pos when learned; otherwise (or with opts.source) the analytic encoding for
/// the model's d_model (sinusoidal) or d_head and rope_theta (rotary), over min(n_ctx, max_positions)
/// positions. Throws UsageError for ALiBi / no positions unless a source is given, or for "learned"
/// when the model has no W_pos.
PositionResult position_structure(const Model& m, const PositionOptions& opts = {});

}  // namespace vocablens

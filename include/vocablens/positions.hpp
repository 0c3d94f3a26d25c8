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
#include "vocablens/tensor_fwd.hpp"

#include <cstdint>
#include <string>
#include <vector>

#include "vocablens/result.hpp"
#include "vocablens/spectrum.hpp"

namespace vocablens {

class Model;

enum class PositionSource { Auto, Learned, Sinusoidal, Rotary };
const char* to_string(PositionSource s);                           ///< "auto", "learned", "sinusoidal", "rotary"
PositionSource position_source_from_string(const std::string& s);  ///< throws UsageError

struct PositionOptions {
  PositionSource source = PositionSource::Auto;  ///< Auto: what the model uses
  int64_t max_positions = 2048;                  ///< analyse positions 0 .. min(n_ctx, max_positions) − 1 (0 = all)
  int64_t k = 16;                                ///< singular values reported
  int64_t components = 8;                        ///< principal components analysed for periodicity
  double sinusoidal_base = 10000.0;
};

/// One principal component of the centred position rows, seen as a series over positions.
struct PositionComponent {
  int64_t index = 0;
  double variance_ratio = 0;       ///< its share of the total variance
  int64_t dominant_frequency = 0;  ///< cycles over the analysed positions (1 .. n/2)
  double power_fraction = 0;       ///< share of the series' non-DC power at that frequency
};

struct PositionResult {
  std::string source;  ///< "learned", "sinusoidal", "rotary"
  int64_t n_positions = 0, dim = 0;
  double base = 0;                       ///< sinusoidal base or RoPE theta (0 for learned)
  std::string scaling;                   ///< rotary rope_scaling applied ("linear x4", "llama3 x8"; empty: none)
  SpectrumResult spectrum;               ///< of P (rows = positions)
  std::vector<float> cosine;             ///< [n, n]
  std::vector<double> cosine_by_offset;  ///< [n] mean of cos(p, p + Δ) over p
  double toeplitz_deviation = 0;         ///< max |cos(p, q) − cosine_by_offset[|p − q|]|
  std::vector<PositionComponent> components;
  std::vector<double> pc_scores;                 ///< [n, components.size()] centred rows on the top components
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
/// The same rows [n, 2h] for explicit frequencies θ [h] (e.g. vocablens::rotary_inv_freq(cfg): a model's
/// partial rotary and rope_scaling).
at::Tensor rotary_position_features(int64_t n, const at::Tensor& inv_freq);

/// Analyses an explicit position matrix P [n, dim].
PositionResult position_structure(const at::Tensor& P, const std::string& source, const PositionOptions& opts = {},
                                  double base = 0.0);

/// The model's positions: W_pos when learned; otherwise (or with opts.source) the analytic encoding for
/// the model's d_model (sinusoidal) or its rotary frequencies (vocablens::rotary_inv_freq: rope_theta,
/// rotary_dim of a partial rotary, rope_scaling), over min(n_ctx, max_positions)
/// positions. Throws UsageError for ALiBi / no positions unless a source is given, or for "learned"
/// when the model has no W_pos.
PositionResult position_structure(const Model& m, const PositionOptions& opts = {});

// ---- segment (token-type) embeddings, beside the positions ---------------------------------------------------
//
// For a model with W_seg [S, d] (`vocablens train --model gpt --segments`): the segment vectors' norms next
// to the mean row norms of W_E and of the position vectors; the S × S cosines; |cos| of each segment vector
// and of the difference Δ = W_seg[1] − W_seg[0] with W_E's top principal directions (eigenvectors of the
// centred token covariance), and the share of ‖Δ‖² inside their span; and how much of the embedding-layer
// residual x0 = W_E[t] + P[p] + W_seg[s] each part explains: for t, p, s drawn independently and uniformly
// (tokens over the vocabulary, positions over the context, segments over S), the total variance
// E‖x0 − E x0‖² is the sum of the three parts' variances, and each share is its part over the total.
// (Sinusoidal positions count with their table; rotary, ALiBi and no positions add nothing to x0.)
//
//   auto s = vocablens::segment_structure(model);          // UsageError when the model has no W_seg
//   s.share_segment;                                        // e.g. 0.004: 0.4% of x0's variance

struct SegmentResult {
  int64_t n_segments = 0, dim = 0, directions = 0;
  std::vector<double> norms;             ///< [S] ‖W_seg[s]‖
  double mean_token_norm = 0;            ///< mean ‖W_E[t]‖
  double mean_position_norm = 0;         ///< mean ‖P[p]‖ (0 without additive positions)
  std::vector<double> cosine;            ///< [S, S]
  double difference_norm = 0;            ///< ‖W_seg[1] − W_seg[0]‖ (0 when S = 1)
  std::vector<double> cos_to_token_pcs;  ///< [S + 1, directions]: |cos| of W_seg[s] (rows 0..S−1) and Δ (row S) with PC_j of W_E
  double difference_in_token_subspace = 0;  ///< ‖proj of Δ on the top `directions` PCs‖² / ‖Δ‖²
  double variance_token = 0, variance_position = 0, variance_segment = 0;
  double share_token = 0, share_position = 0, share_segment = 0;

  /// Adds to a positions result: summary["segments"], arrays "segment_cosine", "segment_cos_to_token_pcs",
  /// table "segments".
  void add_to(Result& r) const;
};

/// Throws UsageError when the model has no segment embeddings.
SegmentResult segment_structure(const Model& m, int64_t directions = 8);

}  // namespace vocablens

// Positional structure: spectrum, position×position cosines and periodicity of W_pos / sinusoidal / RoPE.
// See include/vocablens/positions.hpp.
#include "vocablens/positions.hpp"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "vocablens/error.hpp"
#include "vocablens/linalg/gram.hpp"
#include "vocablens/model.hpp"
#include "util/parallel.hpp"

namespace vocablens {

const char* to_string(PositionSource s) {
  switch (s) {
    case PositionSource::Auto: return "auto";
    case PositionSource::Learned: return "learned";
    case PositionSource::Sinusoidal: return "sinusoidal";
    case PositionSource::Rotary: return "rotary";
  }
  return "?";
}

PositionSource position_source_from_string(const std::string& s) {
  if (s == "auto") return PositionSource::Auto;
  if (s == "learned") return PositionSource::Learned;
  if (s == "sinusoidal") return PositionSource::Sinusoidal;
  if (s == "rotary" || s == "rope") return PositionSource::Rotary;
  throw UsageError("unknown position source '" + s + "' (expected auto, learned, sinusoidal or rotary)");
}

at::Tensor sinusoidal_positions(int64_t n, int64_t d, double base) {
  if (n < 1 || d < 1) throw UsageError("sinusoidal_positions: n and d must be positive");
  at::Tensor pe = at::zeros({n, d}, at::TensorOptions().dtype(at::kDouble));
  auto a = pe.accessor<double, 2>();
  for (int64_t p = 0; p < n; ++p)
    for (int64_t i = 0; i < d; i += 2) {
      double ang = static_cast<double>(p) * std::pow(base, -static_cast<double>(i) / static_cast<double>(d));
      a[p][i] = std::sin(ang);
      if (i + 1 < d) a[p][i + 1] = std::cos(ang);
    }
  return pe.to(at::kFloat);
}

at::Tensor rotary_position_features(int64_t n, int64_t d_head, double theta) {
  if (n < 1 || d_head < 2 || d_head % 2 != 0) throw UsageError("rotary_position_features: need n >= 1 and an even d_head");
  auto i = at::arange(0, d_head, 2, at::TensorOptions().dtype(at::kDouble));
  return rotary_position_features(n, at::pow(theta, -i / static_cast<double>(d_head)));
}

at::Tensor rotary_position_features(int64_t n, const at::Tensor& inv_freq) {
  if (n < 1 || !inv_freq.defined() || inv_freq.dim() != 1 || inv_freq.numel() < 1)
    throw UsageError("rotary_position_features: need n >= 1 and a non-empty 1-D inv_freq");
  const at::Tensor th = inv_freq.to(at::kDouble).contiguous();
  const int64_t h = th.numel();
  const double scale = 1.0 / std::sqrt(static_cast<double>(h));
  at::Tensor P = at::empty({n, 2 * h}, at::TensorOptions().dtype(at::kDouble));
  auto a = P.accessor<double, 2>();
  const double* t = th.data_ptr<double>();
  for (int64_t p = 0; p < n; ++p)
    for (int64_t i = 0; i < h; ++i) {
      const double ang = static_cast<double>(p) * t[i];
      a[p][i] = std::cos(ang) * scale;
      a[p][h + i] = std::sin(ang) * scale;
    }
  return P.to(at::kFloat);
}

namespace {
// The analysis holds an [n, n] float cosine matrix (and an [n, n] SVD workspace): 2^15 positions are 4 GB.
constexpr int64_t kMaxPositions = int64_t{1} << 15;
void check_position_count(int64_t n) {
  if (n > kMaxPositions)
    throw UsageError(
        fmt::format("{} positions would need an {} x {} cosine matrix ({:.0f} GB); analyse at most {} "
                    "(--max-positions)",
                    n, n, n, 4.0 * static_cast<double>(n) * static_cast<double>(n) / 1e9, kMaxPositions));
}
}  // namespace

PositionResult position_structure(const at::Tensor& P0, const std::string& source, const PositionOptions& opts, double base) {
  if (!P0.defined() || P0.dim() != 2 || P0.size(0) < 2 || P0.size(1) < 1)
    throw UsageError("position_structure: expected a position matrix [n >= 2, dim]");
  at::Tensor P = P0.to(at::kFloat).contiguous();
  if (opts.max_positions > 0 && P.size(0) > opts.max_positions) P = P.narrow(0, 0, opts.max_positions).contiguous();
  check_position_count(P.size(0));
  PositionResult r;
  r.source = source;
  r.base = base;
  r.n_positions = P.size(0);
  r.dim = P.size(1);
  const int64_t n = r.n_positions, d = r.dim;

  SpectrumOptions so;
  so.k = std::min<int64_t>(std::max<int64_t>(opts.k, 1), std::min(n, d));
  so.loadings = 5;
  r.spectrum = matrix_spectrum(P, so, source == "learned" ? "W_pos" : source, "position");
  r.explained_variance_ratio = r.spectrum.explained_variance_ratio;

  // Cosine matrix in float64 from the float32 rows.
  at::Tensor Pd = P.to(at::kDouble);
  at::Tensor nr = Pd.square().sum(1).sqrt();
  at::Tensor inv = at::where(nr > 0, 1.0 / nr, at::zeros_like(nr));
  at::Tensor U = Pd * inv.unsqueeze(1);
  at::Tensor C = at::mm(U, U.t()).contiguous();
  const double* c = C.data_ptr<double>();
  r.cosine.resize(static_cast<size_t>(n * n));
  for (int64_t i = 0; i < n * n; ++i) r.cosine[static_cast<size_t>(i)] = static_cast<float>(c[i]);
  r.cosine_by_offset.assign(static_cast<size_t>(n), 0.0);
  for (int64_t dlt = 0; dlt < n; ++dlt) {
    double s = 0;
    for (int64_t p = 0; p + dlt < n; ++p) s += c[p * n + p + dlt];
    r.cosine_by_offset[static_cast<size_t>(dlt)] = s / static_cast<double>(n - dlt);
  }
  double dev = 0;
  for (int64_t p = 0; p < n; ++p)
    for (int64_t q = 0; q < n; ++q)
      dev = std::max(dev, std::abs(c[p * n + q] - r.cosine_by_offset[static_cast<size_t>(std::abs(p - q))]));
  r.toeplitz_deviation = dev;

  // PCA of the centred rows and periodicity of the component scores.
  GramStats g = gram_stats(P);
  std::vector<double> lam;
  at::Tensor Q;
  symmetric_eigen(covariance_from_gram(g), lam, &Q);
  double tot = 0;
  for (double& v : lam) tot += (v = std::max(v, 0.0));
  const int64_t nc = std::min<int64_t>(std::max<int64_t>(opts.components, 0), d);
  if (nc > 0) {
    at::Tensor Z = at::mm(Pd - g.col_mean, Q.narrow(1, 0, nc)).contiguous();  // [n, nc]
    const double* z = Z.data_ptr<double>();
    r.pc_scores.assign(z, z + n * nc);
    r.components.resize(static_cast<size_t>(nc));
    const double two_pi = 2.0 * std::acos(-1.0);
    detail::parallel_for(0, nc, 1, [&](int64_t j0, int64_t j1) {
      for (int64_t j = j0; j < j1; ++j) {
        PositionComponent pc;
        pc.index = j;
        pc.variance_ratio = tot > 0 ? lam[static_cast<size_t>(j)] / tot : 0.0;
        double total = 0, best = -1;
        for (int64_t f = 1; f <= n / 2; ++f) {
          double re = 0, im = 0;
          for (int64_t p = 0; p < n; ++p) {
            double ang = two_pi * static_cast<double>(f) * static_cast<double>(p) / static_cast<double>(n);
            re += z[p * nc + j] * std::cos(ang);
            im -= z[p * nc + j] * std::sin(ang);
          }
          double pw = re * re + im * im;
          // Frequencies f and n − f carry the same power for a real series; count both (Nyquist once).
          double w = (2 * f == n) ? pw : 2 * pw;
          total += w;
          if (pw > best) {
            best = pw;
            pc.dominant_frequency = f;
          }
        }
        double wbest = (2 * pc.dominant_frequency == n) ? best : 2 * best;
        pc.power_fraction = total > 0 ? wbest / total : 0.0;
        r.components[static_cast<size_t>(j)] = pc;
      }
    });
  }
  return r;
}

PositionResult position_structure(const Model& m, const PositionOptions& opts) {
  const auto& cfg = m.config();
  PositionSource src = opts.source;
  if (src == PositionSource::Auto) {
    switch (cfg.positions) {
      case PositionKind::Learned: src = PositionSource::Learned; break;
      case PositionKind::Sinusoidal: src = PositionSource::Sinusoidal; break;
      case PositionKind::Rotary: src = PositionSource::Rotary; break;
      default:
        throw UsageError(std::string("this model's positions (") + to_string(cfg.positions) +
                         ") have no vectors to analyse; ask for --kind sinusoidal or --kind rotary");
    }
  }
  int64_t n = cfg.n_ctx;
  if (opts.max_positions > 0) n = std::min(n, opts.max_positions);
  // n comes from the model's metadata (a GGUF context_length of 2^30 is a few bytes): bounded here, before
  // the [n, dim] features and the [n, n] cosine matrix are built.
  if (src != PositionSource::Learned) check_position_count(n);
  switch (src) {
    case PositionSource::Learned:
      if (!m.W_pos().defined()) throw UsageError("this model has no learned position matrix W_pos");
      return position_structure(m.W_pos(), "learned", opts, 0.0);
    case PositionSource::Sinusoidal:
      return position_structure(sinusoidal_positions(n, cfg.d_model, opts.sinusoidal_base), "sinusoidal", opts,
                                opts.sinusoidal_base);
    case PositionSource::Rotary: {
      // The model's own frequencies: partial rotary (rotary_dim) and rope_scaling included.
      PositionResult r = position_structure(rotary_position_features(n, rotary_inv_freq(cfg)), "rotary", opts, cfg.rope_theta);
      if (cfg.rope_scaling == ModelConfig::RopeScaling::Linear) r.scaling = fmt::format("linear x{:g}", cfg.rope_factor);
      if (cfg.rope_scaling == ModelConfig::RopeScaling::Llama3) r.scaling = fmt::format("llama3 x{:g}", cfg.rope_factor);
      return r;
    }
    default: break;
  }
  throw UsageError("position_structure: no source");
}

Result PositionResult::to_result() const {
  Result res;
  res.kind = "positions";
  res.settings = {{"source", source}, {"n_positions", n_positions}};
  nlohmann::json s;
  s["source"] = source;
  s["n_positions"] = n_positions;
  s["dim"] = dim;
  if (base > 0) s["base"] = base;
  if (!scaling.empty()) s["rope_scaling"] = scaling;
  s["singular_values"] = spectrum.singular_values;
  s["effective_rank"] = spectrum.effective_rank;
  s["effective_rank_centred"] = spectrum.effective_rank_centred;
  s["participation_ratio_centred"] = spectrum.participation_ratio_centred;
  nlohmann::json cev = nlohmann::json::object();
  for (int64_t c : {1, 2, 3, 4, 5, 10, 20})
    if (c <= static_cast<int64_t>(spectrum.cumulative_explained_variance.size()))
      cev[std::to_string(c)] = spectrum.cumulative_explained_variance[static_cast<size_t>(c - 1)];
  s["cumulative_explained_variance"] = cev;
  nlohmann::json comps = nlohmann::json::array();
  Table ct{"components", {"component", "variance_ratio", "dominant_frequency", "power_fraction"}, {}};
  for (const auto& c : components) {
    comps.push_back({{"component", c.index},
                     {"variance_ratio", c.variance_ratio},
                     {"dominant_frequency", c.dominant_frequency},
                     {"power_fraction", c.power_fraction}});
    ct.rows.push_back({c.index, c.variance_ratio, c.dominant_frequency, c.power_fraction});
  }
  s["components"] = comps;
  s["toeplitz_deviation"] = toeplitz_deviation;
  nlohmann::json offs = nlohmann::json::object();
  for (int64_t dl : {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024})
    if (dl < n_positions) offs[std::to_string(dl)] = cosine_by_offset[static_cast<size_t>(dl)];
  s["cosine_at_offset"] = offs;
  res.summary = s;
  res.tables.push_back(std::move(ct));
  Table ot{"offsets", {"offset", "mean_cosine"}, {}};
  for (int64_t dl = 0; dl < n_positions; ++dl) ot.rows.push_back({dl, cosine_by_offset[static_cast<size_t>(dl)]});
  res.tables.push_back(std::move(ot));
  res.arrays["cosine"] = NdArray::f32({n_positions, n_positions}, cosine.data());
  res.arrays["cosine_by_offset"] = NdArray::f64({n_positions}, cosine_by_offset.data());
  res.arrays["singular_values"] =
      NdArray::f64({static_cast<int64_t>(spectrum.singular_values.size())}, spectrum.singular_values.data());
  if (!explained_variance_ratio.empty())
    res.arrays["explained_variance_ratio"] =
        NdArray::f64({static_cast<int64_t>(explained_variance_ratio.size())}, explained_variance_ratio.data());
  if (!components.empty())
    res.arrays["pc_scores"] = NdArray::f64({n_positions, static_cast<int64_t>(components.size())}, pc_scores.data());
  return res;
}

}  // namespace vocablens

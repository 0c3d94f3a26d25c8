// Segment (token-type) embeddings beside W_E and the positions (see vocablens/positions.hpp, "segment").
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/positions.hpp"

namespace vocablens {
namespace {

// E‖row − mean row‖² over the rows (float64).
double row_variance(const at::Tensor& M) {
  at::Tensor X = M.to(at::kDouble);
  return (X - X.mean(0, true)).pow(2).sum(1).mean().item<double>();
}

}  // namespace

SegmentResult segment_structure(const Model& m, int64_t directions) {
  if (!m.W_seg().defined())
    throw UsageError("this model has no segment embeddings W_seg (they come from `vocablens train --model gpt --segments`)");
  if (directions < 1) throw UsageError("segment analysis: directions must be >= 1");
  const ModelConfig& cfg = m.config();
  SegmentResult r;
  at::Tensor S = m.W_seg().to(at::kDouble);
  at::Tensor E = m.W_E().to(at::kDouble);
  r.n_segments = S.size(0);
  r.dim = S.size(1);
  r.directions = std::min<int64_t>(directions, r.dim);
  at::Tensor sn = S.norm(2, 1);
  for (int64_t i = 0; i < r.n_segments; ++i) r.norms.push_back(sn[i].item<double>());
  r.mean_token_norm = E.norm(2, 1).mean().item<double>();
  at::Tensor P;
  if (cfg.positions == PositionKind::Learned && m.W_pos().defined()) P = m.W_pos().to(at::kDouble);
  else if (cfg.positions == PositionKind::Sinusoidal) P = sinusoidal_positions(cfg.n_ctx, cfg.d_model).to(at::kDouble);
  if (P.defined()) r.mean_position_norm = P.norm(2, 1).mean().item<double>();
  at::Tensor U = S / sn.clamp_min(1e-300).unsqueeze(1);
  at::Tensor C = at::matmul(U, U.t());
  r.cosine.assign(C.data_ptr<double>(), C.data_ptr<double>() + C.numel());
  // W_E's principal directions: eigenvectors of the centred covariance, largest eigenvalue first.
  at::Tensor Ec = E - E.mean(0, true);
  at::Tensor cov = at::matmul(Ec.t(), Ec) / static_cast<double>(E.size(0));
  auto [evals, evecs] = at::linalg_eigh(cov);
  at::Tensor pcs = evecs.flip({1}).narrow(1, 0, r.directions);  // [d, k]
  at::Tensor rows = S;
  if (r.n_segments >= 2) {
    at::Tensor delta = S[1] - S[0];
    r.difference_norm = delta.norm().item<double>();
    rows = at::cat({S, delta.unsqueeze(0)}, 0);
    at::Tensor proj = at::matmul(delta, pcs);
    r.difference_in_token_subspace =
        r.difference_norm > 0 ? proj.pow(2).sum().item<double>() / (r.difference_norm * r.difference_norm) : 0.0;
  }
  at::Tensor cosp = at::matmul(rows / rows.norm(2, 1, true).clamp_min(1e-300), pcs).abs().contiguous();
  r.cos_to_token_pcs.assign(cosp.data_ptr<double>(), cosp.data_ptr<double>() + cosp.numel());
  r.variance_token = row_variance(E);
  r.variance_position = P.defined() ? row_variance(P) : 0.0;
  r.variance_segment = row_variance(S);
  const double total = r.variance_token + r.variance_position + r.variance_segment;
  if (total > 0) {
    r.share_token = r.variance_token / total;
    r.share_position = r.variance_position / total;
    r.share_segment = r.variance_segment / total;
  }
  if (!std::isfinite(total)) throw Error("segment analysis: non-finite values in W_E, the positions or W_seg");
  return r;
}

void SegmentResult::add_to(Result& res) const {
  nlohmann::json j;
  j["n_segments"] = n_segments;
  j["dim"] = dim;
  j["norms"] = norms;
  j["mean_token_norm"] = mean_token_norm;
  j["mean_position_norm"] = mean_position_norm;
  j["difference_norm"] = difference_norm;
  j["difference_in_token_subspace"] = difference_in_token_subspace;
  j["token_directions"] = directions;
  j["variance"] = {{"token", variance_token}, {"position", variance_position}, {"segment", variance_segment}};
  j["share_of_embedding_variance"] = {{"token", share_token}, {"position", share_position}, {"segment", share_segment}};
  j["definition"] =
      "x0 = W_E[t] + P[p] + W_seg[s] with t, p, s independent and uniform; shares = each part's variance / the total";
  res.summary["segments"] = j;
  res.arrays["segment_cosine"] = NdArray::f64({n_segments, n_segments}, cosine.data());
  const int64_t rows = static_cast<int64_t>(cos_to_token_pcs.size()) / std::max<int64_t>(1, directions);
  res.arrays["segment_cos_to_token_pcs"] = NdArray::f64({rows, directions}, cos_to_token_pcs.data());
  Table t;
  t.name = "segments";
  t.columns = {"row", "norm", "max_abs_cos_to_token_pc", "argmax_pc"};
  for (int64_t i = 0; i < rows; ++i) {
    double best = 0;
    int64_t arg = 0;
    for (int64_t k = 0; k < directions; ++k) {
      const double c = cos_to_token_pcs[static_cast<size_t>(i * directions + k)];
      if (c > best) best = c, arg = k;
    }
    const bool delta = i == n_segments;
    t.rows.push_back({delta ? std::string("W_seg[1]-W_seg[0]") : "W_seg[" + std::to_string(i) + "]",
                      delta ? difference_norm : norms[static_cast<size_t>(i)], best, arg + 1});
  }
  res.tables.push_back(std::move(t));
}

}  // namespace vocablens

// Exact per-row top / bottom k of X·P through one float32 product per chunk of rows (row_topk.hpp).
#include "row_topk.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "vocablens/unembed.hpp"

namespace vocablens {
namespace detail {

RowTopk::RowTopk(at::Tensor P, std::vector<int64_t> col_id, int64_t k, bool bottom, at::Tensor full, TopkStreamOptions so)
    : P_(std::move(P)), full_(std::move(full)), col_id_(std::move(col_id)), bottom_(bottom), so_(std::move(so)) {
  const int64_t Vc = P_.size(1), r = P_.size(0);
  k_ = std::min<int64_t>(k, Vc);
  // Candidates per row taken from the float32 product; the margin beyond k absorbs float32 rounding.
  mc_ = std::min<int64_t>(Vc, k_ + 16);
  // (float32 norms, enlarged by far more than their rounding error: an upper bound is all the check needs)
  max_col_norm_ = P_.norm(2, {0}).max().item<double>() * (1 + 1e-4);
  // Rigorous bound on |float32 dot - exact| for any summation order (the standard γ_r analysis, as
  // topk_stream uses it), doubled for safety: γ_r(u) = r·u / (1 - r·u).
  auto gamma_r = [&](double u) { return r * u / (1 - r * u); };
  gam_ = 2 * (gamma_r(std::ldexp(1.0, -24)) + gamma_r(std::ldexp(1.0, -53)));
  so_.k = k;
}

int64_t RowTopk::chunk_rows() const {
  return std::max<int64_t>(1, std::min<int64_t>(4096, (int64_t{64} << 20) / std::max<int64_t>(P_.size(1), 1)));
}

int64_t RowTopk::run(const at::Tensor& X, int64_t row0, std::vector<std::vector<TopkEntry>>& top,
                     std::vector<std::vector<TopkEntry>>* bottom, std::vector<double>* norms) const {
  const int64_t cn = X.size(0), r = P_.size(0), Vc = P_.size(1);
  const bool want_bottom = bottom_ && bottom;
  const float* Pd = P_.data_ptr<float>();
  const int64_t ps0 = P_.stride(0), ps1 = P_.stride(1);
  auto token = [&](int64_t c) { return col_id_.empty() ? c : col_id_[static_cast<size_t>(c)]; };
  at::Tensor nr = X.to(at::kDouble).norm(2, {1}).contiguous();
  at::Tensor L = at::mm(X, P_);  // [cn, Vc] float32
  auto [tv, ti] = L.topk(mc_, 1, /*largest=*/true, /*sorted=*/true);
  at::Tensor bv, bi;
  if (want_bottom) std::tie(bv, bi) = L.topk(mc_, 1, /*largest=*/false, /*sorted=*/true);
  L = at::Tensor();
  const float* Xd = X.data_ptr<float>();
  auto nra = nr.accessor<double, 1>();
  std::vector<int64_t> redo_top, redo_bottom;
  // The k best of the m candidates by canonical value; exact when every token outside the candidates
  // (float32 value beyond the m-th) is provably worse than the k-th: edge ± bound.
  auto settle = [&](int64_t q, const at::TensorAccessor<float, 1>& vals, const at::TensorAccessor<int64_t, 1>& cols, bool largest,
                    std::vector<TopkEntry>& out) {
    std::vector<TopkEntry> cand;
    cand.reserve(static_cast<size_t>(mc_));
    for (int64_t e = 0; e < mc_; ++e) {
      const int64_t c = cols[e];
      double v = canonical_dot(Xd + q * r, 1, Pd + c * ps1, ps0, r);
      cand.push_back({row0 + q, token(c), largest ? v : -v});
    }
    std::sort(cand.begin(), cand.end(), topk_better);
    cand.resize(static_cast<size_t>(k_));
    if (mc_ < Vc) {
      const double bound = gam_ * nra[q] * max_col_norm_;
      const double edge = largest ? double(vals[mc_ - 1]) + bound : -double(vals[mc_ - 1]) + bound;
      if (!(cand.back().value > edge)) return false;  // an outside token might beat (or tie) the k-th
    }
    for (auto& e : cand) e.value = largest ? e.value : -e.value;
    out = std::move(cand);
    return true;
  };
  auto tva = tv.accessor<float, 2>();
  auto tia = ti.accessor<int64_t, 2>();
  for (int64_t q = 0; q < cn; ++q) {
    const size_t i = static_cast<size_t>(row0 + q);
    if (norms) (*norms)[i] = nra[q];
    if (!settle(q, tva[q], tia[q], true, top[i])) redo_top.push_back(q);
    if (want_bottom) {
      auto bva = bv.accessor<float, 2>();
      auto bia = bi.accessor<int64_t, 2>();
      if (!settle(q, bva[q], bia[q], false, (*bottom)[i])) redo_bottom.push_back(q);
    }
  }
  // Rows left open: the streamed engine, exact by construction (same canonical values and order).
  auto redo = [&](const std::vector<int64_t>& rows, bool largest) {
    if (rows.empty()) return;
    at::Tensor R = X.index_select(0, at::tensor(rows, at::kLong));
    auto t = project_topk(largest ? R : R.neg(), full_, so_.k, so_);
    for (size_t q = 0; q < rows.size(); ++q) {
      auto& dst = largest ? top[static_cast<size_t>(row0 + rows[q])] : (*bottom)[static_cast<size_t>(row0 + rows[q])];
      dst = std::move(t[q]);
      for (auto& e : dst) {
        e.i = row0 + rows[q];
        if (!largest) e.value = -e.value;
      }
    }
  };
  redo(redo_top, true);
  redo(redo_bottom, false);
  return static_cast<int64_t>(redo_top.size() + redo_bottom.size());
}

}  // namespace detail
}  // namespace vocablens

// A model's E and E⁺ (vocablens/linalg/pinv.hpp), read projections, and top-k token projections.
#include "vocablens/unembed.hpp"

#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/nonfinite.hpp"

namespace vocablens {

InverseKind parse_inverse_kind(const std::string& s) {
  if (s == "pinv") return InverseKind::Pinv;
  if (s == "transpose") return InverseKind::Transpose;
  if (s == "embed") return InverseKind::Embed;
  throw UsageError("unknown inverse '" + s + "' (expected pinv, transpose or embed)");
}

const char* to_string(InverseKind k) {
  switch (k) {
    case InverseKind::Pinv: return "pinv";
    case InverseKind::Transpose: return "transpose";
    case InverseKind::Embed: return "embed";
  }
  return "?";
}

at::Tensor unembedding_matrix(const Model& m) { return m.W_U().t(); }

Pinv embedding_pinv(const Model& m, const PinvOptions& opts) { return pseudo_inverse(unembedding_matrix(m), opts); }

at::Tensor read_projection(const Model& m, InverseKind kind, const PinvOptions& opts) {
  switch (kind) {
    case InverseKind::Pinv: return embedding_pinv(m, opts).pinv;
    case InverseKind::Transpose: return m.W_U();
    case InverseKind::Embed: return m.W_E().t();
  }
  throw UsageError("unknown inverse kind");
}

std::vector<std::vector<TopkEntry>> project_topk(const at::Tensor& X, const at::Tensor& P, int64_t k,
                                                 const TopkStreamOptions& base) {
  if (!X.defined() || X.dim() != 2) throw UsageError("project_topk: X must be [N, d]");
  if (!P.defined() || P.dim() != 2 || P.size(0) != X.size(1))
    throw UsageError("project_topk: P must be [d, V] with d = " + std::to_string(X.size(1)));
  TopkStreamOptions o = base;
  o.k = k;
  at::Tensor Xf = X.to(at::kFloat), Pf = P.to(at::kFloat);
  // Under --allow-nonfinite, a NaN in the unembedding makes every row's ranking undefined; a NaN row
  // of X (one neuron's vector, one position's hidden state) has no top tokens: its list is empty (JSON []),
  // the other rows are exact.
  require_finite(Pf, "the projection matrix [d, V]", "every token ranking through it is undefined");
  at::Tensor bad_rows = at::logical_not(at::isfinite(Xf)).any(1);
  if (!bad_rows.any().item<bool>()) return topk_rows(Xf, Pf, o);
  Xf = Xf.masked_fill(bad_rows.unsqueeze(1), 0.0f);
  auto r = topk_rows(Xf, Pf, o);
  const bool* bad = bad_rows.contiguous().data_ptr<bool>();
  const std::vector<int64_t> rows = o.rows ? *o.rows : std::vector<int64_t>();
  for (size_t q = 0; q < r.size(); ++q) {
    const int64_t i = o.rows ? rows[q] : static_cast<int64_t>(q);
    if (bad[i]) r[q].clear();
  }
  return r;
}

}  // namespace vocablens

// A model's E and E⁺ (vocablens/linalg/pinv.hpp), read projections, and top-k token projections.
#include "vocablens/unembed.hpp"

#include "vocablens/error.hpp"
#include "vocablens/model.hpp"

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
  return topk_rows(X.to(at::kFloat), P.to(at::kFloat), o);
}

}  // namespace vocablens

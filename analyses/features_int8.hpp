// The int8-screened pass of the feature logit weights (analyses/features_int8.cpp), private to the library: the
// contract is vocablens/features.hpp's feature_logits, whose result it fills exactly as the float32 pass does.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "vocablens/features.hpp"

namespace vocablens {
namespace detail {

/// Fills `a` with the top / bottom lists of the features `ids` over the allowed columns `col_id` (empty = all),
/// the decoder rows scaled by `gamma` (the final norm's scale, or undefined). Returns false, having done
/// nothing, when the unembedding cannot be quantised (non-finite or beyond float32's comfortable range): the
/// caller then uses the float32 screen.
bool feature_logits_int8(const Model& m, const Sae& sae, const FeatureLogitsOptions& o, const at::Tensor& gamma,
                         const std::vector<int64_t>& ids, const std::vector<int64_t>& col_id, FeatureLogits& a);

}  // namespace detail
}  // namespace vocablens

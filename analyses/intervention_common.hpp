// analyses/intervention_common.hpp — what the intervention analyses (patching, ablation, attribution)
// share: input checks with one-line errors and the logit metric read from the final norm's output.
// Internal to analyses/; not installed.
#pragma once
#include <ATen/ATen.h>

#include <string>
#include <vector>

namespace vocablens {
class Model;
class Tokenizer;
namespace interv_detail {

/// Throws UsageError "<what> is empty" / "... longer than the context" / "token id ... outside".
void check_ids(const Model& m, const std::vector<int64_t>& ids, const std::string& what);
/// Throws UsageError when id is not in [0, V) ("<flag> token id 70000 is outside the vocabulary [0, V)").
void check_token(const Model& m, int64_t id, const std::string& flag);
/// Resolves -1 to the last position; throws UsageError when pos is not in [0, T).
int64_t resolve_position(int64_t pos, int64_t T);

/// logit[target] - logit[wrong] (logit[target] when wrong < 0) at `pos` of every batch row of the final
/// norm's output fin [B, T, d_model], from the two unembedding columns only. [B] float64.
std::vector<double> metric_from_final(const Model& m, const at::Tensor& fin, int64_t pos, int64_t target, int64_t wrong);

/// "#id" without a tokenizer, else the display form; "" for id < 0.
std::string token_string(const Tokenizer* tok, int64_t id);

}  // namespace interv_detail
}  // namespace vocablens

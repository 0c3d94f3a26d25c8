// Shared checks and the logit metric of the intervention analyses (see intervention_common.hpp).
#include "intervention_common.hpp"

#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/tokenizer.hpp"

namespace vocablens::interv_detail {

void check_ids(const Model& m, const std::vector<int64_t>& ids, const std::string& what) {
  const auto& c = m.config();
  if (ids.empty()) throw UsageError(what + " is empty: it needs at least one token");
  if (static_cast<int64_t>(ids.size()) > c.n_ctx)
    throw UsageError(what + " is " + std::to_string(ids.size()) + " tokens, longer than the model's context of " +
                     std::to_string(c.n_ctx));
  for (auto id : ids)
    if (id < 0 || id >= c.vocab_size)
      throw UsageError(what + ": token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                       std::to_string(c.vocab_size) + ")");
}

void check_token(const Model& m, int64_t id, const std::string& flag) {
  if (id < 0 || id >= m.config().vocab_size)
    throw UsageError(flag + " token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                     std::to_string(m.config().vocab_size) + ")");
}

int64_t resolve_position(int64_t pos, int64_t T) {
  const int64_t p = pos < 0 ? T + pos : pos;
  if (p < 0 || p >= T)
    throw UsageError("position " + std::to_string(pos) + " is outside the prompt's " + std::to_string(T) + " tokens (0.." +
                     std::to_string(T - 1) + ", or -1 for the last)");
  return p;
}

std::vector<double> metric_from_final(const Model& m, const at::Tensor& fin, int64_t pos, int64_t target, int64_t wrong) {
  at::Tensor x = fin.select(1, pos).to(at::kDouble);         // [B, d]
  at::Tensor u = m.W_U().select(1, target).to(at::kDouble);  // [d]
  double bias = 0;
  const at::Tensor& bU = m.weights().b_U;
  if (bU.defined()) bias = bU[target].item<double>();
  if (wrong >= 0) {
    u = u - m.W_U().select(1, wrong).to(at::kDouble);
    if (bU.defined()) bias -= bU[wrong].item<double>();
  }
  at::Tensor v = at::mv(x, u).contiguous();
  std::vector<double> out(static_cast<size_t>(v.size(0)));
  for (int64_t b = 0; b < v.size(0); ++b) out[static_cast<size_t>(b)] = v[b].item<double>() + bias;
  return out;
}

std::string token_string(const Tokenizer* tok, int64_t id) {
  if (id < 0) return "";
  return tok ? tok->display(id) : "#" + std::to_string(id);
}

}  // namespace vocablens::interv_detail

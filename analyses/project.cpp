// Hidden states at a hook point projected to tokens: the `project` command (see include/vocablens/project.hpp).
#include "token_label.hpp"
#include "vocablens/project.hpp"

#include <algorithm>

#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/tokenizer.hpp"

namespace vocablens {

namespace {}  // namespace

HiddenProjection project_hidden(const Model& m, const std::vector<int64_t>& ids, const HiddenProjectionOptions& o,
                                const Tokenizer* tok) {
  static const char* kHooks[] = {"resid_pre", "resid_mid", "resid_post", "attn_out", "mlp_out", "final_norm"};
  if (std::find(std::begin(kHooks), std::end(kHooks), o.hook) == std::end(kHooks))
    throw UsageError("hook '" + o.hook +
                     "' cannot be projected (expected resid_pre, resid_mid, resid_post, attn_out, mlp_out or final_norm)");
  if (ids.empty()) throw UsageError("the prompt has no tokens");
  if (o.top_k < 1) throw UsageError("--top-k must be at least 1");
  const auto& cfg = m.config();
  HiddenProjection r;
  r.options = o;
  r.ids = ids;
  const bool is_final = o.hook == "final_norm";
  if (is_final) {
    r.layers = {-1};
  } else if (o.layer >= 0) {
    if (o.layer >= cfg.n_layers)
      throw UsageError("layer " + std::to_string(o.layer) + " is out of range (model has " + std::to_string(cfg.n_layers) +
                       " layers)");
    r.layers = {o.layer};
  } else {
    for (int64_t l = 0; l < cfg.n_layers; ++l) r.layers.push_back(l);
  }
  const int64_t T = static_cast<int64_t>(ids.size());
  if (o.positions.empty()) {
    for (int64_t t = 0; t < T; ++t) r.positions.push_back(t);
  } else {
    for (int64_t p : o.positions) {
      int64_t q = p < 0 ? T + p : p;
      if (q < 0 || q >= T)
        throw UsageError("position " + std::to_string(p) + " is out of range for a " + std::to_string(T) + "-token prompt");
      r.positions.push_back(q);
    }
  }
  CacheSpec spec;
  if (o.hook == "resid_pre") spec.resid_pre = true;
  if (o.hook == "resid_mid") spec.resid_mid = true;
  if (o.hook == "resid_post") spec.resid_post = true;
  if (o.hook == "attn_out") spec.attn_out = true;
  if (o.hook == "mlp_out") spec.mlp_out = true;
  if (is_final) spec.final_norm = true;
  else spec.layers = r.layers;
  auto out = m.forward(at::tensor(ids, at::kLong).unsqueeze(0), spec, false);
  at::Tensor P = o.read ? read_projection(m, o.inverse, o.pinv) : m.W_U();
  TopkStreamOptions so;
  so.cols = allowed_tokens(P.size(1), o.filter, tok);
  at::Tensor pos = at::tensor(r.positions, at::kLong);
  for (int64_t l : r.layers) {
    at::Tensor X = (is_final ? out.cache.get("final_norm") : out.cache.get(o.hook, l))[0].index_select(0, pos);
    if (o.apply_final_norm && !is_final) X = m.final_norm(X);
    at::Tensor nrm = X.to(at::kDouble).norm(2, {1}).contiguous();
    r.norms.emplace_back(nrm.data_ptr<double>(), nrm.data_ptr<double>() + nrm.numel());
    r.top.push_back(project_topk(X, P, o.top_k, so));
  }
  return r;
}

Result HiddenProjection::to_result(const Tokenizer* tok) const {
  Result res;
  res.kind = "projection";
  res.settings = {
      {"hook", options.hook},
      {"layers", layers},
      {"positions", positions},
      {"top_k", options.top_k},
      {"apply_final_norm", options.apply_final_norm},
      {"space", options.read ? "read" : "write"},
      {"projection", options.read ? std::string("x R, R from --inverse ") + to_string(options.inverse) : std::string("x W_U")},
      {"inverse", to_string(options.inverse)},
      {"alpha_only", options.filter.alpha_only},
      {"allow_list_size", options.filter.allow ? static_cast<int64_t>(options.filter.allow->size()) : -1}};
  nlohmann::json input = nlohmann::json::array();
  for (int64_t id : ids) input.push_back({{"id", id}, {"token", token_label(tok, id)}});
  res.summary["input"] = input;
  const int64_t L = static_cast<int64_t>(layers.size()), Pn = static_cast<int64_t>(positions.size()), k = options.top_k;
  std::vector<int64_t> tid(static_cast<size_t>(L * Pn * k), -1);
  std::vector<double> score(static_cast<size_t>(L * Pn * k), std::numeric_limits<double>::quiet_NaN());
  std::vector<double> nrm(static_cast<size_t>(L * Pn), 0.0);
  Table t{"top_k", {"layer", "position", "input_token", "rank", "token_id", "token", "score"}, {}};
  nlohmann::json js = nlohmann::json::array();
  for (int64_t l = 0; l < L; ++l) {
    nlohmann::json jl = {{"layer", layers[l]}, {"positions", nlohmann::json::array()}};
    for (int64_t p = 0; p < Pn; ++p) {
      nrm[static_cast<size_t>(l * Pn + p)] = norms[l][p];
      const auto& top = this->top[l][p];
      nlohmann::json jp = {{"position", positions[p]},
                           {"input_token", token_label(tok, ids[positions[p]])},
                           {"norm", norms[l][p]},
                           {"top", nlohmann::json::array()}};
      for (size_t q = 0; q < top.size(); ++q) {
        size_t at_ = static_cast<size_t>((l * Pn + p) * k) + q;
        tid[at_] = top[q].j;
        score[at_] = top[q].value;
        t.rows.push_back({layers[l], positions[p], token_label(tok, ids[positions[p]]), static_cast<int64_t>(q + 1), top[q].j,
                          token_label(tok, top[q].j), top[q].value});
        jp["top"].push_back({{"id", top[q].j}, {"token", token_label(tok, top[q].j)}, {"score", top[q].value}});
      }
      jl["positions"].push_back(jp);
    }
    js.push_back(jl);
  }
  res.summary["layers"] = js;
  res.arrays["token_ids"] = NdArray::i64({L, Pn, k}, tid.data());
  res.arrays["scores"] = NdArray::f64({L, Pn, k}, score.data());
  res.arrays["norms"] = NdArray::f64({L, Pn}, nrm.data());
  res.tables.push_back(std::move(t));
  return res;
}

}  // namespace vocablens

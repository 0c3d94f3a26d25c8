// Direct logit attribution (see vocablens/attribution.hpp): the final residual at one position split into
// the embedding, every head, every MLP and the biases, read through the final norm with its scale frozen.
#include "vocablens/attribution.hpp"

#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cmath>

#include "intervention_common.hpp"
#include "vocablens/error.hpp"
#include "vocablens/hooks.hpp"
#include "vocablens/model.hpp"
#include "vocablens/tokenizer.hpp"
#include "vocablens/weight.hpp"

namespace vocablens {

AttributionResult attribute_logit(const Model& m, const std::vector<int64_t>& ids, const AttributionOptions& opts) {
  using namespace interv_detail;
  check_ids(m, ids, "the prompt");
  if (opts.target < 0) throw UsageError("attribution needs a target token (--target)");
  check_token(m, opts.target, "--target");
  if (opts.wrong >= 0) check_token(m, opts.wrong, "--wrong");
  if (opts.wrong == opts.target) throw UsageError("--wrong is the same token as --target: the difference is always 0");
  const auto& cfg = m.config();
  const auto& W = m.weights();
  const int64_t T = static_cast<int64_t>(ids.size()), L = cfg.n_layers, H = cfg.n_heads;
  const int64_t pos = resolve_position(opts.position, T);
  if (opts.layer < -1 || opts.layer > L)
    throw UsageError("attribution: layer " + std::to_string(opts.layer) + " is not a residual of this model (0.." +
                     std::to_string(L) + ", -1 for the last)");
  // The residual read: before block `R` (R = L: the final residual, the model's own logits).
  const int64_t R = opts.layer < 0 ? L : opts.layer;
  at::NoGradGuard no_grad;

  // One forward pass, keeping z and the MLP outputs at `pos`.
  std::vector<at::Tensor> z(static_cast<size_t>(R)), mlp(static_cast<size_t>(R));
  // A mixture of experts: each layer's chosen experts, their weights and outputs at `pos` ([k], [k], [k, d]).
  std::vector<at::Tensor> ex_idx(static_cast<size_t>(R)), ex_w(static_cast<size_t>(R)), ex_out(static_cast<size_t>(R));
  HookList capture = opts.interventions ? *opts.interventions : HookList{};  // the edits first: the captures see them
  for (int64_t l = 0; l < R; ++l) {
    capture.add("z." + std::to_string(l), [&z, l, pos](at::Tensor& t) { z[static_cast<size_t>(l)] = t[0][pos]; });
    capture.add("mlp_out." + std::to_string(l), [&mlp, l, pos](at::Tensor& t) { mlp[static_cast<size_t>(l)] = t[0][pos]; });
    if (cfg.n_experts > 0) {
      const size_t i = static_cast<size_t>(l);
      capture.add("expert_indices." + std::to_string(l), [&ex_idx, i, pos](at::Tensor& t) { ex_idx[i] = t[0][pos].clone(); });
      capture.add("expert_weights." + std::to_string(l), [&ex_w, i, pos](at::Tensor& t) { ex_w[i] = t[0][pos].clone(); });
      capture.add("expert_out." + std::to_string(l), [&ex_out, i, pos](at::Tensor& t) { ex_out[i] = t[0][pos].clone(); });
    }
  }
  CacheSpec spec;
  spec.resid_pre = true;
  spec.resid_post = true;
  spec.final_norm = true;
  spec.layers = {0, std::max<int64_t>(R - 1, 0)};
  auto out = run_with_hooks(m, at::tensor(ids, at::kLong), capture, spec, false);

  AttributionResult r;
  r.tokens = ids;
  r.model_source = m.source();
  r.options = opts;
  r.position = pos;
  r.n_layers = L;
  r.n_heads = H;
  r.layer = R;
  // The model's own value: its float32 logits at `pos` (at an earlier residual: the logit lens's, the final
  // norm applied to that residual in float32). With a final soft-cap (Gemma-2: c * tanh(x / c)) the
  // decomposed value is the logit before the cap, the last linear quantity.
  at::Tensor resid_R = R == 0 ? out.cache.get("resid_pre", 0)[0][pos] : out.cache.get("resid_post", R - 1)[0][pos];
  at::Tensor fin_pos =
      R == L ? out.cache.get("final_norm")[0][pos] : m.final_norm(resid_R.unsqueeze(0).unsqueeze(0).contiguous())[0][0];
  at::Tensor logits = weight_matmul(fin_pos.unsqueeze(0).contiguous(), W.W_U, W.b_U)[0];
  r.model_value = logits[opts.target].item<double>() - (opts.wrong >= 0 ? logits[opts.wrong].item<double>() : 0.0);

  // Components [n, d] in float64, in model order.
  const auto D = at::kDouble;
  std::vector<at::Tensor> parts;
  auto add = [&](at::Tensor v, std::string name, std::string kind, int64_t layer, int64_t head) {
    parts.push_back(v.to(D));
    r.components.push_back({std::move(name), std::move(kind), layer, head, 0.0});
  };
  // The embedding part is the block-0 input less the position part (so that any scaling the runner
  // applies to W_E[id] is the embedding's).
  at::Tensor resid0 = out.cache.get("resid_pre", 0)[0][pos].to(D);
  if (cfg.positions == PositionKind::Learned) {
    at::Tensor p = materialize_weight(W.W_pos.narrow(0, pos, 1))[0].to(D);
    add(resid0 - p, "embed", "embed", -1, -1);
    add(p, "pos_embed", "pos_embed", -1, -1);
  } else if (cfg.positions == PositionKind::Sinusoidal) {
    at::Tensor e = weight_rows(W.W_E, at::tensor({ids[static_cast<size_t>(pos)]}, at::kLong))[0].to(D);
    if (cfg.embed_scale != 1.0) e = e * cfg.embed_scale;
    add(e, "embed", "embed", -1, -1);
    add(resid0 - e, "pos_embed", "pos_embed", -1, -1);
  } else {
    add(resid0, "embed", "embed", -1, -1);
  }
  for (int64_t l = 0; l < R; ++l) {
    at::Tensor zl = z[static_cast<size_t>(l)].to(D);                         // [H, dh]
    at::Tensor heads = at::bmm(zl.unsqueeze(1), m.W_O(l).to(D)).squeeze(1);  // [H, d]
    const auto& Lw = W.layers[static_cast<size_t>(l)];
    at::Tensor b_o = Lw.b_o.defined() ? Lw.b_o.to(D) : at::Tensor();
    if (Lw.post_attn_norm_w.defined()) {
      // Gemma-2 normalises the attention output before adding it to the stream. With that norm's scale frozen
      // at this run's value (as the final norm's below), it is linear: each head's share is its own output
      // times g / s, and the shares sum to the normalised output the block added.
      if (cfg.norm != NormKind::RMSNorm)
        throw UsageError("logit attribution: a post-attention norm other than RMSNorm is not supported");
      at::Tensor raw = heads.sum(0);
      if (b_o.defined()) raw = raw + b_o;
      const double s = std::sqrt(raw.pow(2).mean().item<double>() + cfg.norm_eps);
      const at::Tensor g = Lw.post_attn_norm_w.to(D) / s;
      heads = heads * g;
      if (b_o.defined()) b_o = b_o * g;
    }
    for (int64_t h = 0; h < H; ++h) add(heads[h], "L" + std::to_string(l) + "H" + std::to_string(h), "head", l, h);
    if (b_o.defined()) add(b_o, "L" + std::to_string(l) + " b_O", "attn_bias", l, -1);
    // mlp_out is what the block adds (after Gemma-2's post-MLP norm, which then holds any b_out inside it).
    at::Tensor ml = mlp[static_cast<size_t>(l)].to(D);
    if (ex_out[static_cast<size_t>(l)].defined() && !Lw.post_mlp_norm_w.defined()) {
      // Split by expert: each chosen expert's weighted output (mlp_out is their sum, plus a shared expert's, which
      // is the rest; a mixture without one has a rest of float32 rounding only, left in no part).
      const size_t i = static_cast<size_t>(l);
      at::Tensor routed = at::zeros_like(ml);
      for (int64_t s = 0; s < ex_idx[i].size(0); ++s) {
        const int64_t e = ex_idx[i][s].item<int64_t>();
        const at::Tensor part = ex_out[i][s].to(D) * ex_w[i][s].item<double>();
        routed += part;
        add(part, "L" + std::to_string(l) + "E" + std::to_string(e), "expert", l, -1);
        r.components.back().expert = e;
      }
      if (cfg.shared_expert) add(ml - routed, "MLP" + std::to_string(l) + " shared", "mlp", l, -1);
    } else if (Lw.b_out.defined() && !Lw.post_mlp_norm_w.defined()) {
      add(ml - Lw.b_out.to(D), "MLP" + std::to_string(l), "mlp", l, -1);
      add(Lw.b_out, "MLP" + std::to_string(l) + " b_out", "mlp_bias", l, -1);
    } else {
      add(ml, "MLP" + std::to_string(l), "mlp", l, -1);
    }
  }
  at::Tensor C = at::stack(parts, 0);  // [n, d]

  // Guard: the components must rebuild the residual the final norm saw (not so for post-LN blocks, OPT-350m's).
  at::Tensor x = resid_R.to(D);
  const double err = (C.sum(0) - x).abs().max().item<double>(), scale_x = x.abs().max().item<double>();
  if (!(err <= 1e-3 * std::max(1.0, scale_x)))
    throw UsageError(
        "logit attribution: this model's residual stream is not the sum of its blocks' outputs "
        "(off by " +
        std::to_string(err) + "); the decomposition does not apply");

  // The final norm with its scale frozen at this run's value.
  at::Tensor u = m.W_U().select(1, opts.target).to(D);
  double ub = 0;
  const at::Tensor& bU = W.b_U;
  if (bU.defined()) ub = bU[opts.target].item<double>();
  if (opts.wrong >= 0) {
    u = u - m.W_U().select(1, opts.wrong).to(D);
    if (bU.defined()) ub -= bU[opts.wrong].item<double>();
  }
  at::Tensor wu = W.lnf_w.defined() ? W.lnf_w.to(D) * u : u;
  at::Tensor Cn;
  switch (cfg.norm) {
    case NormKind::LayerNorm:
      r.norm_scale = std::sqrt((x - x.mean()).pow(2).mean().item<double>() + cfg.norm_eps);
      Cn = (C - C.mean(1, true)) / r.norm_scale;
      break;
    case NormKind::RMSNorm:
      r.norm_scale = std::sqrt(x.pow(2).mean().item<double>() + cfg.norm_eps);
      Cn = C / r.norm_scale;
      break;
    default:
      throw UsageError(std::string("logit attribution: the final norm kind '") + to_string(cfg.norm) +
                       "' is not supported (LayerNorm and RMSNorm are)");
  }
  at::Tensor vals = at::mv(Cn, wu).contiguous();
  for (size_t i = 0; i < r.components.size(); ++i) r.components[i].value = vals[static_cast<int64_t>(i)].item<double>();
  if (W.lnf_b.defined()) r.components.push_back({"ln_final bias", "norm_bias", -1, -1, at::dot(W.lnf_b.to(D), u).item<double>()});
  if (bU.defined()) r.components.push_back({"b_U", "unembed_bias", -1, -1, ub});

  r.heads.assign(static_cast<size_t>(R * H), 0.0);
  r.mlps.assign(static_cast<size_t>(R), 0.0);
  r.sum = 0;
  for (const auto& c : r.components) {
    r.sum += c.value;
    if (c.kind == "head") r.heads[static_cast<size_t>(c.layer * H + c.head)] = c.value;
    if (c.kind == "mlp" || c.kind == "expert") r.mlps[static_cast<size_t>(c.layer)] += c.value;  // a layer's MLP, whole
  }
  r.check = std::fabs(r.sum - r.model_value);
  return r;
}

Result AttributionResult::to_result(const Tokenizer* tok, const std::string& prompt) const {
  using interv_detail::token_string;
  Result res;
  res.kind = "logit_attribution";
  res.settings = {
      {"target", {{"id", options.target}, {"token", token_string(tok, options.target)}}},
      {"wrong", options.wrong >= 0 ? nlohmann::json({{"id", options.wrong}, {"token", token_string(tok, options.wrong)}})
                                   : nlohmann::json(nullptr)},
      {"metric", options.wrong >= 0 ? "logit[target] - logit[wrong]" : "logit[target]"},
      {"position", position},
      {"layer", layer},
      {"residual", layer == n_layers ? std::string("the final residual (the model's logits)")
                   : layer == 0      ? std::string("the embedding alone (the logit lens's row 'embed')")
                                     : "the residual after block " + std::to_string(layer - 1) + " (the logit lens's row '" +
                                      std::to_string(layer - 1) + "')"},
      {"final_norm", "scale frozen at its value in this run (apply_ln_to_stack)"}};
  if (!prompt.empty()) res.settings["prompt"] = prompt;
  std::vector<size_t> order(components.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return std::fabs(components[a].value) > std::fabs(components[b].value); });
  nlohmann::json top = nlohmann::json::array(), toks = nlohmann::json::array();
  for (size_t i = 0; i < order.size() && i < 15; ++i)
    top.push_back({{"name", components[order[i]].name}, {"value", components[order[i]].value}});
  for (size_t t = 0; t < tokens.size(); ++t)
    toks.push_back({{"position", t}, {"id", tokens[t]}, {"token", token_string(tok, tokens[t])}});
  res.summary = {{"model", model_source},
                 {"model_value", model_value},
                 {"sum", sum},
                 {"check", check},
                 {"norm_scale", norm_scale},
                 {"n_layers", n_layers},
                 {"n_heads", n_heads},
                 {"largest", top},
                 {"tokens", toks},
                 {"position_token", token_string(tok, tokens[static_cast<size_t>(position)])}};
  std::vector<float> hf(heads.begin(), heads.end()), mf(mlps.begin(), mlps.end());
  res.arrays["heads"] = NdArray::f32({layer, n_heads}, hf.data());
  res.arrays["mlps"] = NdArray::f32({layer}, mf.data());
  Table tab;
  tab.name = "components";
  tab.columns = {"name", "kind", "layer", "head", "value", "expert"};
  for (const auto& c : components)
    tab.rows.push_back({c.name, c.kind, c.layer >= 0 ? nlohmann::json(c.layer) : nlohmann::json(nullptr),
                        c.head >= 0 ? nlohmann::json(c.head) : nlohmann::json(nullptr), c.value,
                        c.expert >= 0 ? nlohmann::json(c.expert) : nlohmann::json(nullptr)});
  res.tables.push_back(std::move(tab));
  return res;
}

}  // namespace vocablens

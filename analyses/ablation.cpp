// Ablation of heads, neurons and residual positions, and steering vectors (see vocablens/ablation.hpp).
#include "vocablens/ablation.hpp"

#include <ATen/core/grad_mode.h>

#include <cctype>
#include <cmath>
#include <map>

#include "intervention_common.hpp"
#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/tokenizer.hpp"

namespace vocablens {

std::string AblationSite::label() const {
  switch (kind) {
    case Kind::Head: return "head " + std::to_string(layer) + "." + std::to_string(index);
    case Kind::Neuron: return "neuron " + std::to_string(layer) + "." + std::to_string(index);
    case Kind::Resid: return "resid " + std::to_string(layer) + "." + std::to_string(index);
    case Kind::Hook: return "hook " + hook;
  }
  return "?";
}

AblationSite parse_ablation_site(const std::string& kind, const std::string& spec) {
  AblationSite s;
  const char* what = nullptr;
  if (kind == "hook") {
    if (spec.empty()) throw UsageError("--hook needs a hook name, e.g. blocks.1.hook_attn_out");
    s.kind = AblationSite::Kind::Hook;
    s.hook = spec;
    return s;
  }
  if (kind == "head") s.kind = AblationSite::Kind::Head, what = "LAYER.HEAD, e.g. 1.3";
  else if (kind == "neuron") s.kind = AblationSite::Kind::Neuron, what = "LAYER.NEURON, e.g. 0.17";
  else if (kind == "resid") s.kind = AblationSite::Kind::Resid, what = "LAYER.POSITION, e.g. 2.4";
  else throw UsageError("unknown ablation site kind '" + kind + "' (head, neuron or resid)");
  auto digits = [](const std::string& x) {
    if (x.empty() || x.size() > 9) return false;
    for (char c : x)
      if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    return true;
  };
  const size_t dot = spec.find('.');
  if (dot == std::string::npos || !digits(spec.substr(0, dot)) || !digits(spec.substr(dot + 1)))
    throw UsageError("--" + kind + " expects " + what + " (got '" + spec + "')");
  s.layer = std::stoll(spec.substr(0, dot));
  s.index = std::stoll(spec.substr(dot + 1));
  return s;
}

namespace {

std::string site_hook(const AblationSite& s) {
  const std::string L = std::to_string(s.layer);
  switch (s.kind) {
    case AblationSite::Kind::Head: return "blocks." + L + ".attn.hook_z";
    case AblationSite::Kind::Neuron: return "blocks." + L + ".mlp.hook_post";
    case AblationSite::Kind::Resid: return "blocks." + L + ".hook_resid_pre";
    case AblationSite::Kind::Hook: return s.hook;
  }
  return "";
}

void check_site(const Model& m, const AblationSite& s, AblationMode mode) {
  const auto& c = m.config();
  if (s.kind == AblationSite::Kind::Hook) {
    HookSite h = parse_hook_name(s.hook, c);  // unknown names: the list of valid ones
    if (mode == AblationMode::Mean && (h.point == HookPoint::Pattern || h.point == HookPoint::AttnScores))
      throw UsageError(s.label() + ": mean ablation of an attention pattern/score is not defined here (use --mode zero)");
    return;
  }
  if (s.layer < 0 || s.layer >= c.n_layers)
    throw UsageError(s.label() + ": layer " + std::to_string(s.layer) + " is out of range (0.." + std::to_string(c.n_layers - 1) +
                     ")");
  if (s.kind == AblationSite::Kind::Head && (s.index < 0 || s.index >= c.n_heads))
    throw UsageError(s.label() + ": head " + std::to_string(s.index) + " is out of range (0.." + std::to_string(c.n_heads - 1) +
                     ")");
  if (s.kind == AblationSite::Kind::Neuron && (s.index < 0 || s.index >= c.d_mlp))
    throw UsageError(s.label() + ": neuron " + std::to_string(s.index) + " is out of range (0.." + std::to_string(c.d_mlp - 1) +
                     ")");
}

Prediction predict(const at::Tensor& logits, int64_t target, int64_t k) {
  Prediction p;
  at::Tensor lp = at::log_softmax(logits.to(at::kDouble), 0);
  p.target_logit = logits[target].item<double>();
  p.target_prob = std::exp(lp[target].item<double>());
  p.target_rank = 1 + (logits > logits[target]).sum().item<int64_t>();
  auto top = at::topk(logits, std::min<int64_t>(k, logits.size(0)));
  at::Tensor ti = std::get<1>(top).contiguous();
  for (int64_t j = 0; j < ti.size(0); ++j) {
    p.top_ids.push_back(ti[j].item<int64_t>());
    p.top_probs.push_back(std::exp(lp[p.top_ids.back()].item<double>()));
  }
  return p;
}

}  // namespace

HookList ablation_hooks(const Model& m, const std::vector<AblationSite>& sites, AblationMode mode,
                        const std::vector<std::vector<int64_t>>& reference) {
  for (const auto& s : sites) check_site(m, s, mode);
  // Mean mode: each hooked activation's mean over every position of the reference sequences.
  std::map<std::string, at::Tensor> means;
  if (mode == AblationMode::Mean) {
    if (reference.empty()) throw UsageError("mean ablation needs at least one reference sequence");
    std::map<std::string, at::Tensor> sums;
    int64_t count = 0;
    at::NoGradGuard no_grad;
    for (const auto& s : sites) sums.emplace(site_hook(s), at::Tensor());
    for (const auto& ref : reference) {
      interv_detail::check_ids(m, ref, "a mean-ablation reference");
      HookList cap;
      for (const auto& kv : sums) {
        const std::string name = kv.first;
        cap.add(name, [&sums, name](at::Tensor& t) {
          at::Tensor v = t.to(at::kDouble).flatten(0, 1).sum(0);  // over batch and positions
          auto& acc = sums[name];
          acc = acc.defined() ? acc + v : v;
        });
      }
      run_with_hooks(m, at::tensor(ref, at::kLong), cap, {}, false);
      count += static_cast<int64_t>(ref.size());
    }
    for (auto& [name, sum] : sums) means[name] = (sum / static_cast<double>(count)).to(at::kFloat);
  }
  HookList hooks;
  for (const auto& s : sites) {
    at::Tensor mean = mode == AblationMode::Mean ? means.at(site_hook(s)) : at::Tensor();
    hooks.add(site_hook(s), [s, mean](at::Tensor& t) {
      switch (s.kind) {
        case AblationSite::Kind::Head: {  // z [B, T, H, dh]
          auto h = t.select(2, s.index);
          mean.defined() ? h.copy_(mean.select(0, s.index)) : h.zero_();
          break;
        }
        case AblationSite::Kind::Neuron: {  // post [B, T, d_mlp]
          auto n = t.select(2, s.index);
          mean.defined() ? n.copy_(mean.select(0, s.index)) : n.zero_();
          break;
        }
        case AblationSite::Kind::Resid: {  // resid_pre [B, T, d]
          if (s.index >= t.size(1))
            throw UsageError(s.label() + ": position " + std::to_string(s.index) + " is outside the prompt's " +
                             std::to_string(t.size(1)) + " tokens");
          auto x = t.select(1, s.index);
          mean.defined() ? x.copy_(mean) : x.zero_();
          break;
        }
        case AblationSite::Kind::Hook:  // the whole activation; mean: [B, T, ...] <- mean over B and T
          mean.defined() ? t.copy_(mean) : t.zero_();
          break;
      }
    });
  }
  return hooks;
}

AblationResult ablate(const Model& m, const std::vector<int64_t>& ids, const AblationOptions& opts) {
  using namespace interv_detail;
  check_ids(m, ids, "the prompt");
  if (opts.sites.empty()) throw UsageError("nothing to ablate: give at least one --head, --neuron, --resid or --hook");
  if (opts.target >= 0) check_token(m, opts.target, "--target");
  if (opts.top_k < 1) throw UsageError("--top-k must be >= 1");
  const int64_t T = static_cast<int64_t>(ids.size());
  const int64_t pos = resolve_position(opts.position, T);
  for (const auto& s : opts.sites)
    if (s.kind == AblationSite::Kind::Resid && (s.index < 0 || s.index >= T))
      throw UsageError(s.label() + ": position " + std::to_string(s.index) + " is outside the prompt's " + std::to_string(T) +
                       " tokens (0.." + std::to_string(T - 1) + ")");
  at::NoGradGuard no_grad;
  HookList hooks =
      ablation_hooks(m, opts.sites, opts.mode, opts.reference.empty() ? std::vector<std::vector<int64_t>>{ids} : opts.reference);
  CacheSpec spec;
  spec.final_norm = true;
  at::Tensor x = at::tensor(ids, at::kLong);
  at::Tensor lb = m.unembed(m.forward(x, spec, false).cache.get("final_norm")[0][pos]);
  at::Tensor la = m.unembed(run_with_hooks(m, x, hooks, spec, false).cache.get("final_norm")[0][pos]);

  AblationResult r;
  r.tokens = ids;
  r.model_source = m.source();
  r.options = opts;
  r.position = pos;
  r.target = opts.target >= 0 ? opts.target : lb.argmax().item<int64_t>();
  r.before = predict(lb, r.target, opts.top_k);
  r.after = predict(la, r.target, opts.top_k);
  at::Tensor pb = at::log_softmax(lb.to(at::kDouble), 0), pa = at::log_softmax(la.to(at::kDouble), 0);
  r.kl = std::max(0.0, (pb.exp() * (pb - pa)).sum().item<double>());
  r.max_logit_change = (la - lb).abs().max().item<double>();
  return r;
}

Result AblationResult::to_result(const Tokenizer* tok, const std::string& prompt) const {
  using interv_detail::token_string;
  Result res;
  res.kind = "ablation";
  nlohmann::json sites = nlohmann::json::array();
  for (const auto& s : options.sites)
    sites.push_back({{"site", s.label()}, {"hook", site_hook(s)}, {"layer", s.layer}, {"index", s.index}});
  res.settings = {{"sites", sites},
                  {"mode", options.mode == AblationMode::Mean ? "mean" : "zero"},
                  {"mean_over", options.mode == AblationMode::Mean
                                    ? (options.reference.empty() ? "the prompt's positions" : "the reference prompts' positions")
                                    : ""},
                  {"position", position},
                  {"target", {{"id", target}, {"token", token_string(tok, target)}}}};
  if (!prompt.empty()) res.settings["prompt"] = prompt;
  auto pred = [&](const Prediction& p) {
    nlohmann::json top = nlohmann::json::array();
    for (size_t j = 0; j < p.top_ids.size(); ++j)
      top.push_back({{"id", p.top_ids[j]}, {"token", token_string(tok, p.top_ids[j])}, {"prob", p.top_probs[j]}});
    return nlohmann::json{
        {"target_logit", p.target_logit}, {"target_prob", p.target_prob}, {"target_rank", p.target_rank}, {"top", top}};
  };
  res.summary = {{"model", model_source}, {"before", pred(before)},
                 {"after", pred(after)},  {"target_logit_change", after.target_logit - before.target_logit},
                 {"kl_before_after", kl}, {"max_logit_change", max_logit_change}};
  Table tab;
  tab.name = "top_k";
  tab.columns = {"run", "rank", "token_id", "token", "prob"};
  for (auto [name, p] : {std::pair<const char*, const Prediction*>{"before", &before}, {"after", &after}})
    for (size_t j = 0; j < p->top_ids.size(); ++j)
      tab.rows.push_back({name, j + 1, p->top_ids[j], token_string(tok, p->top_ids[j]), p->top_probs[j]});
  res.tables.push_back(std::move(tab));
  return res;
}

at::Tensor embedding_difference(const Model& m, int64_t plus, int64_t minus) {
  interv_detail::check_token(m, plus, "steering (+)");
  interv_detail::check_token(m, minus, "steering (-)");
  return (m.W_E()[plus] - m.W_E()[minus]).clone();
}

HookList steering_hooks(const at::Tensor& v, int64_t layer, double scale) {
  if (v.dim() != 1) throw UsageError("a steering vector must be one-dimensional [d_model]");
  at::Tensor add = (v.to(at::kFloat) * scale).contiguous();
  HookList h;
  h.add("blocks." + std::to_string(layer) + ".hook_resid_pre", [add](at::Tensor& x) {
    if (x.size(-1) != add.size(0))
      throw UsageError("the steering vector has " + std::to_string(add.size(0)) + " entries, the residual stream " +
                       std::to_string(x.size(-1)));
    x.add_(add);
  });
  return h;
}

}  // namespace vocablens

// Activation patching (see vocablens/patching.hpp): one clean run, one corrupted run, then per layer one
// batched corrupted run whose row i has site i replaced by the clean run's activation.
#include "vocablens/patching.hpp"

#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "intervention_common.hpp"
#include "vocablens/error.hpp"
#include "vocablens/hooks.hpp"
#include "vocablens/model.hpp"
#include "vocablens/tokenizer.hpp"

namespace vocablens {

const char* patch_over_name(PatchOver o) {
  switch (o) {
    case PatchOver::Resid: return "resid";
    case PatchOver::Attn: return "attn";
    case PatchOver::Mlp: return "mlp";
    case PatchOver::Heads: return "heads";
  }
  return "?";
}

PatchOver parse_patch_over(const std::string& s) {
  for (PatchOver o : {PatchOver::Resid, PatchOver::Attn, PatchOver::Mlp, PatchOver::Heads})
    if (s == patch_over_name(o)) return o;
  throw UsageError("--over must be resid, attn, mlp or heads (got '" + s + "')");
}

namespace {

using interv_detail::metric_from_final;

// The hook name patched in row `layer`.
std::string site_hook(PatchOver o, int64_t layer) {
  const std::string L = std::to_string(layer);
  switch (o) {
    case PatchOver::Resid: return "blocks." + L + ".hook_resid_pre";
    case PatchOver::Attn: return "blocks." + L + ".hook_attn_out";
    case PatchOver::Mlp: return "blocks." + L + ".hook_mlp_out";
    case PatchOver::Heads: return "blocks." + L + ".attn.hook_z";
  }
  return "";
}

}  // namespace

PatchResult activation_patching(const Model& m, const std::vector<int64_t>& clean, const std::vector<int64_t>& corrupt,
                                const PatchOptions& opts) {
  using namespace interv_detail;
  check_ids(m, clean, "the clean prompt");
  check_ids(m, corrupt, "the corrupt prompt");
  if (clean.size() != corrupt.size())
    throw UsageError("the clean prompt is " + std::to_string(clean.size()) + " tokens and the corrupt prompt is " +
                     std::to_string(corrupt.size()) +
                     " tokens: patching needs the same length; reword one of them (`vocablens tokenize MODEL "
                     "TEXT` shows the tokens) so that both have the same number of tokens");
  if (opts.target < 0) throw UsageError("patching needs a target token (--target)");
  check_token(m, opts.target, "--target");
  if (opts.wrong >= 0) check_token(m, opts.wrong, "--wrong");
  if (opts.wrong == opts.target) throw UsageError("--wrong is the same token as --target: the difference is always 0");
  const auto& cfg = m.config();
  const int64_t T = static_cast<int64_t>(clean.size()), L = cfg.n_layers, H = cfg.n_heads, d = cfg.d_model;
  const int64_t pos = resolve_position(opts.position, T);
  at::NoGradGuard no_grad;

  PatchResult r;
  r.clean_tokens = clean;
  r.corrupt_tokens = corrupt;
  r.model_source = m.source();
  r.options = opts;
  r.options.progress = nullptr;
  r.position = pos;
  r.rows = L;
  r.cols = opts.over == PatchOver::Heads ? H : T;

  // Clean run: keep every layer's activation at the patched site.
  std::vector<at::Tensor> clean_act(static_cast<size_t>(L));
  HookList capture;
  for (int64_t l = 0; l < L; ++l)
    capture.add(site_hook(opts.over, l), [&clean_act, l](at::Tensor& t) { clean_act[static_cast<size_t>(l)] = t[0]; });
  CacheSpec fin_spec;
  fin_spec.final_norm = true;
  auto clean_out = run_with_hooks(m, at::tensor(clean, at::kLong), capture, fin_spec, false);
  r.clean_metric = metric_from_final(m, clean_out.cache.get("final_norm"), pos, opts.target, opts.wrong)[0];
  auto corrupt_out = m.forward(at::tensor(corrupt, at::kLong), fin_spec, false);
  r.corrupt_metric = metric_from_final(m, corrupt_out.cache.get("final_norm"), pos, opts.target, opts.wrong)[0];
  const double denom = r.clean_metric - r.corrupt_metric;
  r.degenerate = !(std::fabs(denom) > 0) || !std::isfinite(denom);

  // Rows per batch: bounded by ~256 MB of the largest per-row activations (patterns and residuals).
  const int64_t per_row = 4 * (H * T * T * 3 + T * std::max(d, cfg.d_mlp) * 8);
  const int64_t chunk = std::clamp<int64_t>((int64_t{256} << 20) / std::max<int64_t>(per_row, 1), 1, r.cols);
  r.metric.assign(static_cast<size_t>(r.rows * r.cols), 0.0);
  at::Tensor corrupt_ids = at::tensor(corrupt, at::kLong).unsqueeze(0);
  for (int64_t l = 0; l < L; ++l) {
    const at::Tensor& src = clean_act[static_cast<size_t>(l)];  // [T, d] or [T, H, dh]
    for (int64_t c0 = 0; c0 < r.cols; c0 += chunk) {
      const int64_t n = std::min(chunk, r.cols - c0);
      HookList patch;
      patch.add(site_hook(opts.over, l), [&, c0, n](at::Tensor& t) {
        for (int64_t i = 0; i < n; ++i) {
          const int64_t site = c0 + i;
          if (opts.over == PatchOver::Heads) t[i].select(1, site).copy_(src.select(1, site));  // z [T, H, dh]
          else t[i][site].copy_(src[site]);                                                    // [T, d]
        }
      });
      auto out = run_with_hooks(m, corrupt_ids.expand({n, T}), patch, fin_spec, false);
      auto v = metric_from_final(m, out.cache.get("final_norm"), pos, opts.target, opts.wrong);
      for (int64_t i = 0; i < n; ++i) r.metric[r.at(l, c0 + i)] = v[static_cast<size_t>(i)];
    }
    if (opts.progress) opts.progress(l + 1, L);
  }
  r.restored.resize(r.metric.size());
  for (size_t i = 0; i < r.metric.size(); ++i)
    r.restored[i] = r.degenerate ? std::numeric_limits<double>::quiet_NaN() : (r.metric[i] - r.corrupt_metric) / denom;
  for (int64_t l = 0; l < L; ++l) r.row_hooks.push_back(site_hook(opts.over, l));
  return r;
}

Result PatchResult::to_result(const Tokenizer* tok, const std::string& clean_prompt, const std::string& corrupt_prompt) const {
  using interv_detail::token_string;
  auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  Result res;
  res.kind = "activation_patching";
  res.settings = {
      {"over", patch_over_name(options.over)},
      {"target", {{"id", options.target}, {"token", token_string(tok, options.target)}}},
      {"wrong", options.wrong >= 0 ? nlohmann::json({{"id", options.wrong}, {"token", token_string(tok, options.wrong)}})
                                   : nlohmann::json(nullptr)},
      {"metric", options.wrong >= 0 ? "logit[target] - logit[wrong]" : "logit[target]"},
      {"position", position},
      {"normalisation", "(patched - corrupt) / (clean - corrupt): 0 = corrupted run, 1 = clean run"}};
  if (!clean_prompt.empty()) res.settings["clean_prompt"] = clean_prompt;
  if (!corrupt_prompt.empty()) res.settings["corrupt_prompt"] = corrupt_prompt;
  nlohmann::json toks = nlohmann::json::array();
  for (size_t t = 0; t < clean_tokens.size(); ++t)
    toks.push_back({{"position", t},
                    {"clean_id", clean_tokens[t]},
                    {"clean", token_string(tok, clean_tokens[t])},
                    {"corrupt_id", corrupt_tokens[t]},
                    {"corrupt", token_string(tok, corrupt_tokens[t])},
                    {"differs", clean_tokens[t] != corrupt_tokens[t]}});
  nlohmann::json cols_j = nlohmann::json::array(), rows_j = nlohmann::json::array();
  for (int64_t c = 0; c < cols; ++c)
    cols_j.push_back(options.over == PatchOver::Heads ? "H" + std::to_string(c)
                                                      : std::to_string(c) + " " + token_string(tok, clean_tokens[c]));
  for (int64_t l = 0; l < rows; ++l) rows_j.push_back(row_hooks[static_cast<size_t>(l)]);
  std::vector<size_t> order(restored.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    double x = std::fabs(metric[a] - corrupt_metric), y = std::fabs(metric[b] - corrupt_metric);
    return x != y ? x > y : a < b;
  });
  nlohmann::json top = nlohmann::json::array();
  for (size_t i = 0; i < order.size() && i < 10; ++i) {
    const int64_t l = static_cast<int64_t>(order[i]) / cols, c = static_cast<int64_t>(order[i]) % cols;
    top.push_back({{"layer", l},
                   {"hook", row_hooks[static_cast<size_t>(l)]},
                   {options.over == PatchOver::Heads ? "head" : "position", c},
                   {"metric", metric[order[i]]},
                   {"restored", num(restored[order[i]])}});
  }
  res.summary = {{"model", model_source},
                 {"clean_metric", clean_metric},
                 {"corrupt_metric", corrupt_metric},
                 {"degenerate", degenerate},
                 {"rows", rows_j},
                 {"columns", cols_j},
                 {"column_kind", options.over == PatchOver::Heads ? "head" : "position"},
                 {"tokens", toks},
                 {"strongest", top}};
  std::vector<float> rf(restored.begin(), restored.end()), mf(metric.begin(), metric.end());
  res.arrays["restored"] = NdArray::f32({rows, cols}, rf.data());
  res.arrays["metric"] = NdArray::f32({rows, cols}, mf.data());
  Table tab;
  tab.name = "sites";
  tab.columns = {"layer", "hook", options.over == PatchOver::Heads ? "head" : "position", "token", "metric", "restored"};
  for (int64_t l = 0; l < rows; ++l)
    for (int64_t c = 0; c < cols; ++c)
      tab.rows.push_back(
          {l, row_hooks[static_cast<size_t>(l)], c,
           options.over == PatchOver::Heads ? nlohmann::json(nullptr) : nlohmann::json(token_string(tok, clean_tokens[c])),
           metric[at(l, c)], num(restored[at(l, c)])});
  res.tables.push_back(std::move(tab));
  return res;
}

}  // namespace vocablens

// The logit lens over many prompts: prompts file reader, one lens per prompt, the tidy per-layer table.
#include "vocablens/lens_batch.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <nlohmann/json.hpp>

#include "vocablens/detail/lens_engine.hpp"
#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/token_id.hpp"
#include "vocablens/tuned_lens.hpp"
#include "util/regular_file.hpp"

namespace vocablens {

LensBatchResult logit_lens_batch(const Model& m, const Tokenizer& tok, const std::vector<LensPrompt>& prompts,
                                 const LensOptions& opts, const EncodeOptions& eo,
                                 const std::function<void(size_t, size_t)>& progress) {
  auto t0 = std::chrono::steady_clock::now();
  if (prompts.empty()) throw UsageError("lens --prompts: no prompts");
  LensBatchResult b;
  b.prompts = prompts;
  auto where = [](const LensPrompt& p) { return p.line > 0 ? fmt::format("prompt on line {}", p.line) : std::string("prompt"); };
  // Validate every prompt before the first forward pass.
  std::vector<std::vector<int64_t>> ids(prompts.size());
  std::vector<LensOptions> lo(prompts.size(), opts);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto& p = prompts[i];
    ids[i] = tok.encode(p.prompt, eo);
    if (ids[i].empty()) throw UsageError(where(p) + ": encodes to no tokens");
    if (static_cast<int64_t>(ids[i].size()) > m.config().n_ctx)
      throw UsageError(
          fmt::format("{}: {} tokens, longer than the model's context of {}", where(p), ids[i].size(), m.config().n_ctx));
    if (!p.target.empty()) {
      std::vector<int64_t> pieces;
      auto id = single_token_id(tok, p.target, &pieces);
      if (!id)
        throw UsageError(fmt::format("{}: target '{}' is {} tokens: {} (it must be a single token)", where(p), p.target,
                                     pieces.size(), display_ids(tok, pieces)));
      lo[i].target = *id;
    }
  }
  for (const auto& v : ids) lens_detail::validate_ids(m, v);
  b.runs.resize(prompts.size());
  size_t done = 0;
  if (opts.decoder_blocks > 0) {
    // The decoder-blocks lens re-runs blocks per sequence: one prompt at a time.
    for (size_t i = 0; i < prompts.size(); ++i) {
      b.runs[i] = logit_lens(m, ids[i], lo[i]);
      if (progress) progress(++done, prompts.size());
    }
  } else {
    // Batched forward (docs/lens.md, bench/bench_lens_batch.cpp): prompts sorted by length, right-padded to the
    // longest of their chunk with their own last id (causal attention: no real position sees a padded one), one
    // forward per chunk, then each prompt's lens pass on its own rows.
    lens_detail::LensEngine eng(m, opts);
    const auto& layers = eng.layers();
    std::vector<size_t> order(prompts.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return ids[x].size() < ids[y].size(); });
    const int64_t n = static_cast<int64_t>(layers.size()), d = m.config().d_model;
    // At most 64 prompts and about 256 MB of cached residuals per forward.
    const int64_t budget = std::max<int64_t>(1, (int64_t{256} << 20) / (4 * std::max<int64_t>(1, n * d)));
    vocablens::CacheSpec spec;
    spec.resid_pre = spec.resid_post = true;
    spec.resid_mid = opts.resid_mid;
    for (size_t c0 = 0; c0 < order.size();) {
      size_t c1 = c0 + 1;
      int64_t Tmax = static_cast<int64_t>(ids[order[c0]].size());
      while (c1 < order.size() && c1 - c0 < 64) {
        const int64_t T1 = std::max<int64_t>(Tmax, static_cast<int64_t>(ids[order[c1]].size()));
        if (T1 * static_cast<int64_t>(c1 - c0 + 1) > budget) break;
        Tmax = T1;
        ++c1;
      }
      const int64_t B = static_cast<int64_t>(c1 - c0);
      at::Tensor batch = at::empty({B, Tmax}, at::kLong);
      int64_t* bp = batch.data_ptr<int64_t>();
      for (int64_t r = 0; r < B; ++r) {
        const auto& v = ids[order[c0 + static_cast<size_t>(r)]];
        for (int64_t t = 0; t < Tmax; ++t)
          bp[r * Tmax + t] = v[static_cast<size_t>(std::min<int64_t>(t, static_cast<int64_t>(v.size()) - 1))];
      }
      at::Tensor all;  // [B, n, Tmax, d]
      {
        auto out = m.forward(batch, spec, /*compute_logits=*/false);
        std::vector<at::Tensor> hooks;
        hooks.reserve(layers.size());
        for (const auto& L : layers) hooks.push_back(out.cache.get(L.hook));  // [B, Tmax, d] each
        all = at::stack(hooks, 1);
      }
      for (int64_t r = 0; r < B; ++r) {
        const size_t i = order[c0 + static_cast<size_t>(r)];
        const int64_t T = static_cast<int64_t>(ids[i].size());
        at::Tensor normed = eng.normalise(all[r].narrow(1, 0, T));  // translators (tuned lens), final norm
        b.runs[i] = lens_detail::lens_from_normalised(m, eng, normed, ids[i], lo[i]);
        if (progress) progress(++done, prompts.size());
      }
      c0 = c1;
    }
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    const int64_t T = static_cast<int64_t>(ids[i].size());
    b.readout.push_back(lo[i].target ? T - 1 : (T >= 2 ? T - 2 : -1));
  }
  b.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return b;
}

Result LensBatchResult::to_result(const Tokenizer* tok) const {
  Result r;
  r.kind = "logit_lens_batch";
  const int64_t P = static_cast<int64_t>(runs.size());
  const int64_t n = P ? runs[0].n_layers() : 0;
  int64_t T = 0;
  for (const auto& L : runs) T = std::max(T, L.n_positions());
  auto name = [&](int64_t id) { return id < 0 ? std::string() : tok ? tok->display(id) : "#" + std::to_string(id); };
  const float nanf = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> tp(static_cast<size_t>(P * n * T), nanf), ent(tp.size(), nanf), kl(tp.size(), nanf);
  std::vector<int64_t> rank(tp.size(), -1), toks(static_cast<size_t>(P * T), -1), lengths(static_cast<size_t>(P));
  std::vector<float> rp(static_cast<size_t>(P * n), nanf);
  std::vector<int64_t> rr(static_cast<size_t>(P * n), -1);
  Table t{
      "by_layer",
      {"prompt_index", "prompt", "target", "position", "layer", "layer_label", "target_rank", "target_prob", "top1", "top1_prob"},
      {}};
  nlohmann::json ptoks = nlohmann::json::array(), plist = nlohmann::json::array();
  for (int64_t p = 0; p < P; ++p) {
    const LensResult& L = runs[static_cast<size_t>(p)];
    const int64_t Tp = L.n_positions();
    lengths[static_cast<size_t>(p)] = Tp;
    nlohmann::json tk = nlohmann::json::array();
    for (int64_t j = 0; j < Tp; ++j) {
      toks[static_cast<size_t>(p * T + j)] = L.tokens[static_cast<size_t>(j)];
      tk.push_back(name(L.tokens[static_cast<size_t>(j)]));
    }
    ptoks.push_back(tk);
    for (int64_t l = 0; l < n; ++l)
      for (int64_t j = 0; j < Tp; ++j) {
        const size_t dst = static_cast<size_t>((p * n + l) * T + j), src = L.at(l, j);
        tp[dst] = L.target_prob[src];
        rank[dst] = L.target_rank[src];
        ent[dst] = L.entropy[src];
        kl[dst] = L.kl_final[src];
      }
    const int64_t ro = readout[static_cast<size_t>(p)];
    const std::string tgt = ro >= 0 ? name(L.targets[static_cast<size_t>(ro)]) : std::string();
    plist.push_back({{"prompt", prompts[static_cast<size_t>(p)].prompt},
                     {"target", tgt},
                     {"readout_position", ro},
                     {"explicit_target", !prompts[static_cast<size_t>(p)].target.empty()},
                     {"tokens", Tp}});
    if (ro < 0) continue;
    for (int64_t l = 0; l < n; ++l) {
      const size_t src = L.at(l, ro);
      rp[static_cast<size_t>(p * n + l)] = L.target_prob[src];
      rr[static_cast<size_t>(p * n + l)] = L.target_rank[src];
      nlohmann::json top1 = L.top_k > 0 ? nlohmann::json(name(L.top_id(l, ro, 0))) : nlohmann::json();
      nlohmann::json top1p = L.top_k > 0 ? nlohmann::json(L.top_prob(l, ro, 0)) : nlohmann::json();
      t.rows.push_back({p, prompts[static_cast<size_t>(p)].prompt, tgt, ro, l, L.layers[static_cast<size_t>(l)].label,
                        L.target_rank[src], L.target_prob[src], top1, top1p});
    }
  }
  nlohmann::json layers = nlohmann::json::array();
  if (P)
    for (const auto& ly : runs[0].layers) layers.push_back(ly.label);
  const LensOptions* lo = P ? &runs[0].options : nullptr;
  r.settings = {{"prompts_file", source},
                {"top_k", P ? runs[0].top_k : 0},
                {"prompts", P},
                {"lens", lo && lo->tuned ? "tuned" : "logit"},
                {"tuned_lens", lo && lo->tuned ? nlohmann::json(lo->tuned->source) : nlohmann::json(nullptr)}};
  r.summary = {{"prompts", plist}, {"prompt_tokens", ptoks}, {"layers", layers},       {"n_prompts", P},
               {"max_tokens", T},  {"seconds", seconds},     {"forward", "per-prompt"}};
  r.arrays["target_prob"] = NdArray::f32({P, n, T}, tp.data());
  r.arrays["target_rank"] = NdArray::i64({P, n, T}, rank.data());
  r.arrays["entropy"] = NdArray::f32({P, n, T}, ent.data());
  r.arrays["kl_final"] = NdArray::f32({P, n, T}, kl.data());
  r.arrays["tokens"] = NdArray::i64({P, T}, toks.data());
  r.arrays["lengths"] = NdArray::i64({P}, lengths.data());
  r.arrays["readout_prob"] = NdArray::f32({P, n}, rp.data());
  r.arrays["readout_rank"] = NdArray::i64({P, n}, rr.data());
  r.tables.push_back(std::move(t));
  return r;
}

}  // namespace vocablens

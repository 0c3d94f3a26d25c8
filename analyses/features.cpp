// SAE / transcoder features in vocabulary space: the logit weights W_dec[f] W_U of every feature, streamed.
#include "vocablens/features.hpp"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <tuple>
#include <limits>
#include <map>

#include <fmt/format.h>

#include "vocablens/error.hpp"
#include "vocablens/hooks.hpp"
#include "vocablens/model.hpp"
#include "vocablens/sae.hpp"
#include "vocablens/tokenizer.hpp"
#include "vocablens/unembed.hpp"
#include "vocablens/weight.hpp"

#include "features_int8.hpp"
#include "row_topk.hpp"

namespace vocablens {

FeatureLogits feature_logits(const Model& m, const Sae& sae, const FeatureLogitsOptions& o, const Tokenizer* tok) {
  at::NoGradGuard no_grad;
  const int64_t d_model = m.config().d_model;
  if (sae.d_out != d_model)
    throw UsageError(fmt::format("{}: the decoder writes {}-wide vectors, the model's residual stream is {} wide", sae.source,
                                 sae.d_out, d_model));
  FeatureLogits a;
  a.options = o;
  a.sae_source = sae.source;
  a.sae_layout = sae.layout;
  a.architecture = to_string(sae.architecture);
  a.hook_name = sae.hook_name;
  a.hook_name_out = sae.hook_name_out;
  a.d_sae = sae.d_sae;
  a.d_in = sae.d_in;
  a.vocab_size = m.weights().W_U.size(1);
  if (o.top_k < 1) throw UsageError("--top-k must be at least 1");
  if (o.top_k > a.vocab_size)
    throw UsageError(fmt::format("--top-k {} is larger than the vocabulary ({} tokens)", o.top_k, a.vocab_size));
  std::vector<int64_t> ids = o.features;
  if (ids.empty())
    for (int64_t f = 0; f < sae.d_sae; ++f) ids.push_back(f);
  for (int64_t f : ids)
    if (f < 0 || f >= sae.d_sae)
      throw UsageError(
          fmt::format("feature {} is out of range ({} has {} features: 0..{})", f, sae.source, sae.d_sae, sae.d_sae - 1));
  a.features = ids;
  at::Tensor gamma;
  if (o.final_norm_scale && m.weights().lnf_w.defined()) gamma = materialize_weight(m.weights().lnf_w).to(at::kFloat);
  TopkStreamOptions so;
  so.cols = allowed_tokens(a.vocab_size, o.filter, tok);

  const int64_t N = static_cast<int64_t>(ids.size());
  a.top.resize(static_cast<size_t>(N));
  if (o.bottom) a.bottom.resize(static_cast<size_t>(N));
  a.decoder_norms.resize(static_cast<size_t>(N));
  // Columns (tokens) the lists may hold: all, or the filter's allow-list (ascending original ids).
  std::vector<int64_t> col_id;  // column of P -> token id; empty = identity
  if (so.cols) {
    col_id = *so.cols;
    std::sort(col_id.begin(), col_id.end());
    col_id.erase(std::unique(col_id.begin(), col_id.end()), col_id.end());
  }
  a.screen = "float32";
  const std::string scr = o.screen;
  if (scr != "auto" && scr != "int8" && scr != "float32")
    throw UsageError("screen '" + scr + "': expected auto, int8 or float32");
  const at::Tensor& Ws = m.weights().W_U;  // as stored
  const bool dense_wu = !is_packed_weight(Ws) &&
                        (Ws.scalar_type() == at::kFloat || Ws.scalar_type() == at::kBFloat16 || Ws.scalar_type() == at::kHalf);
  if (dense_wu && Ws.size(0) <= 65000 && feature_logits_int8_available() && (scr == "int8" || (scr == "auto" && N >= 256)) &&
      detail::feature_logits_int8(m, sae, o, gamma, ids, col_id, a)) {
    if (o.progress) o.progress(N, N);
    return a;
  }
  // The float32 screen: W_U as float32 (a view when stored so; a copy otherwise).
  const at::Tensor W_U = m.W_U();  // [d, V]
  at::Tensor P = W_U;
  if (!col_id.empty()) P = W_U.index_select(1, at::tensor(col_id, at::kLong)).contiguous();
  // else W_U as it is (a transposed view of W_E when tied: no copy; canonical_dot takes strides)
  // Chunks of decoder rows: only these are upcast to float32 (a BF16 W_dec of 262k × 2304 stays as stored),
  // and their product with W_U ([chunk, V] float32, at most ~256 MB) is the only large buffer: exact top and
  // bottom k per row come from it (row_topk.hpp); rows it cannot settle (near-ties at the margin) go through
  // the streamed engine. Nothing of size d_sae × V is ever formed.
  const detail::RowTopk rt(P, col_id, o.top_k, o.bottom, W_U, so);
  const int64_t kChunk = rt.chunk_rows();
  for (int64_t c0 = 0; c0 < N; c0 += kChunk) {
    if (o.progress) o.progress(c0, N);
    const int64_t cn = std::min(kChunk, N - c0);
    at::Tensor sel = at::tensor(std::vector<int64_t>(ids.begin() + c0, ids.begin() + c0 + cn), at::kLong);
    at::Tensor X = materialize_weight(sae.W_dec.index_select(0, sel)).to(at::kFloat).contiguous();
    if (gamma.defined()) X = (X * gamma).contiguous();
    if (!at::isfinite(X).all().item<bool>()) throw UsageError(sae.source + ": non-finite decoder rows");
    a.rows_streamed += rt.run(X, c0, a.top, o.bottom ? &a.bottom : nullptr, &a.decoder_norms);
  }
  if (o.progress) o.progress(N, N);
  return a;
}

Result FeatureLogits::to_result(const Tokenizer* tok) const {
  auto text = [&](int64_t id) { return tok ? tok->display(id) : "#" + std::to_string(id); };
  Result r;
  r.kind = "features";
  r.settings = {{"sae", sae_source},
                {"layout", sae_layout},
                {"top_k", options.top_k},
                {"bottom", options.bottom},
                {"final_norm_scale", options.final_norm_scale},
                {"features", static_cast<int64_t>(features.size()) == d_sae ? nlohmann::json("all") : nlohmann::json(features)},
                {"alpha_only", options.filter.alpha_only},
                {"conventions",
                 "logit weights of feature f = W_dec[f] @ W_U (Neuronpedia's top/bottom logits); with "
                 "final_norm_scale, (W_dec[f] * gamma_final) @ W_U; exact top-k, value desc then token id asc"}};
  r.summary["architecture"] = architecture;
  r.summary["hook_name"] = hook_name;
  if (!hook_name_out.empty()) r.summary["hook_name_out"] = hook_name_out;
  r.summary["d_sae"] = d_sae;
  r.summary["screen"] = screen;
  if (screen == "int8") {
    r.summary["screen_survivors"] = survivors;
    r.summary["screen_finalists"] = finalists;
  }
  r.summary["d_in"] = d_in;
  r.summary["vocab_size"] = vocab_size;
  const int64_t N = static_cast<int64_t>(features.size()), k = options.top_k;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Table tab{"top_k", {"feature", "direction", "rank", "token_id", "token", "value"}, {}};
  nlohmann::json pages = nlohmann::json::array();
  auto pack = [&](const std::vector<std::vector<TopkEntry>>& lists, const char* name) {
    std::vector<int64_t> ids(static_cast<size_t>(N * k), -1);
    std::vector<double> vals(static_cast<size_t>(N * k), nan);
    for (int64_t q = 0; q < N; ++q)
      for (size_t e = 0; e < lists[static_cast<size_t>(q)].size() && static_cast<int64_t>(e) < k; ++e) {
        ids[static_cast<size_t>(q * k) + e] = lists[static_cast<size_t>(q)][e].j;
        vals[static_cast<size_t>(q * k) + e] = lists[static_cast<size_t>(q)][e].value;
      }
    r.arrays[std::string(name) + "_ids"] = NdArray::i64({N, k}, ids.data());
    r.arrays[std::string(name) + "_values"] = NdArray::f64({N, k}, vals.data());
  };
  // The table and the report's pages hold the first kTableFeatures features (a table row is a few hundred
  // bytes of JSON: 262 144 features × 20 rows would be over a GB); the arrays hold every feature.
  constexpr int64_t kTableFeatures = 2000;
  if (N > kTableFeatures) r.summary["table_features"] = kTableFeatures;
  for (int64_t q = 0; q < std::min(N, kTableFeatures); ++q) {
    nlohmann::json page = {{"feature", features[static_cast<size_t>(q)]},
                           {"decoder_norm", decoder_norms[static_cast<size_t>(q)]}};
    for (int dir = 0; dir < (options.bottom ? 2 : 1); ++dir) {
      const auto& lst = dir == 0 ? top[static_cast<size_t>(q)] : bottom[static_cast<size_t>(q)];
      nlohmann::json toks = nlohmann::json::array(), vals = nlohmann::json::array();
      for (size_t e = 0; e < lst.size(); ++e) {
        tab.rows.push_back({features[static_cast<size_t>(q)], dir == 0 ? "top" : "bottom", static_cast<int64_t>(e + 1), lst[e].j,
                            text(lst[e].j), lst[e].value});
        if (e < 10) {
          toks.push_back(text(lst[e].j));
          vals.push_back(lst[e].value);
        }
      }
      page[dir == 0 ? "pos_str" : "neg_str"] = toks;
      page[dir == 0 ? "pos_values" : "neg_values"] = vals;
    }
    pages.push_back(page);
  }
  r.summary["features"] = pages;
  pack(top, "top");
  if (options.bottom) pack(bottom, "bottom");
  r.arrays["feature_ids"] = NdArray::i64({N}, features.data());
  r.arrays["decoder_norms"] = NdArray::f64({N}, decoder_norms.data());
  r.tables.push_back(std::move(tab));
  return r;
}

FeatureLens feature_lens(const Model& m, const Sae& sae, const std::vector<int64_t>& ids, const FeatureLensOptions& o,
                         const Tokenizer* tok) {
  at::NoGradGuard no_grad;
  if (sae.hook_name.empty()) throw UsageError(sae.source + ": the SAE names no hook point; give one (--hook / hook_name=)");
  if (ids.empty()) throw UsageError("the prompt has no tokens");
  if (o.top_features < 1) throw UsageError("--top-features must be at least 1");
  check_sae_fits(sae, m);
  FeatureLens a;
  a.options = o;
  a.sae_source = sae.source;
  a.hook_name = sae.hook_name;
  a.ids = ids;
  at::Tensor seen;
  HookList hooks;
  hooks.add(sae.hook_name, [&](at::Tensor& x) { seen = x.detach().clone(); });
  run_with_hooks(m, at::tensor(ids, at::kLong), hooks);
  if (!seen.defined()) throw UsageError("hook " + sae.hook_name + " was not reached in the forward pass");
  at::Tensor x = seen.reshape({-1, seen.size(-1)}).to(at::kFloat);  // [T, d_in] (hook_z: heads flattened)
  if (x.size(-1) != sae.d_in) x = seen.reshape({static_cast<int64_t>(ids.size()), -1}).to(at::kFloat);
  a.acts = sae.encode(x).contiguous();
  const int64_t T = a.acts.size(0), n = std::min<int64_t>(o.top_features, sae.d_sae);
  auto [vals, idx] = a.acts.topk(n, 1);
  std::vector<int64_t> shown;
  for (int64_t t = 0; t < T; ++t) {
    a.l0.push_back((a.acts[t] > 0).sum().item<int64_t>());
    std::vector<std::pair<int64_t, double>> row;
    for (int64_t q = 0; q < n; ++q) {
      const double v = vals[t][q].item<double>();
      if (v <= 0) break;
      row.emplace_back(idx[t][q].item<int64_t>(), v);
      shown.push_back(row.back().first);
    }
    a.top.push_back(std::move(row));
  }
  std::sort(shown.begin(), shown.end());
  shown.erase(std::unique(shown.begin(), shown.end()), shown.end());
  a.shown = shown;
  if (!shown.empty() && sae.d_out == m.config().d_model) {
    FeatureLogitsOptions fo;
    fo.top_k = o.top_k;
    fo.features = shown;
    fo.bottom = false;
    fo.final_norm_scale = o.final_norm_scale;
    a.shown_tokens = feature_logits(m, sae, fo, tok).top;
  }
  return a;
}

Result FeatureLens::to_result(const Tokenizer* tok, const std::string& prompt) const {
  auto text = [&](int64_t id) { return tok ? tok->display(id) : "#" + std::to_string(id); };
  Result r;
  r.kind = "feature_lens";
  r.settings = {{"sae", sae_source},
                {"hook_name", hook_name},
                {"prompt", prompt},
                {"top_features", options.top_features},
                {"top_k", options.top_k}};
  const int64_t T = static_cast<int64_t>(ids.size()), n = options.top_features;
  std::vector<int64_t> tf(static_cast<size_t>(T * n), -1);
  std::vector<double> ta(static_cast<size_t>(T * n), 0.0);
  nlohmann::json toks = nlohmann::json::array();
  std::map<int64_t, std::string> feature_text;
  for (size_t s = 0; s < shown.size() && s < shown_tokens.size(); ++s) {
    std::string t;
    for (const auto& e : shown_tokens[s]) t += (t.empty() ? "" : " ") + text(e.j);
    feature_text[shown[s]] = t;
  }
  Table tab{"top_features", {"position", "token", "rank", "feature", "activation", "feature_top_tokens"}, {}};
  for (int64_t t = 0; t < T; ++t) {
    toks.push_back(text(ids[static_cast<size_t>(t)]));
    const auto& row = top[static_cast<size_t>(t)];
    for (size_t q = 0; q < row.size(); ++q) {
      tf[static_cast<size_t>(t * n) + q] = row[q].first;
      ta[static_cast<size_t>(t * n) + q] = row[q].second;
      tab.rows.push_back({t, text(ids[static_cast<size_t>(t)]), static_cast<int64_t>(q + 1), row[q].first, row[q].second,
                          feature_text.count(row[q].first) ? feature_text[row[q].first] : ""});
    }
  }
  r.summary["tokens"] = toks;
  r.arrays["ids"] = NdArray::i64({T}, ids.data());
  r.arrays["l0"] = NdArray::i64({T}, l0.data());
  r.arrays["top_features"] = NdArray::i64({T, n}, tf.data());
  r.arrays["top_activations"] = NdArray::f64({T, n}, ta.data());
  const int64_t S = static_cast<int64_t>(shown.size());
  r.arrays["shown_features"] = NdArray::i64({S}, shown.data());
  if (!shown_tokens.empty()) {
    std::vector<int64_t> st(static_cast<size_t>(S * options.top_k), -1);
    for (int64_t s = 0; s < S; ++s)
      for (size_t e = 0; e < shown_tokens[static_cast<size_t>(s)].size(); ++e)
        st[static_cast<size_t>(s * options.top_k) + e] = shown_tokens[static_cast<size_t>(s)][e].j;
    r.arrays["shown_token_ids"] = NdArray::i64({S, options.top_k}, st.data());
  }
  r.tables.push_back(std::move(tab));
  return r;
}

}  // namespace vocablens

// An attribution graph as a Result (kind "graph", vocablens/graph.hpp): pruned, scored, each node labelled in
// vocabulary space, and Neuronpedia's graph JSON with circuit-tracer's node ids and feature_type strings
// (frontend/graph_models.py, utils/create_graph_files.py).
#include <cmath>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "row_topk.hpp"
#include "token_label.hpp"
#include "vocablens/error.hpp"
#include "vocablens/features.hpp"
#include "vocablens/graph.hpp"
#include "vocablens/model.hpp"
#include "vocablens/nonfinite.hpp"
#include "vocablens/result.hpp"
#include "vocablens/sae.hpp"
#include "vocablens/tokenizer.hpp"
#include "vocablens/unembed.hpp"

namespace vocablens {

namespace graph_result_detail {

/// One node of the full order, described.
struct NodeInfo {
  std::string kind;  ///< "feature", "error", "embedding", "logit"
  int64_t layer = -1, pos = -1, feature = -1, token = -1, index = -1;
  double activation = std::nan("");
};

NodeInfo describe(const AttributionGraph& g, int64_t n) {
  NodeInfo i;
  i.index = n;
  const int64_t F = g.n_selected(), E = F + g.n_layers * g.n_pos, Tk = E + g.n_pos;
  if (n < F) {
    const int64_t a = g.selected[n].item<int64_t>();
    i.kind = "feature";
    i.layer = g.active_features[a][0].item<int64_t>();
    i.pos = g.active_features[a][1].item<int64_t>();
    i.feature = g.active_features[a][2].item<int64_t>();
    i.activation = g.activations[a].item<double>();
  } else if (n < E) {
    i.kind = "error";
    i.layer = (n - F) / g.n_pos;
    i.pos = (n - F) % g.n_pos;
  } else if (n < Tk) {
    i.kind = "embedding";
    i.pos = n - E;
  } else {
    i.kind = "logit";
    i.pos = g.n_pos - 1;
    i.token = g.logit_ids[n - Tk].item<int64_t>();
  }
  if (i.kind != "logit") i.token = g.ids[i.pos].item<int64_t>();
  return i;
}

/// A feature's vocabulary labels: token ids of its decoder row's top and bottom logit weights through W_U and
/// of its encoder row's top tokens through E⁺.
struct FeatureLabel {
  std::vector<int64_t> top, bottom, encoder;
};

std::vector<int64_t> ids_of(const std::vector<TopkEntry>& v) {
  std::vector<int64_t> out;
  for (const auto& e : v) out.push_back(e.j);
  return out;
}

std::string tokens_of(const Tokenizer* tok, const std::vector<int64_t>& ids) {
  std::string s;
  for (int64_t j : ids) s += (s.empty() ? "" : " ") + token_label(tok, j);
  return s;
}

/// Each kept feature's labels (FeatureLabel), by (layer, feature): the decoder row into the last layer it
/// writes to through the feature-logit engine, the encoder row through the read projection E⁺. Every layer's
/// rows go through each engine at once: a pass costs about the same for 1 row as for 100 (the streamed
/// projection sorts and transposes its [d, V] matrix first), so one pass per layer would cost L of them.
std::map<std::pair<int64_t, int64_t>, FeatureLabel> feature_labels(const Model& m, const Tokenizer* tok,
                                                                   const GraphTranscoders& tcs, const std::vector<NodeInfo>& kept,
                                                                   int64_t k) {
  std::map<int64_t, std::vector<int64_t>> by_layer;
  for (const NodeInfo& n : kept)
    if (n.kind == "feature") by_layer[n.layer].push_back(n.feature);
  std::map<std::pair<int64_t, int64_t>, FeatureLabel> out;
  if (by_layer.empty()) return out;
  std::vector<at::Tensor> dec, enc;
  std::vector<std::pair<int64_t, int64_t>> keys;
  for (auto& [layer, feats] : by_layer) {
    std::sort(feats.begin(), feats.end());
    feats.erase(std::unique(feats.begin(), feats.end()), feats.end());
    const at::Tensor f = at::tensor(feats, at::kLong);
    int64_t last = layer;
    for (int64_t o = layer; o < tcs.n_layers(); ++o)
      if (tcs.writes(layer, o)) last = o;
    dec.push_back(tcs.decoder_rows(layer, last, f));
    enc.push_back(tcs.encoder_rows(layer, f));
    for (int64_t feat : feats) keys.emplace_back(layer, feat);
  }
  // the decoder rows as an SAE of their own, so that the feature-logit engine reads them
  Sae rows;
  rows.source = tcs.source();
  rows.W_dec = at::cat(dec, 0);
  rows.d_sae = rows.W_dec.size(0);
  rows.d_in = rows.d_out = rows.W_dec.size(1);
  FeatureLogitsOptions fo;
  fo.top_k = k;
  FeatureLogits fl = feature_logits(m, rows, fo, tok);
  // The encoder rows through E⁺ by one float32 product [n, V] screened and settled exactly (row_topk.hpp), as
  // the feature-logit engine does: the streamed engine (project_topk) first makes sorted and packed copies of
  // E⁺ [d, V] (three of 154 MB on GPT-2) whatever the number of rows, which was this run's peak and a second.
  const at::Tensor X = at::cat(enc, 0).contiguous(), R = read_projection(m, InverseKind::Pinv);
  require_finite(R, "the projection matrix [d, V]", "every token ranking through it is undefined");
  if (!all_finite(X)) throw UsageError(tcs.source() + ": non-finite encoder rows");
  const detail::RowTopk rt(R, {}, k, /*bottom=*/false, R, {});
  std::vector<std::vector<TopkEntry>> e(static_cast<size_t>(X.size(0)));
  for (int64_t r0 = 0; r0 < X.size(0); r0 += rt.chunk_rows())
    rt.run(X.narrow(0, r0, std::min(rt.chunk_rows(), X.size(0) - r0)).contiguous(), r0, e, nullptr, nullptr);
  for (size_t i = 0; i < keys.size(); ++i) out[keys[i]] = {ids_of(fl.top[i]), ids_of(fl.bottom[i]), ids_of(e[i])};
  return out;
}

std::string label_of(const NodeInfo& n, const Tokenizer* tok, const AttributionGraph& g,
                     const std::map<std::pair<int64_t, int64_t>, FeatureLabel>& feats) {
  if (n.kind == "feature") return tokens_of(tok, feats.at({n.layer, n.feature}).top);
  if (n.kind == "error") return fmt::format("error at {}", token_label(tok, n.token));
  if (n.kind == "embedding") return token_label(tok, n.token);
  const int64_t k = n.index - (g.n_nodes() - g.n_logits());
  return fmt::format("Output \"{}\" (p={:.3f})", token_label(tok, n.token), g.logit_probs[k].item<double>());
}

/// circuit-tracer's Node.feature_node / error_node / token_node / logit_node (its current frontend/graph_models.py):
/// a feature's `feature` is the Cantor pairing of (layer, feature), an error's id has -1 in the feature's place, so
/// no two nodes share an id.
nlohmann::json neuronpedia_node(const NodeInfo& n, const AttributionGraph& g, double cumulative, const std::string& label) {
  nlohmann::json j;
  const std::string L = std::to_string(n.layer);
  if (n.kind == "feature") {
    j = {{"node_id", fmt::format("{}_{}_{}", n.layer, n.feature, n.pos)},
         {"feature", (n.layer + n.feature) * (n.layer + n.feature + 1) / 2 + n.feature},
         {"layer", L},
         {"ctx_idx", n.pos},
         {"feature_type", "cross layer transcoder"},
         {"jsNodeId", fmt::format("{}_{}-0", n.layer, n.feature)},
         {"influence", cumulative},
         {"activation", n.activation}};
  } else if (n.kind == "error") {
    j = {{"node_id", fmt::format("{}_-1_{}", n.layer, n.pos)},
         {"feature", -1},
         {"layer", L},
         {"ctx_idx", n.pos},
         {"feature_type", "mlp reconstruction error"},
         {"jsNodeId", fmt::format("{}_-1-{}", n.layer, n.pos)},
         {"influence", cumulative},
         {"activation", nullptr}};
  } else if (n.kind == "embedding") {
    j = {{"node_id", fmt::format("E_{}_{}", n.token, n.pos)},
         {"feature", n.pos},
         {"layer", "E"},
         {"ctx_idx", n.pos},
         {"feature_type", "embedding"},
         {"jsNodeId", fmt::format("E_{}-{}", n.token, n.pos)},
         {"influence", cumulative},
         {"activation", nullptr}};
  } else {
    const int64_t k = n.index - (g.n_nodes() - g.n_logits());
    const std::string top = std::to_string(g.n_layers + 1);
    j = {{"node_id", fmt::format("{}_{}_{}", top, n.token, n.pos)},
         {"feature", n.token},
         {"layer", top},
         {"ctx_idx", n.pos},
         {"feature_type", "logit"},
         {"jsNodeId", fmt::format("L_{}-{}", n.token, n.pos)},
         {"influence", nullptr},
         {"activation", nullptr}};
    j["token_prob"] = g.logit_probs[k].item<double>();
    j["is_target_logit"] = k == 0;
  }
  if (!j.contains("token_prob")) j["token_prob"] = 0.0;
  if (!j.contains("is_target_logit")) j["is_target_logit"] = false;
  j["run_idx"] = 0;
  j["reverse_ctx_idx"] = 0;
  j["clerp"] = label;
  return j;
}

}  // namespace graph_result_detail

Result graph_result(const Model& m, const Tokenizer* tok, const GraphTranscoders& tcs, const AttributionGraph& g,
                    const GraphReportOptions& o) {
  using namespace graph_result_detail;
  const GraphPruning p = prune_graph(g, o.node_threshold, o.edge_threshold);
  const GraphScores sc = graph_scores(g);
  std::vector<NodeInfo> kept;
  auto mask = p.node_mask.accessor<bool, 1>();
  for (int64_t n = 0; n < g.n_nodes(); ++n)
    if (mask[n]) kept.push_back(describe(g, n));
  const auto feats = feature_labels(m, tok, tcs, kept, o.label_tokens);

  Result r;
  r.kind = "graph";
  r.settings = {{"prompt", o.prompt},
                {"transcoders", o.transcoders},
                {"node_threshold", o.node_threshold},
                {"edge_threshold", o.edge_threshold}};
  const int64_t M = static_cast<int64_t>(kept.size());
  std::vector<int64_t> idx;
  for (const NodeInfo& n : kept) idx.push_back(n.index);
  at::Tensor ix = at::tensor(idx, at::kLong);
  const at::Tensor kept_mask = g.between(p.edge_mask, ix);
  at::Tensor adj = g.between(g.rows, ix).to(at::kDouble) * kept_mask.to(at::kDouble);
  at::Tensor adj32 = adj.to(at::kFloat).contiguous();
  r.arrays["ids"] = NdArray::i64({g.n_pos}, g.ids.contiguous().data_ptr<int64_t>());
  r.arrays["nodes"] = NdArray::i64({M}, idx.data());
  r.arrays["adjacency"] = NdArray::f32({M, M}, adj32.data_ptr<float>());
  at::Tensor inf = p.node_influence.contiguous();
  r.arrays["node_influence"] = NdArray::f64({g.n_nodes()}, inf.data_ptr<double>());
  at::Tensor af = g.active_features.contiguous(), acts = g.activations.contiguous(), sel = g.selected.contiguous();
  r.arrays["active_features"] = NdArray::i64({af.size(0), 3}, af.data_ptr<int64_t>());
  r.arrays["activations"] = NdArray::f32({acts.size(0)}, acts.data_ptr<float>());
  r.arrays["selected"] = NdArray::i64({sel.size(0)}, sel.data_ptr<int64_t>());
  if (o.rows) {
    at::Tensor rows = g.rows.contiguous(), lid = g.logit_ids.contiguous(), lp = g.logit_probs.to(at::kDouble).contiguous();
    r.arrays["rows"] = NdArray::f32({rows.size(0), rows.size(1)}, rows.data_ptr<float>());
    r.arrays["logit_ids"] = NdArray::i64({lid.size(0)}, lid.data_ptr<int64_t>());
    r.arrays["logit_probs"] = NdArray::f64({lp.size(0)}, lp.data_ptr<double>());
  }
  if (o.full_adjacency) {
    at::Tensor full = g.dense_adjacency();
    r.arrays["full_adjacency"] = NdArray::f32({g.n_nodes(), g.n_nodes()}, full.data_ptr<float>());
  }

  Table t{"nodes",
          {"node", "node_id", "kind", "layer", "position", "feature", "token_id", "activation", "influence", "cumulative",
           "label", "bottom_tokens", "encoder_tokens"},
          {}};
  // the feature nodes' label token ids, [M, k] in the table's order (-1 on other nodes' rows)
  const int64_t k = o.label_tokens;
  std::vector<int64_t> lab_top(static_cast<size_t>(M * k), -1), lab_bottom(lab_top), lab_enc(lab_top);
  nlohmann::json np_nodes = nlohmann::json::array(), links = nlohmann::json::array();
  std::vector<std::string> node_ids(static_cast<size_t>(M));
  for (int64_t i = 0; i < M; ++i) {
    const NodeInfo& n = kept[static_cast<size_t>(i)];
    const std::string label = label_of(n, tok, g, feats);
    nlohmann::json nj = neuronpedia_node(n, g, p.cumulative_scores[n.index].item<double>(), label);
    node_ids[static_cast<size_t>(i)] = nj["node_id"].get<std::string>();
    np_nodes.push_back(nj);
    std::string bottom, encoder;
    if (n.kind == "feature") {
      const FeatureLabel& fl = feats.at({n.layer, n.feature});
      bottom = tokens_of(tok, fl.bottom);
      encoder = tokens_of(tok, fl.encoder);
      std::copy(fl.top.begin(), fl.top.end(), lab_top.begin() + i * k);
      std::copy(fl.bottom.begin(), fl.bottom.end(), lab_bottom.begin() + i * k);
      std::copy(fl.encoder.begin(), fl.encoder.end(), lab_enc.begin() + i * k);
    }
    t.rows.push_back({n.index, node_ids[static_cast<size_t>(i)], n.kind, n.layer, n.pos, n.feature, n.token,
                      std::isnan(n.activation) ? nlohmann::json(nullptr) : nlohmann::json(n.activation),
                      p.node_influence[n.index].item<double>(), p.cumulative_scores[n.index].item<double>(), label, bottom,
                      encoder});
  }
  // links in circuit-tracer's order (row-major over target, source); nodes kept only when linked, or
  // embeddings and logits
  std::vector<char> linked(static_cast<size_t>(M), 0);
  auto a = adj.accessor<double, 2>();
  auto em = kept_mask.accessor<bool, 2>();
  int64_t kept_edges = 0;
  for (int64_t dst = 0; dst < M; ++dst)
    for (int64_t src = 0; src < M; ++src)
      if (em[dst][src]) {
        links.push_back({{"source", node_ids[src]}, {"target", node_ids[dst]}, {"weight", a[dst][src]}});
        linked[dst] = linked[src] = 1;
        ++kept_edges;
      }
  nlohmann::json used = nlohmann::json::array();
  for (int64_t i = 0; i < M; ++i) {
    const std::string ft = np_nodes[i]["feature_type"].get<std::string>();
    if (linked[i] || ft == "embedding" || ft == "logit") used.push_back(np_nodes[i]);
  }
  r.tables.push_back(std::move(t));
  r.arrays["label_top_ids"] = NdArray::i64({M, k}, lab_top.data());
  r.arrays["label_bottom_ids"] = NdArray::i64({M, k}, lab_bottom.data());
  r.arrays["label_encoder_ids"] = NdArray::i64({M, k}, lab_enc.data());

  nlohmann::json prompt_tokens = nlohmann::json::array(), logits = nlohmann::json::array();
  for (int64_t i = 0; i < g.n_pos; ++i) prompt_tokens.push_back(token_label(tok, g.ids[i].item<int64_t>()));
  for (int64_t k = 0; k < g.n_logits(); ++k) {
    const int64_t id = g.logit_ids[k].item<int64_t>();
    logits.push_back({{"id", id}, {"token", token_label(tok, id)}, {"prob", g.logit_probs[k].item<double>()}});
  }
  r.summary = {{"n_layers", g.n_layers},
               {"n_pos", g.n_pos},
               {"n_active", g.active_features.size(0)},
               {"n_selected", g.n_selected()},
               {"n_errors", g.n_layers * g.n_pos},
               {"n_logits", g.n_logits()},
               {"logits", logits},
               {"replacement_score", sc.replacement},
               {"completeness_score", sc.completeness},
               {"kept_nodes", M},
               {"kept_edges", kept_edges}};
  r.summary["neuronpedia"] = {{"metadata",
                               {{"slug", o.slug},
                                {"scan", o.transcoders},
                                {"transcoder_list", nlohmann::json::array()},
                                {"prompt_tokens", prompt_tokens},
                                {"prompt", o.prompt},
                                {"node_threshold", o.node_threshold},
                                {"schema_version", 1}}},
                              {"qParams",
                               {{"pinnedIds", nlohmann::json::array()},
                                {"supernodes", nlohmann::json::array()},
                                {"linkType", "both"},
                                {"clickedId", ""},
                                {"sg_pos", ""}}},
                              {"nodes", used},
                              {"links", links}};
  return r;
}

std::vector<std::string> graph_feature_labels(const Model& m, const Tokenizer* tok, const GraphTranscoders& tcs,
                                              const std::vector<std::pair<int64_t, int64_t>>& features, int64_t label_tokens) {
  using namespace graph_result_detail;
  std::vector<NodeInfo> nodes;
  for (const auto& [layer, feature] : features) {
    if (layer < 0 || layer >= tcs.n_layers() || feature < 0 || feature >= tcs.n_features(layer))
      throw UsageError(
          fmt::format("graph: no feature {} at layer {} in {} ({} layers)", feature, layer, tcs.source(), tcs.n_layers()));
    NodeInfo n;
    n.kind = "feature";
    n.layer = layer;
    n.feature = feature;
    nodes.push_back(n);
  }
  const auto labels = feature_labels(m, tok, tcs, nodes, label_tokens);
  std::vector<std::string> out;
  for (const NodeInfo& n : nodes) out.push_back(tokens_of(tok, labels.at({n.layer, n.feature}).top));
  return out;
}

}  // namespace vocablens

// `graph`: its options, declared once, its memory estimate and the call every surface makes
// (vocablens/analysis_registry.hpp): `vocablens graph MODEL --transcoders DIR --prompt TEXT`,
// `vocablens.graph(model, prompt, transcoders=...)`, `POST /api/graph`.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "entry_common.hpp"
#include "vocablens/analysis_estimate.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/error.hpp"
#include "vocablens/graph.hpp"
#include "vocablens/memory_estimate.hpp"
#include "vocablens/model.hpp"
#include "vocablens/tokenizer.hpp"

namespace vocablens::entries {

namespace {

/// The prompt's ids with the model's BOS first (circuit-tracer's graphs start with it; its position's
/// features and error are then left out), unless `bos` is false.
std::vector<int64_t> graph_prompt(const AnalysisRequest& q) {
  std::vector<int64_t> ids = entry::prompt_of(q);
  const int64_t bos = q.model.config().bos_token_id;
  const nlohmann::json& b = q.options.at("bos");
  if (!(b.is_boolean() && !b.get<bool>()) && bos >= 0 && ids.front() != bos) ids.insert(ids.begin(), bos);
  if (static_cast<int64_t>(ids.size()) > q.model.config().n_ctx)
    throw UsageError(fmt::format("graph: {}: the prompt with its BOS is {} tokens, longer than the model's context of {} tokens",
                                 q.spelled("prompt"), ids.size(), q.model.config().n_ctx));
  return ids;
}

GraphOptions graph_options(const AnalysisRequest& q) {
  const auto& o = q.options;
  GraphOptions g;
  g.max_n_logits = o.at("max_n_logits").get<int64_t>();
  g.desired_logit_prob = o.at("desired_logit_prob").get<double>();
  g.batch_size = o.at("batch_size").get<int64_t>();
  if (!o.at("max_feature_nodes").is_null()) g.max_feature_nodes = o.at("max_feature_nodes").get<int64_t>();
  g.progress = q.progress;
  return g;
}

// The peak memory (vocablens/analysis_estimate.hpp): the forward with its patterns, then the frozen state
// (patterns, errors, one layer's dense activations, the active features' scaled decoder rows), the rows [F + K, A + (L + 1) T], the adjacency
// [N, N] and pruning's float64 copies of it. A, the active features, is known only once the transcoders
// ran: taken as 64 per position and layer (the L0 of the published transcoders is 20-150), or
// max_feature_nodes when smaller for the rows.
AnalysisEstimate graph_estimate(const AnalysisRequest& q) {
  const Model& m = q.model;
  const auto& c = m.config();
  const std::vector<int64_t> ids = graph_prompt(q);
  const double T = static_cast<double>(ids.size()), L = static_cast<double>(c.n_layers), d = static_cast<double>(c.d_model);
  const double H = static_cast<double>(c.n_heads), K = static_cast<double>(q.options.at("max_n_logits").get<int64_t>());
  // the transcoders are memory-mapped: opening them costs their headers, and they say how many features can fire
  auto tcs = load_graph_transcoders(q.options.at("transcoders").get<std::string>(), m);
  double A = 0, rows_written = 0;  // rows_written: active features × the blocks each writes to (a CLT: all later ones)
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const double a = T * std::min(64.0, static_cast<double>(tcs->n_features(l)));
    A += a;
    for (int64_t o = l; o < c.n_layers; ++o) rows_written += tcs->writes(l, o) ? a : 0.0;
  }
  double F = A;
  if (!q.options.at("max_feature_nodes").is_null())
    F = std::min(F, static_cast<double>(q.options.at("max_feature_nodes").get<int64_t>()));
  const double B = static_cast<double>(q.options.at("batch_size").get<int64_t>());
  CacheSpec spec;
  spec.resid_pre = spec.resid_mid = spec.resid_post = spec.mlp_out = spec.pattern = true;
  AnalysisEstimate e;
  e.memory = estimate_forward_memory(m, 1, static_cast<int64_t>(ids.size()), spec, true);
  e.memory.add("graph: frozen attention patterns [L, H, T, T]", L * H * T * T * 4);
  e.memory.add("graph: error vectors and MLP inputs [L, T, d]", 2 * L * T * d * 4);
  e.memory.add("graph: active features (64 per position and layer assumed, at most the width)", A * 28);
  e.memory.add("graph: their decoder rows × activation, per block written", rows_written * d * 4);
  const double N = F + (L + 1) * T + K;
  e.memory.add("graph: rows [F + K, A + (L + 1) T]", (F + K) * (A + (L + 1) * T) * 4);
  e.memory.add_phase("graph: one backward batch [B, T, d] and its temporaries", 6 * B * T * d * 4 + B * H * T * d * 4);
  e.memory.add_phase("graph: adjacency [N, N] and pruning's float64 copies", N * N * (4 + 5 * 8));
  e.what = fmt::format("the attribution graph of {} tokens of {}", ids.size(), m.source());
  e.reduce = "give a shorter prompt, or a smaller " + q.spelled("max_feature_nodes");
  return e;
}

}  // namespace

void register_graph_entry(AnalysisRegistry& r) {
  AnalysisDecl d;
  d.name = d.command = "graph";
  d.summary = "Attribution graph through transcoders (per-layer or cross-layer): which features, errors and tokens drive the next-token "
              "logits (circuit-tracer's local replacement model), pruned, each node labelled in vocabulary space";
  d.input = "prompt";
  d.options = entry::prompt_decls();
  entry::append(d.options, {
      OptionDecl{"transcoders", OptionType::Text, nullptr,
                 "Transcoder folder: circuit-tracer's config.yaml folder (transcoder_set or cross_layer_transcoder, read "
                 "at mlp.hook_in, writing the MLP output), or layer_{i}.safetensors for every layer, each read at its "
                 "layer's MLP input"}.as_required(),
      {"node_threshold", OptionType::Real, 0.8, "Pruning: keep the features and errors carrying this share of the influence on the logits", 0, 1},
      {"edge_threshold", OptionType::Real, 0.98, "Pruning: keep the edges carrying this share of the influence", 0, 1},
      {"max_feature_nodes", OptionType::Integer, nullptr,
       "Compute rows for at most this many features, the most influential first (default: every active feature)", 1, 1e7},
      {"max_n_logits", OptionType::Integer, 10, "At most this many logit targets", 1, 1000},
      {"desired_logit_prob", OptionType::Real, 0.95, "Fewest top logits whose probabilities reach this", 1e-9, 1},
      {"batch_size", OptionType::Integer, 64, "Rows computed together in one backward pass", 1, 4096},
      {"label_tokens", OptionType::Integer, 5, "Tokens in a feature's vocabulary label", 1, 100},
      {"save_adjacency", OptionType::Flag, false, "Also keep the unpruned adjacency [N, N] (array full_adjacency)"},
  });
  r.add({std::move(d),
         [](const AnalysisRequest& q) {
           const auto& o = q.options;
           const std::string dir = o.at("transcoders").get<std::string>();
           auto tcs = load_graph_transcoders(dir, q.model);
           const std::vector<int64_t> ids = graph_prompt(q);
           GraphOptions go = graph_options(q);
           go.zero_first_position = ids.front() == q.model.config().bos_token_id;
           AttributionGraph g = attribution_graph(q.model, at::tensor(ids, at::kLong), *tcs, go);
           GraphReportOptions ro;
           ro.node_threshold = o.at("node_threshold").get<double>();
           ro.edge_threshold = o.at("edge_threshold").get<double>();
           ro.label_tokens = o.at("label_tokens").get<int64_t>();
           ro.prompt = entry::prompt_text(q, ids);
           ro.transcoders = dir;
           ro.full_adjacency = o.at("save_adjacency").get<bool>();
           Result res = graph_result(q.model, q.tok, *tcs, g, ro);
           for (const char* k : {"max_feature_nodes", "max_n_logits", "desired_logit_prob", "batch_size", "label_tokens",
                               "save_adjacency"})
             res.settings[k] = o.at(k);
           if (entry::prompt_is_ids(o)) res.settings["prompt_ids"] = ids;
           return res;
         },
         graph_estimate});
}

}  // namespace vocablens::entries

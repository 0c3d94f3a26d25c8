// `graph`: its options, declared once, its memory estimate and the call every surface makes
// (vocablens/analysis_registry.hpp): `vocablens graph MODEL --transcoders DIR --prompt TEXT`,
// `vocablens.graph(model, prompt, transcoders=...)`, `POST /api/graph`.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "entry_common.hpp"
#include "graph_internal.hpp"
#include "vocablens/analysis_estimate.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/error.hpp"
#include "vocablens/graph.hpp"
#include "vocablens/memory_estimate.hpp"
#include "vocablens/model.hpp"
#include "vocablens/tokenizer.hpp"
#include "vocablens/weight.hpp"

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
  g.dense_adjacency = false;  // graph_result reads the rows; --save-adjacency builds [N, N] from them
  return g;
}

// The peak memory (vocablens/analysis_estimate.hpp). The number of active features A decides most of it
// and is known only once the transcoders ran, so the estimate runs the forward pass and the encoders to
// count them (graph_active_counts), nothing else. Resident throughout: the runtime, the model's and the
// transcoders' weights, the graph's rows [F + K, S]. Then, one after another: the recorded forward (its
// cache, patterns, logits); the backward (frozen patterns, errors, decoder rows × activation, the rows
// before compaction [F + K, A + (L + 1) T] when max_feature_nodes selects, one batch's propagation
// [B, T, d]); pruning (the rows in float64, masks, the nonzero scores sorted); the labels (E⁺).
AnalysisEstimate graph_estimate(const AnalysisRequest& q) {
  const Model& m = q.model;
  const auto& c = m.config();
  const std::vector<int64_t> ids = graph_prompt(q);
  const double T = static_cast<double>(ids.size()), L = static_cast<double>(c.n_layers), d = static_cast<double>(c.d_model);
  const double H = static_cast<double>(c.n_heads), dh = static_cast<double>(c.d_head);
  const double V = static_cast<double>(c.vocab_size);
  // kept for the run that usually follows (graph_transcoders.cpp): one NaN/Inf scan of the weights, not two
  auto tcs = graph_engine::load_graph_transcoders(q.options.at("transcoders").get<std::string>(), m, true);
  const bool zero_first = ids.front() == c.bos_token_id;
  const double tcs_features = static_cast<double>(tcs->n_features(0));
  const std::vector<int64_t> active = graph_active_counts(m, at::tensor(ids, at::kLong), *tcs, zero_first);
  double A = 0, rows_written = 0;  // rows_written: active features × the blocks each writes to (a CLT: all later ones)
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const double a = static_cast<double>(active[static_cast<size_t>(l)]);
    A += a;
    for (int64_t o = l; o < c.n_layers; ++o) rows_written += tcs->writes(l, o) ? a : 0.0;
  }
  // the logits reaching desired_logit_prob are known only after the forward: at most max_n_logits
  const double K = static_cast<double>(q.options.at("max_n_logits").get<int64_t>());
  const double batch = static_cast<double>(q.options.at("batch_size").get<int64_t>());
  const bool save_rows = q.options.at("save_rows").get<bool>(), save_adjacency = q.options.at("save_adjacency").get<bool>();
  const double patterns = L * H * T * T * 4;
  // the backward's decoder rows × activation: every active feature's kept when they fit (graph.cpp,
  // Backward), else one source layer's gathered from the mapped files at a time, its pages given back after
  double most_written = 0;  // the largest gather: one source layer's rows into one block
  for (int64_t l = 0; l < c.n_layers; ++l)
    most_written = std::max(most_written, static_cast<double>(active[static_cast<size_t>(l)]));
  const double dec = rows_written * d * 4 <= graph_decoder_cache_bytes() ? rows_written * d * 4 : most_written * d * 4;
  // labels: E⁺ [d, V] float32, and the larger of computing it when it is not cached yet (linalg/pinv.cpp: one
  // float64 chunk of 8192 rows and its product, the d x d Gram matrix and its eigenvectors) and the label
  // products (graph_result.cpp: [rows, V] float32 chunks of the kept features, at most F of them, two at a
  // time; the feature-logit engine's int8 screen from 256 features on: two chunks of 256 MiB, measured on the
  // GPT-2-small shape). A W_U not stored as float32 (bfloat16, quantized) is read as a float32 copy [d, V]
  // while E⁺ is computed or read from its cache (unembed.cpp: pseudo_inverse(W_U())): both are held at once.
  const at::Tensor& WU = m.weights().W_U;
  const double wu_copy = WU.scalar_type() == at::kFloat && !is_packed_weight(WU) ? 0.0 : d * V * 4;
  const double label_chunk = std::max(1.0, std::min(4096.0, std::floor(64.0 * 1024 * 1024 / V)));
  const MemoryEstimate forward = estimate_forward_memory(m, 1, static_cast<int64_t>(ids.size()), CacheSpec{}, false);
  const double tc_bytes = static_cast<double>(tcs->resident_bytes());
  // The estimate for F features with rows (everything else is fixed by the prompt's forward).
  auto memory_for = [=](double F) {
    const bool ranking = F < A;
    const double B = std::min(batch, F + K), S = F + (L + 1) * T, R = F + K;
    MemoryEstimate me = forward;
    me.add("graph: transcoders' weights", tc_bytes);
    me.add(fmt::format("graph: rows [F + K, S] ({} active features, {} with rows)", A, F), R * S * 4);
    // the result's own copies, held with the rows until it is written
    if (save_rows) me.add("graph: the rows' copy in the result (save_rows)", R * S * 4);
    if (save_adjacency) me.add("graph: the unpruned adjacency [N, N] (save_adjacency)", (S + K) * (S + K) * 4);
    me.add_phase("graph: the recorded forward (residuals, patterns, last logits, one layer's activations)",
                 4 * L * T * d * 4 + patterns + V * 4 + 2 * L * T * d * 4 + 2 * T * tcs_features * 4);
    me.add_phase(ranking ? "graph: backward (frozen state, rows over every active feature, one batch)"
                         : "graph: backward (frozen state, one batch)",
                 patterns + L * T * d * 4 + A * 28 + dec + 2 * L * d * H * dh * 4 + (ranking ? R * (A + (L + 1) * T) * 4 : 0.0) +
                     5 * B * T * d * 4);
    me.add_phase("graph: pruning (the rows in float64, masks, nonzero scores)", R * S * (8 + 8 + 3));
    const double products = F >= 256 ? 512.0 * 1024 * 1024 : 2 * std::min(F, label_chunk) * V * 4;
    me.add_phase("graph: labels (E⁺ [d, V] and its computation, or the label products)",
                 d * V * 4 + wu_copy + std::max(2 * 8192 * d * 8 + 5 * d * d * 8, products));
    return me;
  };
  double F = A;
  if (!q.options.at("max_feature_nodes").is_null())
    F = std::min(F, static_cast<double>(q.options.at("max_feature_nodes").get<int64_t>()));
  AnalysisEstimate e;
  e.memory = memory_for(F);
  // Refused for want of memory: the largest max_feature_nodes that fits, from the same terms (they grow with
  // F below A; every feature, F = A, needs no ranking but rows over all of them, more still).
  // "--max-feature-nodes 12" on the command line, "max_feature_nodes=12" in Python (a keyword argument).
  const std::string opt = q.spelled("max_feature_nodes") + (q.surface == Surface::Python ? "=" : " ");
  e.reduce_within = [memory_for, A, opt](double limit) {
    const double MiB = 1024.0 * 1024.0;
    if (memory_for(1).total() > limit)
      return fmt::format("give a shorter prompt (even {}1 needs about {:.0f} MiB)", opt, memory_for(1).total() / MiB);
    double lo = 1, hi = std::max(1.0, A - 1);  // lo fits; find the largest F <= hi that fits
    if (memory_for(hi).total() <= limit) lo = hi;
    while (hi - lo > 1) {
      const double mid = std::floor((lo + hi) / 2);
      (memory_for(mid).total() <= limit ? lo : hi) = mid;
    }
    return fmt::format(
        "give {}{:.0f} or less (the most that fits in {:.0f} MiB by this estimate: {:.0f} MiB), or a "
        "shorter prompt",
        opt, lo, limit / MiB, memory_for(lo).total() / MiB);
  };
  e.what = fmt::format(
      "the attribution graph of {} tokens of {} (its {} active features counted by running the "
      "forward pass and the encoders)",
      ids.size(), m.source(), static_cast<int64_t>(A));
  e.reduce = "give a shorter prompt, or a smaller " + q.spelled("max_feature_nodes");
  e.computed = "forward and encoders only; no attribution computed";
  return e;
}

}  // namespace

void register_graph_entry(AnalysisRegistry& r) {
  AnalysisDecl d;
  d.name = d.command = "graph";
  d.estimate_runs_model = true;  // graph_estimate runs the forward and the encoders
  d.summary =
      "Attribution graph through transcoders (per-layer or cross-layer): which features, errors and tokens drive the next-token "
      "logits (circuit-tracer's local replacement model), pruned, each node labelled in vocabulary space";
  d.input = "prompt";
  d.options = entry::prompt_decls();
  entry::append(
      d.options,
      {
          OptionDecl{"transcoders", OptionType::Text, nullptr,
                     "Transcoder folder: circuit-tracer's config.yaml folder (transcoder_set or cross_layer_transcoder, read "
                     "at mlp.hook_in, writing the MLP output), or layer_{i}.safetensors for every layer, each read at its "
                     "layer's MLP input"}
              .as_required()
              .on_server(
                  {"DIR",
                   "Per-layer transcoders' folder (`vocablens graph --transcoders`): the API's POST /api/graph with "
                   "{\"transcoders\": true}",
                   // Read once at start-up: a folder that is not a transcoder set for this model is refused
                   // before the server binds, not by the first POST /api/graph. GET /api/model reports its shape.
                   [](const Model& m, const std::string& dir) {
                     auto tcs = load_graph_transcoders(dir, m);
                     nlohmann::json widths = nlohmann::json::array();
                     for (int64_t l = 0; l < tcs->n_layers(); ++l) widths.push_back(tcs->n_features(l));
                     return nlohmann::json{{"source", tcs->source()}, {"n_layers", tcs->n_layers()}, {"n_features", widths}};
                   }}),
          {"node_threshold", OptionType::Real, 0.8,
           "Pruning: keep the features and errors carrying this share of the influence on the logits", 0, 1},
          {"edge_threshold", OptionType::Real, 0.98, "Pruning: keep the edges carrying this share of the influence", 0, 1},
          {"max_feature_nodes", OptionType::Integer, nullptr,
           "Compute rows for at most this many features, the most influential first (default: every active feature)", 1, 1e7},
          {"max_n_logits", OptionType::Integer, 10, "At most this many logit targets", 1, 1000},
          {"desired_logit_prob", OptionType::Real, 0.95, "Fewest top logits whose probabilities reach this", 1e-9, 1},
          {"batch_size", OptionType::Integer, 64, "Rows computed together in one backward pass", 1, 4096},
          {"label_tokens", OptionType::Integer, 5, "Tokens in a feature's vocabulary label", 1, 100},
          {"save_adjacency", OptionType::Flag, false, "Also keep the unpruned adjacency [N, N] (array full_adjacency)"},
          {"save_rows", OptionType::Flag, false,
           "Also keep the unpruned rows [F + K, S] (array rows, with logit_ids and logit_probs): every edge that can be "
           "nonzero, without the [N, N] zeros"},
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
           ro.rows = o.at("save_rows").get<bool>();
           Result res = graph_result(q.model, q.tok, *tcs, g, ro);
           for (const char* k : {"max_feature_nodes", "max_n_logits", "desired_logit_prob", "batch_size", "label_tokens",
                                 "save_adjacency", "save_rows"})
             res.settings[k] = o.at(k);
           if (entry::prompt_is_ids(o)) res.settings["prompt_ids"] = ids;
           return res;
         },
         graph_estimate});
}

}  // namespace vocablens::entries

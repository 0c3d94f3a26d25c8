// vocablens/graph.hpp — attribution graphs through transcoders: which features, errors and tokens of a
// prompt write to which, and into which next-token logits.
//
// Concept (Ameisen et al. 2025, "Circuit Tracing"; the open-source circuit-tracer's definitions). Each MLP
// is replaced by a transcoder that reads the MLP's input (the output of the block's second norm, its weight
// and bias applied) and writes the MLP's output; what it fails to reconstruct is an error node. With the
// prompt's attention patterns and the denominators of every norm (ln1, ln2, final) frozen at their forward
// values, and each feature's output taken as activation × decoder row, the rest of the model is linear in
// its inputs — the *local replacement model*. Its nodes:
//   features   (layer, position, feature) with a nonzero activation (position 0, the BOS, excluded)
//   errors     (layer, position): true MLP output − transcoder output (position 0 zeroed)
//   tokens     (position): the token's embedding row (× the family's embedding scale; learned position
//              embeddings are constant inputs, not nodes, as circuit-tracer's hook_embed)
//   logits     the smallest set of top next-token logits at the last position whose probabilities reach
//              desired_logit_prob (at most max_n_logits), read through the demeaned W_U column
// and edge s → t is the direct effect of s on t in that linear model: for a feature target, on its
// pre-activation (the encoder row dotted with the MLP input); for a logit, on the demeaned logit.
//
// How the rows are computed: each target's reading vector is propagated backward by hand, a batch of
// targets at once, block by block — through the frozen final norm, the residual stream, each MLP's skip
// connection (when the transcoder has one) and the frozen attention's OV path (patternᵀ, W_O, W_V, frozen
// ln1) — and at each layer the gradient at the MLP output is dotted with every active feature's scaled
// decoder row and every error vector; at the bottom, with the token embeddings. No autograd and nothing
// retained but the frozen patterns and denominators, the sparse activations and the error vectors.
//
//   vocablens::Model model = vocablens::load_model("gpt2");
//   auto tcs = vocablens::load_graph_transcoders("transcoders/gpt2", model);   // config.yaml or layer_{i}.safetensors
//   vocablens::AttributionGraph g = vocablens::attribution_graph(model, ids, *tcs);  // ids: BOS first
//   vocablens::GraphPruning p = vocablens::prune_graph(g);                     // 0.8 / 0.98
//   vocablens::GraphScores s = vocablens::graph_scores(g);                     // replacement, completeness
//
// Shapes: T positions, L layers, A active features, F ≤ A selected features, K logits;
// N = F + L·T + T + K nodes, in this order (circuit-tracer's): features (ascending active index, i.e. by
// layer, position, feature), errors (layer-major), tokens, logits (most probable first).
//   rows [F + K, S] float32, S = F + L·T + T: the adjacency's only rows that can be nonzero — those of the
//   selected features (ascending), then the logits — over its only columns that can be nonzero, the
//   sources (features, errors, tokens). Rows of errors and tokens are zero (they have no inputs), logit
//   columns are zero: the [N, N] adjacency is `rows` with those zeros put back (dense_adjacency()).
//   Memory: the computed rows before the features are chosen (max_feature_nodes below A) span every active
//   feature, [F + K, A + L·T + T]; after, [F + K, S]; nothing [N, N] unless asked.
// Guarantees: every entry equals the change of its target when its source is removed from the frozen
// replacement model (tests/graph_test.cpp checks each one against a float64 intervention, 1e-5 of the
// largest entry); rows are computed in float32; bad input (a transcoder that does not fit, a family whose
// block the replacement model does not cover, ids over the context) throws UsageError / FormatError naming
// the file or the option before any work.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace vocablens {

class Model;
class Tokenizer;
struct Result;
struct Sae;

/// What the engine needs of a set of transcoders, so that a cross-layer transcoder (a feature read at
/// layer l writing to every later MLP output) plugs in without changing the engine. Tensors are float32;
/// `features` are int64 indices of features read at `layer`.
/// Where a set of transcoders reads its input in each block: the MLP's input (ln2's output, its weight and
/// bias applied; TransformerLens's blocks.L.mlp.hook_in), ln2's normalised input before its weight and bias
/// (blocks.L.ln2.hook_normalized: Gemma Scope's per-layer transcoders), or the residual stream before ln2
/// (blocks.L.hook_resid_mid). In the replacement model each is linear in resid_mid, ln2's denominator frozen.
enum class GraphInput { MlpIn, Ln2Normalized, ResidMid };

class GraphTranscoders {
 public:
  virtual ~GraphTranscoders() = default;
  /// Where the set reads (every layer the same point).
  virtual GraphInput input() const { return GraphInput::MlpIn; }
  virtual int64_t n_layers() const = 0;
  /// Features read at `layer`.
  virtual int64_t n_features(int64_t layer) const = 0;
  /// Activations [T, n_features(layer)] of the features read at `layer` from its input x [T, d_model] (input()).
  virtual at::Tensor encode(int64_t layer, const at::Tensor& x) const = 0;
  /// The linear part of those features' pre-activations: rows [n, d_model] dotted with their input.
  virtual at::Tensor encoder_rows(int64_t layer, const at::Tensor& features) const = 0;
  /// Whether features read at `src` write to the MLP output of layer `out` (per-layer: src == out).
  virtual bool writes(int64_t src, int64_t out) const = 0;
  /// What a unit activation of each feature read at `src` adds to the MLP output of `out`: [n, d_model].
  virtual at::Tensor decoder_rows(int64_t src, int64_t out, const at::Tensor& features) const = 0;
  /// The transcoders' whole output at the MLP of `out` [T, d_model], given the MLP inputs of every layer
  /// (mlp_in[l] [T, d_model]) and the features encode gave for them (features[l] [T, n_features(l)]),
  /// l <= out — every feature written there, biases and skip connection.
  virtual at::Tensor output(int64_t out, const std::vector<at::Tensor>& mlp_in,
                            const std::vector<at::Tensor>& features) const = 0;
  /// The skip connection of layer `layer`: [d_model, d_model] in x @ W orientation, undefined when none.
  virtual at::Tensor skip(int64_t layer) const = 0;
  /// Where the set came from (error messages, provenance).
  virtual std::string source() const = 0;
  /// Done with the whole matrices of `layer` (its features encoded, its error known): a set mapped from
  /// files gives back their resident pages; later reads (a few encoder and decoder rows) page in again.
  virtual void release(int64_t /*layer*/) const {}
  /// Bytes of weights the graph holds resident at once: one layer's matrices while it is encoded (each is
  /// released after; a CLT's mapped decoders, read in rows, not counted).
  virtual int64_t resident_bytes() const { return 0; }
};

/// One vocablens::Sae per layer (circuit-tracer's per-layer transcoders). Refuses (UsageError naming the
/// file) a transcoder whose widths do not match the model, whose hook is not the MLP input of its own
/// layer (blocks.L.mlp.hook_in: ln2's output, its weight and bias applied), or whose encoder is not linear
/// in its input (SAELens's input normalisations).
std::unique_ptr<GraphTranscoders> per_layer_transcoders(std::vector<Sae> saes, const Model& model);

/// Reads a transcoder folder through load_transcoders (vocablens/transcoders.hpp), one loader for every
/// layout: circuit-tracer's config.yaml folders (transcoder_set, per-layer; cross_layer_transcoder, a
/// feature of layer i writing to the MLP output of every layer from i on), and a folder of
/// `layer_{i}.safetensors` without config.yaml, read as a per-layer set at mlp.hook_in → hook_mlp_out.
/// Refused in one line naming the folder or its config: a plain folder missing a layer ("no
/// layer_2.safetensors"), a set whose hooks are not the MLP's input (mlp.hook_in) and output (hook_mlp_out
/// or mlp.hook_out), the checks of check_transcoders_fit and per_layer_transcoders.
std::unique_ptr<GraphTranscoders> load_graph_transcoders(const std::string& dir, const Model& model);

struct GraphOptions {
  int64_t max_n_logits = 10;         ///< at most this many logit targets
  double desired_logit_prob = 0.95;  ///< fewest top logits whose probabilities reach this
  int64_t batch_size = 64;           ///< targets propagated backward together
  /// 0 = every active feature gets its row; otherwise only this many, chosen as circuit-tracer does: the
  /// logit rows first, then repeatedly the features of highest influence (through the rows computed so
  /// far) on the logits, update_interval batches at a time.
  int64_t max_feature_nodes = 0;
  int64_t update_interval = 4;
  /// Zero position 0's features and error (the BOS, whose activations are outliers): circuit-tracer's
  /// zero_bos. The entry prepends the model's BOS.
  bool zero_first_position = true;
  /// Called with (rows done, rows in total) as the backward batches finish; may be empty.
  std::function<void(int64_t, int64_t)> progress;
  /// Also fill AttributionGraph::adjacency, the [N, N] matrix (N² floats: off for long prompts).
  bool dense_adjacency = true;
};

struct AttributionGraph {
  at::Tensor ids;              ///< [T] int64, the prompt
  at::Tensor logit_ids;        ///< [K] int64, most probable first
  at::Tensor logit_probs;      ///< [K] float64
  at::Tensor active_features;  ///< [A, 3] int64 (layer, position, feature), sorted
  at::Tensor activations;      ///< [A] float32
  at::Tensor selected;         ///< [F] int64, indices into active_features, ascending
  at::Tensor rows;             ///< [F + K, S] float32: target rows (selected features, logits) × sources
  at::Tensor adjacency;        ///< [N, N] float32, row = target, column = source (GraphOptions::dense_adjacency)
  int64_t n_layers = 0, n_pos = 0;

  int64_t n_selected() const { return selected.size(0); }
  int64_t n_logits() const { return logit_ids.size(0); }
  int64_t n_sources() const { return rows.size(1); }
  int64_t n_nodes() const { return n_sources() + n_logits(); }
  /// The node of row r of `rows`: r for a feature, the logit's node for the last K.
  int64_t row_node(int64_t r) const { return r < n_selected() ? r : n_sources() + (r - n_selected()); }
  /// [N, N] from `rows` (zeros elsewhere).
  at::Tensor dense_adjacency() const;
  /// The [M, M] block of a [F + K, S] matrix (rows, or GraphPruning::edge_mask) between `nodes` [M] int64
  /// (indices in the full order), with the structural zeros (no row, a logit column) filled in.
  at::Tensor between(const at::Tensor& m, const at::Tensor& nodes) const;
  int64_t error_node(int64_t layer, int64_t pos) const { return n_selected() + layer * n_pos + pos; }
  int64_t token_node(int64_t pos) const { return n_selected() + n_layers * n_pos + pos; }
  int64_t logit_node(int64_t k) const { return n_selected() + (n_layers + 1) * n_pos + k; }
};

/// Active features per layer of `ids` (position 0 left out when zero_first_position): the forward pass and
/// the encoders only, for the memory estimate.
std::vector<int64_t> graph_active_counts(const Model& model, const at::Tensor& ids, const GraphTranscoders& tcs,
                                         bool zero_first_position);
/// The most bytes of scaled decoder rows the engine keeps; above, it gathers them at each use.
double graph_decoder_cache_bytes();

/// The graph of `ids` ([T] int64, 1 <= T <= n_ctx). Throws UsageError when the model's block is not one
/// the replacement model covers (parallel attention and MLP, post-LN, blocks without input norms, a norm of
/// the embeddings: refused by name), when `tcs` has another layer count, or on bad options. Norms after
/// attention and MLP (Gemma-2, Gemma 3) are covered: the post-attention norm frozen at its forward
/// denominator, the MLP and its post-norm replaced by the transcoder (docs/graph.md, "Gemma-2's blocks").
AttributionGraph attribution_graph(const Model& model, const at::Tensor& ids, const GraphTranscoders& tcs,
                                   const GraphOptions& opts = {});

/// circuit-tracer's pruning: node influence on the logits (weighted by their probabilities) through the
/// row-normalised |adjacency| summed over all path lengths; features and errors kept while they carry
/// node_threshold of it; edges scored the same way on the pruned matrix and kept up to edge_threshold;
/// then features and errors without outgoing kept edges, and features without incoming ones, dropped until
/// nothing changes. Tokens and logits are always kept.
struct GraphPruning {
  at::Tensor node_influence;     ///< [N] float64
  at::Tensor cumulative_scores;  ///< [N] float64: the share of total influence of nodes at least as influential
  at::Tensor node_mask;          ///< [N] bool
  at::Tensor edge_mask;          ///< [F + K, S] bool, over AttributionGraph::rows (the only edges that can be nonzero)
};
GraphPruning prune_graph(const AttributionGraph& g, double node_threshold = 0.8, double edge_threshold = 0.98);

/// circuit-tracer's scores: replacement = token influence / (token + error influence); completeness = the
/// share of each node's normalised inputs not from errors, averaged with weights influence + logit weight.
struct GraphScores {
  double replacement = 0, completeness = 0;
};
GraphScores graph_scores(const AttributionGraph& g);

/// How graph_result prunes and labels.
struct GraphReportOptions {
  double node_threshold = 0.8, edge_threshold = 0.98;
  int64_t label_tokens = 5;     ///< tokens in a feature's vocabulary label
  std::string prompt;           ///< the prompt's text, as given (settings, Neuronpedia's metadata.prompt)
  std::string transcoders;      ///< the transcoders' folder (settings, Neuronpedia's metadata.scan)
  std::string slug = "graph";   ///< Neuronpedia's metadata.slug
  bool full_adjacency = false;  ///< also the unpruned adjacency [N, N] as array full_adjacency
  bool rows = false;            ///< also AttributionGraph::rows [F + K, S] as array rows, logit_ids [K], logit_probs [K]
};

/// Result kind "graph": the graph pruned (prune_graph), its scores, each kept node's vocabulary label, and
/// Neuronpedia's graph JSON in summary["neuronpedia"] (written beside as graph.neuronpedia.json by the CLI).
///   arrays  ids [T] int64; nodes [M] int64 (kept nodes' indices in the full node order); adjacency [M, M]
///           float32 (kept edges only, row = target); node_influence [N] float64; active_features [A, 3]
///           int64; activations [A] float32; selected [F] int64; full_adjacency [N, N] float32 when asked;
///           label_top_ids / label_bottom_ids / label_encoder_ids [M, label_tokens] int64 (-1 off features);
///           rows [F + K, S] float32, logit_ids [K] int64, logit_probs [K] float64 when asked (GraphReportOptions::rows)
///   tables  nodes (node, node_id, kind, layer, position, feature, token_id, activation, influence,
///           cumulative, label, bottom_tokens, encoder_tokens)
///   summary n_layers, n_pos, n_active, n_selected, n_errors, n_logits, logits [{id, token, prob}],
///           replacement_score, completeness_score, kept_nodes, kept_edges, neuronpedia
/// A feature's label: its `label_tokens` top tokens through W_U of its decoder row (the last layer it
/// writes to), from feature_logits (vocablens/features.hpp); beside it its bottom tokens through W_U and its
/// encoder row's top tokens through E⁺ (read_projection, pinv); an error or embedding node names its token.
Result graph_result(const Model& m, const Tokenizer* tok, const GraphTranscoders& tcs, const AttributionGraph& g,
                    const GraphReportOptions& o);

/// The vocabulary label graph_result gives each feature (its `label_tokens` top tokens through W_U, joined by
/// spaces), for features given as (layer, feature) pairs — any active feature, kept by pruning or not (the
/// Python Graph labels the nodes of its own prunings with it).
std::vector<std::string> graph_feature_labels(const Model& m, const Tokenizer* tok, const GraphTranscoders& tcs,
                                              const std::vector<std::pair<int64_t, int64_t>>& features, int64_t label_tokens);

}  // namespace vocablens

// vocablens/transcoders.hpp — a model's transcoders as one set, read from a folder as circuit-tracer reads it:
// per-layer transcoders (one per block) or a cross-layer transcoder (CLT), each reading at its own hook point.
//
// A transcoder replaces a block's MLP: it reads the MLP's input at the set's input hook (circuit-tracer's
// feature_input_hook, e.g. ln2.hook_normalized or hook_resid_mid), encodes it into sparse features, and writes a
// reconstruction of the MLP's output at its output hook (feature_output_hook, hook_mlp_out). A per-layer set has
// one transcoder per block. In a CLT the features of layer i read at block i and write to block i and every later
// block: feature f of layer i has one decoder row per block it writes to.
//
//   vocablens::TranscoderSet set = vocablens::load_transcoders("clt/");       // config.yaml + weights
//   vocablens::check_transcoders_fit(set, model);                            // layers, hooks, widths
//   at::Tensor f = set.encode(3, x);            // x [.., d_in] read at set.input_hook(3) -> [.., d_transcoder]
//   at::Tensor rows = set.decoder_rows(3, 17);  // [set.n_outputs(3), d_out]: what feature 17 of layer 3 writes
//                                               //   into blocks 3, 4, ... (a per-layer set: block 3 only)
//   hooks.add(set.input_hook(3), ...);          // "blocks.3.ln2.hook_normalized": the set's own point
//
// The folder (docs/features.md, "Transcoder sets"):
//   config.yaml        model_kind: transcoder_set | cross_layer_transcoder; feature_input_hook; feature_output_hook;
//                      optional transcoders: [file per layer, relative to the folder]; optional activation
//                      (relu | jumprelu | topk) and k (topk)
//   transcoder_set     layer_{i}.safetensors (circuit-tracer: W_enc [d_tc, d_in], W_dec [d_tc, d_out], b_enc, b_dec,
//                      optional activation_function.threshold (JumpReLU), k (TopK), W_skip [d_out, d_in]), or the
//                      files the transcoders: list names (those, or Gemma Scope params.npz / params.safetensors)
//   cross_layer_transcoder  W_enc_{i}.safetensors (W_enc_{i} [d_tc, d_in], b_enc_{i} [d_tc], b_dec_{i} [d_out],
//                      optional threshold_{i} [d_tc]) and W_dec_{i}.safetensors (W_dec_{i} [d_tc, n_layers - i, d_out])
// Hooks are circuit-tracer's names within a block (hook_resid_mid, ln2.hook_normalized, mlp.hook_in, hook_mlp_out;
// mlp.hook_out, the MLP's own output, is hook_mlp_out in blocks with no norm after the MLP), or full names with
// "{layer}" for the block.
//
// Shapes: n_layers blocks; every layer's transcoder has d_in inputs, d_transcoder features, d_out outputs.
// Guarantees: weights keep their stored dtype and stay views of the mapped files (vocablens/weight.hpp); a CLT is
// never read whole — loading reads its biases and thresholds, and a set whose files total more than
// TranscoderLoadOptions::check_at_load_bytes has its matrices checked for NaN/Inf as they are read (a layer's
// encoder on its first encode, a feature's decoder rows when they are asked for) instead of at load. Everything
// wrong is one FormatError line naming the file (unknown model_kind, hooks that name no point, a missing layer
// file or tensor, missing thresholds, shapes, NaN/Inf), and check_transcoders_fit one UsageError line naming the
// folder (layer count, hook, width against a model). Encode computes in float64 for float64 input, else float32.
#pragma once
#include <ATen/ATen.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "vocablens/sae.hpp"

namespace vocablens {

class Model;

enum class TranscoderKind { PerLayer, CrossLayer };

struct TranscoderLoadOptions {
  /// Sets whose weight files total at most this many bytes are checked for NaN/Inf whole at load; larger ones
  /// (a CLT of millions of features: ~170 GB) as their parts are read.
  uint64_t check_at_load_bytes = uint64_t{1} << 30;
  /// A folder without config.yaml is read as a transcoder_set of layer_{i}.safetensors reading and writing these
  /// points (spelled as config.yaml's hooks) when both are given — for a caller that knows where its transcoders
  /// sit (the attribution graph: mlp.hook_in, hook_mlp_out); empty: such a folder is refused.
  std::string default_input_hook, default_output_hook;
};

class TranscoderSet {
 public:
  std::string source;       ///< the folder read (messages)
  std::string config_path;  ///< its config.yaml (empty: a folder read without one, with the default hooks)
  TranscoderKind kind = TranscoderKind::PerLayer;
  int64_t n_layers = 0, d_in = 0, d_transcoder = 0, d_out = 0;
  std::string feature_input_hook, feature_output_hook;  ///< as config.yaml spells them
  std::string stored_dtype;                             ///< "F32", "BF16", ... as in the files
  uint64_t file_bytes = 0;                              ///< the weight files' total size

  /// The hook point layer `l` reads / writes, in TransformerLens's spelling ("blocks.3.ln2.hook_normalized").
  std::string input_hook(int64_t l) const;
  std::string output_hook(int64_t l) const;

  /// Layer l's transcoder as an Sae (encoder, bias, threshold or k, skip; hook_name / hook_name_out are the
  /// set's points): what feature_logits and sae_splice read. A CLT layer's W_dec is its rows into block l only.
  const Sae& layer(int64_t l) const;
  /// Pre-activations and features of layer l: x [.., d_in] -> [.., d_transcoder].
  at::Tensor encode_pre(int64_t l, const at::Tensor& x) const;
  at::Tensor encode(int64_t l, const at::Tensor& x) const;
  /// How many blocks a feature of layer l writes to: 1 per-layer, n_layers - l in a CLT (blocks l, l + 1, ...).
  int64_t n_outputs(int64_t l) const;
  /// Feature `feature` of layer l: its decoder rows, [n_outputs(l), d_out] float32 (row j writes block l + j).
  at::Tensor decoder_rows(int64_t l, int64_t feature) const;
  /// Gives back the resident pages of layer l's mapped matrices (encoder, decoder, skip): a reader done with
  /// them (the attribution graph, once layer l is encoded and its error known) stops holding ~150 MB per
  /// GPT-2-small layer; whatever is read later is paged in again from the file. Weights not mapped from a
  /// file (an npz copy) stay as they are.
  void release_pages(int64_t l) const;
  /// Decoder bias and skip of output block `out` (the skip undefined when absent).
  at::Tensor b_dec(int64_t out) const;
  /// The reconstruction written at block `out`: Σ_{l ≤ out} f_l W_dec[l → out] + b_dec[out] (+ x_out W_skip),
  /// from features[l] [.., d_transcoder] of every layer l ≤ out (per-layer sets: features[out] only) and the
  /// input read at block `out` (needed for a skip connection).
  at::Tensor decode(int64_t out, const std::vector<at::Tensor>& features, const at::Tensor& x_out = {}) const;

  // The parts as read (views of the files): per layer an Sae; a CLT's W_dec_{i} [d_tc, n_layers - i, d_out].
  std::vector<Sae> layers;
  std::vector<at::Tensor> clt_decoders;
  std::string input_point, output_point;  ///< within a block: "ln2.hook_normalized", "hook_mlp_out"
  bool output_before_post_norm = false;   ///< config said mlp.hook_out (refused on models with a post-MLP norm)

  /// Large sets: which layers' encoders have been checked for NaN/Inf (null: all were, at load); shared by copies.
  std::shared_ptr<std::vector<std::atomic<char>>> encoder_checked;
  std::vector<std::string> encoder_files, decoder_files;
};

/// Reads a transcoder folder (or its config.yaml). Throws FormatError naming the file on anything wrong.
TranscoderSet load_transcoders(const std::string& path, const TranscoderLoadOptions& opts = {});

/// Checks the set against a model: as many layers, hook points the model has, widths those points have.
/// Throws UsageError naming the folder ("clt: a cross-layer transcoder of 3 layers, but M has 5").
void check_transcoders_fit(const TranscoderSet& set, const Model& m);

}  // namespace vocablens

// vocablens/sae.hpp — sparse autoencoders (SAEs) and per-layer transcoders, read from the files the field
// publishes, with their encode / decode / forward.
//
// An SAE reads an activation x [.., d_in] at one hook point (hook_name), writes d_sae feature activations
// f = encode(x) (sparse, >= 0), and reconstructs x̂ = decode(f) [.., d_out] (d_out == d_in for an SAE; a
// transcoder reads one point and writes another, hook_name_out, e.g. the MLP's input and its output).
// Weights are in the "x @ W" orientation whatever the file stored:
//   W_enc [d_in, d_sae]   b_enc [d_sae]   W_dec [d_sae, d_out]   b_dec [d_out]
//   threshold [d_sae]     (jumprelu, batchtopk)      scaling_factor [d_sae] (SAELens's finetuning scale)
//   W_skip [d_in, d_out]  (transcoders: x @ W_skip is added to the reconstruction)
//   b_gate, b_mag, r_mag [d_sae] (gated)
// Row f of W_dec is feature f's decoder direction: what the feature writes, the vector that
// feature_logits() (vocablens/features.hpp) reads through the unembedding.
//
// Encode, as each architecture defines it (x' = normalised input, see SaeNormalize):
//   sae_in = x' - b_dec        when apply_b_dec_to_input (SAELens's default), x' otherwise
//   pre    = sae_in @ W_enc + b_enc
//   standard   f = relu(pre)
//   jumprelu   f = relu(pre) * (pre > threshold)          (Gemma Scope, SAELens; keep_negative: pre * (pre > threshold),
//                                                          circuit-tracer's transcoder sets)
//   batchtopk  the same with its learned global threshold (BatchTopK SAEs infer as JumpReLU)
//   topk       the k largest entries of pre kept (then relu, unless keep_negative), the rest 0 (ties: lower index
//              first)
//   gated      f = (sae_in @ W_enc + b_gate > 0) * relu(sae_in @ (W_enc * exp(r_mag)) + b_mag)
//   Llama Scope's sparsity_include_decoder_norm: the activation runs on pre * ‖W_dec[f]‖ and is divided back.
// Decode: x̂' = (f * scaling_factor) @ W_dec + b_dec, then the normalisation undone, then + x @ W_skip.
//
//   vocablens::Sae sae = vocablens::load_sae("saes/gpt2-tiny-res-1");   // any layout below
//   vocablens::check_sae_fits(sae, model);                               // d_in vs. the hook's width
//   at::Tensor f = sae.encode(x);          // x [B, T, d_in] float32 -> [B, T, d_sae] float32
//   at::Tensor xhat = sae.forward(x);      // decode(encode(x), x)
//
// Layouts read (load_sae picks one from what the path holds; docs/features.md has each in full):
//   saelens          folder: cfg.json + sae_weights.safetensors (W_enc, W_dec, b_enc, b_dec, threshold,
//                    scaling_factor, b_gate, b_mag, r_mag); cfg keys architecture, d_in, d_sae, dtype,
//                    apply_b_dec_to_input, normalize_activations, k, metadata.hook_name (or meta.hook_name,
//                    hook_name); the pre-6.0 keys hook_point and activation_fn_str (+ activation_fn_kwargs.k)
//   gemmascope-npz   Gemma Scope params.npz (W_enc, W_dec, b_enc, b_dec, threshold): JumpReLU, no b_dec
//                    subtraction
//   gemmascope-st    Gemma Scope 2 params.safetensors (w_enc / W_enc ..., threshold, optional
//                    affine_skip_connection [d_out, d_in] applied as x @ Wᵀ, SAELens's W_skip) and the
//                    config.json beside it (hf_hook_point_in / _out mapped to our hook names, type, width,
//                    affine_connection, architecture jump_relu — each checked against the tensors)
//   llamascope       folder: hyperparams.json + checkpoints/final.safetensors (encoder.weight [d_sae, d_in],
//                    encoder.bias, decoder.weight [d_in, d_sae], decoder.bias — transposed on load); act_fn
//                    jumprelu (jump_relu_threshold) / topk (top_k) / relu; norm_activation dataset-wise
//                    (x' = x·√d_in / dataset_average_activation_norm.in, output scaled by .out / √d_in)
//   circuit-tracer   one per-layer transcoder file (layer_N.safetensors): W_enc [d_sae, d_in] (F.linear
//                    orientation, transposed on load), W_dec [d_sae, d_out], b_enc, b_dec, optional W_skip
//                    [d_out, d_in] (applied as x @ W_skipᵀ), optional activation_function.threshold (JumpReLU)
// Gemma Scope 1 and circuit-tracer files (and a Gemma Scope 2 file without its config.json) carry no hook name:
// it is guessed from the path (layer_N and resid_post / mlp_out / att / transcoder in a folder name), said on
// stderr, or given in SaeLoadOptions::hook_name.
//
// Guarantees: weights keep their stored dtype (float32 views of the file where possible, BF16/F16 kept as
// stored, like model weights — vocablens/weight.hpp); every tensor is checked for its shape against d_in /
// d_sae and for NaN/Inf; a bad file is one FormatError line naming the file and the problem, and a
// folder holding none of the layouts names what it found and the layouts read. encode/decode compute in
// float64 when given float64 input (for references) and in float32 otherwise.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

namespace vocablens {

class Model;

enum class SaeArchitecture { Standard, JumpReLU, TopK, BatchTopK, Gated };
/// SAELens's normalize_activations modes at inference, and Llama Scope's dataset-wise norm.
///  none / expected_average_only_in: identity (SAELens folds the average into the weights at load time)
///  constant_norm_rescale: x' = x·√d_in/‖x‖, output ·‖x‖/√d_in
///  layer_norm: x' = (x - mean) / (std + 1e-5) (std unbiased), output · std + mean
///  dataset_wise (Llama Scope): x' = x·√d_in/norm_in, output · norm_out/√d_in
enum class SaeNormalize { None, ExpectedAverageOnlyIn, ConstantNormRescale, LayerNorm, DatasetWise };

const char* to_string(SaeArchitecture a);
const char* to_string(SaeNormalize n);

struct Sae {
  std::string source;  ///< the file or folder read (error messages)
  std::string layout;  ///< "saelens", "gemmascope-npz", "gemmascope-st", "llamascope", "circuit-tracer"
  SaeArchitecture architecture = SaeArchitecture::Standard;
  int64_t d_in = 0, d_sae = 0, d_out = 0;
  at::Tensor W_enc, b_enc, W_dec, b_dec;
  at::Tensor threshold;             ///< [d_sae]; jumprelu / batchtopk only
  at::Tensor scaling_factor;        ///< [d_sae]; undefined when absent or all ones
  at::Tensor W_skip;                ///< [d_in, d_out]; transcoders with a skip connection
  at::Tensor b_gate, b_mag, r_mag;  ///< [d_sae]; gated only
  int64_t k = 0;                    ///< topk
  /// circuit-tracer's activation functions (its layout, and every layer of a transcoder set): TopK and JumpReLU
  /// keep the selected pre-activations as they are (pre · gate, a negative one too); SAELens's and Gemma Scope's
  /// take their relu (the default).
  bool keep_negative = false;
  bool apply_b_dec_to_input = false;
  SaeNormalize normalize = SaeNormalize::None;
  double norm_in = 0, norm_out = 0;  ///< dataset_wise averages
  bool sparsity_include_decoder_norm = false;
  std::string hook_name;                          ///< where it reads ("blocks.1.hook_resid_pre"); "" when unknown
  std::string hook_name_out;                      ///< where a transcoder writes; "" for an SAE
  bool hook_guessed = false;                      ///< hook_name came from the folder names, not from the file (load_sae says so)
  std::string stored_dtype;                       ///< "F32", "BF16", ... as in the file
  nlohmann::json cfg = nlohmann::json::object();  ///< the configuration as read (cfg.json, hyperparams.json, ...)

  bool is_transcoder() const { return !hook_name_out.empty() || W_skip.defined(); }

  /// Pre-activations `pre` [.., d_sae] (before the sparsifying function; gated: the magnitude path).
  at::Tensor encode_pre(const at::Tensor& x) const;
  /// x [.., d_in] -> feature activations [.., d_sae]. UsageError when x's last dimension is not d_in.
  at::Tensor encode(const at::Tensor& x) const;
  /// f [.., d_sae] -> reconstruction [.., d_out]. `x` (the input that f came from) is needed when the
  /// normalisation depends on it (constant_norm_rescale, layer_norm) or for W_skip: UsageError without it.
  at::Tensor decode(const at::Tensor& f, const at::Tensor& x = {}) const;
  /// decode(encode(x), x).
  at::Tensor forward(const at::Tensor& x) const;
};

struct SaeLoadOptions {
  std::string hook_name;  ///< overrides the file's (or guessed) hook name when non-empty
};

/// Reads an SAE or transcoder from a folder or file in one of the layouts above. Throws FormatError
/// (file: problem) on anything wrong: unknown layout, missing cfg field, bad shape, NaN in a weight.
Sae load_sae(const std::string& path, const SaeLoadOptions& opts = {});

/// A hook (vocablens/hooks.hpp HookFn) that replaces the activation at the SAE's hook point by its
/// reconstruction x̂ (error_term: by x̂ + (x − x̂) computed in float64, i.e. the activation itself up to
/// rounding, so that features can be read or edited without changing the forward). hook_z activations
/// [B, T, H, d_head] are flattened to [B, T, H·d_head] for the SAE and back. The Sae is copied (its tensors
/// are shared, not duplicated).
///   hooks.add(sae.hook_name, vocablens::sae_splice(sae));
std::function<void(at::Tensor&)> sae_splice(const Sae& sae, bool error_term = false);

/// Width of the activation at a hook point of `m` (d_model for the residual points and the sublayer
/// outputs, d_mlp for mlp_pre/mlp_post, n_heads·d_head for hook_z). Throws UsageError on an unknown name.
int64_t hook_width(const Model& m, const std::string& hook_name);

/// Checks that the SAE reads and writes vectors of the model's widths: d_in == hook_width(hook_name) when
/// the hook is known, and d_out == d_model when it writes into the residual stream. Throws UsageError
/// (two good files that do not pair) naming the SAE's file ("d_in 32 does not match blocks.1.hook_resid_pre of
/// <model> (width 64)").
void check_sae_fits(const Sae& sae, const Model& m);

}  // namespace vocablens

// vocablens/tuned_lens_checkpoint.hpp — the files of a tuned lens, read (the checkpoint layer's part of
// vocablens/tuned_lens.hpp; programs usually call load_tuned_lens there, which reads through this).
//
// A tuned lens is a directory:
//   tuned_lens.safetensors   "<l>.weight" [d, d] (out x in), "<l>.bias" [d]; metadata: format
//                            "vocablens-tuned-lens", unembed_sha256 (the model it was trained on)
//   params.pt                the tuned-lens package's torch.save(layer_translators.state_dict()): same keys
//   config.json              the package's TunedLensConfig (below); optional
// read_tuned_lens_checkpoint reads the safetensors file when there is one, else params.pt, and config.json when
// present, and checks them against each other: translators 0..n-1 with nothing else, every weight [d, d] and
// bias [d] (a missing bias is zeros unless config.json says bias: true), finite values, and the layer count and
// width config.json states.
//
//   vocablens::TunedLensCheckpoint c = vocablens::read_tuned_lens_checkpoint("out/stories-lens");
//   c.weight.size();                 // n translators, each [d, d] float32, contiguous
//   if (auto u = vocablens::tuned_lens_unfinished("out/stories-lens")) ...;   // trained u.trained_steps of u.steps
//
// Tensors are float32 (float16/bfloat16 in params.pt is upcast). Every problem is a FormatError naming the file.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "vocablens/tensor_fwd.hpp"

namespace vocablens {

/// The package's TunedLensConfig (config.json).
struct TunedLensConfig {
  std::string base_model_name_or_path;
  int64_t d_model = 0;
  int64_t num_hidden_layers = 0;
  bool bias = true;
  std::string base_model_revision;  ///< "" = null
  std::string unembed_hash;         ///< "" = null
  std::string lens_type = "linear_tuned_lens";
};

/// What a tuned lens directory holds, checked.
struct TunedLensCheckpoint {
  // Out of line: at::Tensor is only declared here (vocablens/tensor_fwd.hpp); using the tensors needs <ATen/ATen.h>.
  TunedLensCheckpoint();
  ~TunedLensCheckpoint();
  TunedLensCheckpoint(const TunedLensCheckpoint&);
  TunedLensCheckpoint(TunedLensCheckpoint&&) noexcept;
  TunedLensCheckpoint& operator=(const TunedLensCheckpoint&);
  TunedLensCheckpoint& operator=(TunedLensCheckpoint&&) noexcept;

  TunedLensConfig config;          ///< config.json; without one, d_model and num_hidden_layers of the tensors
  std::vector<at::Tensor> weight;  ///< [n] of [d, d], out x in
  std::vector<at::Tensor> bias;    ///< [n] of [d]
  std::string unembed_sha256;      ///< from tuned_lens.safetensors' metadata; "" when unknown (params.pt)
};

/// Reads the directory `dir`. Throws FormatError naming the directory or file on any problem (no such
/// directory, no checkpoint in it, invalid config.json, unexpected or missing tensor, wrong shape, non-finite value).
TunedLensCheckpoint read_tuned_lens_checkpoint(const std::string& dir);

/// The mark save_tuned_lens (vocablens/tuned_lens_train.hpp) leaves on an unfinished lens: trained_steps < steps.
/// Both 0 when the lens in `dir` is finished or unmarked (the package's own lenses); a lens directory that cannot
/// be read counts as unmarked (read_tuned_lens_checkpoint reports it).
struct TunedLensUnfinished {
  int64_t trained_steps = 0, steps = 0;
  explicit operator bool() const { return steps > 0; }
};
TunedLensUnfinished tuned_lens_unfinished(const std::string& dir);

}  // namespace vocablens

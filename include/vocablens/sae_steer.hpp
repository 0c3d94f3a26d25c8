// vocablens/sae_steer.hpp — steering with an SAE feature: add scale · W_dec[f] (feature f's decoder direction)
// to the activation at the point the SAE writes (its hook; a transcoder's output hook), at every position —
// activation addition (Turner et al.) with a learned dictionary direction instead of an embedding difference.
//
//   vocablens::Sae sae = vocablens::load_sae("saes/res-1");
//   vocablens::HookList h = vocablens::feature_steering_hooks(sae, /*feature=*/12, /*scale=*/8.0);
//   auto ids = vocablens::generate_greedy_with_hooks(model, prompt, 20, -1, h);   // vocablens/hooks.hpp
//
// The direction is W_dec[f] as stored (upcast to float32; its norm is kept: scale is in units of one unit of
// activation, as SAELens's steering examples use it). hook_z activations [B, T, H, d_head] receive it reshaped to
// [H, d_head]. CLI: `vocablens generate MODEL --sae PATH --steer-feature F --scale S`.
#pragma once
#include <cstdint>
#include <string>

#include "vocablens/hooks.hpp"

namespace vocablens {

struct Sae;

/// The hook point the SAE writes: hook_name_out for a transcoder, hook_name otherwise. UsageError when the
/// SAE names none.
std::string sae_write_hook(const Sae& sae);

/// feature's decoder row W_dec[feature] [d_out] as float32 (a copy). UsageError when out of range.
at::Tensor feature_direction(const Sae& sae, int64_t feature);

/// One hook at sae_write_hook(sae) adding scale · W_dec[feature] at every position.
HookList feature_steering_hooks(const Sae& sae, int64_t feature, double scale);

}  // namespace vocablens

// Steering with an SAE feature's decoder direction (see vocablens/sae_steer.hpp).
#include "vocablens/sae_steer.hpp"

#include "vocablens/error.hpp"
#include "vocablens/sae.hpp"

namespace vocablens {

std::string sae_write_hook(const Sae& sae) {
  const std::string h = sae.hook_name_out.empty() ? sae.hook_name : sae.hook_name_out;
  if (h.empty()) throw UsageError(sae.source + ": the SAE names no hook point; give one (--hook / hook_name=)");
  return h;
}

at::Tensor feature_direction(const Sae& sae, int64_t feature) {
  if (feature < 0 || feature >= sae.d_sae)
    throw UsageError("feature " + std::to_string(feature) + " is out of range: " + sae.source + " has " +
                     std::to_string(sae.d_sae) + " features (0.." + std::to_string(sae.d_sae - 1) + ")");
  return sae.W_dec[feature].to(at::kFloat).clone();
}

HookList feature_steering_hooks(const Sae& sae, int64_t feature, double scale) {
  const at::Tensor v = feature_direction(sae, feature) * scale;
  HookList h;
  h.add(sae_write_hook(sae), [v](at::Tensor& a) {
    // [B, T, d] or hook_z's [B, T, H, d_head]: the direction fills the trailing dimensions.
    if (a.dim() >= 3 && a.size(-1) != v.size(0)) a.add_(v.reshape(a.sizes().slice(2)));
    else a.add_(v);
  });
  return h;
}

}  // namespace vocablens

// Config values that parse but would make the forward pass NaN.
#include "core/config_checks.hpp"

#include <cmath>
#include <sstream>

#include "vocablens/arch.hpp"
#include "vocablens/error.hpp"

namespace vocablens::detail {

namespace {
std::string num(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}
}  // namespace

void check_config_values(const ModelConfig& c, const std::string& path) {
  // The key the family's config.json spells it with (vocablens/arch.hpp); a config made in code may name none.
  const ArchSpec* a = find_family(c.family);
  const char* eps_name = a && a->recipe.norm_eps_key && a->recipe.norm == c.norm ? a->recipe.norm_eps_key
                         : c.norm == NormKind::LayerNorm                         ? "layer_norm_epsilon"
                                                                                 : "rms_norm_eps";
  if (!std::isfinite(c.norm_eps) || c.norm_eps < 0)
    throw FormatError(path, std::string(eps_name) + " is " + num(c.norm_eps) +
                                "; it must be a finite number >= 0 (a negative epsilon makes the norm NaN)");
  if (c.positions == PositionKind::Rotary && (!std::isfinite(c.rope_theta) || !(c.rope_theta > 0)))
    throw FormatError(
        path, "rope_theta is " + num(c.rope_theta) +
                  "; it must be a finite number > 0 (the rotary frequencies theta^(-2i/d) are NaN or infinite otherwise)");
  // Families: soft-caps divide the logits, rope_scaling factors divide the frequencies.
  for (auto [v, name] : {std::pair{c.attn_softcap, "attn_logit_softcapping"}, {c.final_softcap, "final_logit_softcapping"}})
    if (!std::isfinite(v) || v < 0)
      throw FormatError(path, std::string(name) + " is " + num(v) + "; it must be a finite number >= 0 (0: no soft-cap)");
  if (c.rope_scaling != ModelConfig::RopeScaling::None && (!std::isfinite(c.rope_factor) || !(c.rope_factor > 0)))
    throw FormatError(path, "rope_scaling.factor is " + num(c.rope_factor) + "; it must be a finite number > 0");
  if (!std::isfinite(c.embed_scale) || !std::isfinite(c.attn_scale) || c.attn_scale < 0)
    throw FormatError(path, "the embedding scale " + num(c.embed_scale) + " / attention scale " + num(c.attn_scale) +
                                " implied by this config is not a finite number (check query_pre_attn_scalar and hidden_size)");
}

}  // namespace vocablens::detail

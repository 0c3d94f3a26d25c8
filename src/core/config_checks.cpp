// Config values that parse but would make the forward pass NaN (issue #16).
#include "core/config_checks.hpp"

#include <cmath>
#include <sstream>

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
  const char* eps_name = c.norm == NormKind::LayerNorm ? "layer_norm_epsilon" : "rms_norm_eps";
  if (!std::isfinite(c.norm_eps) || c.norm_eps < 0)
    throw FormatError(path, std::string(eps_name) + " is " + num(c.norm_eps) +
                                "; it must be a finite number >= 0 (a negative epsilon makes the norm NaN)");
  if (c.positions == PositionKind::Rotary && (!std::isfinite(c.rope_theta) || !(c.rope_theta > 0)))
    throw FormatError(path, "rope_theta is " + num(c.rope_theta) +
                                "; it must be a finite number > 0 (the rotary frequencies theta^(-2i/d) are NaN or infinite otherwise)");
}

}  // namespace vocablens::detail

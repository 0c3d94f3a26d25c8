// Position encodings of the forward pass: rotary (with Llama-3.1 / linear scaling), sinusoidal, ALiBi
// (src/model/position_encodings.hpp).
#include "model/position_encodings.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "vocablens/model.hpp"

namespace vocablens {

at::Tensor rotary_inv_freq(const ModelConfig& cfg) {
  const int64_t rd = cfg.rotary_dim > 0 ? cfg.rotary_dim : cfg.d_head;
  auto i = at::arange(0, rd, 2, at::TensorOptions().dtype(at::kDouble));
  auto inv_freq = at::pow(cfg.rope_theta, -i / static_cast<double>(rd));
  if (cfg.rope_scaling == ModelConfig::RopeScaling::Linear) return inv_freq / cfg.rope_factor;
  if (cfg.rope_scaling == ModelConfig::RopeScaling::Llama3) {
    // Llama-3.1: long wavelengths slowed by `factor`, short ones kept, a smooth blend in between.
    const double old_ctx = static_cast<double>(cfg.rope_original_context);
    const double lo = cfg.rope_low_freq_factor, hi = cfg.rope_high_freq_factor, f = cfg.rope_factor;
    auto wavelen = (2 * M_PI) / inv_freq;
    auto smooth = (old_ctx / wavelen - lo) / (hi - lo);
    auto blended = (1 - smooth) * inv_freq / f + smooth * inv_freq;
    auto out = at::where(wavelen > old_ctx / lo, inv_freq / f, inv_freq);
    auto medium = (wavelen <= old_ctx / lo).logical_and(wavelen >= old_ctx / hi);
    return at::where(medium, blended, out);
  }
  if (cfg.rope_scaling == ModelConfig::RopeScaling::Yarn) {
    // YaRN: pair i rotates at inv_freq (extrapolated) below the correction range [lo, hi], at inv_freq / factor
    // (interpolated) above it, blended linearly inside; the range is where beta_fast and beta_slow full turns fit
    // in the original context (ggml_rope_yarn_corr_dims and Hugging Face's find_correction_range alike).
    const double base = cfg.rope_theta, orig = static_cast<double>(cfg.rope_original_context);
    auto corr_dim = [&](double turns) { return rd * std::log(orig / (turns * 2 * M_PI)) / (2 * std::log(base)); };
    double lo = corr_dim(cfg.rope_yarn_beta_fast), hi = corr_dim(cfg.rope_yarn_beta_slow);
    if (cfg.rope_yarn_truncate) lo = std::floor(lo), hi = std::ceil(hi);
    lo = std::max(lo, 0.0);
    hi = std::min(hi, static_cast<double>(rd - 1));
    if (lo == hi) hi += 0.001;  // Hugging Face's guard against a zero-width ramp
    auto keep = 1 - ((at::arange(rd / 2, inv_freq.options()) - lo) / (hi - lo)).clamp(0, 1);  // 1: extrapolate
    return inv_freq / cfg.rope_factor * (1 - keep) + inv_freq * keep;
  }
  return inv_freq;
}

namespace detail {

// cos/sin tables [T, rotary_dim/2]; angles in double for accuracy, stored as float.
std::pair<at::Tensor, at::Tensor> rotary_tables(const ModelConfig& cfg, int64_t T, const at::Device& dev) {
  auto pos = at::arange(T, at::TensorOptions().dtype(at::kDouble));
  auto ang = at::outer(pos, rotary_inv_freq(cfg));
  const double s = cfg.rope_attention_factor;  // YaRN scales q and k (so the scores by s^2) through cos and sin
  if (s != 1.0) return {(at::cos(ang) * s).to(at::kFloat).to(dev), (at::sin(ang) * s).to(at::kFloat).to(dev)};
  return {at::cos(ang).to(at::kFloat).to(dev), at::sin(ang).to(at::kFloat).to(dev)};
}

// x: [B, H, T, d_head]. Rotates feature pairs of the first 2 * cos.size(-1) features by position-dependent
// angles; the rest pass unchanged (partial rotary, GPT-NeoX).
at::Tensor apply_rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, bool interleaved) {
  const int64_t dh = x.size(-1), rd = 2 * cos.size(-1);
  if (rd < dh) {
    auto rot = apply_rotary(x.narrow(-1, 0, rd), cos, sin, interleaved);
    return at::cat({rot, x.narrow(-1, rd, dh - rd)}, -1);
  }
  if (interleaved) {
    // pairs (2i, 2i+1), as llama2.c's run.c and Meta's reference code.
    auto xs = x.reshape({x.size(0), x.size(1), x.size(2), dh / 2, 2});
    auto x0 = xs.select(-1, 0), x1 = xs.select(-1, 1);
    auto r0 = x0 * cos - x1 * sin;
    auto r1 = x0 * sin + x1 * cos;
    return at::stack({r0, r1}, -1).reshape(x.sizes());
  }
  // Hugging Face rotate_half: pairs (i, i + d_head/2).
  auto x1 = x.narrow(-1, 0, dh / 2), x2 = x.narrow(-1, dh / 2, dh / 2);
  return at::cat({x1 * cos - x2 * sin, x2 * cos + x1 * sin}, -1);
}

// Sinusoidal position table [T, d] (Vaswani et al.): sin on even features, cos on odd ones.
at::Tensor sinusoidal_table(int64_t T, int64_t d) {
  auto pos = at::arange(T, at::TensorOptions().dtype(at::kDouble)).unsqueeze(1);
  auto i = at::arange(0, d, 2, at::TensorOptions().dtype(at::kDouble));
  auto ang = pos * at::pow(10000.0, -i / static_cast<double>(d));
  auto pe = at::zeros({T, d}, at::TensorOptions().dtype(at::kDouble));
  pe.index_put_({at::indexing::Slice(), at::indexing::Slice(0, at::indexing::None, 2)}, at::sin(ang));
  pe.index_put_({at::indexing::Slice(), at::indexing::Slice(1, at::indexing::None, 2)}, at::cos(ang).narrow(1, 0, d / 2));
  return pe.to(at::kFloat);
}

// ALiBi head slopes (Press et al.): geometric sequence 2^(-8/n) ..., with the standard interpolation
// when the head count is not a power of two.
std::vector<double> alibi_slopes(int64_t n) {
  auto pow2 = [](int64_t m) {
    std::vector<double> s;
    double start = std::pow(2.0, -std::pow(2.0, -(std::log2(static_cast<double>(m)) - 3)));
    for (int64_t i = 0; i < m; ++i) s.push_back(start * std::pow(start, static_cast<double>(i)));
    return s;
  };
  int64_t p = 1;
  while (p * 2 <= n) p *= 2;
  auto s = pow2(p);
  if (p != n) {
    auto extra = pow2(2 * p);
    for (int64_t i = 0; static_cast<int64_t>(s.size()) < n; i += 2) s.push_back(extra[static_cast<size_t>(i)]);
  }
  return s;
}

}  // namespace detail
}  // namespace vocablens

// SAE / transcoder encode and decode (vocablens/sae.hpp), and whether an SAE fits a model's hook.
#include "vocablens/sae.hpp"

#include <cmath>
#include <functional>
#include <vector>

#include <fmt/format.h>

#include "vocablens/error.hpp"
#include "vocablens/hooks.hpp"
#include "vocablens/model.hpp"
#include "vocablens/weight.hpp"

namespace vocablens {

const char* to_string(SaeArchitecture a) {
  switch (a) {
    case SaeArchitecture::Standard: return "standard";
    case SaeArchitecture::JumpReLU: return "jumprelu";
    case SaeArchitecture::TopK: return "topk";
    case SaeArchitecture::BatchTopK: return "batchtopk";
    case SaeArchitecture::Gated: return "gated";
  }
  return "?";
}

const char* to_string(SaeNormalize n) {
  switch (n) {
    case SaeNormalize::None: return "none";
    case SaeNormalize::ExpectedAverageOnlyIn: return "expected_average_only_in";
    case SaeNormalize::ConstantNormRescale: return "constant_norm_rescale";
    case SaeNormalize::LayerNorm: return "layer_norm";
    case SaeNormalize::DatasetWise: return "dataset_wise";
  }
  return "?";
}

namespace {

// Weights are kept as stored; each product upcasts them to the compute dtype (float32, or float64 when
// the caller passes float64 input to get reference-grade numbers).
at::Tensor as(const at::Tensor& w, at::ScalarType t) { return w.defined() ? materialize_weight(w).to(t) : w; }

at::ScalarType compute_type(const at::Tensor& x) { return x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat; }

void check_last(const at::Tensor& x, int64_t want, const char* what, const std::string& src) {
  if (!x.defined() || x.dim() < 1 || x.size(-1) != want)
    throw UsageError(fmt::format("{}: {} must end in a dimension of {} (got shape {})", src, what, want,
                                 x.defined() ? fmt::format("{}", fmt::join(x.sizes(), "x")) : "undefined"));
  if (!x.is_floating_point()) throw UsageError(src + ": " + what + " must be a floating-point tensor");
}

const std::vector<int64_t> kLastDim{-1};
at::IntArrayRef last_dim() { return at::IntArrayRef(kLastDim); }

// x -> x' (the normalised input) as the SAE's mode defines it.
at::Tensor normalise_in(const Sae& s, const at::Tensor& x) {
  switch (s.normalize) {
    case SaeNormalize::ConstantNormRescale: return x * (std::sqrt(double(s.d_in)) / x.norm(2, last_dim(), true));
    case SaeNormalize::LayerNorm: {
      at::Tensor mu = x.mean(last_dim(), true);
      at::Tensor c = x - mu;
      at::Tensor sd = c.std(last_dim(), /*unbiased=*/true, /*keepdim=*/true);
      return c / (sd + 1e-5);
    }
    case SaeNormalize::DatasetWise: return x * (std::sqrt(double(s.d_in)) / s.norm_in);
    default: return x;
  }
}

at::Tensor normalise_out(const Sae& s, const at::Tensor& y, const at::Tensor& x) {
  switch (s.normalize) {
    case SaeNormalize::ConstantNormRescale: return y / (std::sqrt(double(s.d_in)) / x.norm(2, last_dim(), true));
    case SaeNormalize::LayerNorm: {
      at::Tensor mu = x.mean(last_dim(), true);
      at::Tensor sd = (x - mu).std(last_dim(), true, true);
      return y * sd + mu;
    }
    case SaeNormalize::DatasetWise: return y * (s.norm_out / std::sqrt(double(s.d_in)));
    default: return y;
  }
}

at::Tensor sae_input(const Sae& s, const at::Tensor& x, at::ScalarType t) {
  at::Tensor xi = normalise_in(s, x.to(t));
  if (s.apply_b_dec_to_input) xi = xi - as(s.b_dec, t);
  return xi;
}

}  // namespace

at::Tensor Sae::encode_pre(const at::Tensor& x) const {
  check_last(x, d_in, "the input", source);
  const auto t = compute_type(x);
  at::Tensor xi = sae_input(*this, x, t);
  if (architecture == SaeArchitecture::Gated) return at::matmul(xi, as(W_enc, t) * as(r_mag, t).exp()) + as(b_mag, t);
  return at::matmul(xi, as(W_enc, t)) + as(b_enc, t);
}

at::Tensor Sae::encode(const at::Tensor& x) const {
  at::NoGradGuard ng;
  check_last(x, d_in, "the input", source);
  const auto t = compute_type(x);
  at::Tensor pre = encode_pre(x);
  at::Tensor dn;
  if (sparsity_include_decoder_norm) {
    dn = as(W_dec, t).norm(2, {1});
    pre = pre * dn;
  }
  at::Tensor f;
  switch (architecture) {
    case SaeArchitecture::Standard: f = pre.relu(); break;
    case SaeArchitecture::JumpReLU:
    case SaeArchitecture::BatchTopK: f = (keep_negative ? pre : pre.relu()) * (pre > as(threshold, t)).to(t); break;
    case SaeArchitecture::TopK: {
      auto [vals, idx] = pre.topk(std::min<int64_t>(k, d_sae), -1);
      f = at::zeros_like(pre).scatter_(-1, idx, keep_negative ? vals : vals.relu());
      break;
    }
    case SaeArchitecture::Gated: {
      at::Tensor gate = at::matmul(sae_input(*this, x, t), as(W_enc, t)) + as(b_gate, t);
      f = (gate > 0).to(t) * pre.relu();
      break;
    }
  }
  if (sparsity_include_decoder_norm) f = f / dn;
  return f;
}

at::Tensor Sae::decode(const at::Tensor& f, const at::Tensor& x) const {
  at::NoGradGuard ng;
  check_last(f, d_sae, "the feature activations", source);
  const bool needs_x = normalize == SaeNormalize::ConstantNormRescale || normalize == SaeNormalize::LayerNorm || W_skip.defined();
  if (needs_x && !x.defined())
    throw UsageError(source + ": decode needs the input x as well (" +
                     (W_skip.defined() ? std::string("skip connection") : std::string("normalisation ") + to_string(normalize)) +
                     ")");
  if (x.defined()) check_last(x, d_in, "the input", source);
  const auto t = compute_type(f);
  at::Tensor ff = f.to(t);
  if (scaling_factor.defined()) ff = ff * as(scaling_factor, t);
  at::Tensor y = at::matmul(ff, as(W_dec, t)) + as(b_dec, t);
  if (normalize == SaeNormalize::ConstantNormRescale || normalize == SaeNormalize::LayerNorm ||
      normalize == SaeNormalize::DatasetWise)
    y = normalise_out(*this, y, x.defined() ? x.to(t) : x);
  if (W_skip.defined()) y = y + at::matmul(x.to(t), as(W_skip, t));
  return y;
}

at::Tensor Sae::forward(const at::Tensor& x) const { return decode(encode(x), x); }

std::function<void(at::Tensor&)> sae_splice(const Sae& sae, bool error_term) {
  return [sae, error_term](at::Tensor& a) {
    at::NoGradGuard ng;
    const auto shape = a.sizes().vec();
    at::Tensor x = a;
    if (a.dim() >= 2 && a.size(-1) != sae.d_in && a.size(-1) * a.size(-2) == sae.d_in) x = a.flatten(-2);
    at::Tensor y;
    if (error_term) {
      at::Tensor xd = x.to(at::kDouble);
      at::Tensor xh = sae.forward(xd);
      y = xh + (xd - xh);
    } else {
      y = sae.forward(x.to(at::kFloat));
    }
    if (y.size(-1) != shape.back()) y = y.reshape(shape);
    a = y.to(a.scalar_type());
  };
}

int64_t hook_width(const Model& m, const std::string& name) {
  const auto& c = m.config();
  HookSite s = parse_hook_name(name, c);
  switch (s.point) {
    case HookPoint::MlpPre:
    case HookPoint::MlpPost: return c.d_mlp;
    case HookPoint::Z: return c.n_heads * c.d_head;
    case HookPoint::Q: return c.n_heads * c.d_head;
    case HookPoint::K:
    case HookPoint::V: return c.n_kv_heads * c.d_head;
    case HookPoint::AttnScores:
    case HookPoint::Pattern:
    case HookPoint::Result:
    case HookPoint::Ln1Scale:
    case HookPoint::Ln2Scale:
    case HookPoint::FinalScale:
      throw UsageError("hook point '" + name +
                       "' is not one an SAE reads (attention scores, patterns, per-head results, norms' scales)");
    default: return c.d_model;
  }
}

// A width or hook that does not fit is a wrong pairing of two good files, so a UsageError (the CLI's exit 2,
// Python's ValueError), not a FormatError; the message still starts with the SAE's path.
void check_sae_fits(const Sae& sae, const Model& m) {
  auto width = [&](const std::string& h) {
    try {
      return hook_width(m, h);
    } catch (const UsageError& e) {
      throw UsageError(sae.source + ": hook '" + h + "' is not a hook point of " + m.source() +
                       " (e.g. blocks.0.hook_resid_pre, blocks.0.hook_mlp_out, blocks.0.attn.hook_z)");
    }
  };
  if (!sae.hook_name.empty()) {
    const int64_t w = width(sae.hook_name);
    if (w != sae.d_in)
      throw UsageError(sae.source + ": " +
                       fmt::format("d_in {} does not match {} of {} (width {})", sae.d_in, sae.hook_name, m.source(), w));
  }
  const int64_t d_model = m.config().d_model;
  const std::string out = sae.hook_name_out.empty() ? sae.hook_name : sae.hook_name_out;
  if (!out.empty()) {
    const int64_t w = width(out);
    if (w != sae.d_out)
      throw UsageError(sae.source + ": " +
                       fmt::format("d_out {} does not match {} of {} (width {})", sae.d_out, out, m.source(), w));
  } else if (sae.d_in != d_model && sae.d_out != d_model) {
    throw UsageError(
        sae.source + ": " +
        fmt::format("d_in {} / d_out {} match no residual width of {} (d_model {})", sae.d_in, sae.d_out, m.source(), d_model));
  }
}

}  // namespace vocablens

// The tuned lens's translators (see vocablens/tuned_lens.hpp): applying a translator, checking that a lens
// belongs to a model, and a TunedLens from the checked files of a lens directory (read by the checkpoint layer,
// src/checkpoint/tuned_lens_checkpoint.cpp).
#include "vocablens/tuned_lens.hpp"

#include <iostream>

#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/detail/sha256.hpp"
#include "vocablens/dist.hpp"

namespace vocablens {

TunedLens::TunedLens() = default;
TunedLens::~TunedLens() = default;
TunedLens::TunedLens(const TunedLens&) = default;
TunedLens::TunedLens(TunedLens&&) noexcept = default;
TunedLens& TunedLens::operator=(const TunedLens&) = default;
TunedLens& TunedLens::operator=(TunedLens&&) noexcept = default;

int64_t TunedLens::n_translators() const { return static_cast<int64_t>(weight.size()); }

TunedLens TunedLens::identity(const Model& m) {
  const auto& c = m.config();
  TunedLens t;
  t.config.base_model_name_or_path = m.source();
  t.config.d_model = c.d_model;
  t.config.num_hidden_layers = c.n_layers;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    t.weight.push_back(at::zeros({c.d_model, c.d_model}, at::kFloat));
    t.bias.push_back(at::zeros({c.d_model}, at::kFloat));
  }
  return t;
}

at::Tensor TunedLens::translate(const at::Tensor& h, int64_t idx) const {
  if (idx < 0 || idx >= n_translators())
    throw UsageError("tuned lens: translator " + std::to_string(idx) + " out of range (0.." +
                     std::to_string(n_translators() - 1) + ")");
  const auto& W = weight[static_cast<size_t>(idx)];
  const auto& b = bias[static_cast<size_t>(idx)];
  return at::addmm(b, h.reshape({-1, h.size(-1)}), W.t()).reshape(h.sizes()) + h;
}

void TunedLens::check_model(const Model& m) const {
  const auto& c = m.config();
  if (config.d_model != c.d_model || n_translators() != c.n_layers)
    throw UsageError("the tuned lens " + (source.empty() ? std::string("(in memory)") : source) + " was trained for d_model " +
                     std::to_string(config.d_model) + " with " + std::to_string(n_translators()) + " layers, but the model " +
                     m.source() + " has d_model " + std::to_string(c.d_model) + " and " + std::to_string(c.n_layers) + " layers");
}

std::string unembedding_sha256(const Model& m) {
  Sha256 h;
  at::Tensor W = m.W_U().contiguous();
  h.update(static_cast<const char*>(W.data_ptr()), static_cast<size_t>(W.numel()) * sizeof(float));
  if (m.weights().b_U.defined()) {
    at::Tensor b = m.weights().b_U.to(at::kFloat).contiguous();
    h.update(static_cast<const char*>(b.data_ptr()), static_cast<size_t>(b.numel()) * sizeof(float));
  }
  return h.hex_digest();
}

bool TunedLens::matches_unembedding(const Model& m) const {
  return unembed_sha256.empty() || unembed_sha256 == unembedding_sha256(m);
}

TunedLens load_tuned_lens(const std::string& dir) {
  TunedLensCheckpoint c = read_tuned_lens_checkpoint(dir);
  TunedLens t;
  t.config = std::move(c.config);
  t.weight = std::move(c.weight);
  t.bias = std::move(c.bias);
  t.unembed_sha256 = std::move(c.unembed_sha256);
  t.source = dir;
  // A lens whose training stopped early (--stop-after, Ctrl-C) reads like a finished one; say so, on every
  // path that loads it (lens --tuned, tuned-lens eval, serve, Python).
  if (const auto u = tuned_lens_unfinished(dir); u && dist::rank() == 0)
    std::cerr << "vocablens: warning: " << dir << " is an unfinished tuned lens: trained " << u.trained_steps << " of " << u.steps
              << " steps (stopped by --stop-after or Ctrl-C), so its translators are only partly trained; "
              << "finish it with the same `vocablens tuned-lens train` command and --resume\n";
  return t;
}

}  // namespace vocablens

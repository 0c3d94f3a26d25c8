// Python bindings of the weight analyses: heads and neurons (as `vocablens heads/neurons`). Both run in
// steps (heads: one layer at a time; neurons: blocks of `block`, default 256) so that progress shows and Ctrl-C stops
// between steps; the merged analysis is the one a single call returns (same order, same numbers).
#include "analyses.hpp"
#include "vocablens/error.hpp"
#include "vocablens/heads.hpp"
#include "vocablens/neurons.hpp"

namespace vlpy {
namespace {

vocablens::TokenFilter token_filter(Options& o) {
  vocablens::TokenFilter f;
  f.alpha_only = o.flag("alpha_only", false);
  if (o.has("allow")) f.allow = o.indices("allow");
  else o.raw("allow");
  return f;
}

RegisterAnalysis heads_reg{
    "heads", "Attention heads in vocabulary space: top (token, token) pairs of OV / QK circuits, spectra, copying scores",
    [](const PyModel& m, Options& o) {
      const auto& cfg = m.model.config();
      vocablens::HeadsOptions ho;
      ho.layers = o.indices("layers");
      ho.heads = o.indices("heads");
      std::string kind = o.choice("kind", "both", {"both", "ov", "qk", "OV", "QK"});
      if (kind == "both") ho.kinds = {vocablens::CircuitKind::OV, vocablens::CircuitKind::QK};
      else ho.kinds = {vocablens::parse_circuit_kind(kind)};
      ho.top_k = o.integer_at_least("top_k", 50, 1);
      ho.per_token_k = o.integer_at_least("per_token_k", 0, 0);
      ho.inverse = vocablens::parse_inverse_kind(o.choice("inverse", "pinv", {"pinv", "transpose", "embed"}));
      ho.pinv.rtol = o.real("pinv_rtol", 1e-6);
      ho.drop_same_token = o.flag("drop_same_token", false);
      ho.drop_same_normalized = o.flag("drop_same_word", false);
      ho.filter = token_filter(o);
      ho.spectra = o.flag("spectra", true);
      ho.prune = o.flag("prune", true);
      py::object tokens = o.raw("tokens");
      py::object progress = o.raw("progress");
      o.finish();
      if (!tokens.is_none()) {
        py::list items;
        if (py::isinstance<py::str>(tokens) || py::isinstance<py::int_>(tokens)) items.append(tokens);
        else if (py::isinstance<py::list>(tokens) || py::isinstance<py::tuple>(tokens))
          for (auto t : tokens) items.append(t);
        else throw py::type_error("heads(): tokens must be a token, a token id, or a list of them");
        for (size_t i = 0; i < items.size(); ++i)
          ho.source_tokens.push_back(token_from(m, items[i], "tokens[" + std::to_string(i) + "]"));
      }
      for (auto& l : ho.layers)
        if (l < 0) l += cfg.n_layers;  // Python-style negative layers
      std::vector<int64_t> layers = ho.layers;
      if (layers.empty())
        for (int64_t l = 0; l < cfg.n_layers; ++l) layers.push_back(l);
      for (int64_t l : layers)
        if (l < 0 || l >= cfg.n_layers)
          throw py::value_error("heads(): layers: layer " + std::to_string(l) + " is out of range (the model has " +
                                std::to_string(cfg.n_layers) + " layers)");
      Progress bar(progress, static_cast<int64_t>(layers.size()), "heads", "layer");
      py::gil_scoped_release nogil;
      vocablens::HeadsAnalysis all;
      for (size_t i = 0; i < layers.size(); ++i) {
        vocablens::HeadsOptions one = ho;
        one.layers = {layers[i]};
        auto a = vocablens::analyze_heads(m.model, one, m.tok.get());
        if (i == 0) {
          all = std::move(a);
        } else {
          for (auto& c : a.circuits) all.circuits.push_back(std::move(c));
        }
        bar.advance();
      }
      all.options.layers = layers;
      return all.to_result(m.tok.get());
    }};

RegisterAnalysis neurons_reg{
    "neurons", "MLP neurons in vocabulary space: top tokens of each key, gate and value vector, with their norms",
    [](const PyModel& m, Options& o) {
      vocablens::NeuronsOptions no;
      no.layer = o.integer("layer", 0);
      if (no.layer < 0) no.layer += m.model.config().n_layers;
      no.neurons = o.indices("neurons");
      no.top_k = o.integer_at_least("top_k", 30, 1);
      no.inverse = vocablens::parse_inverse_kind(o.choice("inverse", "pinv", {"pinv", "transpose", "embed"}));
      no.pinv.rtol = o.real("pinv_rtol", 1e-6);
      no.keys = o.flag("keys", true);
      no.values = o.flag("values", true);
      no.gates = o.flag("gates", true);
      no.bottom = o.flag("bottom", false);
      no.filter = token_filter(o);
      const size_t block = static_cast<size_t>(o.integer_at_least("block", 256, 1));
      py::object progress = o.raw("progress");
      o.finish();
      if (!no.keys && !no.values && !no.gates)
        throw py::value_error("neurons(): keys=False, gates=False and values=False leave nothing to show");
      const auto& cfg = m.model.config();
      if (no.layer < 0 || no.layer >= cfg.n_layers)
        throw py::value_error("neurons(): layer " + std::to_string(no.layer) + " is out of range (the model has " +
                              std::to_string(cfg.n_layers) + " layers)");
      std::vector<int64_t> ids = no.neurons;
      if (ids.empty())
        for (int64_t n = 0; n < cfg.d_mlp; ++n) ids.push_back(n);
      Progress bar(progress, static_cast<int64_t>(ids.size()), "neurons", "neuron");
      py::gil_scoped_release nogil;
      vocablens::NeuronsAnalysis all;
      for (size_t s = 0; s < ids.size(); s += block) {
        vocablens::NeuronsOptions one = no;
        one.neurons.assign(ids.begin() + static_cast<std::ptrdiff_t>(s),
                           ids.begin() + static_cast<std::ptrdiff_t>(std::min(ids.size(), s + block)));
        auto a = vocablens::analyze_neurons(m.model, one, m.tok.get());
        if (s == 0) all = std::move(a);
        else for (auto& n : a.neurons) all.neurons.push_back(std::move(n));
        bar.advance(static_cast<int64_t>(one.neurons.size()));
      }
      all.options.neurons = ids;
      return all.to_result(m.tok.get());
    }};

}  // namespace
}  // namespace vlpy

// tests/support/graph_checks.hpp — what the attribution-graph test files share: a graph's computed rows, the
// check of every one of its entries against an intervention in the float64 frozen replacement model
// (frozen_replacement.hpp), and a writer of float32 safetensors files for the transcoders a test makes.
//
//   FrozenRef f(model, ref_per_layer(dir, L), ids);
//   const double largest = check_against_interventions(model, ids, graph, f, "what");   // Catch2 checks
//
// Private to the test files that include it (an unnamed namespace).
#pragma once
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "fixtures.hpp"
#include "frozen_replacement.hpp"

namespace {

/// The graph's computed rows (selected features, logits) as float64.
Tensor computed_rows(const vocablens::AttributionGraph& g) {
  Tensor a = g.adjacency.to(at::kDouble);
  return at::cat({a.slice(0, 0, g.n_selected()), a.slice(0, g.n_nodes() - g.n_logits())});
}

/// The graph of `ids` through `tcs` checked against `f` (settled here): the nodes, and every computed row
/// entry against an intervention, to 1e-5 of the largest entry. Returns that largest entry.
double check_against_interventions(const vocablens::Model& m, const Tensor& ids, const vocablens::AttributionGraph& g,
                                   FrozenRef& f, const std::string& what) {
  INFO(what);
  f.settle();
  // the frozen model as it is reproduces the model's own last logits (patterns and denominators are the
  // forward's): its final norm output through W_U
  Tensor logits = m.forward(ids).logits[0][f.T - 1].to(at::kDouble);
  Tensor mine = at::matmul(f.run(-1, 0, 0, 0).final_out[f.T - 1], g64(m.weights().W_U));
  if (m.weights().b_U.defined()) mine = mine + g64(m.weights().b_U);
  const double cap = m.config().final_softcap;  // Gemma-2's c·tanh(logit / c)
  if (cap > 0) mine = at::tanh(mine / cap) * cap;
  CHECK((mine - logits).abs().max().item<double>() < 1e-4);

  // the nodes: active features (position 0 excluded) and their activations, the salient logits
  Tensor nz = at::cat(
      [&] {
        std::vector<Tensor> v;
        for (int64_t l = 0; l < f.L; ++l) {
          Tensor n = f.acts[l].nonzero();
          v.push_back(at::cat({at::full({n.size(0), 1}, l, at::kLong), n}, 1));
        }
        return v;
      }(),
      0);
  REQUIRE(g.active_features.sizes() == nz.sizes());
  CHECK(at::equal(g.active_features, nz));
  CHECK(g.n_selected() == nz.size(0));
  CHECK(g.n_selected() > 20);
  Tensor probs = at::softmax(logits, -1);
  auto top = at::topk(probs, g.n_logits() + 1);
  CHECK(at::equal(g.logit_ids, std::get<1>(top).slice(0, 0, g.n_logits())));
  const double cum = std::get<0>(top).slice(0, 0, g.n_logits()).sum().item<double>();
  CHECK((cum >= 0.95 || g.n_logits() == 10));
  CHECK((g.n_logits() == 1 || std::get<0>(top).slice(0, 0, g.n_logits() - 1).sum().item<double>() < 0.95));

  Tensor ref = intervened(f, g);
  Tensor got = computed_rows(g);
  const double scale = ref.abs().max().item<double>();
  const double err = (got - ref).abs().max().item<double>();
  WARN(what << ": " << g.n_selected() << " features, " << g.n_logits() << " logits; max |adjacency - intervention| " << err
            << " = " << err / scale << " of the largest entry " << scale);
  CHECK(err <= 1e-5 * scale);
  // error and token rows are zero; logit columns are zero
  CHECK(g.adjacency.slice(0, g.n_selected(), g.n_nodes() - g.n_logits()).abs().max().item<double>() == 0);
  CHECK(g.adjacency.slice(1, g.n_nodes() - g.n_logits()).abs().max().item<double>() == 0);

  // break-check: the same comparison against a frozen model with a 1 % wrong ln2 denominator fails (a set
  // read at hook_resid_mid reads before ln2: nothing to break there)
  if (f.input != 2) {
    f.s2_factor = 1.01;
    const double broken = (got - intervened(f, g)).abs().max().item<double>();
    CHECK(broken > 1e-3 * scale);
    f.s2_factor = 1.0;
  }
  if (!f.s_attn.empty()) {  // and with a 1 % wrong post-attention denominator
    f.s_attn_factor = 1.01;
    const double broken = (got - intervened(f, g)).abs().max().item<double>();
    WARN(what << ": post-attention denominator 1 % off: " << broken / scale << " of the largest entry");
    CHECK(broken > 1e-3 * scale);
    f.s_attn_factor = 1.0;
  }
  return scale;
}

/// float32 tensors as one safetensors file.
void write_f32_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& ts) {
  nlohmann::json h = nlohmann::json::object();
  std::string data;
  for (const auto& [name, t] : ts) {
    const Tensor c = t.contiguous();
    h[name] = {{"dtype", "F32"}, {"shape", c.sizes().vec()}, {"data_offsets", {data.size(), data.size() + 4 * c.numel()}}};
    data.append(static_cast<const char*>(c.data_ptr()), static_cast<size_t>(4 * c.numel()));
  }
  std::string hs = h.dump();
  while (hs.size() % 8) hs.push_back(' ');
  std::string out(8, '\0');
  const uint64_t len = hs.size();
  std::memcpy(&out[0], &len, 8);
  vl_test::write_file(path, out + hs + data);
}

}  // namespace

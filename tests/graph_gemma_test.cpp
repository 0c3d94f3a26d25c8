// Attribution graphs on Gemma-2's blocks (vocablens/graph.hpp): norms after attention and after the MLP,
// attention and final soft-caps, embeddings scaled by sqrt(d_model) — the families' gemma2 and gemma3 fixtures
// with per-layer transcoders written here as Gemma Scope's are read (ln2.hook_normalized -> hook_mlp_out).
// Every adjacency entry is checked against an intervention in the float64 frozen replacement model
// (tests/support/frozen_replacement.hpp), as graph_test does for the pre-norm families.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "graph_checks.hpp"
#include "vocablens/graph.hpp"
#include "vocablens/model.hpp"

namespace {

/// Random per-layer JumpReLU transcoders for `m` as Gemma Scope's are read: ln2.hook_normalized (the norm
/// before its weight) -> hook_mlp_out (after a post-MLP norm), circuit-tracer's layer_{i}.safetensors with a
/// config.yaml; their float64 masters (float32 values, as written) for the reference.
std::string write_gemma_scope_like(const std::string& tag, const vocablens::Model& m, RefTranscoders& ref) {
  const int64_t L = m.config().n_layers, D = m.config().d_model, N = 48;
  const std::string dir = vl_test::temp_dir(tag);
  at::Generator gen = at::detail::createCPUGenerator(20261130);
  auto normal = [&](std::vector<int64_t> shape, double sd) { return at::normal(0.0, sd, shape, gen).to(at::kFloat); };
  auto uniform = [&](std::vector<int64_t> shape, double a, double b) {
    return (at::rand(shape, gen, at::kDouble) * (b - a) + a).to(at::kFloat);
  };
  for (int64_t l = 0; l < L; ++l) {
    // the input has unit RMS: pre-activations of order 1, about a third of them past their thresholds
    Tensor W_enc = normal({N, D}, 1.0 / std::sqrt(static_cast<double>(D))), b_enc = uniform({N}, -0.6, 0.0);
    Tensor W_dec = normal({N, D}, 0.2), b_dec = normal({D}, 0.05), thr = uniform({N}, 0.05, 0.3);
    write_f32_safetensors(
        dir + "/layer_" + std::to_string(l) + ".safetensors",
        {{"W_enc", W_enc}, {"b_enc", b_enc}, {"W_dec", W_dec}, {"b_dec", b_dec}, {"activation_function.threshold", thr}});
    ref.W_enc.push_back(W_enc.t().to(at::kDouble));
    ref.b_enc.push_back(b_enc.to(at::kDouble));
    ref.thr.push_back(thr.to(at::kDouble));
    ref.b_dec.push_back(b_dec.to(at::kDouble));
    ref.W_skip.emplace_back();
    ref.dec.push_back({W_dec.to(at::kDouble)});
  }
  vl_test::write_file(dir + "/config.yaml",
                      "model_kind: transcoder_set\nfeature_input_hook: ln2.hook_normalized\n"
                      "feature_output_hook: hook_mlp_out\n");
  return dir;
}

}  // namespace

TEST_CASE("Gemma-2 blocks (norms after attention and MLP, soft-caps): every entry equals an intervention", "[graph]") {
  // gemma2: post-norms, attention and final soft-caps that bite, a sliding window, embeddings × sqrt(d);
  // gemma3: the same blocks with q/k norms. The post-attention norm is frozen (linear); the MLP with its
  // post-norm is what the transcoder replaces; the logits' probabilities are the capped ones, their edges
  // the demeaned W_U columns, as circuit-tracer's.
  for (const char* family : {"gemma2", "gemma3"}) {
    INFO(family);
    vocablens::Model m = vocablens::load_model(std::string(vl_test::source_dir_path()) + "/tests/fixtures/families/" + family);
    REQUIRE(m.weights().layers[0].post_attn_norm_w.defined());
    REQUIRE(m.weights().layers[0].post_mlp_norm_w.defined());
    Tensor ids =
        at::tensor(std::vector<int64_t>{2, 17, 200, 45, 88, 131, 9}, at::kLong);  // short: each source is one float64 forward
    RefTranscoders rt;
    const std::string dir = write_gemma_scope_like(std::string("graph-") + family, m, rt);
    auto tcs = vocablens::load_graph_transcoders(dir, m);
    CHECK(tcs->input() == vocablens::GraphInput::Ln2Normalized);
    vocablens::GraphOptions o;
    o.batch_size = 5;
    vocablens::AttributionGraph g = vocablens::attribution_graph(m, ids, *tcs, o);
    FrozenRef f(m, rt, ids);
    f.input = 1;
    REQUIRE(static_cast<int64_t>(f.s_attn.size()) == m.config().n_layers);
    check_against_interventions(m, ids, g, f, std::string(family) + " read at ln2.hook_normalized");
  }
}

// Attribution graphs (vocablens/graph.hpp) against interventions: every adjacency entry must equal the change
// of its target when its source is removed from the frozen replacement model, which
// tests/support/frozen_replacement.hpp implements on its own in float64 — circuit-tracer's own test method.
// Fixtures: gpt2-tiny (LayerNorm, learned positions) with ReLU transcoders and a skip connection, the
// llama3 family fixture (RMSNorm, rotary, grouped-query attention) with JumpReLU transcoders; the
// transcoders are tests/fixtures/graph/ (make_transcoders.py).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fixtures.hpp"
#include "graph_checks.hpp"
#include "vocablens/error.hpp"
#include "vocablens/graph.hpp"
#include "vocablens/model.hpp"
#include "vocablens/result.hpp"
#include "vocablens/sae.hpp"
#include "vocablens/weight.hpp"

namespace {

using at::Tensor;

std::string graph_fixture(const std::string& model) {
  return std::string(vl_test::source_dir_path()) + "/tests/fixtures/graph/" + model;
}

struct GraphCase {
  const char* model;
  std::string path;
  std::vector<int64_t> ids;
};

std::vector<GraphCase> graph_cases() {
  return {
      {"gpt2-tiny", vl_test::fixture("gpt2-tiny"), {50256, 464, 412, 733, 8765, 318, 287}},
      {"llama3", std::string(vl_test::source_dir_path()) + "/tests/fixtures/families/llama3", {319, 17, 200, 45, 88, 131, 9}}};
}

/// The gpt2-tiny fixture's per-layer files in a folder with circuit-tracer's config.yaml.
std::string configured_copy(const std::string& tag, const std::string& hook_in, const std::string& hook_out) {
  const std::string dir = vl_test::temp_dir(tag);
  for (int l = 0; l < 3; ++l) {
    const std::string name = "/layer_" + std::to_string(l) + ".safetensors";
    vl_test::write_file(dir + name, vl_test::read_file(graph_fixture("gpt2-tiny") + name));
  }
  vl_test::write_file(dir + "/config.yaml",
                      "model_kind: transcoder_set\nfeature_input_hook: " + hook_in + "\nfeature_output_hook: " + hook_out + "\n");
  return dir;
}

}  // namespace

TEST_CASE("every adjacency entry equals an intervention in the frozen replacement model", "[graph]") {
  for (const GraphCase& gc : graph_cases()) {
    INFO(gc.model);
    REQUIRE(!gc.path.empty());
    vocablens::Model m = vocablens::load_model(gc.path);
    Tensor ids = at::tensor(gc.ids, at::kLong);
    auto tcs = vocablens::load_graph_transcoders(graph_fixture(gc.model), m);
    vocablens::GraphOptions o;
    o.batch_size = 5;  // several batches, targets of different layers mixed in one
    vocablens::AttributionGraph g = vocablens::attribution_graph(m, ids, *tcs, o);
    FrozenRef f(m, ref_per_layer(graph_fixture(gc.model), m.config().n_layers), ids);
    check_against_interventions(m, ids, g, f, gc.model);
  }
}

TEST_CASE("a config.yaml transcoder_set folder gives the plain folder's graph exactly", "[graph]") {
  const GraphCase gc = graph_cases()[0];
  vocablens::Model m = vocablens::load_model(gc.path);
  Tensor ids = at::tensor(gc.ids, at::kLong);
  vocablens::GraphOptions o;
  o.batch_size = 5;
  auto plain = vocablens::attribution_graph(m, ids, *vocablens::load_graph_transcoders(graph_fixture("gpt2-tiny"), m), o);
  // circuit-tracer's spellings of the same points: the block's own name and the full name with {layer}
  for (const auto& [in, out] : std::vector<std::pair<std::string, std::string>>{
           {"mlp.hook_in", "mlp.hook_out"}, {"\"blocks.{layer}.mlp.hook_in\"", "hook_mlp_out"}}) {
    INFO(in << " -> " << out);
    const std::string dir = configured_copy("graph-set", in, out);
    auto g = vocablens::attribution_graph(m, ids, *vocablens::load_graph_transcoders(dir, m), o);
    CHECK(at::equal(g.active_features, plain.active_features));
    CHECK(at::equal(g.activations, plain.activations));
    CHECK(at::equal(g.logit_ids, plain.logit_ids));
    CHECK(at::equal(g.adjacency, plain.adjacency));
  }
}

TEST_CASE("a set read at ln2.hook_normalized or hook_resid_mid: every entry equals an intervention", "[graph]") {
  const GraphCase gc = graph_cases()[0];
  vocablens::Model m = vocablens::load_model(gc.path);
  Tensor ids = at::tensor(gc.ids, at::kLong);
  vocablens::GraphOptions o;
  o.batch_size = 5;
  auto at_mlp_in = vocablens::attribution_graph(m, ids, *vocablens::load_graph_transcoders(graph_fixture("gpt2-tiny"), m), o);
  for (const auto& [hook, input] :
       std::vector<std::pair<std::string, int>>{{"ln2.hook_normalized", 1}, {"\"blocks.{layer}.hook_resid_mid\"", 2}}) {
    const std::string dir = configured_copy("graph-in", hook, "hook_mlp_out");
    auto tcs = vocablens::load_graph_transcoders(dir, m);
    CHECK(tcs->input() == (input == 1 ? vocablens::GraphInput::Ln2Normalized : vocablens::GraphInput::ResidMid));
    vocablens::AttributionGraph g = vocablens::attribution_graph(m, ids, *tcs, o);
    // the same weights read at another point are another graph (ln2's weight and bias are not the identity)
    CHECK_FALSE((g.active_features.sizes() == at_mlp_in.active_features.sizes() &&
                 at::equal(g.active_features, at_mlp_in.active_features) && at::equal(g.activations, at_mlp_in.activations)));
    FrozenRef f(m, ref_per_layer(graph_fixture("gpt2-tiny"), m.config().n_layers), ids);
    f.input = input;
    check_against_interventions(m, ids, g, f, "gpt2-tiny read at " + hook);
  }
}

namespace {

/// A random cross-layer transcoder for gpt2-tiny (3 layers, d 64, 48 features, JumpReLU) written as
/// circuit-tracer's W_enc_{i} / W_dec_{i} files with a config.yaml reading mlp.hook_in; its float64 masters
/// (float32 values, as written) for the reference.
std::string write_clt(const std::string& tag, RefTranscoders& ref) {
  const int64_t L = 3, D = 64, N = 48;
  const std::string dir = vl_test::temp_dir(tag);
  at::Generator gen = at::detail::createCPUGenerator(20261129);
  auto normal = [&](std::vector<int64_t> shape, double sd) { return at::normal(0.0, sd, shape, gen).to(at::kFloat); };
  auto uniform = [&](std::vector<int64_t> shape, double a, double b) {
    return (at::rand(shape, gen, at::kDouble) * (b - a) + a).to(at::kFloat);
  };
  const auto write = write_f32_safetensors;
  for (int64_t i = 0; i < L; ++i) {
    // as the per-layer fixture: pre-activations of order 1 on the normalised input, about a third firing
    Tensor W_enc = normal({N, D}, 1.0 / std::sqrt(static_cast<double>(D))), b_enc = uniform({N}, -0.6, 0.0);
    Tensor b_dec = normal({D}, 0.05), thr = uniform({N}, 0.05, 0.3);
    Tensor W_dec = normal({N, L - i, D}, 0.2);
    const std::string I = std::to_string(i);
    write(dir + "/W_enc_" + I + ".safetensors",
          {{"W_enc_" + I, W_enc}, {"b_enc_" + I, b_enc}, {"b_dec_" + I, b_dec}, {"threshold_" + I, thr}});
    write(dir + "/W_dec_" + I + ".safetensors", {{"W_dec_" + I, W_dec}});
    ref.W_enc.push_back(W_enc.t().to(at::kDouble));
    ref.b_enc.push_back(b_enc.to(at::kDouble));
    ref.thr.push_back(thr.to(at::kDouble));
    ref.b_dec.push_back(b_dec.to(at::kDouble));
    ref.W_skip.emplace_back();
    ref.dec.emplace_back();
    for (int64_t j = 0; j < L - i; ++j) ref.dec.back().push_back(W_dec.select(1, j).to(at::kDouble));
  }
  vl_test::write_file(dir + "/config.yaml",
                      "model_kind: cross_layer_transcoder\nfeature_input_hook: mlp.hook_in\n"
                      "feature_output_hook: hook_mlp_out\n");
  return dir;
}

}  // namespace

TEST_CASE("a cross-layer transcoder's edges sum over every later layer it writes to", "[graph]") {
  const GraphCase gc = graph_cases()[0];
  vocablens::Model m = vocablens::load_model(gc.path);
  Tensor ids = at::tensor(gc.ids, at::kLong);
  RefTranscoders rt;
  const std::string dir = write_clt("graph-clt", rt);
  vocablens::GraphOptions o;
  o.batch_size = 5;
  auto g = vocablens::attribution_graph(m, ids, *vocablens::load_graph_transcoders(dir, m), o);
  FrozenRef f(m, rt, ids);
  const double scale = check_against_interventions(m, ids, g, f, "gpt2-tiny, cross-layer transcoder");
  // break-checks: a reference that forgets one later block a feature writes to disagrees (a write past the
  // next block, and one from a middle layer)
  Tensor got = computed_rows(g);
  for (const auto& [src, out] : std::vector<std::pair<int64_t, int64_t>>{{0, 2}, {1, 2}}) {
    INFO("layer " << src << "'s decoder into block " << out << " dropped");
    f.drop_src = src;
    f.drop_out = out;
    const double broken = (got - intervened(f, g)).abs().max().item<double>();
    WARN("decoder " << src << " -> " << out << " dropped: " << broken / scale << " of the largest entry");
    CHECK(broken > 1e-3 * scale);
  }
  // a feature's label reads its decoder row into the last block; the graph's result runs whole
  vocablens::GraphReportOptions ro;
  ro.transcoders = dir;
  vocablens::Result r = vocablens::graph_result(m, nullptr, *vocablens::load_graph_transcoders(dir, m), g, ro);
  CHECK(r.summary.at("n_selected").get<int64_t>() == g.n_selected());
}

TEST_CASE("max_feature_nodes keeps the rows of the features it selects", "[graph]") {
  vocablens::Model m = vocablens::load_model(vl_test::fixture("gpt2-tiny"));
  Tensor ids = at::tensor(std::vector<int64_t>{50256, 464, 412, 733, 8765, 318, 287}, at::kLong);
  auto tcs = vocablens::load_graph_transcoders(graph_fixture("gpt2-tiny"), m);
  vocablens::GraphOptions o;
  o.batch_size = 4;
  o.update_interval = 1;
  vocablens::AttributionGraph full = vocablens::attribution_graph(m, ids, *tcs, o);
  o.max_feature_nodes = 9;
  vocablens::AttributionGraph part = vocablens::attribution_graph(m, ids, *tcs, o);
  REQUIRE(part.n_selected() == 9);
  // each selected feature's row (over the selected features' columns and the rest) is its row in the full graph
  // (float32 rows summed in other batches: equal to rounding)
  Tensor cols = at::cat({part.selected, at::arange(full.n_selected(), full.n_nodes() - full.n_logits())});
  const double scale = full.adjacency.abs().max().item<double>();
  for (int64_t i = 0; i < part.n_selected(); ++i) {
    Tensor want = full.adjacency[part.selected[i].item<int64_t>()].index_select(0, cols);
    Tensor have = part.adjacency[i].slice(0, 0, part.n_nodes() - part.n_logits());
    CHECK((have - want).abs().max().item<double>() <= 1e-6 * scale);
  }
  // the first feature visited is the one of highest influence on the logits through the logit rows alone:
  // |row| normalised, weighted by the logit probabilities
  Tensor lr = full.adjacency.slice(0, full.n_nodes() - full.n_logits()).slice(1, 0, full.n_selected()).to(at::kDouble);
  Tensor la = full.adjacency.slice(0, full.n_nodes() - full.n_logits()).abs().to(at::kDouble);
  Tensor direct = at::matmul(full.logit_probs.unsqueeze(0), lr.abs() / la.sum(1, true))[0];
  const int64_t best = direct.argmax().item<int64_t>();
  CHECK(at::isin(at::tensor({best}, at::kLong), part.selected).item<bool>());
}

// circuit-tracer's prune_graph on the dense [N, N] matrix, float64, written here from its definition: the
// engine prunes its [F + K, S] rows without building it.
struct DensePruning {
  Tensor node_mask, edge_mask, influence;
};
DensePruning dense_prune(const Tensor& adj, const Tensor& w, int64_t F, int64_t keep_from, double nt, double et) {
  auto norm = [](const Tensor& a) {
    Tensor n = a.abs();
    return n / n.sum(1, true).clamp_min(1e-10);
  };
  auto influence = [](const Tensor& A, const Tensor& w) {
    Tensor cur = at::matmul(w, A), total = cur.clone();
    while (cur.ne(0).any().item<bool>()) {
      cur = at::matmul(cur, A);
      total += cur;
    }
    return total;
  };
  auto thr = [](const Tensor& x, double f) {
    Tensor s = std::get<0>(at::sort(x.flatten(), 0, true));
    Tensor cum = at::cumsum(s, 0) / s.sum();
    const int64_t i = std::min(at::lt(cum, f).sum().item<int64_t>(), s.size(0) - 1);
    return s[i].item<double>();
  };
  DensePruning p;
  p.influence = influence(norm(adj), w);
  Tensor node = p.influence.ge(thr(p.influence, nt));
  node.slice(0, keep_from).fill_(true);
  Tensor pr = adj.clone();
  pr.index_put_({node.logical_not()}, 0);
  pr.index_put_({at::indexing::Slice(), node.logical_not()}, 0);
  Tensor A = norm(pr);
  Tensor sc = A * (influence(A, w) + w).unsqueeze(1);
  Tensor edge = sc.ge(thr(sc, et));
  Tensor old = node.clone();
  for (;;) {
    node.slice(0, 0, keep_from).logical_and_(edge.slice(1, 0, keep_from).any(0));
    node.slice(0, 0, F).logical_and_(edge.slice(0, 0, F).any(1));
    if (at::equal(node, old)) break;
    old.copy_(node);
    edge.index_put_({node.logical_not()}, false);
    edge.index_put_({at::indexing::Slice(), node.logical_not()}, false);
  }
  p.node_mask = node;
  p.edge_mask = edge;
  return p;
}

TEST_CASE("the graph kept as target rows prunes as the dense adjacency does", "[graph]") {
  vocablens::Model m = vocablens::load_model(vl_test::fixture("gpt2-tiny"));
  Tensor ids = at::tensor(std::vector<int64_t>{50256, 464, 412, 733, 8765, 318, 287, 6342, 13}, at::kLong);
  auto tcs = vocablens::load_graph_transcoders(graph_fixture("gpt2-tiny"), m);
  vocablens::GraphOptions o;
  o.batch_size = 5;
  vocablens::AttributionGraph dense = vocablens::attribution_graph(m, ids, *tcs, o);
  o.dense_adjacency = false;
  o.max_feature_nodes = 20;
  o.update_interval = 1;
  vocablens::AttributionGraph g = vocablens::attribution_graph(m, ids, *tcs, o);
  CHECK_FALSE(g.adjacency.defined());
  REQUIRE(g.rows.size(0) == g.n_selected() + g.n_logits());
  // the rows are the dense graph's rows of the same nodes, over its source columns (rounding: other batches)
  const Tensor adj = dense.adjacency.to(at::kDouble);
  const double scale = adj.abs().max().item<double>();
  Tensor src = at::cat({g.selected, at::arange(dense.n_selected(), dense.n_nodes() - dense.n_logits())});
  Tensor dst = at::cat({g.selected, at::arange(dense.n_nodes() - dense.n_logits(), dense.n_nodes())});
  Tensor want = adj.index_select(0, dst).index_select(1, src);
  CHECK((g.rows.to(at::kDouble) - want).abs().max().item<double>() <= 1e-6 * scale);
  // pruning the rows equals pruning the dense [N, N] matrix built from them, node for node and edge for edge
  for (auto [nt, et] : {std::pair{0.8, 0.98}, std::pair{0.5, 0.7}, std::pair{1.0, 1.0}}) {
    INFO("node threshold " << nt << ", edge threshold " << et);
    vocablens::GraphPruning p = vocablens::prune_graph(g, nt, et);
    Tensor full = g.dense_adjacency().to(at::kDouble);
    REQUIRE(full.size(0) == g.n_nodes());
    Tensor w = at::zeros({g.n_nodes()}, at::kDouble);
    w.slice(0, g.n_nodes() - g.n_logits()).copy_(g.logit_probs);
    DensePruning d = dense_prune(full, w, g.n_selected(), g.n_nodes() - g.n_logits() - g.n_pos, nt, et);
    CHECK((p.node_influence - d.influence).abs().max().item<double>() <= 1e-12);
    CHECK(at::equal(p.node_mask, d.node_mask));
    // the edge mask over the rows the engine keeps (targets with inputs × sources)
    Tensor rn = at::cat({at::arange(g.n_selected()), at::arange(g.n_sources(), g.n_nodes())});
    // over the edges of nonzero weight: at an edge threshold of 1.0, circuit-tracer's cumsum / sum reaches 1
    // or stops a rounding short of it, and then its cut falls on the zeros of [N, N] and "keeps" every zero
    // entry — no edge either way; the engine cuts among the nonzero scores
    const Tensor nonzero = full.index_select(0, rn).slice(1, 0, g.n_sources()).ne(0);
    const Tensor dm = d.edge_mask.index_select(0, rn).slice(1, 0, g.n_sources()).logical_and(nonzero);
    CHECK_FALSE(p.edge_mask.logical_and(nonzero.logical_not()).any().item<bool>());
    INFO("edges kept: " << p.edge_mask.sum().item<int64_t>() << " by the engine, " << dm.sum().item<int64_t>()
                        << " by the reference; " << p.edge_mask.ne(dm).sum().item<int64_t>() << " differ");
    CHECK(at::equal(p.edge_mask, dm));
    CHECK(p.edge_mask.sum().item<int64_t>() > 0);
  }
}

TEST_CASE("graph input that does not fit is one clear error", "[graph]") {
  vocablens::Model m = vocablens::load_model(vl_test::fixture("gpt2-tiny"));
  vocablens::Model llama = vocablens::load_model(std::string(vl_test::source_dir_path()) + "/tests/fixtures/families/llama3");
  auto msg = [](auto&& f) -> std::string {
    try {
      f();
    } catch (const vocablens::Error& e) { return e.what(); }
    return "";
  };
  // a folder with fewer layers than the model
  std::string e = msg([&] { vocablens::load_graph_transcoders(graph_fixture("llama3"), m); });
  CHECK(e.find("no layer_2.safetensors") != std::string::npos);
  // a set read at a point no MLP reads from (the block's input, before attention)
  e = msg([&] { vocablens::load_graph_transcoders(configured_copy("graph-pre", "hook_resid_pre", "hook_mlp_out"), m); });
  CHECK(e.find("config.yaml: feature_input_hook 'hook_resid_pre'") != std::string::npos);
  CHECK(e.find("mlp.hook_in") != std::string::npos);
  e = msg([&] { vocablens::load_graph_transcoders(configured_copy("graph-resid", "mlp.hook_in", "hook_resid_post"), m); });
  CHECK(e.find("feature_output_hook 'hook_resid_post'") != std::string::npos);
  // ids over the context
  auto tcs = vocablens::load_graph_transcoders(graph_fixture("llama3"), llama);
  e = msg([&] { vocablens::attribution_graph(llama, at::zeros({129}, at::kLong), *tcs); });
  CHECK(e.find("129 tokens") != std::string::npos);
  // a transcoder reading another hook than its layer's MLP input, and a set of another layer count
  std::vector<vocablens::Sae> saes;
  for (int l = 0; l < 3; ++l) {
    // load_sae guesses hook_resid_mid for a circuit-tracer file; the MLP input is said explicitly
    vocablens::SaeLoadOptions lo;
    lo.hook_name = "blocks." + std::to_string(l) + ".mlp.hook_in";
    saes.push_back(vocablens::load_sae(graph_fixture("gpt2-tiny") + "/layer_" + std::to_string(l) + ".safetensors", lo));
  }
  saes[1].hook_name = "blocks.1.hook_resid_pre";
  e = msg([&] { vocablens::per_layer_transcoders(saes, m); });
  CHECK(e.find("layer_1.safetensors: transcoder of layer 1 reads blocks.1.hook_resid_pre") != std::string::npos);
  saes[1].hook_name = "blocks.1.mlp.hook_in";
  auto two = vocablens::per_layer_transcoders(std::vector<vocablens::Sae>(saes.begin(), saes.begin() + 2), m);
  e = msg([&] { vocablens::attribution_graph(m, at::zeros({3}, at::kLong), *two); });
  CHECK(e.find("transcoders for 2 layers") != std::string::npos);
  vocablens::GraphOptions o;
  o.max_feature_nodes = -1;
  e = msg([&] { vocablens::attribution_graph(llama, at::zeros({3}, at::kLong), *tcs, o); });
  CHECK(e.find("max_feature_nodes") != std::string::npos);
}

namespace {

// The fixture's folder copied, with `layer` replaced by `bytes` (or the file edited by `edit`).
std::string graph_fixture_copy(const std::string& tag, int layer, const std::function<std::string(std::string)>& edit) {
  const std::string dir = vl_test::temp_dir(tag);
  for (int l = 0; l < 3; ++l) {
    const std::string name = "/layer_" + std::to_string(l) + ".safetensors";
    std::string bytes = vl_test::read_file(graph_fixture("gpt2-tiny") + name);
    vl_test::write_file(dir + name, l == layer ? edit(bytes) : bytes);
  }
  return dir;
}

}  // namespace

TEST_CASE("vocablens graph refuses bad input in one line, writing nothing", "[graph][cli]") {
  const std::string cli = vl_test::require_cli();
  const std::string model = vl_test::fixture("gpt2-tiny");
  REQUIRE(!cli.empty());
  REQUIRE(!model.empty());
  // NaN in layer 1's W_dec (the first value of its data: W_dec comes after W_enc and b_enc in the file's order)
  const std::string nan_dir = graph_fixture_copy("graph-nan", 1, [](std::string b) {
    const uint64_t hlen = *reinterpret_cast<const uint64_t*>(b.data());
    const auto header = nlohmann::json::parse(b.substr(8, hlen));
    const size_t at = 8 + hlen + header["W_dec"]["data_offsets"][0].get<size_t>();
    const float nan = std::nanf("");
    std::memcpy(&b[at], &nan, 4);
    return b;
  });
  // a transcoder of another width: layer 2 of d_model 32
  const std::string narrow_dir = graph_fixture_copy("graph-narrow", 2, [](const std::string&) {
    nlohmann::json h;
    std::string data;
    size_t off = 0;
    for (auto [name, shape] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
             {"W_enc", {8, 32}}, {"b_enc", {8}}, {"W_dec", {8, 32}}, {"b_dec", {32}}}) {
      int64_t n = 1;
      for (int64_t s : shape) n *= s;
      h[name] = {{"dtype", "F32"}, {"shape", shape}, {"data_offsets", {off, off + 4 * n}}};
      data += std::string(static_cast<size_t>(4 * n), '\0');
      off += static_cast<size_t>(4 * n);
    }
    std::string hs = h.dump();
    while (hs.size() % 8) hs.push_back(' ');
    std::string out(8, '\0');
    const uint64_t len = hs.size();
    std::memcpy(&out[0], &len, 8);
    return out + hs + data;
  });
  const std::string good = graph_fixture("gpt2-tiny");
  const std::string long_prompt = [] {
    std::string s;
    for (int i = 0; i < 200; ++i) s += "a ";
    return vl_test::shq(s);  // 200 tokens; gpt2-tiny's context is 128
  }();
  struct Bad {
    std::string args, expect;
  };
  const std::vector<Bad> cases = {
      {"--transcoders " + graph_fixture("llama3") + " --prompt Hello", "no layer_2.safetensors"},
      {"--transcoders " + nan_dir + " --prompt Hello", "NaN"},
      {"--transcoders " + narrow_dir + " --prompt Hello", "layer_2.safetensors: d_in 32"},
      {"--transcoders " + good + " --prompt Hello --max-feature-nodes 0", "--max-feature-nodes"},
      {"--transcoders " + good + " --prompt Hello --max-feature-nodes 1000000000", "--max-feature-nodes"},
      {"--transcoders " + good + " --prompt " + long_prompt, "context"},
  };
  for (const Bad& b : cases) {
    INFO(b.args);
    const std::string out = vl_test::temp_dir("graph-bad") + "/run";
    std::string text;
    const int rc = vl_test::run_command(
        vl_test::shq(cli) + " graph " + vl_test::shq(model) + " " + b.args + " --out " + vl_test::shq(out) + " 2>&1", text);
    INFO(text);
    CHECK(rc != 0);
    CHECK(text.find(b.expect) != std::string::npos);
    CHECK(std::count(text.begin(), text.end(), '\n') <= 1);
    CHECK(!vl_test::file_exists(out + "/graph.json"));
    CHECK(!vl_test::file_exists(out + "/graph.neuronpedia.json"));
  }
}

TEST_CASE("the estimate's count of active features, and its forward kept for the run, give the run's graph", "[graph]") {
  vocablens::Model m = vocablens::load_model(vl_test::fixture("gpt2-tiny"));
  Tensor ids = at::tensor(std::vector<int64_t>{50256, 464, 412, 733, 8765, 318, 287, 6342, 13}, at::kLong);
  Tensor other = at::tensor(std::vector<int64_t>{50256, 464, 412, 733, 8765, 318, 287, 6342, 11}, at::kLong);
  auto tcs = vocablens::load_graph_transcoders(graph_fixture("gpt2-tiny"), m);
  vocablens::GraphOptions o;
  o.dense_adjacency = false;
  const vocablens::AttributionGraph alone = vocablens::attribution_graph(m, ids, *tcs, o);
  const vocablens::AttributionGraph alone_other = vocablens::attribution_graph(m, other, *tcs, o);
  const std::vector<int64_t> counts = vocablens::graph_active_counts(m, ids, *tcs, o.zero_first_position);
  REQUIRE(counts.size() == 3);
  for (int64_t l = 0; l < 3; ++l) CHECK(counts[l] == alone.active_features.select(1, 0).eq(l).sum().item<int64_t>());
  // the run of the estimated prompt (its forward taken over), then one of another prompt after a fresh estimate
  // (nothing of the estimate's forward may reach it)
  const vocablens::AttributionGraph after = vocablens::attribution_graph(m, ids, *tcs, o);
  CHECK(at::equal(after.rows, alone.rows));
  CHECK(at::equal(after.active_features, alone.active_features));
  CHECK(at::equal(after.activations, alone.activations));
  (void)vocablens::graph_active_counts(m, ids, *tcs, o.zero_first_position);
  const vocablens::AttributionGraph moved = vocablens::attribution_graph(m, other, *tcs, o);
  CHECK(at::equal(moved.rows, alone_other.rows));
  CHECK(at::equal(moved.active_features, alone_other.active_features));
  CHECK_FALSE(at::equal(moved.activations, alone.activations));
}

TEST_CASE("a graph refused for memory names the largest --max-feature-nodes that fits, and that one runs", "[graph][cli]") {
  const std::string cli = vl_test::require_cli();
  const std::string model = vl_test::fixture("gpt2-tiny");
  REQUIRE(!cli.empty());
  std::string prompt;
  for (int i = 0; i < 5; ++i) prompt += "The Eiffel Tower is in Paris and the Colosseum is in Rome. ";
  const std::string base = vl_test::shq(cli) + " graph " + vl_test::shq(model) + " --transcoders " +
                           vl_test::shq(graph_fixture("gpt2-tiny")) + " --prompt " + vl_test::shq(prompt);
  auto total_mib = [&](const std::string& args) {
    std::string out;
    REQUIRE(vl_test::run_command(base + " " + args + " --dry-run 2>&1", out) == 0);
    const size_t at = out.find("\n  total");
    REQUIRE(at != std::string::npos);
    return std::stod(out.substr(out.find_first_of("0123456789", at)));
  };
  const double one = total_mib("--max-feature-nodes 1"), all = total_mib("");
  REQUIRE(all > one + 100);  // every active feature's rows (and their pruning) need far more than one feature's
  // a limit between the two: every feature is refused, some number of them fits
  const std::string limit = "VOCABLENS_MEMORY_LIMIT=" + std::to_string(static_cast<int64_t>(one + 40)) + "M ";
  std::string text;
  const std::string dir = vl_test::temp_dir("graph-refused") + "/run";
  CHECK(vl_test::run_command(limit + base + " --out " + vl_test::shq(dir) + " 2>&1", text) == 1);
  INFO(text);
  CHECK(std::count(text.begin(), text.end(), '\n') <= 1);
  CHECK(!vl_test::file_exists(dir + "/graph.json"));
  const std::string key = "give --max-feature-nodes ";
  const size_t at = text.find(key);
  REQUIRE(at != std::string::npos);
  CHECK(text.find(" or less", at) != std::string::npos);
  const int64_t n = std::stoll(text.substr(at + key.size()));
  CHECK(n > 1);
  // the largest that fits: n fits under the same limit, n + 1 does not
  std::string fits, over;
  REQUIRE(vl_test::run_command(limit + base + " --max-feature-nodes " + std::to_string(n) + " --dry-run 2>&1", fits) == 0);
  CHECK_THAT(fits, Catch::Contains("it fits"));
  REQUIRE(vl_test::run_command(limit + base + " --max-feature-nodes " + std::to_string(n + 1) + " --dry-run 2>&1", over) == 0);
  CHECK_THAT(over, Catch::Contains("it would NOT fit") && Catch::Contains(key + std::to_string(n) + " or less"));
  // and the advice runs: the graph of n features under that limit
  std::string ran;
  CHECK(vl_test::run_command(limit + base + " --max-feature-nodes " + std::to_string(n) + " --out " + vl_test::shq(dir) + " 2>&1",
                             ran) == 0);
  CHECK(vl_test::file_exists(dir + "/graph.json"));
}

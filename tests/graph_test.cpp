// Attribution graphs (vocablens/graph.hpp) against interventions: every adjacency entry must equal the change
// of its target when its source is removed from the frozen replacement model, which this file implements
// on its own in float64 (frozen patterns and norm denominators, each MLP's output frozen at its true value
// except the removed source's share and the live skip connection) — circuit-tracer's own test method.
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
#include "vocablens/error.hpp"
#include "vocablens/graph.hpp"
#include "vocablens/model.hpp"
#include "vocablens/sae.hpp"
#include "vocablens/weight.hpp"

namespace {

using at::Tensor;

Tensor g64(const Tensor& t) { return t.defined() ? vocablens::materialize_weight(t).to(at::kDouble) : t; }

std::string graph_fixture(const std::string& model) {
  return std::string(vl_test::source_dir_path()) + "/tests/fixtures/graph/" + model;
}

/// The frozen replacement model in float64, written from the definitions, and what it reads of the model's
/// one true forward pass (patterns, norm denominators, MLP outputs).
struct FrozenRef {
  const vocablens::Model& m;
  std::vector<vocablens::Sae> tcs;
  Tensor ids;
  int64_t T, L, d;
  std::vector<Tensor> pattern, s1, s2, mlp_true, mlp_in0, acts, errs;
  Tensor sf, embed, tok;
  double s2_factor = 1.0;  // != 1: a deliberately wrong ln2 denominator (the break-check)

  FrozenRef(const vocablens::Model& model, const std::string& tc_dir, Tensor ids_)
      : m(model), ids(std::move(ids_)) {
    const auto& c = m.config();
    T = ids.size(0), L = c.n_layers, d = c.d_model;
    for (int64_t l = 0; l < L; ++l) tcs.push_back(vocablens::load_sae(tc_dir + "/layer_" + std::to_string(l) + ".safetensors"));
    vocablens::CacheSpec spec = vocablens::CacheSpec::all();
    auto out = m.forward(ids, spec);
    for (int64_t l = 0; l < L; ++l) {
      pattern.push_back(out.cache.get("pattern", l)[0].to(at::kDouble));
      s1.push_back(denom(out.cache.get("resid_pre", l)[0].to(at::kDouble)));
      s2.push_back(denom(out.cache.get("resid_mid", l)[0].to(at::kDouble)));
      mlp_true.push_back(out.cache.get("mlp_out", l)[0].to(at::kDouble));
    }
    sf = denom(out.cache.get("resid_post", L - 1)[0].to(at::kDouble));
    tok = g64(m.weights().W_E).index_select(0, ids) * c.embed_scale;
    embed = tok.clone();
    if (m.weights().W_pos.defined()) embed = embed + g64(m.weights().W_pos).slice(0, 0, T);
  }

  Tensor denom(const Tensor& x) const {
    const auto& c = m.config();
    if (c.norm == vocablens::NormKind::LayerNorm) return at::sqrt(x.var(-1, false, true) + c.norm_eps);
    return at::sqrt(x.pow(2).mean(-1, true) + c.norm_eps);
  }
  Tensor norm(const Tensor& x, const Tensor& s, const at::Tensor& w, const at::Tensor& b) const {
    Tensor y = m.config().norm == vocablens::NormKind::LayerNorm ? x - x.mean(-1, true) : x;
    y = y / s;
    if (w.defined()) y = y * g64(w);
    if (b.defined()) y = y + g64(b);
    return y;
  }
  Tensor encode(int64_t l, const Tensor& x) const {  // float64 activations from the definitions
    const vocablens::Sae& s = tcs[l];
    Tensor pre = at::matmul(x, g64(s.W_enc)) + g64(s.b_enc);
    Tensor a = at::relu(pre);
    if (s.threshold.defined()) a = a * pre.gt(g64(s.threshold)).to(at::kDouble);
    return a;
  }
  Tensor skip(int64_t l, const Tensor& x) const {
    return tcs[l].W_skip.defined() ? at::matmul(x, g64(tcs[l].W_skip)) : at::zeros_like(x);
  }

  /// One source removed from the frozen model: kind 0 feature (layer, pos, feature), 1 error (layer, pos),
  /// 2 token (pos), -1 none. Returns the MLP inputs of every layer [L][T, d] and the final norm's output.
  struct Run {
    std::vector<Tensor> mlp_in;
    Tensor final_out;
  };
  Run run(int kind, int64_t sl, int64_t sp, int64_t sf_idx) const {
    const auto& c = m.config();
    Run r;
    Tensor x = embed.clone();
    if (kind == 2) x[sp] -= tok[sp];
    for (int64_t l = 0; l < L; ++l) {
      const auto& w = m.weights().layers[l];
      Tensor h = norm(x, s1[l], w.ln1_w, w.ln1_b);
      Tensor WV = m.W_V(l).to(at::kDouble), WO = m.W_O(l).to(at::kDouble);
      Tensor v = at::matmul(h.unsqueeze(0), WV);  // [H, T, dh]
      if (m.b_V(l).defined()) v = v + m.b_V(l).to(at::kDouble).unsqueeze(1);
      Tensor attn = at::matmul(at::matmul(pattern[l], v), WO).sum(0);
      if (w.b_o.defined()) attn = attn + g64(w.b_o);
      x = x + attn;
      Tensor mi = norm(x, s2[l] * s2_factor, w.ln2_w, w.ln2_b);
      r.mlp_in.push_back(mi);
      // the MLP's output frozen at its true value, the skip connection live
      Tensor mlp = mlp_true[l] + skip(l, mi) - skip(l, mlp_in0.empty() ? mi : mlp_in0[l]);
      if (kind == 0 && sl == l) mlp[sp] -= acts[l][sp][sf_idx] * g64(tcs[l].W_dec)[sf_idx];
      if (kind == 1 && sl == l) mlp[sp] -= errs[l][sp];
      x = x + mlp;
    }
    r.final_out = c.final_norm ? norm(x, sf, m.weights().lnf_w, m.weights().lnf_b) : x;
    return r;
  }

  /// The baseline: MLP inputs, activations (position 0 zeroed) and errors of the frozen model as it is.
  void settle() {
    Run base = run(-1, 0, 0, 0);
    mlp_in0 = base.mlp_in;
    acts.clear();
    errs.clear();
    for (int64_t l = 0; l < L; ++l) {
      Tensor a = encode(l, mlp_in0[l]);
      Tensor recon = at::matmul(a, g64(tcs[l].W_dec)) + g64(tcs[l].b_dec) + skip(l, mlp_in0[l]);
      Tensor e = mlp_true[l] - recon;
      a[0].zero_();
      e[0].zero_();
      acts.push_back(a);
      errs.push_back(e);
    }
  }
};

/// The targets' values in one run, in the graph's row order: the selected features' pre-activations (linear
/// part), then the logits' demeaned reading.
Tensor target_values(const FrozenRef& f, const FrozenRef::Run& r, const vocablens::AttributionGraph& g) {
  std::vector<Tensor> vals;
  for (int64_t i = 0; i < g.n_selected(); ++i) {
    Tensor af = g.active_features[g.selected[i].item<int64_t>()];
    const int64_t l = af[0].item<int64_t>(), p = af[1].item<int64_t>(), k = af[2].item<int64_t>();
    vals.push_back((r.mlp_in[l][p] * g64(f.tcs[l].W_enc).select(1, k)).sum());
  }
  Tensor WU = g64(f.m.weights().W_U);
  Tensor u = WU.index_select(1, g.logit_ids) - WU.mean(1, true);  // [d, K]
  vals.push_back(at::matmul(r.final_out[f.T - 1], u));
  return at::cat({at::stack(std::vector<Tensor>(vals.begin(), vals.end() - 1)).reshape({-1}), vals.back()});
}

/// The reference adjacency's rows of the selected features and logits, every source's column by one
/// intervention.
Tensor intervened(const FrozenRef& f, const vocablens::AttributionGraph& g) {
  const Tensor base = target_values(f, f.run(-1, 0, 0, 0), g);
  const int64_t N = g.n_nodes();
  Tensor ref = at::zeros({base.size(0), N}, at::kDouble);
  auto col = [&](int64_t j, const FrozenRef::Run& r) { ref.select(1, j).copy_(base - target_values(f, r, g)); };
  for (int64_t i = 0; i < g.n_selected(); ++i) {
    Tensor af = g.active_features[g.selected[i].item<int64_t>()];
    col(i, f.run(0, af[0].item<int64_t>(), af[1].item<int64_t>(), af[2].item<int64_t>()));
  }
  for (int64_t l = 0; l < f.L; ++l)
    for (int64_t p = 0; p < f.T; ++p) col(g.error_node(l, p), f.run(1, l, p, 0));
  for (int64_t p = 0; p < f.T; ++p) col(g.token_node(p), f.run(2, 0, p, 0));
  return ref;
}

/// The graph's computed rows (selected features, logits) as float64.
Tensor computed_rows(const vocablens::AttributionGraph& g) {
  Tensor a = g.adjacency.to(at::kDouble);
  return at::cat({a.slice(0, 0, g.n_selected()), a.slice(0, g.n_nodes() - g.n_logits())});
}

struct GraphCase {
  const char* model;
  std::string path;
  std::vector<int64_t> ids;
};

std::vector<GraphCase> graph_cases() {
  return {{"gpt2-tiny", vl_test::fixture("gpt2-tiny"), {50256, 464, 412, 733, 8765, 318, 287}},
          {"llama3", std::string(vl_test::source_dir_path()) + "/tests/fixtures/families/llama3",
           {319, 17, 200, 45, 88, 131, 9}}};
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

    FrozenRef f(m, graph_fixture(gc.model), ids);
    f.settle();
    // the frozen model as it is reproduces the model's own last logits (patterns and denominators are the
    // forward's): its final norm output through W_U
    Tensor logits = m.forward(ids).logits[0][f.T - 1].to(at::kDouble);
    Tensor mine = at::matmul(f.run(-1, 0, 0, 0).final_out[f.T - 1], g64(m.weights().W_U));
    if (m.weights().b_U.defined()) mine = mine + g64(m.weights().b_U);
    CHECK((mine - logits).abs().max().item<double>() < 1e-4);

    // the nodes: active features (position 0 excluded) and their activations, the salient logits
    Tensor nz = at::cat([&] {
      std::vector<Tensor> v;
      for (int64_t l = 0; l < f.L; ++l) {
        Tensor n = f.acts[l].nonzero();
        v.push_back(at::cat({at::full({n.size(0), 1}, l, at::kLong), n}, 1));
      }
      return v;
    }(), 0);
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
    WARN(gc.model << ": " << g.n_selected() << " features, " << g.n_logits() << " logits; max |adjacency - intervention| "
                  << err << " = " << err / scale << " of the largest entry " << scale);
    CHECK(err <= 1e-5 * scale);
    // error and token rows are zero; logit columns are zero
    CHECK(g.adjacency.slice(0, g.n_selected(), g.n_nodes() - g.n_logits()).abs().max().item<double>() == 0);
    CHECK(g.adjacency.slice(1, g.n_nodes() - g.n_logits()).abs().max().item<double>() == 0);

    // break-check: the same comparison against a frozen model with a 1 % wrong ln2 denominator fails
    f.s2_factor = 1.01;
    const double broken = (got - intervened(f, g)).abs().max().item<double>();
    CHECK(broken > 1e-3 * scale);
  }
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

TEST_CASE("graph input that does not fit is one clear error", "[graph]") {
  vocablens::Model m = vocablens::load_model(vl_test::fixture("gpt2-tiny"));
  vocablens::Model llama = vocablens::load_model(std::string(vl_test::source_dir_path()) + "/tests/fixtures/families/llama3");
  auto msg = [](auto&& f) -> std::string {
    try {
      f();
    } catch (const vocablens::Error& e) {
      return e.what();
    }
    return "";
  };
  // a folder with fewer layers than the model
  std::string e = msg([&] { vocablens::load_graph_transcoders(graph_fixture("llama3"), m); });
  CHECK(e.find("no layer_2.safetensors") != std::string::npos);
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
      {"--transcoders " + narrow_dir + " --prompt Hello", "d_model"},
      {"--transcoders " + good + " --prompt Hello --max-feature-nodes 0", "--max-feature-nodes"},
      {"--transcoders " + good + " --prompt Hello --max-feature-nodes 1000000000", "--max-feature-nodes"},
      {"--transcoders " + good + " --prompt " + long_prompt, "context"},
  };
  for (const Bad& b : cases) {
    INFO(b.args);
    const std::string out = vl_test::temp_dir("graph-bad") + "/run";
    std::string text;
    const int rc = vl_test::run_command(vl_test::shq(cli) + " graph " + vl_test::shq(model) + " " + b.args + " --out " +
                                            vl_test::shq(out) + " 2>&1",
                                        text);
    INFO(text);
    CHECK(rc != 0);
    CHECK(text.find(b.expect) != std::string::npos);
    CHECK(std::count(text.begin(), text.end(), '\n') <= 1);
    CHECK(!vl_test::file_exists(out + "/graph.json"));
    CHECK(!vl_test::file_exists(out + "/graph.neuronpedia.json"));
  }
}

// MLP neurons in vocabulary space against dense torch projections; gated (Llama) and plain (GPT-2) MLPs.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <cstdlib>

#include <nlohmann/json.hpp>

#include "fixtures.hpp"
#include "npy_tensor.hpp"
#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/neurons.hpp"
#include "vocablens/tokenizer.hpp"
#include "vocablens/unembed.hpp"

namespace {

// The list equals the dense projection's top-k (values within fp32 rounding; ids where no near-tie).
void check_against_dense(const std::vector<vocablens::TopkEntry>& got, const at::Tensor& scores /*[V]*/, int64_t k,
                         bool lowest = false) {
  REQUIRE(static_cast<int64_t>(got.size()) == k);
  auto ref = at::topk(scores, k, 0, /*largest=*/!lowest);
  at::Tensor v = std::get<0>(ref), ix = std::get<1>(ref);
  double tol = 1e-5 * std::max(1.0, scores.abs().max().item<double>());
  for (int64_t q = 0; q < k; ++q) {
    CHECK(std::abs(got[q].value - v[q].item<double>()) <= tol);
    CHECK(std::abs(scores[got[q].j].item<double>() - got[q].value) <= tol);
    bool near_tie = (q > 0 && std::abs(v[q].item<double>() - v[q - 1].item<double>()) <= tol) ||
                    (q + 1 < k && std::abs(v[q].item<double>() - v[q + 1].item<double>()) <= tol);
    if (!near_tie) CHECK(got[q].j == ix[q].item<int64_t>());
    if (q > 0) CHECK((lowest ? got[q].value >= got[q - 1].value : got[q].value <= got[q - 1].value));
  }
}

}  // namespace

TEST_CASE("parse_index_list", "[neurons]") {
  CHECK(vocablens::parse_index_list("3") == std::vector<int64_t>{3});
  CHECK(vocablens::parse_index_list("0,5,10-12") == std::vector<int64_t>{0, 5, 10, 11, 12});
  CHECK(vocablens::parse_index_list("1, 2") == std::vector<int64_t>{1, 2});
  for (const char* bad : {"", "a", "1,", "3-1", "-2", "1;2", "1--2"})
    CHECK_THROWS_AS(vocablens::parse_index_list(bad), vocablens::UsageError);
}

TEST_CASE("gpt2-tiny neurons: keys through E+, values through W_U, norms", "[neurons]") {
  vocablens::init_runtime();
  vl_test::use_temp_cache("neurons-cache");
  std::string dir = vl_test::fixture("gpt2-tiny");
  if (dir.empty()) return;
  auto m = vocablens::load_model(dir);
  auto tok = vocablens::load_tokenizer_for(dir);
  vocablens::NeuronsOptions o;
  o.layer = 1;
  o.neurons = {0, 5, 255};
  o.top_k = 12;
  o.bottom = true;
  auto a = vocablens::analyze_neurons(m, o, tok.get());
  CHECK_FALSE(a.gated);
  CHECK(a.d_mlp == 256);
  REQUIRE(a.neurons.size() == 3);
  at::Tensor R = vocablens::embedding_pinv(m).pinv;
  for (size_t q = 0; q < 3; ++q) {
    const auto& n = a.neurons[q];
    INFO("neuron " << n.neuron);
    at::Tensor key = m.W_in(1).select(1, n.neuron), val = m.W_out(1)[n.neuron];
    CHECK(std::abs(n.key_norm - key.norm().item<double>()) < 1e-5);
    CHECK(std::abs(n.value_norm - val.norm().item<double>()) < 1e-5);
    CHECK(n.gate_norm == 0.0);
    CHECK(n.gate_top.empty());
    at::Tensor key_scores = at::mv(R.t(), key), val_scores = at::mv(m.W_U().t(), val);
    check_against_dense(n.key_top, key_scores, 12);
    check_against_dense(n.value_top, val_scores, 12);
    check_against_dense(n.key_bottom, key_scores, 12, /*lowest=*/true);
    check_against_dense(n.value_bottom, val_scores, 12, /*lowest=*/true);
  }
  auto r = a.to_result(tok.get());
  CHECK(r.kind == "neurons");
  CHECK(r.arrays.at("key_top_ids").shape == std::vector<int64_t>{3, 12});
  CHECK(r.arrays.at("value_bottom_scores").shape == std::vector<int64_t>{3, 12});
  CHECK(r.arrays.count("gate_top_ids") == 0);
  CHECK(r.tables[0].rows.size() == 3 * 2 * 2 * 12);  // 3 neurons × {key, value} × {top, bottom} × 12
  CHECK(r.tables[1].rows.size() == 3);

  // transpose: keys through W_U (Dar's approximation).
  o.inverse = vocablens::InverseKind::Transpose;
  o.bottom = false;
  o.values = false;
  auto t = vocablens::analyze_neurons(m, o, tok.get());
  check_against_dense(t.neurons[1].key_top, at::mv(m.W_U().t(), m.W_in(1).select(1, 5)), 12);
  CHECK(t.neurons[1].value_top.empty());

  // Alphabetic tokens only, every neuron of the layer.
  o.neurons = {};
  o.filter.alpha_only = true;
  o.values = true;
  o.top_k = 3;
  auto all = vocablens::analyze_neurons(m, o, tok.get());
  REQUIRE(all.neurons.size() == 256);
  for (auto& n : all.neurons)
    for (auto& e : n.value_top) CHECK(vocablens::is_alphabetic_token(*tok, e.j));

  o.layer = 3;
  CHECK_THROWS_AS(vocablens::analyze_neurons(m, o, tok.get()), vocablens::UsageError);
  o.layer = 0;
  o.neurons = {256};
  CHECK_THROWS_AS(vocablens::analyze_neurons(m, o, tok.get()), vocablens::UsageError);
}

TEST_CASE("stories260K neurons: gated MLP has key (up), gate and value lists", "[neurons]") {
  vocablens::init_runtime();
  vl_test::use_temp_cache("neurons-cache");
  std::string dir = vl_test::fixture("stories260K");
  if (dir.empty()) return;
  auto m = vocablens::load_model(dir + "/stories260K.bin");
  auto tok = vocablens::load_tokenizer_for(dir + "/stories260K.bin");
  vocablens::NeuronsOptions o;
  o.layer = 4;
  o.top_k = 10;
  auto a = vocablens::analyze_neurons(m, o, tok.get());
  CHECK(a.gated);
  REQUIRE(a.neurons.size() == 172);
  at::Tensor R = vocablens::embedding_pinv(m).pinv;
  for (int64_t n : {0, 100, 171}) {
    const auto& p = a.neurons[n];
    CHECK(p.neuron == n);
    at::Tensor gate = m.W_gate(4).select(1, n);
    CHECK(std::abs(p.gate_norm - gate.norm().item<double>()) < 1e-5);
    check_against_dense(p.gate_top, at::mv(R.t(), gate), 10);
    check_against_dense(p.key_top, at::mv(R.t(), m.W_in(4).select(1, n)), 10);
    check_against_dense(p.value_top, at::mv(m.W_U().t(), m.W_out(4)[n]), 10);
  }
  auto r = a.to_result(tok.get());
  CHECK(r.arrays.at("gate_top_ids").shape == std::vector<int64_t>{172, 10});
  CHECK(r.arrays.at("gate_norms").shape == std::vector<int64_t>{172});
}

TEST_CASE("vocablens neurons CLI", "[neurons][cli]") {
  std::string cli = vl_test::require_cli();
  if (cli.empty()) return;
  std::string dir = vl_test::fixture("stories260K");
  if (dir.empty()) return;
  std::string env = "VOCABLENS_CACHE=" + vl_test::temp_dir("neurons-cli-cache") + " ";
  std::string out;
  int rc = vl_test::run_command(env + cli + " neurons " + dir + "/stories260K.bin --layer 2 --neurons 0,3-4 --top-k 5", out);
  INFO(out);
  REQUIRE(rc == 0);
  CHECK(out.find("neuron 3") != std::string::npos);
  rc =
      vl_test::run_command(env + cli + " neurons " + dir + "/stories260K.bin --layer 2 --neurons 1 --top-k 4 --format json", out);
  REQUIRE(rc == 0);
  auto j = nlohmann::json::parse(out.substr(out.find('{')));
  CHECK(j["kind"] == "neurons");
  rc = vl_test::run_command(env + cli + " neurons " + dir + "/stories260K.bin --layer 2 --neurons 500", out);
  CHECK(rc == 2);
  rc = vl_test::run_command(
      env + cli + " project " + dir + "/stories260K.bin --prompt 'Once upon a time' --hook resid_post.3 --top-k 3", out);
  INFO(out);
  CHECK(rc == 0);
  rc = vl_test::run_command(env + cli + " project " + dir + "/stories260K.bin --prompt 'Once' --hook pattern.1", out);
  CHECK(rc == 2);
}

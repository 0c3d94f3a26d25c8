// Cosine neighbourhoods: expressions, word composition and the parser; a single token scores exactly like
// the k-NN kernel (whose own tests against brute force are knn_test.cpp).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <memory>

#include "fixtures.hpp"
#include "vocablens/error.hpp"
#include "vocablens/knn.hpp"
#include "vocablens/model.hpp"
#include "vocablens/neighbours.hpp"
#include "vocablens/tokenizer.hpp"

TEST_CASE("neighbours: expression parser", "[neighbours]") {
  using vocablens::parse_expression;
  auto t = parse_expression("king - man + woman");
  REQUIRE(t.size() == 3);
  CHECK(t[0].text == "king");
  CHECK(t[0].weight == 1.0);
  CHECK(t[1].text == "man");
  CHECK(t[1].weight == -1.0);
  CHECK(t[2].text == "woman");
  CHECK(t[2].weight == 1.0);
  t = parse_expression("0.5*king -2 * #464 + 'New York' - \"a - b\"");
  REQUIRE(t.size() == 4);
  CHECK(t[0].weight == 0.5);
  CHECK(t[1].weight == -2.0);
  CHECK(t[1].id == 464);
  CHECK(t[2].text == "New York");
  CHECK(t[3].text == "a - b");
  CHECK(t[3].weight == -1.0);
  t = parse_expression("-man");
  REQUIRE(t.size() == 1);
  CHECK(t[0].weight == -1.0);
  t = parse_expression("king-man");  // a hyphenated word, not an expression
  REQUIRE(t.size() == 1);
  CHECK(t[0].text == "king-man");
  t = parse_expression("2x + #12 + C++ + '-ing'");
  REQUIRE(t.size() == 4);
  CHECK(t[0].text == "2x");
  CHECK(t[1].id == 12);
  CHECK(t[2].text == "C++");
  CHECK(t[3].text == "-ing");
  t = parse_expression("'a'+'b'");
  REQUIRE(t.size() == 2);
  using vocablens::UsageError;
  CHECK_THROWS_AS(parse_expression(""), UsageError);
  CHECK_THROWS_AS(parse_expression("king -"), UsageError);
  CHECK_THROWS_AS(parse_expression("king man"), UsageError);
  CHECK_THROWS_AS(parse_expression("'unterminated"), UsageError);
  CHECK_THROWS_AS(parse_expression("2 *"), UsageError);
  CHECK_THROWS_AS(parse_expression("''"), UsageError);
}

TEST_CASE("neighbours: tokens, words and expressions on gpt2-tiny", "[neighbours][fixtures]") {
  vocablens::init_runtime();
  std::string dir = vl_test::fixture("gpt2-tiny");
  if (dir.empty()) return;
  auto m = vocablens::load_model(dir);
  auto tok = vocablens::load_tokenizer_for(dir);
  at::Tensor X = m.W_E().contiguous();
  const int64_t d = X.size(1);
  const float* x = X.data_ptr<float>();

  // A single token scores exactly like the k-NN kernel.
  vocablens::NeighbourOptions o;
  o.k = 10;
  int64_t king = tok->require_token_id(" king");
  auto nb = vocablens::neighbours(X, tok.get(), "' king'", o);
  auto g = vocablens::knn_query(X, {king}, {10, 2048, 0, {}});
  REQUIRE(nb.neighbours.size() == 10u);
  for (int64_t t = 0; t < 10; ++t) {
    CHECK(nb.neighbours[static_cast<size_t>(t)].id == g.indices[static_cast<size_t>(t)]);
    CHECK(nb.neighbours[static_cast<size_t>(t)].cosine == g.scores[static_cast<size_t>(t)]);
  }
  // The display form and #id name the same token.
  auto nb2 = vocablens::neighbours(X, tok.get(), "␣king", o);
  auto nb3 = vocablens::neighbours(X, tok.get(), "#" + std::to_string(king), o);
  CHECK(nb2.neighbours[0].id == nb.neighbours[0].id);
  CHECK(nb3.neighbours[0].id == nb.neighbours[0].id);
  o.prefix_space = true;
  auto nb4 = vocablens::neighbours(X, tok.get(), "king", o);
  CHECK(nb4.terms[0].pieces == std::vector<int64_t>{king});
  o.prefix_space = false;

  // king - man + woman: unit-normalised terms, inputs excluded, brute force over all V.
  auto expr = vocablens::neighbours(X, tok.get(), "' king' - ' man' + ' woman'", o);
  std::vector<int64_t> ids = {king, tok->require_token_id(" man"), tok->require_token_id(" woman")};
  std::vector<double> q(static_cast<size_t>(d), 0.0);
  double w[3] = {1, -1, 1};
  for (int t = 0; t < 3; ++t) {
    const float* r = x + ids[static_cast<size_t>(t)] * d;
    double nr = 0;
    for (int64_t c = 0; c < d; ++c) nr += static_cast<double>(r[c]) * r[c];
    nr = std::sqrt(nr);
    for (int64_t c = 0; c < d; ++c) q[static_cast<size_t>(c)] += w[t] * r[c] / nr;
  }
  for (int64_t c = 0; c < d; ++c) CHECK(std::abs(expr.query_vector[static_cast<size_t>(c)] - q[static_cast<size_t>(c)]) < 1e-14);
  CHECK(expr.excluded == ids);
  at::Tensor qv = at::tensor(q, at::kDouble);
  at::Tensor cs = at::mv(X.to(at::kDouble), qv) / (X.to(at::kDouble).norm(2, 1) * qv.norm());
  for (int64_t id : ids) cs[id] = -5.0;
  auto top = std::get<1>(at::topk(cs, 10));
  for (int64_t t = 0; t < 10; ++t) CHECK(expr.neighbours[static_cast<size_t>(t)].id == top[t].item<int64_t>());

  // A multi-piece word: " Eiffel" -> " E" "iff" "el" composed by sum, mean, weighted.
  auto word = vocablens::neighbours(X, tok.get(), "' Eiffel'", o);
  REQUIRE(word.terms[0].pieces == std::vector<int64_t>{412, 733, 417});
  CHECK_FALSE(word.terms[0].single_token);
  CHECK(word.terms[0].piece_weights == std::vector<double>{1.0 / 3, 1.0 / 3, 1.0 / 3});
  o.compose = vocablens::Compose::Sum;
  CHECK(vocablens::neighbours(X, tok.get(), "' Eiffel'", o).terms[0].piece_weights == std::vector<double>{1, 1, 1});
  o.compose = vocablens::Compose::Weighted;
  auto wt = vocablens::neighbours(X, tok.get(), "' Eiffel'", o);
  CHECK(wt.terms[0].piece_weights == std::vector<double>{2.0 / 7, 3.0 / 7, 2.0 / 7});  // " E" "iff" "el"
  o.compose = vocablens::Compose::Mean;

  CHECK_THROWS_AS(vocablens::neighbours(X, tok.get(), "' king' - ' king'", o), vocablens::UsageError);
  CHECK_THROWS_AS(vocablens::neighbours(X, tok.get(), "#99999999", o), vocablens::UsageError);
  CHECK_THROWS_AS(vocablens::neighbours(X, nullptr, "king", o), vocablens::UsageError);
  auto res = expr.to_result(tok.get());
  CHECK(res.kind == "neighbours");
  CHECK(res.tables[0].rows.size() == 10u);
  CHECK(res.summary["terms"].size() == 3u);
}

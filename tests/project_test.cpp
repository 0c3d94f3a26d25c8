// Hidden states at a hook point projected to tokens (the `project` slice): final_norm through W_U equals the
// model's own top tokens, resid_post + final norm is the same thing, filters and positions, bad input.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "fixtures.hpp"
#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/project.hpp"
#include "vocablens/token_filter.hpp"
#include "vocablens/tokenizer.hpp"

TEST_CASE("project_hidden: final_norm projected through W_U gives the model's own top tokens", "[unembed]") {
  vocablens::init_runtime();
  std::string dir = vl_test::fixture("gpt2-tiny");
  if (dir.empty()) return;
  auto m = vocablens::load_model(dir);
  auto tok = vocablens::load_tokenizer_for(dir);
  std::vector<int64_t> ids = {464, 412, 733, 417, 8765, 318, 287, 262, 1748, 286};
  vocablens::HiddenProjectionOptions o;
  o.hook = "final_norm";
  o.top_k = 5;
  auto p = vocablens::project_hidden(m, ids, o, tok.get());
  REQUIRE(p.layers == std::vector<int64_t>{-1});
  REQUIRE(p.positions.size() == ids.size());
  at::Tensor logits = m.forward(at::tensor(ids, at::kLong)).logits[0];
  for (size_t t = 0; t < ids.size(); ++t) {
    auto ref = at::topk(logits[static_cast<int64_t>(t)], 5);
    for (int64_t q = 0; q < 5; ++q) { CHECK(std::abs(p.top[0][t][q].value - std::get<0>(ref)[q].item<double>()) < 1e-4); }
    CHECK(p.top[0][t][0].j == std::get<1>(ref)[0].item<int64_t>());
  }
  // resid_post of the last layer + apply_final_norm is the same thing.
  o.hook = "resid_post";
  o.layer = 2;
  o.apply_final_norm = true;
  o.positions = {-1, 0};
  auto q = vocablens::project_hidden(m, ids, o, tok.get());
  REQUIRE(q.positions == std::vector<int64_t>{9, 0});
  CHECK(q.top[0][0][0].j == p.top[0][9][0].j);
  CHECK(q.top[0][1][0].j == p.top[0][0][0].j);
  // Every layer, alphabetic tokens only, as a Result.
  o.layer = -1;
  o.filter.alpha_only = true;
  auto all = vocablens::project_hidden(m, ids, o, tok.get());
  CHECK(all.layers.size() == 3);
  for (auto& layer : all.top)
    for (auto& pos : layer)
      for (auto& e : pos) CHECK(vocablens::is_alphabetic_token(*tok, e.j));
  auto res = all.to_result(tok.get());
  CHECK(res.kind == "projection");
  CHECK(res.arrays.at("token_ids").shape == std::vector<int64_t>{3, 2, 5});
  CHECK(res.tables.at(0).rows.size() == 3 * 2 * 5);
  o.hook = "pattern";
  CHECK_THROWS_AS(vocablens::project_hidden(m, ids, o, tok.get()), vocablens::UsageError);
  o.hook = "resid_post";
  o.positions = {10};
  CHECK_THROWS_AS(vocablens::project_hidden(m, ids, o, tok.get()), vocablens::UsageError);
  o.positions = {};
  o.layer = 3;
  CHECK_THROWS_AS(vocablens::project_hidden(m, ids, o, tok.get()), vocablens::UsageError);
}

// Segment (token-type) embeddings: `train --model gpt --segments` writes W_seg, the loader and the runner use it
// (segment 0 by default), the segment ids come from the corpus markup or alternate by line, and `positions` /
// `spectrum --matrix W_seg` analyse it beside W_pos.
#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "fixtures.hpp"
#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/positions.hpp"
#include "vocablens/tensor_store.hpp"
#include "vocablens/train.hpp"

namespace {

vocablens::TrainOptions tiny_segments(const std::string& tag) {
  vocablens::init_runtime();
  vocablens::TrainOptions o;
  o.model = vocablens::TrainModel::GPT;
  o.synthetic = true;
  o.synthetic_options.lines = 2000;
  o.vocab_size = 600;
  o.out_dir = vl_test::temp_dir(tag);
  o.steps = 6;
  o.batch_size = 4;
  o.d_model = 32;
  o.n_layers = 1;
  o.n_heads = 4;
  o.n_ctx = 24;
  o.warmup_steps = 2;
  o.segments = true;
  return o;
}

}  // namespace

TEST_CASE("segments: prompt spans give segment B to the answer; lines alternate", "[segments]") {
  vocablens::TokenStream s;
  // line 0: p p a a \n   line 1: x x \n   line 2: y
  s.ids = {1, 2, 3, 4, 0, 5, 6, 0, 7};
  s.target = {0, 0, 1, 1, 1, 1, 1, 1, 1};
  s.line_starts = {0, 5, 8};
  s.line_ends = {4, 7, 9};
  vocablens::assign_segments(s, "auto");
  CHECK(s.segment_source == "prompt");
  CHECK(s.segment == std::vector<uint8_t>{0, 0, 1, 1, 0, 0, 0, 0, 0});
  vocablens::assign_segments(s, "lines");
  CHECK(s.segment == std::vector<uint8_t>{0, 0, 0, 0, 0, 1, 1, 1, 0});
  s.target.assign(s.ids.size(), 1);
  vocablens::assign_segments(s, "auto");
  CHECK(s.segment_source == "lines");
  CHECK_THROWS_AS(vocablens::assign_segments(s, "prompt"), vocablens::UsageError);
  CHECK_THROWS_AS(vocablens::assign_segments(s, "words"), vocablens::UsageError);
}

TEST_CASE("segments: the checkpoint carries W_seg, the runner adds it, segment 0 by default", "[segments]") {
  vocablens::TrainOptions o = tiny_segments("seg_train");
  vocablens::TrainReport r = vocablens::train(o);
  REQUIRE(r.step == 6);
  auto cfg = nlohmann::json::parse(vl_test::read_file(o.out_dir + "/config.json"));
  CHECK(cfg["vocablens_segments"] == 2);
  CHECK(cfg["vocablens_segment_source"] == "prompt");  // the synthetic corpus has prompt spans
  vocablens::TensorStore st = vocablens::read_safetensors(o.out_dir + "/model.safetensors");
  const at::Tensor& seg = st.get("token_type_embeddings.weight");
  REQUIRE(seg.sizes() == at::IntArrayRef({2, 32}));
  vocablens::Model m = vocablens::load_model(o.out_dir);
  REQUIRE(m.W_seg().defined());
  CHECK(m.config().n_segments == 2);
  CHECK(at::equal(m.W_seg(), seg));
  // trained: the two rows moved away from each other's initial values (not asserting a size, only change)
  at::Tensor ids = at::tensor({5, 9, 17, 3, 11, 2}, at::kLong).view({1, 6});
  at::Tensor zeros = at::zeros({1, 6}, at::kLong), ones = at::ones({1, 6}, at::kLong);
  at::Tensor mixed = at::tensor({0, 0, 0, 1, 1, 1}, at::kLong).view({1, 6});
  at::NoGradGuard ng;
  vocablens::CacheSpec spec;
  spec.resid_pre = true;
  spec.layers = {0};
  auto base = m.forward(ids, spec);
  auto with0 = vocablens::run_forward(m.config(), m.weights(), ids, spec, true, zeros);
  auto with1 = vocablens::run_forward(m.config(), m.weights(), ids, spec, true, mixed);
  CHECK(at::equal(base.logits, with0.logits));  // no segment ids = segment 0 everywhere
  // the embedding the first block sees: W_E[t] + W_pos[p] + W_seg[s], computed here by hand
  at::Tensor expect =
      m.W_E().index_select(0, ids.view(-1)) + m.W_pos().narrow(0, 0, 6) + m.W_seg().index_select(0, mixed.view(-1));
  CHECK(at::allclose(with1.cache.get("resid_pre", 0)[0], expect, 1e-6, 1e-6));
  CHECK_FALSE(at::allclose(with1.logits, with0.logits));
  // bad segment ids: one clear error
  CHECK_THROWS_AS(vocablens::run_forward(m.config(), m.weights(), ids, spec, true, ones * 2), vocablens::UsageError);
  CHECK_THROWS_AS(vocablens::run_forward(m.config(), m.weights(), ids, spec, true, at::zeros({1, 5}, at::kLong)),
                  vocablens::UsageError);
  // a model without W_seg refuses segment ids
  vocablens::ModelWeights w = m.weights();
  w.W_seg = at::Tensor();
  CHECK_THROWS_AS(vocablens::run_forward(m.config(), w, ids, spec, true, zeros), vocablens::UsageError);
}

TEST_CASE("segments: positions' segment analysis — norms, cosines, variance shares computed by hand", "[segments]") {
  vocablens::TrainOptions o = tiny_segments("seg_analysis");
  o.steps = 2;
  vocablens::train(o);
  vocablens::Model trained = vocablens::load_model(o.out_dir);
  // Replace W_seg by rows whose quantities are known: ±a e_0 -> norms a, cosine −1, row variance a².
  const double a = 0.3;
  vocablens::ModelWeights w = trained.weights();
  w.W_seg = at::zeros({2, 32}, at::kFloat);
  w.W_seg[0][0] = a;
  w.W_seg[1][0] = -a;
  vocablens::ModelConfig cfg = trained.config();
  vocablens::Model m(cfg, w, "hand-made");
  vocablens::SegmentResult s = vocablens::segment_structure(m, 8);
  CHECK(s.norms[0] == Approx(a).epsilon(1e-6));
  CHECK(s.norms[1] == Approx(a).epsilon(1e-6));
  CHECK(s.cosine[1] == Approx(-1.0).epsilon(1e-9));
  CHECK(s.difference_norm == Approx(2 * a).epsilon(1e-6));
  auto var = [](const at::Tensor& M) {
    at::Tensor X = M.to(at::kDouble);
    return (X - X.mean(0, true)).pow(2).sum(1).mean().item<double>();
  };
  const double vE = var(m.W_E()), vP = var(m.W_pos()), vS = a * a;
  CHECK(s.variance_segment == Approx(vS).epsilon(1e-6));
  CHECK(s.share_segment == Approx(vS / (vE + vP + vS)).epsilon(1e-6));
  CHECK(s.share_token + s.share_position + s.share_segment == Approx(1.0));
  // Δ = −2a e_0: its |cos| with the PCs of W_E are |PC_j[0]|, and their squares sum to the subspace share
  double sum = 0;
  for (int64_t j = 0; j < s.directions; ++j) sum += std::pow(s.cos_to_token_pcs[static_cast<size_t>(2 * s.directions + j)], 2);
  CHECK(sum == Approx(s.difference_in_token_subspace).epsilon(1e-9));
  CHECK(s.difference_in_token_subspace <= 1.0 + 1e-12);
  // a model without W_seg: one clear error
  w.W_seg = at::Tensor();
  vocablens::Model none(cfg, w, "none");
  CHECK_THROWS_AS(vocablens::segment_structure(none), vocablens::UsageError);
}

TEST_CASE("segments: positions and spectrum --matrix W_seg on the command line", "[segments][cli]") {
  const std::string cli = vl_test::cli_path();
  REQUIRE_FALSE(cli.empty());
  const std::string dir = vl_test::temp_dir("seg_cli");
  std::string out;
  REQUIRE(vl_test::run_command(cli +
                                   " train --model gpt --synthetic --synthetic-lines 2000 --vocab-size 600 --segments "
                                   "--segment-source lines --steps 4 --batch 4 --ctx 24 --d-model 32 --layers 1 -q --out " +
                                   dir + " 2>&1",
                               out) == 0);
  auto cfg = nlohmann::json::parse(vl_test::read_file(dir + "/config.json"));
  CHECK(cfg["vocablens_segment_source"] == "lines");
  REQUIRE(vl_test::run_command(cli + " positions " + dir + " 2>&1", out) == 0);
  CHECK(out.find("segment embeddings W_seg [2 × 32]") != std::string::npos);
  CHECK(out.find("share of the embedding residual's variance") != std::string::npos);
  const std::string res = vl_test::temp_dir("seg_res");
  REQUIRE(vl_test::run_command(cli + " positions " + dir + " --out " + res + " 2>&1", out) == 0);
  auto pj = nlohmann::json::parse(vl_test::read_file(res + "/positions.json"));
  CHECK(pj["summary"]["segments"]["n_segments"] == 2);
  REQUIRE(vl_test::run_command(cli + " spectrum " + dir + " --matrix W_seg --k 2 2>&1", out) == 0);
  CHECK(out.find("W_seg [2 × 32]") != std::string::npos);
  // a model without segments: one line
  const std::string plain = vl_test::temp_dir("seg_plain");
  REQUIRE(vl_test::run_command(cli +
                                   " train --model gpt --synthetic --synthetic-lines 2000 --vocab-size 600 --steps 2 "
                                   "--batch 4 --ctx 24 --d-model 32 --layers 1 -q --out " +
                                   plain + " 2>&1",
                               out) == 0);
  CHECK(vl_test::run_command(cli + " spectrum " + plain + " --matrix W_seg 2>&1", out) != 0);
  CHECK(out.find("no segment embeddings") != std::string::npos);
  CHECK(std::count(out.begin(), out.end(), '\n') == 1);
}

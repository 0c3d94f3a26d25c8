// Safety, model layer: non-finite weights and activations are named and refused (or, when asked,
// warned about), config values that would make the forward NaN are refused, every tensor of a checkpoint is
// used or reported, and generation matches llama2.c's run.c at the context end.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>

#include <nlohmann/json.hpp>

#include "fixtures.hpp"
#include "tiny_gpt2.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/error.hpp"
#include "vocablens/heads.hpp"
#include "vocablens/lens.hpp"
#include "vocablens/lens_corpus.hpp"
#include "vocablens/model.hpp"
#include "vocablens/neurons.hpp"
#include "vocablens/nonfinite.hpp"
#include "vocablens/spectrum.hpp"
#include "vocablens/tokenizer.hpp"

namespace fs = std::filesystem;

namespace {

using vl_test::make_model_dir;
using vl_test::tiny_gpt2_config;

// Every tensor of a `layers`-layer tiny GPT-2 (vl_test::tiny_gpt2_config) plus `extra`, float32 0.01, one
// element set to `poke_value` in tensor `poke` (flat index 1) when given.
std::string filled_gpt2_safetensors(int layers, std::map<std::string, std::vector<int64_t>> extra = {},
                                    const std::string& poke = "", float poke_value = 0) {
  std::map<std::string, std::vector<int64_t>> shapes = {
      {"wte.weight", {10, 4}}, {"wpe.weight", {8, 4}}, {"ln_f.weight", {4}}, {"ln_f.bias", {4}}};
  for (int l = 0; l < layers; ++l) {
    std::string p = "h." + std::to_string(l) + ".";
    for (auto& [k, v] : std::map<std::string, std::vector<int64_t>>{{"ln_1.weight", {4}},
                                                                    {"ln_1.bias", {4}},
                                                                    {"ln_2.weight", {4}},
                                                                    {"ln_2.bias", {4}},
                                                                    {"attn.c_attn.weight", {4, 12}},
                                                                    {"attn.c_attn.bias", {12}},
                                                                    {"attn.c_proj.weight", {4, 4}},
                                                                    {"attn.c_proj.bias", {4}},
                                                                    {"mlp.c_fc.weight", {4, 16}},
                                                                    {"mlp.c_fc.bias", {16}},
                                                                    {"mlp.c_proj.weight", {16, 4}},
                                                                    {"mlp.c_proj.bias", {4}},
                                                                    {"attn.bias", {1, 1, 8, 8}}})
      shapes[p + k] = v;
  }
  for (auto& [k, v] : extra) shapes[k] = v;
  nlohmann::json h = {{"__metadata__", {{"format", "pt"}}}};
  std::string data;
  for (auto& [k, v] : shapes) {
    uint64_t n = 1;
    for (auto s : v) n *= static_cast<uint64_t>(s);
    std::vector<float> vals(n, 0.01f);
    if (k == poke) vals[1] = poke_value;
    h[k] = {{"dtype", "F32"}, {"shape", v}, {"data_offsets", {data.size(), data.size() + 4 * n}}};
    data.append(reinterpret_cast<const char*>(vals.data()), 4 * n);
  }
  return vl_test::safetensors_bytes(h, data);
}

template <class E>
std::string load_error(const std::string& path) {
  try {
    vocablens::load_model(path);
  } catch (const E& e) {
    std::string w = e.what();
    CHECK(w.find('\n') == std::string::npos);
    return w;
  }
  FAIL("load_model accepted " << path);
  return "";
}

int cli(const std::string& args, std::string& out) {
  std::string c = vl_test::cli_path();
  REQUIRE_FALSE(c.empty());
  return vl_test::run_command(c + " " + args, out);
}

// A copy of stories260K.bin with float `index` (counted from the first weight, after the 28-byte header) set.
std::string poked_stories(const std::string& tag, int64_t index, float value) {
  std::string src = vl_test::fixture("stories260K/stories260K.bin");
  std::string bytes = vl_test::read_file(src);
  std::memcpy(&bytes[28 + 4 * static_cast<size_t>(index)], &value, 4);
  std::string dir = vl_test::temp_dir(tag);
  vl_test::write_file(dir + "/m.bin", bytes);
  fs::copy_file(fs::path(src).parent_path() / "tok512.bin", dir + "/tok512.bin");
  return dir + "/m.bin";
}

// stories260K: dim 64, hidden 172, 5 layers, kv_dim 32, vocab 512 (v0 layout).
constexpr int64_t kEmb = 512 * 64, kRmsAtt = 5 * 64, kWq = 5 * 64 * 64;

}  // namespace

TEST_CASE("NaN in one q_proj entry of a llama2.c .bin: named at load with its layer, CLI exit 1; --allow-nonfinite warns") {
  if (vl_test::fixture("stories260K").empty()) return;
  // wq[2][5][7]
  std::string m = poked_stories("nanwq", kEmb + kRmsAtt + 2 * 64 * 64 + 5 * 64 + 7, std::nanf(""));
  std::string w = load_error<vocablens::NonFiniteError>(m);
  INFO(w);
  CHECK(w.find("weight 'wq'") != std::string::npos);
  CHECK(w.find("1 non-finite value") != std::string::npos);
  CHECK(w.find("nan at [2, 5, 7] (layer 2)") != std::string::npos);
  std::string out;
  CHECK(cli("generate '" + m + "' --steps 5", out) == 1);
  CHECK(out.find("weight 'wq'") != std::string::npos);
  CHECK(out.find("<unk>") == std::string::npos);
  // Asked to continue: a warning, exit 0, and the model's NaN does not become text silently.
  CHECK(cli("generate '" + m + "' --steps 5 --allow-nonfinite", out) == 0);
  CHECK(out.find("warning") != std::string::npos);
  CHECK(out.find("weight 'wq'") != std::string::npos);
}

TEST_CASE("NaN in the final norm, Inf embedding: named") {
  if (vl_test::fixture("stories260K").empty()) return;
  std::string m =
      poked_stories("nanfinal", kEmb + kRmsAtt + 2 * kWq + 2 * (5 * 32 * 64) + 5 * 64 + 3 * (5 * 172 * 64) + 9, std::nanf(""));
  std::string w = load_error<vocablens::NonFiniteError>(m);
  INFO(w);
  CHECK(w.find("weight 'rms_final'") != std::string::npos);
  CHECK(w.find("nan at [9]") != std::string::npos);

  std::string dir = make_model_dir("infemb", tiny_gpt2_config().dump(), filled_gpt2_safetensors(1, {}, "wte.weight", INFINITY));
  w = load_error<vocablens::NonFiniteError>(dir);
  INFO(w);
  CHECK(w.find("weight 'wte.weight'") != std::string::npos);
  CHECK(w.find("inf at [0, 1]") != std::string::npos);
  std::string out;
  CHECK(cli("lens '" + dir + "' --prompt-ids 1,2,3", out) == 1);
  CHECK(out.find("wte.weight") != std::string::npos);
}

TEST_CASE("activations: a non-finite value appearing in a block names the hook, layer and position") {
  std::string src = vl_test::fixture("stories260K/stories260K.bin");
  if (src.empty()) return;
  auto m = vocablens::load_model(src);
  vocablens::ModelWeights w = m.weights();
  // Finite weights whose products overflow float32 in the attention of layer 3.
  w.layers[3].w_v = w.layers[3].w_v * 1e38f;
  w.layers[3].w_o = w.layers[3].w_o * 1e38f;
  vocablens::Model big(m.config(), w, "test");
  std::vector<int64_t> ids = {1, 403, 407, 261, 378};
  try {
    big.forward(at::tensor(ids, at::kLong));
    FAIL("forward accepted an overflowing block");
  } catch (const vocablens::NonFiniteError& e) {
    std::string s = e.what();
    INFO(s);
    CHECK(s.find("attn_out.3") != std::string::npos);
    CHECK(s.find("position 0") != std::string::npos);
    CHECK(s.find("layer 3") != std::string::npos);
  }
  // Warn: the forward returns, with NaN/Inf where they are (never a plausible number).
  vocablens::set_nonfinite_policy(vocablens::NonFinitePolicy::Warn);
  auto out = big.forward(at::tensor(ids, at::kLong));
  vocablens::set_nonfinite_policy(vocablens::NonFinitePolicy::Refuse);
  CHECK_FALSE(at::isfinite(out.logits).all().item<bool>());
  // The unmodified model is unaffected by the checks.
  CHECK(at::isfinite(m.forward(at::tensor(ids, at::kLong)).logits).all().item<bool>());
}

TEST_CASE("config.json values that make the forward NaN are refused") {
  auto cfg = tiny_gpt2_config();
  cfg["layer_norm_epsilon"] = -1;
  std::string dir = make_model_dir("eps", cfg.dump(), filled_gpt2_safetensors(1));
  CHECK(load_error<vocablens::FormatError>(dir).find("layer_norm_epsilon is -1") != std::string::npos);
  std::string dir_l = vl_test::fixture("stories260K-hf");
  if (dir_l.empty()) return;
  auto j = nlohmann::json::parse(vl_test::read_file(dir_l + "/config.json"));
  for (double theta : {0.0, -10000.0}) {
    j["rope_theta"] = theta;
    std::string d = vl_test::temp_dir("theta");
    vl_test::write_file(d + "/config.json", j.dump());
    fs::copy_file(dir_l + "/model.safetensors", d + "/model.safetensors");
    std::string w = load_error<vocablens::FormatError>(d);
    INFO(w);
    CHECK(w.find("rope_theta is") != std::string::npos);
    CHECK(w.find("must be a finite number > 0") != std::string::npos);
  }
  j["rope_theta"] = 10000.0;
  j["rms_norm_eps"] = -1e-5;
  std::string d = vl_test::temp_dir("rmseps");
  vl_test::write_file(d + "/config.json", j.dump());
  fs::copy_file(dir_l + "/model.safetensors", d + "/model.safetensors");
  CHECK(load_error<vocablens::FormatError>(d).find("rms_norm_eps is -1e-05") != std::string::npos);
}

TEST_CASE("n_layer 10^12 is reported as out of range, with its value") {
  auto cfg = tiny_gpt2_config();
  cfg["n_layer"] = 1000000000000LL;
  std::string dir = make_model_dir("hugelayers", cfg.dump(), filled_gpt2_safetensors(1));
  std::string w = load_error<vocablens::FormatError>(dir);
  INFO(w);
  CHECK(w.find("number of layers is 1000000000000") != std::string::npos);
  CHECK(w.find("must be positive") == std::string::npos);
}

TEST_CASE("every tensor of the checkpoint is used or reported") {
  // A config saying 2 layers over 3-layer weights.
  std::string dir = make_model_dir("layers", tiny_gpt2_config(2).dump(), filled_gpt2_safetensors(3));
  std::string w = load_error<vocablens::FormatError>(dir);
  INFO(w);
  CHECK(w.find("holds weights of layer 2") != std::string::npos);
  CHECK(w.find("says 2 layers") != std::string::npos);
  // Unknown extra tensors.
  std::string dir2 = make_model_dir("extra", tiny_gpt2_config().dump(),
                                    filled_gpt2_safetensors(1, {{"score.weight", {3, 4}}, {"h.0.adapter.weight", {4}}}));
  w = load_error<vocablens::FormatError>(dir2);
  INFO(w);
  CHECK(w.find("2 tensors that a GPT2LMHeadModel model does not use: 'h.0.adapter.weight', 'score.weight'") != std::string::npos);
  std::string out;
  CHECK(cli("inspect '" + dir2 + "'", out) == 1);
  // The buffers real checkpoints carry (attn.bias) are not reported: the 1-layer model loads.
  CHECK_NOTHROW(vocablens::load_model(make_model_dir("ok", tiny_gpt2_config().dump(), filled_gpt2_safetensors(1))));
  // And every fixture loads.
  for (const char* f : {"gpt2-tiny", "gpt2-tiny-prefixed", "gpt2-tiny-torchbin", "stories260K-hf", "llama2xs/ckpt.pt"}) {
    std::string p = vl_test::fixture(f);
    if (p.empty()) continue;
    INFO(f);
    CHECK_NOTHROW(vocablens::load_model(p));
  }
}

TEST_CASE("generate: a full context ends as run.c's does (n_ctx + 1 tokens); a longer prompt is refused") {
  std::string src = vl_test::fixture("stories260K/stories260K.bin");
  if (src.empty()) return;
  auto m = vocablens::load_model(src);
  const int64_t n = m.config().n_ctx;  // 512
  std::vector<int64_t> prompt(static_cast<size_t>(n - 3), 403);
  prompt[0] = 1;
  auto ids = m.generate_greedy(prompt, 600, -1);
  CHECK(static_cast<int64_t>(ids.size()) == n + 1);  // run.c feeds positions 0..n-1: 4 new tokens
  std::vector<int64_t> full(static_cast<size_t>(n), 403);
  CHECK(m.generate_greedy(full, 10, -1).size() == static_cast<size_t>(n + 1));
  full.push_back(403);
  CHECK_THROWS_AS(m.generate_greedy(full, 10, -1), vocablens::UsageError);
}

TEST_CASE("corpus lens progress follows predicted tokens with max_tokens") {
  std::string src = vl_test::fixture("stories260K/stories260K.bin");
  if (src.empty()) return;
  auto m = vocablens::load_model(src);
  auto tok = vocablens::load_tokenizer_for(src, "");
  std::string text;
  for (int i = 0; i < 200; ++i) text += "Once upon a time, there was a little girl named Lily. She loved to play.\n";
  std::string dir = vl_test::temp_dir("corpus");
  vl_test::write_file(dir + "/c.txt", text);
  vocablens::CorpusLensOptions co;
  co.window = 64;
  co.max_tokens = 300;
  std::vector<std::pair<uint64_t, uint64_t>> calls;
  co.progress = [&](uint64_t done, uint64_t total) { calls.emplace_back(done, total); };
  auto r = vocablens::logit_lens_corpus(m, *tok, dir + "/c.txt", co);
  REQUIRE_FALSE(calls.empty());
  CHECK(calls.back().first == 300);
  CHECK(calls.back().second == 300);
  CHECK(r.predicted == 300);
}

// ---- --allow-nonfinite across the analyses: NaN stays NaN, never a plausible number -----------------------
// Before: a NaN in one embedding row gave every lens cell a top-1 token at "<1%", a finite mean cross-entropy
// and rank 1 for a NaN target (the row passes skip NaN in comparisons and the AVX2 exp maps it to a finite
// value); a spectrum of W_E died with "internal error: TridiagEigen"; one NaN neuron stopped `neurons`.

namespace {
vocablens::Model poisoned(const vocablens::Model& m, const std::function<void(vocablens::ModelWeights&)>& f) {
  vocablens::ModelWeights w = m.weights();
  f(w);
  return vocablens::Model(m.config(), w, "poisoned");
}
// NaN at E[5, 3] (tied: token 5's logit is NaN everywhere).
vocablens::Model nan_in_embedding(const vocablens::Model& m) {
  return poisoned(m, [](vocablens::ModelWeights& w) {
    w.W_E = w.W_E.clone();
    w.W_E[5][3] = std::numeric_limits<float>::quiet_NaN();
    w.W_U = w.W_E.t();
  });
}
// NaN at layer 1's w_out[7, 2]: neuron 7's value vector, and mlp_out.1 from then on.
vocablens::Model nan_in_w_out(const vocablens::Model& m) {
  return poisoned(m, [](vocablens::ModelWeights& w) {
    w.layers[1].w_out = w.layers[1].w_out.clone();
    w.layers[1].w_out[7][2] = std::numeric_limits<float>::quiet_NaN();
  });
}
vocablens::Model stories260k() {
  std::string src = vl_test::fixture("stories260K/stories260K.bin");
  REQUIRE_FALSE(src.empty());  // the fixture is part of the checkout: missing means a broken setup
  return vocablens::load_model(src);
}
struct WarnPolicy {
  WarnPolicy() { vocablens::set_nonfinite_policy(vocablens::NonFinitePolicy::Warn); }
  ~WarnPolicy() { vocablens::set_nonfinite_policy(vocablens::NonFinitePolicy::Refuse); }
};
}  // namespace

TEST_CASE("--allow-nonfinite: a NaN logit makes the lens row NaN (no top token, no rank, no cross-entropy)") {
  auto m = stories260k();
  WarnPolicy warn;
  // One NaN in embedding row 5: with the tied unembedding, token 5's logit is NaN at every layer and position.
  auto emb = nan_in_embedding(m);
  std::vector<int64_t> ids = {1, 403, 407, 261, 378};
  vocablens::LensOptions o;
  o.top_k = 3;
  o.target = 261;
  auto r = vocablens::logit_lens(emb, ids, o);
  for (int64_t li = 0; li < r.n_layers(); ++li) {
    CHECK(std::isnan(r.mean_cross_entropy(li)));
    for (int64_t t = 0; t < r.n_positions(); ++t) {
      CHECK(r.top_id(li, t, 0) == -1);
      CHECK(std::isnan(r.top_prob(li, t, 0)));
      CHECK(r.target_rank[r.at(li, t)] == -1);
      CHECK(std::isnan(r.target_prob[r.at(li, t)]));
    }
  }
  // A NaN in layer 1's MLP output weights: the embedding and layer-0 rows stay exact, later ones are NaN.
  auto mlp = nan_in_w_out(m);
  auto clean = vocablens::logit_lens(m, ids, o);
  auto r2 = vocablens::logit_lens(mlp, ids, o);
  for (int64_t li = 0; li < r2.n_layers(); ++li) {
    const bool before = r2.layers[static_cast<size_t>(li)].block < 1;  // embed (-1) and block 0
    INFO("layer row " << li);
    CHECK(std::isnan(r2.mean_cross_entropy(li)) != before);
    if (before) CHECK(r2.top_id(li, 4, 0) == clean.top_id(li, 4, 0));
    else CHECK(r2.top_id(li, 4, 0) == -1);
  }
}

TEST_CASE("--allow-nonfinite: neurons and heads keep the finite ones exact; spectrum and cosines refuse in one line") {
  auto m = stories260k();
  WarnPolicy warn;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // neuron 7 of layer 1: its value vector (row 7 of w_out) holds a NaN.
  auto mlp = nan_in_w_out(m);
  vocablens::NeuronsOptions no;
  no.layer = 1;
  no.neurons = {6, 7, 8};
  no.top_k = 4;
  auto clean = vocablens::analyze_neurons(m, no);
  auto a = vocablens::analyze_neurons(mlp, no);
  CHECK(a.neurons[1].value_top.empty());
  CHECK(std::isnan(a.neurons[1].value_norm));
  CHECK(a.neurons[1].key_top.size() == 4);  // its key is finite
  for (size_t q : {size_t{0}, size_t{2}}) {
    REQUIRE(a.neurons[q].value_top.size() == 4);
    CHECK(a.neurons[q].value_top[0].j == clean.neurons[q].value_top[0].j);
  }
  // layer 0 head 0's W_Q holds a NaN: its QK circuit is empty with NaN scores, every other circuit is exact.
  auto attn = poisoned(m, [&](vocablens::ModelWeights& w) {
    w.layers[0].w_q = w.layers[0].w_q.clone();
    w.layers[0].w_q[3][1] = nan;
  });
  vocablens::HeadsOptions ho;
  ho.layers = {0};
  ho.heads = {0, 1};
  ho.top_k = 3;
  auto hc = vocablens::analyze_heads(m, ho);
  auto h = vocablens::analyze_heads(attn, ho);
  REQUIRE(h.circuits.size() == hc.circuits.size());
  for (size_t i = 0; i < h.circuits.size(); ++i) {
    const auto& c = h.circuits[i];
    INFO("head " << c.head << " " << vocablens::to_string(c.kind));
    if (c.head == 0 && c.kind == vocablens::CircuitKind::QK) {
      CHECK(c.top.empty());
      CHECK(std::isnan(c.copying_score));
    } else {
      REQUIRE(c.top.size() == 3);
      CHECK(c.top[0].i == hc.circuits[i].top[0].i);
      CHECK(c.top[0].j == hc.circuits[i].top[0].j);
    }
  }
  // A NaN in E: its spectrum and cosine neighbours are undefined; one line naming the value and where.
  auto emb = nan_in_embedding(m);
  try {
    vocablens::matrix_spectrum(emb.W_E(), {}, "W_E", "token");
    FAIL("spectrum of a NaN matrix");
  } catch (const vocablens::Error& e) {
    std::string s = e.what();
    CHECK(s.find("W_E holds 1 non-finite value") != std::string::npos);
    CHECK(s.find("nan at [5, 3]") != std::string::npos);
  }
  CHECK_THROWS_WITH(vocablens::analyze_heads(emb, ho), Catch::Contains("W_E holds 1 non-finite"));
}

TEST_CASE("finiteness is scanned in place for float32, bfloat16 and float16, contiguous or transposed") {
  // Values placed by hand, so the expected first hit (in the view's row-major order) is known independently.
  for (auto dt : {at::kFloat, at::kBFloat16, at::kHalf}) {
    CAPTURE(c10::toString(dt));
    at::Tensor t = at::zeros({37, 4099}, dt);
    t[0][0] = dt == at::kHalf ? 65504.0f : 3.0e38f;  // the largest finite values are finite
    t[1][1] = dt == at::kHalf ? 6.0e-8f : 1.0e-40f;  // and so are subnormals
    CHECK(vocablens::all_finite(t));
    CHECK(vocablens::all_finite(t.t()));
    t[5][17] = std::numeric_limits<float>::quiet_NaN();
    t[20][3] = -std::numeric_limits<float>::infinity();
    CHECK_FALSE(vocablens::all_finite(t));
    CHECK_FALSE(vocablens::all_finite(t.t()));
    CHECK(vocablens::all_finite(t.narrow(0, 6, 14)));        // rows 6..19: contiguous, clean
    CHECK_FALSE(vocablens::all_finite(t.narrow(0, 6, 15)));  // row 20 included
    CHECK(vocablens::all_finite(t.narrow(1, 4, 13)));        // columns 4..16: strided, clean
    CHECK_THROWS_WITH(vocablens::require_finite(t, "M", "c"),
                      Catch::Contains("M holds 2 non-finite values of 151663 (first: nan at [5, 17])"));
    // Transposed: [17, 5] holds the NaN, [3, 20] the -inf, which comes first in the view's order.
    CHECK_THROWS_WITH(vocablens::require_finite(t.t(), "M", "c"), Catch::Contains("(first: -inf at [3, 20])"));
  }
}

TEST_CASE("a checkpoint truncated or written in place after loading: one error naming it, not SIGBUS or other numbers") {
  const std::string src = vl_test::fixture("gpt2-tiny");
  REQUIRE(!src.empty());
  const at::Tensor ids = at::tensor(std::vector<int64_t>{464, 412, 733}, at::kLong);
  for (const char* how : {"truncate", "overwrite", "replace"}) {
    INFO(how);
    const std::string dir = vl_test::temp_dir(std::string("changed-") + how);
    fs::copy(src, dir + "/m", fs::copy_options::recursive);
    const std::string st = dir + "/m/model.safetensors";
    REQUIRE(fs::exists(st));
    at::Tensor before;
    {
      auto m = vocablens::load_model(dir + "/m");
      before = m.forward(ids).logits;
      const auto size = fs::file_size(st);
      if (std::string(how) == "truncate") {
        fs::resize_file(st, size / 2);  // touching the lost pages would raise SIGBUS
      } else if (std::string(how) == "overwrite") {
        // The same size, the same header, other weights: written in place, as `dd conv=notrunc` or a careless
        // re-save would. The mapping's unread pages would show the new bytes.
        std::FILE* f = std::fopen(st.c_str(), "r+b");
        REQUIRE(f);
        std::fseek(f, static_cast<long>(size - 4096), SEEK_SET);
        std::vector<char> junk(4096, 0x7f);
        std::fwrite(junk.data(), 1, junk.size(), f);
        std::fclose(f);
        fs::last_write_time(st, fs::last_write_time(st) + std::chrono::seconds(2));  // coarse clocks: a visible move
      } else {
        // Replaced by a new file (rename over it): the mapping keeps the old one, nothing changed for this model.
        fs::copy_file(st, st + ".new");
        fs::rename(st + ".new", st);
      }
      if (std::string(how) == "replace") {
        CHECK(at::equal(m.forward(ids).logits, before));
      } else {
        CHECK_THROWS_WITH(m.forward(ids), Catch::Contains("model.safetensors") &&
                                              Catch::Contains("changed on disk since it was loaded") &&
                                              Catch::Contains("load it again"));
        // An analysis that reads weights without a forward pass asks too (run_analysis, every surface).
        CHECK_THROWS_AS(vocablens::run_analysis(vocablens::find_analysis("neurons"), m, nullptr, {{"layer", 0}, {"neurons", {0}}},
                                                vocablens::Surface::Python),
                        vocablens::FormatError);
      }
    }
  }
}

// SAE / transcoder readers and feature logit weights against independent float64 NumPy references
// (tests/fixtures/sae/make_saes.py writes each layout and computes encode/decode from its definition).
#include <catch2/catch.hpp>
#include <sys/stat.h>

#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "fixtures.hpp"
#include "sae_fixtures.hpp"
#include "npy_tensor.hpp"
#include "vocablens/error.hpp"
#include "vocablens/features.hpp"
#include "vocablens/hooks.hpp"
#include "vocablens/model.hpp"
#include "vocablens/sae.hpp"
#include "vocablens/unembed.hpp"
#include "vocablens/tokenizer.hpp"

namespace {

// The generated SAEs (made once per build directory, support/sae_fixtures.hpp): OUT/<case>, OUT/ref,
// OUT/cases.json.
const std::string& sae_fixtures() { return vl_test::sae_fixtures_dir(); }

double max_abs(const at::Tensor& a, const at::Tensor& b) {
  REQUIRE(a.sizes() == b.sizes());
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

template <class F>
std::string error_thrown_by(F&& f) {
  try {
    f();
  } catch (const vocablens::Error& e) { return e.what(); }
  return "";
}

}  // namespace

TEST_CASE("every SAE layout encodes and decodes as its float64 reference", "[sae]") {
  const std::string& fx = sae_fixtures();
  auto cases = nlohmann::json::parse(vl_test::read_file(fx + "/cases.json"));
  REQUIRE(cases.size() == 13);
  at::Tensor x = vl_test::load_npy_tensor(fx + "/x.npy");  // [6, 64] float64
  vocablens::Model m = vocablens::load_model(vl_test::fixture("gpt2-tiny"));
  for (auto& [name, c] : cases.items()) {
    INFO(name);
    vocablens::Sae sae = vocablens::load_sae(c["path"].get<std::string>());
    CHECK(sae.d_in == 64);
    CHECK(sae.d_sae == 96);
    CHECK(sae.hook_name == c["hook"].get<std::string>());
    CHECK(sae.hook_name_out == c["hook_out"].get<std::string>());
    vocablens::check_sae_fits(sae, m);
    at::Tensor acts_ref = vl_test::load_npy_tensor(fx + "/ref/" + name + ".acts.npy");
    at::Tensor recon_ref = vl_test::load_npy_tensor(fx + "/ref/" + name + ".recon.npy");
    at::Tensor acts = sae.encode(x);
    CHECK(acts.scalar_type() == at::kDouble);
    CHECK(max_abs(acts, acts_ref) <= 1e-5);
    CHECK(max_abs(sae.decode(acts, x), recon_ref) <= 1e-5);
    CHECK(max_abs(sae.forward(x), recon_ref) <= 1e-5);
    // the same pattern of active features (the sparsifying function agrees, not only the values)
    CHECK(at::equal(acts > 0, acts_ref > 0));
    // float32 input computes in float32: close, not reference-grade
    at::Tensor r32 = sae.forward(x.to(at::kFloat));
    CHECK(r32.scalar_type() == at::kFloat);
    if (name == "saelens_standard") CHECK(max_abs(r32, recon_ref) <= 1e-4);
  }
}

TEST_CASE("SAE readers keep the stored dtype and name the layout", "[sae]") {
  const std::string& fx = sae_fixtures();
  auto bf = vocablens::load_sae(fx + "/saelens_batchtopk_bf16");
  CHECK(bf.layout == "saelens");
  CHECK(bf.architecture == vocablens::SaeArchitecture::BatchTopK);
  CHECK(bf.stored_dtype == "BF16");
  CHECK(bf.W_dec.scalar_type() == at::kBFloat16);
  CHECK(vocablens::load_sae(fx + "/saelens_pre6").scaling_factor.defined());
  CHECK(vocablens::load_sae(fx + "/saelens_topk").k == 8);
  CHECK(vocablens::load_sae(fx + "/llamascope").layout == "llamascope");
  CHECK(vocablens::load_sae(fx + "/circuit_tracer/layer_1.safetensors").layout == "circuit-tracer");
  CHECK(vocablens::load_sae(fx + "/gemmascope_v2/transcoder/layer_1_width_96/params.safetensors").W_skip.defined());
  // a hook given by the caller wins over the guessed one
  vocablens::SaeLoadOptions o;
  o.hook_name = "blocks.0.hook_resid_pre";
  CHECK(vocablens::load_sae(fx + "/gemmascope_v1/layer_1/width_96/average_l0_20/params.npz", o).hook_name ==
        "blocks.0.hook_resid_pre");
}

TEST_CASE("bad SAE files give one line naming the file", "[sae]") {
  const std::string& fx = sae_fixtures();
  vocablens::Model m = vocablens::load_model(vl_test::fixture("gpt2-tiny"));
  auto one_line = [](const std::string& e) { return !e.empty() && e.find('\n') == std::string::npos; };

  std::string e = error_thrown_by([&] { vocablens::load_sae(fx + "/bad_nan"); });
  INFO(e);
  CHECK(one_line(e));
  CHECK(e.find("bad_nan") != std::string::npos);
  CHECK(e.find("'W_dec' has NaN") != std::string::npos);

  e = error_thrown_by([&] { vocablens::load_sae(fx + "/bad_missing"); });
  INFO(e);
  CHECK(one_line(e));
  CHECK(e.find("bad_missing/cfg.json: missing field 'd_sae'") != std::string::npos);

  e = error_thrown_by([&] { vocablens::load_sae(fx + "/bad_unknown"); });
  INFO(e);
  CHECK(one_line(e));
  CHECK(e.find("bad_unknown: no SAE layout found") != std::string::npos);
  CHECK(e.find("layouts read") != std::string::npos);

  // Gemma Scope 2's config.json checked against the tensors, and its points mapped or refused
  for (const auto& [dir, what] : std::vector<std::pair<std::string, std::string>>{
           {"bad_gs2_width", "bad_gs2_width/config.json: width 97 does not match params.safetensors's 96 features"},
           {"bad_gs2_affine", "config.json says affine_connection but there is no affine_skip_connection"},
           {"bad_gs2_hook", "hf_hook_point_in 'model.layers.0.mlp.down_proj.input' is not a point vocablens maps"},
           {"bad_gs2_arch", "bad_gs2_arch/config.json: architecture 'topk' is not one vocablens reads"}}) {
    e = error_thrown_by([&] { vocablens::load_sae(fx + "/" + dir); });
    INFO(e);
    CHECK(one_line(e));
    CHECK(e.find(what) != std::string::npos);
  }

  e = error_thrown_by([&] { vocablens::load_sae(fx + "/no_such_sae"); });
  CHECK(e.find("no_such_sae: no such file") != std::string::npos);

  auto din = vocablens::load_sae(fx + "/bad_din");
  e = error_thrown_by([&] { vocablens::check_sae_fits(din, m); });
  INFO(e);
  CHECK(one_line(e));
  CHECK(e.find("bad_din: d_in 32 does not match blocks.1.hook_resid_pre") != std::string::npos);

  auto hook = vocablens::load_sae(fx + "/bad_hook");
  e = error_thrown_by([&] { vocablens::check_sae_fits(hook, m); });
  INFO(e);
  CHECK(one_line(e));
  CHECK(e.find("bad_hook: hook 'blocks.1.hook_nowhere'") != std::string::npos);

  // input of the wrong width: a UsageError naming the SAE
  auto sae = vocablens::load_sae(fx + "/saelens_standard");
  e = error_thrown_by([&] { sae.encode(at::zeros({2, 32})); });
  CHECK(e.find("saelens_standard") != std::string::npos);
  auto tc = vocablens::load_sae(fx + "/circuit_tracer/layer_1.safetensors");
  e = error_thrown_by([&] { tc.decode(at::zeros({2, 96})); });
  CHECK(e.find("skip connection") != std::string::npos);
}

TEST_CASE("feature logit weights equal the dense float64 product's top and bottom k", "[sae][features]") {
  const std::string& fx = sae_fixtures();
  vocablens::Model m = vocablens::load_model(vl_test::fixture("gpt2-tiny"));
  auto sae = vocablens::load_sae(fx + "/saelens_standard");
  // both screens (int8 where this CPU has an exact int8 kernel, float32): the same lists
  for (const std::string screen : {"float32", "int8"})
    for (const std::string suffix : {"", "_norm"}) {
      INFO("suffix " << suffix << " screen " << screen);
      vocablens::FeatureLogitsOptions o;
      o.top_k = 7;
      o.final_norm_scale = suffix == "_norm";
      o.screen = screen;
      auto a = vocablens::feature_logits(m, sae, o);
      CHECK(a.screen == (screen == "int8" && vocablens::feature_logits_int8_available() ? "int8" : "float32"));
      vocablens::Result r = a.to_result(nullptr);
      CHECK(r.kind == "features");
      REQUIRE(r.arrays.at("top_ids").shape == std::vector<int64_t>{96, 7});
      REQUIRE(r.arrays.at("bottom_values").shape == std::vector<int64_t>{96, 7});
      at::Tensor top_ids = vl_test::load_npy_tensor(fx + "/ref/logits.top_ids" + suffix + ".npy");
      at::Tensor top_vals = vl_test::load_npy_tensor(fx + "/ref/logits.top_values" + suffix + ".npy");
      at::Tensor bot_ids = vl_test::load_npy_tensor(fx + "/ref/logits.bottom_ids" + suffix + ".npy");
      at::Tensor bot_vals = vl_test::load_npy_tensor(fx + "/ref/logits.bottom_values" + suffix + ".npy");
      // without the norm scale both sides multiply the same float32 numbers in float64: equal to rounding;
      // with it, the scaled row is rounded to float32 here and not in NumPy (relative 6e-8)
      const double tol = suffix.empty() ? 1e-10 : 1e-5;
      int64_t id_mismatch = 0;
      for (int64_t f = 0; f < 96; ++f)
        for (int64_t q = 0; q < 7; ++q) {
          const auto& t = a.top[static_cast<size_t>(f)][static_cast<size_t>(q)];
          const auto& b = a.bottom[static_cast<size_t>(f)][static_cast<size_t>(q)];
          id_mismatch += t.j != top_ids[f][q].item<int64_t>();
          id_mismatch += b.j != bot_ids[f][q].item<int64_t>();
          CHECK(std::abs(t.value - top_vals[f][q].item<double>()) <= tol);
          CHECK(std::abs(b.value - bot_vals[f][q].item<double>()) <= tol);
        }
      CHECK(id_mismatch == 0);
    }
  // a subset of features: the rows of the same features
  vocablens::FeatureLogitsOptions o;
  o.top_k = 7;
  o.features = {0, 5, 6, 7, 8, 9};
  auto a = vocablens::feature_logits(m, sae, o);
  at::Tensor top_ids = vl_test::load_npy_tensor(fx + "/ref/logits.top_ids.npy");
  REQUIRE(a.top.size() == 6);
  for (size_t q = 0; q < 6; ++q) CHECK(a.top[q][0].j == top_ids[o.features[q]][0].item<int64_t>());
  o.features = {96};
  CHECK(error_thrown_by([&] { vocablens::feature_logits(m, sae, o); }).find("feature 96 is out of range") != std::string::npos);
}

TEST_CASE("vocablens features CLI and its report pages", "[sae][cli]") {
  const std::string& fx = sae_fixtures();
  std::string cli = vl_test::cli_path();
  struct stat st {};
  REQUIRE(!cli.empty());
  REQUIRE(::stat(cli.c_str(), &st) == 0);
  const std::string gpt2 = vl_test::fixture("gpt2-tiny");
  const std::string run = vl_test::temp_dir("features-cli") + "/run";
  std::string out;
  int rc = vl_test::run_command(
      cli + " features " + gpt2 + " --sae " + fx + "/saelens_standard --top-k 5 --features 0,5-9 --out " + run, out);
  INFO(out);
  REQUIRE(rc == 0);
  CHECK(out.find("feature 5") != std::string::npos);
  at::Tensor ids = vl_test::load_npy_tensor(run + "/features.top_ids.npy");
  CHECK(ids.sizes() == at::IntArrayRef({6, 5}));
  at::Tensor ref = vl_test::load_npy_tensor(fx + "/ref/logits.top_ids.npy");
  CHECK(ids[1][0].item<int64_t>() == ref[5][0].item<int64_t>());
  rc = vl_test::run_command(cli + " report " + run, out);
  REQUIRE(rc == 0);
  std::string html = vl_test::read_file(run + "/report.html");
  CHECK(html.find("Feature pages") != std::string::npos);
  CHECK(html.find("feature 9") != std::string::npos);
  // bad input: one line, naming the file, exit != 0
  rc = vl_test::run_command(cli + " features " + gpt2 + " --sae " + fx + "/bad_unknown", out);
  CHECK(rc != 0);
  CHECK(out.find("bad_unknown: no SAE layout found") != std::string::npos);
  rc = vl_test::run_command(cli + " features " + gpt2 + " --sae " + fx + "/bad_din", out);
  CHECK(rc != 0);
  CHECK(out.find("d_in 32 does not match") != std::string::npos);
}

TEST_CASE("an SAE spliced into the forward pass", "[sae][hooks]") {
  const std::string& fx = sae_fixtures();
  vocablens::Model m = vocablens::load_model(vl_test::fixture("gpt2-tiny"));
  auto sae = vocablens::load_sae(fx + "/saelens_jumprelu");  // blocks.2.hook_resid_post
  at::Tensor ids = at::tensor(std::vector<int64_t>{464, 412, 733, 4008, 318}, at::kLong);
  auto clean = vocablens::run_with_hooks(m, ids, vocablens::HookList());
  // with the error term the forward is unchanged (up to float32 rounding of x̂ + (x − x̂))
  vocablens::HookList with_error;
  with_error.add(sae.hook_name, vocablens::sae_splice(sae, true));
  auto same = vocablens::run_with_hooks(m, ids, with_error);
  CHECK(max_abs(same.logits, clean.logits) <= 1e-4);
  // without it, the last block's input is the reconstruction: logits = unembed(final_norm(x̂)) exactly
  at::Tensor resid;
  vocablens::HookList read;
  read.add(sae.hook_name, [&](at::Tensor& a) { resid = a.clone(); });
  vocablens::run_with_hooks(m, ids, read);
  vocablens::HookList spliced;
  spliced.add(sae.hook_name, vocablens::sae_splice(sae));
  auto out = vocablens::run_with_hooks(m, ids, spliced);
  at::Tensor want = m.unembed(m.final_norm(sae.forward(resid)));
  CHECK(max_abs(out.logits, want) <= 1e-4);
  CHECK(max_abs(out.logits, clean.logits) > 1e-2);
}

TEST_CASE("mutated SAE files load or fail with one line, never otherwise", "[sae][robustness]") {
  // A small deterministic fuzz of every reader: truncations and overwritten bytes of each layout's files.
  const std::string& fx = sae_fixtures();
  struct Target {
    std::string dir, file, load;  // folder to copy, file in it to mutate, what to load (relative to the copy)
  };
  const std::vector<Target> targets = {{"saelens_standard", "cfg.json", ""},
                                       {"saelens_standard", "sae_weights.safetensors", ""},
                                       {"gemmascope_v1/layer_1/width_96/average_l0_20", "params.npz", "params.npz"},
                                       {"llamascope", "hyperparams.json", ""},
                                       {"circuit_tracer", "layer_1.safetensors", "layer_1.safetensors"}};
  uint64_t seed = 0x9E3779B97F4A7C15ull;
  auto next = [&]() {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return seed >> 33;
  };
  int loaded = 0, refused = 0;
  for (const auto& t : targets) {
    const std::string orig = vl_test::read_file(fx + "/" + t.dir + "/" + t.file);
    for (int round = 0; round < 40; ++round) {
      const std::string dir = vl_test::temp_dir("sae-mut");
      std::string log;
      REQUIRE(vl_test::run_command("cp -r '" + fx + "/" + t.dir + "/.' '" + dir + "/'", log) == 0);
      std::string bytes = orig;
      if (round % 3 == 0) {
        bytes.resize(next() % bytes.size());
      } else {
        const int n = 1 + static_cast<int>(next() % 8);
        for (int q = 0; q < n; ++q) bytes[next() % bytes.size()] = static_cast<char>(next() & 0xff);
      }
      vl_test::write_file(dir + "/" + t.file, bytes);
      INFO(t.dir << "/" << t.file << " round " << round);
      try {
        auto sae = vocablens::load_sae(t.load.empty() ? dir : dir + "/" + t.load);
        at::Tensor x = at::randn({2, sae.d_in});
        sae.forward(x);
        ++loaded;
      } catch (const vocablens::Error& e) {
        CHECK(std::string(e.what()).find('\n') == std::string::npos);
        ++refused;
      }
    }
  }
  CHECK(loaded + refused == 200);
  CHECK(refused > 0);
}

TEST_CASE("feature logit weights with an allow-list equal the streamed engine's, bit for bit", "[sae][features]") {
  const std::string& fx = sae_fixtures();
  vocablens::Model m = vocablens::load_model(vl_test::fixture("gpt2-tiny"));
  auto sae = vocablens::load_sae(fx + "/saelens_topk");
  std::vector<int64_t> allow;
  for (int64_t t = 7; t < 50257; t += 13) allow.push_back(t);
  for (const std::string screen : {"float32", "int8"})
    for (int64_t k : {1, 5, 40}) {
      INFO("k " << k << " screen " << screen);
      vocablens::FeatureLogitsOptions o;
      o.top_k = k;
      o.filter.allow = allow;
      o.screen = screen;
      auto a = vocablens::feature_logits(m, sae, o);
      vocablens::TopkStreamOptions so;
      so.cols = allow;
      at::Tensor X = sae.W_dec.to(at::kFloat);
      auto top = vocablens::project_topk(X, m.W_U(), k, so);
      auto bot = vocablens::project_topk(X.neg(), m.W_U(), k, so);
      for (size_t f = 0; f < 96; ++f) {
        REQUIRE(a.top[f].size() == static_cast<size_t>(k));
        for (size_t q = 0; q < static_cast<size_t>(k); ++q) {
          CHECK(a.top[f][q].j == top[f][q].j);
          CHECK(a.top[f][q].value == top[f][q].value);
          CHECK(a.bottom[f][q].j == bot[f][q].j);
          CHECK(a.bottom[f][q].value == -bot[f][q].value);
        }
      }
    }
}

// Transcoder sets (vocablens/transcoders.hpp) against float64 NumPy references written from circuit-tracer's
// definitions (tests/fixtures/transcoders/make_transcoders.py): per-layer sets (JumpReLU with a skip, TopK keeping
// negative values, a transcoders: list with a Gemma Scope params.npz) and cross-layer transcoders (BF16 JumpReLU,
// F32 ReLU); each set's hooks; bad input, one line each; a CLT's files are not read whole, a per-layer set's
// pages are given back once read.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "fixtures.hpp"
#include "tensor_checks.hpp"
#include "tiny_gpt2.hpp"
#include "npy_tensor.hpp"
#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/transcoders.hpp"

namespace {

// make_transcoders.py's output, made once per test program.
const std::string& transcoder_fixtures() {
  static const std::string dir = [] {
    std::string d = vl_test::temp_dir("transcoders");
    std::string out;
    const int rc = vl_test::run_command(
        "/usr/bin/python3 " +
            vl_test::shq(std::string(VOCABLENS_SOURCE_DIR) + "/tests/fixtures/transcoders/make_transcoders.py") + " " +
            vl_test::shq(d) + " 2>&1",
        out);
    if (rc != 0) throw std::runtime_error("make_transcoders.py failed: " + out);
    return d;
  }();
  return dir;
}

double tc_max_abs(const at::Tensor& a, const at::Tensor& b) {
  REQUIRE(a.sizes() == b.sizes());  // max_abs_diff alone would broadcast
  return vl_test::max_abs_diff(a, b);
}

template <class F>
std::string tc_error(F&& f) {
  try {
    f();
  } catch (const vocablens::Error& e) { return e.what(); }
  return "(no error)";
}

// Resident set size of this process in bytes (/proc/self/statm: pages).
int64_t resident_bytes() {
  std::ifstream f("/proc/self/statm");
  int64_t size = 0, resident = 0;
  f >> size >> resident;
  return resident * ::sysconf(_SC_PAGESIZE);
}

// A safetensors file of one F32 tensor per (name, shape), its data left as a hole (a sparse file of zeros).
void sparse_safetensors(const std::string& path, const std::vector<std::pair<std::string, std::vector<int64_t>>>& ts) {
  nlohmann::json h = nlohmann::json::object();
  int64_t off = 0;
  for (const auto& [name, shape] : ts) {
    int64_t n = 4;
    for (int64_t s : shape) n *= s;
    h[name] = {{"dtype", "F32"}, {"shape", shape}, {"data_offsets", {off, off + n}}};
    off += n;
  }
  std::string text = h.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t len = text.size();
  const int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(::write(fd, &len, 8) == 8);
  REQUIRE(::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
  REQUIRE(::ftruncate(fd, static_cast<off_t>(8 + len + off)) == 0);
  ::close(fd);
}

}  // namespace

TEST_CASE("transcoder sets encode, decode and give decoder rows as their float64 references") {
  const std::string& fx = transcoder_fixtures();
  const auto cases = nlohmann::json::parse(vl_test::read_file(fx + "/cases.json"));
  REQUIRE(cases.size() == 4);
  const at::Tensor x = vl_test::load_npy_tensor(fx + "/x.npy");  // [3, 6, 64] float64
  const vocablens::Model m = vocablens::load_model(vl_test::fixture("gpt2-tiny"));
  for (const auto& [name, c] : cases.items()) {
    INFO(name);
    const vocablens::TranscoderSet set = vocablens::load_transcoders(fx + "/" + name);
    const bool clt = c["kind"] == "cross_layer";
    CHECK((set.kind == vocablens::TranscoderKind::CrossLayer) == clt);
    CHECK(set.n_layers == 3);
    CHECK(set.d_in == 64);
    CHECK(set.d_transcoder == 48);
    CHECK(set.d_out == 64);
    CHECK(set.stored_dtype == (name == "clt_jumprelu_bf16" ? "BF16" : "F32"));
    // each set reads and writes at its own points, its config's hooks under our names
    CHECK(set.input_hook(2) == "blocks.2." + c["hook_in"].get<std::string>());
    CHECK(set.output_hook(1) == "blocks.1." + c["hook_out"].get<std::string>());
    CHECK(set.layer(1).hook_name == set.input_hook(1));
    CHECK(set.layer(1).hook_name_out == set.output_hook(1));
    vocablens::check_transcoders_fit(set, m);
    const at::Tensor acts = vl_test::load_npy_tensor(fx + "/ref/" + name + ".acts.npy");
    const at::Tensor recon = vl_test::load_npy_tensor(fx + "/ref/" + name + ".recon.npy");
    const at::Tensor rows = vl_test::load_npy_tensor(fx + "/ref/" + name + ".rows.npy");
    std::vector<at::Tensor> f;
    for (int64_t l = 0; l < 3; ++l) {
      f.push_back(set.encode(l, x[l]));  // float64 in, float64 arithmetic: the same active features
      CHECK(tc_max_abs(f.back(), acts[l]) < 1e-9);
      CHECK(at::equal(f.back() != 0, acts[l] != 0));
      CHECK(set.n_outputs(l) == (clt ? 3 - l : 1));
      const at::Tensor r = set.decoder_rows(l, 5);
      CHECK(r.sizes().vec() == std::vector<int64_t>{set.n_outputs(l), 64});
      CHECK(tc_max_abs(r, rows[l].narrow(0, 0, set.n_outputs(l))) == 0);
      // float32 input: the same features up to float32 rounding
      CHECK(tc_max_abs(set.encode(l, x[l].to(at::kFloat)).masked_fill(acts[l] == 0, 0), acts[l]) < 1e-4);
    }
    for (int64_t l = 0; l < 3; ++l) CHECK(tc_max_abs(set.decode(l, f, x[l]), recon[l]) < 1e-9);
  }
}

TEST_CASE("transcoder sets: bad input is one line naming the file") {
  const std::string& fx = transcoder_fixtures();
  const vocablens::Model m = vocablens::load_model(vl_test::fixture("gpt2-tiny"));
  auto load = [&](const std::string& c) { return tc_error([&] { vocablens::load_transcoders(fx + "/" + c); }); };
  auto fit = [&](const std::string& c) {
    const auto set = vocablens::load_transcoders(fx + "/" + c);
    return tc_error([&] { vocablens::check_transcoders_fit(set, m); });
  };
  const std::vector<std::pair<std::string, std::vector<std::string>>> expected = {
      {load("bad_kind"), {"bad_kind/config.yaml: unknown model_kind 'sparse_autoencoder'", "transcoder_set"}},
      {load("bad_hook"), {"bad_hook/config.yaml: feature_input_hook 'hook_nowhere' names no hook point"}},
      {load("bad_yaml"), {"bad_yaml/config.yaml: not valid YAML", "line"}},
      {load("bad_no_hook"), {"bad_no_hook/config.yaml: missing field 'feature_input_hook'"}},
      {load("bad_gap"), {"bad_gap: layer_1.safetensors is missing"}},
      {load("bad_no_thresholds"),
       {"bad_no_thresholds/layer_0.safetensors: config.yaml's activation is jumprelu", "no thresholds"}},
      {load("bad_clt_nan"), {"bad_clt_nan/W_dec_1.safetensors: tensor 'W_dec_1' has NaN or infinite values"}},
      {load("bad_clt_thresholds"), {"bad_clt_thresholds/W_enc_2.safetensors: missing tensor 'threshold_2'"}},
      {load("bad_clt_decoder"), {"bad_clt_decoder/W_dec_2.safetensors: missing tensor 'W_dec_2'"}},
      {load("no_such_folder"), {"no_such_folder: no such file or folder"}},
      {tc_error([&] { vocablens::load_sae(fx + "/clt_relu"); }), {"clt_relu: a transcoder folder", "load_transcoders"}},
      {fit("bad_width"), {"bad_width: d_in 32 does not match blocks.0.hook_resid_mid of", "(width 64)"}},
      {fit("bad_clt_layers"), {"bad_clt_layers: a cross-layer transcoder of 2 layers, but", "has 3"}},
  };
  for (const auto& [msg, parts] : expected) {
    INFO(msg);
    for (const auto& p : parts) CHECK_THAT(msg, Catch::Contains(p));
    CHECK(msg.find('\n') == std::string::npos);
  }
  // A large set checks its matrices as they are read: the poisoned feature's rows, not its neighbours'.
  vocablens::TranscoderLoadOptions lazy;
  lazy.check_at_load_bytes = 0;
  const auto set = vocablens::load_transcoders(fx + "/bad_clt_nan", lazy);
  CHECK(set.decoder_rows(1, 6).isfinite().all().item<bool>());
  CHECK_THAT(tc_error([&] { set.decoder_rows(1, 7); }),
             Catch::Contains("bad_clt_nan/W_dec_1.safetensors: decoder rows of feature 7 of layer 1 have NaN"));
  CHECK_THAT(tc_error([&] { set.decoder_rows(3, 0); }), Catch::Contains("layer 3 is out of range"));
}

TEST_CASE("a cross-layer transcoder's files are mapped, not read: loading one of 1.2 GB keeps RSS flat") {
  const std::string d = vl_test::temp_dir("clt-large");
  const int64_t L = 3, dtc = 8192, dm = 4096;  // W_dec_0 alone is 8192 x 3 x 4096 float32: 402 MB
  for (int64_t i = 0; i < L; ++i) {
    const std::string I = std::to_string(i);
    sparse_safetensors(d + "/W_enc_" + I + ".safetensors",
                       {{"W_enc_" + I, {dtc, dm}}, {"b_enc_" + I, {dtc}}, {"b_dec_" + I, {dm}}, {"threshold_" + I, {dtc}}});
    sparse_safetensors(d + "/W_dec_" + I + ".safetensors", {{"W_dec_" + I, {dtc, L - i, dm}}});
  }
  std::ofstream(d + "/config.yaml") << "model_kind: cross_layer_transcoder\nfeature_input_hook: hook_resid_mid\n"
                                       "feature_output_hook: hook_mlp_out\n";
  const int64_t before = resident_bytes();
  const vocablens::TranscoderSet set = vocablens::load_transcoders(d);
  CHECK(set.file_bytes > (uint64_t{1150} << 20));  // 1.2 GB
  CHECK(set.encoder_checked != nullptr);           // above check_at_load_bytes: matrices checked as read
  const int64_t loaded = resident_bytes();
  CHECK(loaded - before < (int64_t{16} << 20));
  const at::Tensor rows = set.decoder_rows(0, 1234);  // 3 x 4096 values of W_dec_0
  CHECK(rows.sizes().vec() == std::vector<int64_t>{3, dm});
  CHECK(resident_bytes() - before < (int64_t{16} << 20));
  INFO("RSS grew by " << (loaded - before) << " bytes loading " << set.file_bytes << " bytes of files");
}

TEST_CASE("a per-layer set is not kept resident: pages given back after the load's check and by release_pages") {
  const std::string d = vl_test::temp_dir("per-layer-large");
  const int64_t dtc = 16384, dm = 1024;  // W_enc and W_dec of 64 MB each per layer: 256 MB in all, checked at load
  for (int64_t l = 0; l < 2; ++l)
    sparse_safetensors(d + "/layer_" + std::to_string(l) + ".safetensors",
                       {{"W_enc", {dtc, dm}}, {"b_enc", {dtc}}, {"W_dec", {dtc, dm}}, {"b_dec", {dm}}});
  vocablens::TranscoderLoadOptions o;
  o.default_input_hook = "mlp.hook_in";
  o.default_output_hook = "hook_mlp_out";
  const int64_t before = resident_bytes();
  const vocablens::TranscoderSet set = vocablens::load_transcoders(d, o);
  REQUIRE(set.n_layers == 2);
  CHECK(resident_bytes() - before < (int64_t{32} << 20));  // read whole for NaN/Inf, then given back
  const at::Tensor f = set.encode(0, at::ones({2, dm}));   // reads layer 0's encoder whole: 64 MB
  CHECK(resident_bytes() - before > (int64_t{48} << 20));
  set.release_pages(0);
  CHECK(resident_bytes() - before < (int64_t{32} << 20));
  CHECK(at::equal(set.encode(0, at::ones({2, dm})), f));  // read again from the file
}

TEST_CASE("release_pages leaves every set's values as they were (mapped files, a params.npz, a BF16 CLT)") {
  const std::string& fx = transcoder_fixtures();
  const auto cases = nlohmann::json::parse(vl_test::read_file(fx + "/cases.json"));
  const at::Tensor x = vl_test::load_npy_tensor(fx + "/x.npy");
  for (const auto& [name, c] : cases.items()) {
    INFO(name);
    const vocablens::TranscoderSet set = vocablens::load_transcoders(fx + "/" + name);
    std::vector<at::Tensor> f, rows;
    for (int64_t l = 0; l < 3; ++l) {
      f.push_back(set.encode(l, x[l]));
      rows.push_back(set.decoder_rows(l, 5));
    }
    // memory that is not a mapping's (a copied npz member) must be left alone, never zeroed
    for (int64_t l = 0; l < 3; ++l) set.release_pages(l);
    for (int64_t l = 0; l < 3; ++l) {
      CHECK(at::equal(set.encode(l, x[l]), f[static_cast<size_t>(l)]));
      CHECK(at::equal(set.decoder_rows(l, 5), rows[static_cast<size_t>(l)]));
      CHECK(f[static_cast<size_t>(l)].ne(0).any().item<bool>());
    }
  }
}

TEST_CASE("transcoder sets against a model's points: mlp.hook_out and post-MLP norms, blocks without ln2") {
  const std::string root = std::string(VOCABLENS_SOURCE_DIR) + "/tests/fixtures/families/";
  // A per-layer set of 4 features on d_model 64, for `layers` blocks, with the given hooks.
  auto make_set = [](int layers, const std::string& in, const std::string& out) {
    const std::string d = vl_test::temp_dir("tc-hooks");
    std::string data(static_cast<size_t>(4 * (4 * 64 * 2 + 4 + 64)), '\0');
    nlohmann::json h = {{"W_enc", {{"dtype", "F32"}, {"shape", {4, 64}}, {"data_offsets", {0, 1024}}}},
                        {"W_dec", {{"dtype", "F32"}, {"shape", {4, 64}}, {"data_offsets", {1024, 2048}}}},
                        {"b_enc", {{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {2048, 2064}}}},
                        {"b_dec", {{"dtype", "F32"}, {"shape", {64}}, {"data_offsets", {2064, 2320}}}}};
    for (int l = 0; l < layers; ++l)
      std::ofstream(d + "/layer_" + std::to_string(l) + ".safetensors", std::ios::binary) << vl_test::safetensors_bytes(h, data);
    std::ofstream(d + "/config.yaml") << "model_kind: transcoder_set\nfeature_input_hook: " << in
                                      << "\nfeature_output_hook: " << out << "\n";
    return vocablens::load_transcoders(d);
  };
  const auto gemma2 = vocablens::load_model(root + "gemma2");  // post-MLP norms
  vocablens::check_transcoders_fit(make_set(3, "ln2.hook_normalized", "hook_mlp_out"), gemma2);
  CHECK_THAT(tc_error([&] { vocablens::check_transcoders_fit(make_set(3, "ln2.hook_normalized", "mlp.hook_out"), gemma2); }),
             Catch::Contains("config.yaml: feature_output_hook 'mlp.hook_out' is the MLP's output before the post-MLP norm"));
  const auto llama = vocablens::load_model(root + "llama3");  // none: mlp.hook_out is hook_mlp_out
  const auto set = make_set(static_cast<int>(llama.config().n_layers), "mlp.hook_in", "mlp.hook_out");
  CHECK(set.output_hook(0) == "blocks.0.hook_mlp_out");
  vocablens::check_transcoders_fit(set, llama);
  const auto olmo2 = vocablens::load_model(root + "olmo2");  // no norm before the MLP
  CHECK_THAT(tc_error([&] { vocablens::check_transcoders_fit(make_set(2, "ln2.hook_normalized", "hook_mlp_out"), olmo2); }),
             Catch::Contains("config.yaml: feature_input_hook 'ln2.hook_normalized' (blocks.0.ln2.hook_normalized) is "
                             "not a point of") &&
                 Catch::Contains("no norm before its attention and MLP"));
  vocablens::check_transcoders_fit(make_set(2, "mlp.hook_in", "hook_mlp_out"), olmo2);
}

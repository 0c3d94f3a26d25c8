// Bad model input: every case gives one line naming the file and the problem, exit code != 0, no crash.
// Each case is checked through the API (FormatError type and text) and through `vocablens inspect`.
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "fixtures.hpp"
#include "tiny_gpt2.hpp"
#include "vocablens/error.hpp"
#include "vocablens/model.hpp"

namespace fs = std::filesystem;

namespace {

using vl_test::le64;
using vl_test::make_model_dir;
using vl_test::safetensors_bytes;
using vl_test::tiny_gpt2_config;

// Every tensor of the one-layer tiny GPT-2, float32 zeros, laid out back to back; shapes overridden or dropped.
std::string zero_gpt2_safetensors(std::map<std::string, std::vector<int64_t>> override_shapes = {},
                                  std::vector<std::string> drop = {}) {
  std::map<std::string, std::vector<int64_t>> shapes = {
      {"wte.weight", {10, 4}},
      {"wpe.weight", {8, 4}},
      {"ln_f.weight", {4}},
      {"ln_f.bias", {4}},
      {"h.0.ln_1.weight", {4}},
      {"h.0.ln_1.bias", {4}},
      {"h.0.ln_2.weight", {4}},
      {"h.0.ln_2.bias", {4}},
      {"h.0.attn.c_attn.weight", {4, 12}},
      {"h.0.attn.c_attn.bias", {12}},
      {"h.0.attn.c_proj.weight", {4, 4}},
      {"h.0.attn.c_proj.bias", {4}},
      {"h.0.mlp.c_fc.weight", {4, 16}},
      {"h.0.mlp.c_fc.bias", {16}},
      {"h.0.mlp.c_proj.weight", {16, 4}},
      {"h.0.mlp.c_proj.bias", {4}},
      {"h.0.attn.bias", {1, 1, 8, 8}}};  // the causal-mask buffer real files carry: must be ignored
  for (auto& [k, v] : override_shapes) shapes[k] = v;
  for (auto& k : drop) shapes.erase(k);
  nlohmann::json h = {{"__metadata__", {{"format", "pt"}}}};
  uint64_t off = 0;
  for (auto& [k, v] : shapes) {
    uint64_t n = 4;
    for (auto s : v) n *= static_cast<uint64_t>(s);
    h[k] = {{"dtype", "F32"}, {"shape", v}, {"data_offsets", {off, off + n}}};
    off += n;
  }
  return safetensors_bytes(h, std::string(off, '\0'));
}

// The API throws FormatError whose message names `file` and contains `problem`; the CLI prints exactly
// one line with both and exits non-zero (and not by a signal).
void expect_clean_failure(const std::string& model_path, const std::string& file, const std::string& problem) {
  INFO("model " << model_path << ", expecting '" << problem << "'");
  try {
    vocablens::load_model(model_path);
    FAIL("load_model accepted a bad model");
  } catch (const vocablens::FormatError& e) {
    std::string what = e.what();
    INFO("what(): " << what);
    CHECK(what.find(file) != std::string::npos);
    CHECK(what.find(problem) != std::string::npos);
    CHECK(what.find('\n') == std::string::npos);
  }
  std::string cli = vl_test::require_cli();
  if (cli.empty()) return;
  std::string out;
  int rc = vl_test::run_command(cli + " inspect '" + model_path + "'", out);
  INFO("CLI output: " << out);
  CHECK(rc == 1);
  CHECK(out.find(file) != std::string::npos);
  CHECK(out.find(problem) != std::string::npos);
  CHECK(std::count(out.begin(), out.end(), '\n') == 1);
}

}  // namespace

TEST_CASE("a well-formed hand-made checkpoint loads (the error cases below differ from it in one thing)") {
  std::string dir = make_model_dir("ok", tiny_gpt2_config().dump(), zero_gpt2_safetensors());
  auto m = vocablens::load_model(dir);
  CHECK(m.config().n_layers == 1);
  auto out = m.forward(at::tensor(std::vector<int64_t>{1, 2, 3}, at::kLong));
  CHECK(out.logits.sizes() == at::IntArrayRef({1, 3, 10}));
}

TEST_CASE("non-existent path") {
  expect_clean_failure("/nonexistent/model/dir", "/nonexistent/model/dir", "no such file or directory");
}

TEST_CASE("truncated safetensors file") {
  std::string full = zero_gpt2_safetensors();
  std::string dir = make_model_dir("trunc", tiny_gpt2_config().dump(), full.substr(0, full.size() - 100));
  expect_clean_failure(dir, dir + "/model.safetensors", "outside the data section");
  std::string dir2 = make_model_dir("trunc2", tiny_gpt2_config().dump(), full.substr(0, 5));
  expect_clean_failure(dir2, dir2 + "/model.safetensors", "truncated");
}

TEST_CASE("header length past the end of the file") {
  std::string dir = make_model_dir("hdrlen", tiny_gpt2_config().dump(), le64(1u << 20) + "{}");
  expect_clean_failure(dir, dir + "/model.safetensors", "runs past the end of the file");
  std::string dir2 = make_model_dir("hdrhuge", tiny_gpt2_config().dump(), le64(uint64_t(1) << 63) + "{}");
  expect_clean_failure(dir2, dir2 + "/model.safetensors", "exceeds the 100 MB limit");
}

TEST_CASE("overlapping and out-of-range offsets") {
  nlohmann::json h = {{"a", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0, 8}}}},
                      {"b", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {4, 12}}}}};
  std::string dir = make_model_dir("overlap", tiny_gpt2_config().dump(), safetensors_bytes(h, std::string(12, '\0')));
  expect_clean_failure(dir, dir + "/model.safetensors", "overlaps");
  nlohmann::json h2 = {{"a", {{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {0, 16}}}}};
  std::string dir2 = make_model_dir("range", tiny_gpt2_config().dump(), safetensors_bytes(h2, std::string(8, '\0')));
  expect_clean_failure(dir2, dir2 + "/model.safetensors", "outside the data section");
}

TEST_CASE("dtype/shape byte mismatch") {
  nlohmann::json h = {{"a", {{"dtype", "F32"}, {"shape", {3}}, {"data_offsets", {0, 8}}}}};
  std::string dir = make_model_dir("bytes", tiny_gpt2_config().dump(), safetensors_bytes(h, std::string(8, '\0')));
  expect_clean_failure(dir, dir + "/model.safetensors", "does not match shape");
  nlohmann::json h2 = {{"a", {{"dtype", "Q4"}, {"shape", {2}}, {"data_offsets", {0, 8}}}}};
  std::string dir2 = make_model_dir("dtype", tiny_gpt2_config().dump(), safetensors_bytes(h2, std::string(8, '\0')));
  expect_clean_failure(dir2, dir2 + "/model.safetensors", "unsupported dtype 'Q4'");
}

TEST_CASE("missing tensor") {
  std::string dir = make_model_dir("missing", tiny_gpt2_config().dump(), zero_gpt2_safetensors({}, {"h.0.mlp.c_fc.bias"}));
  expect_clean_failure(dir, dir + "/model.safetensors", "missing tensor 'h.0.mlp.c_fc.bias'");
}

TEST_CASE("shape disagreeing with config.json") {
  std::string dir = make_model_dir("shape", tiny_gpt2_config().dump(), zero_gpt2_safetensors({{"wpe.weight", {7, 4}}}));
  expect_clean_failure(dir, dir + "/model.safetensors", "tensor 'wpe.weight' has shape [7, 4]");
}

TEST_CASE("unknown architecture") {
  auto cfg = tiny_gpt2_config();
  cfg["architectures"] = {"MambaForCausalLM"};
  cfg["model_type"] = "mamba";
  std::string dir = make_model_dir("arch", cfg.dump(), zero_gpt2_safetensors());
  expect_clean_failure(dir, dir + "/config.json", "unknown architecture 'MambaForCausalLM'");
  // The same line names the family whose tensor table maps the checkpoint's names (here all of GPT-2's but the
  // causal-mask buffer), and what differs.
  expect_clean_failure(dir, dir + "/config.json",
                       "nearest supported family: gpt2 (GPT2LMHeadModel): 9 of 10 tensor name patterns map; "
                       "not in its table: h.{L}.attn.bias");
}

TEST_CASE("malformed JSON") {
  std::string dir = make_model_dir("json", "{\"n_layer\": 1,", zero_gpt2_safetensors());
  expect_clean_failure(dir, dir + "/config.json", "malformed JSON");
  std::string bad_header = le64(8) + "{\"a\":[1 ";
  std::string dir2 = make_model_dir("hjson", tiny_gpt2_config().dump(), bad_header);
  expect_clean_failure(dir2, dir2 + "/model.safetensors", "not valid JSON");
  std::string deep(100000, '[');
  std::string dir3 = make_model_dir("deep", deep, zero_gpt2_safetensors());
  expect_clean_failure(dir3, dir3 + "/config.json", "nested deeper than");
}

TEST_CASE("llama2.c .bin: truncated and inconsistent headers") {
  std::string src = vl_test::fixture("stories260K/stories260K.bin");
  if (src.empty()) return;
  std::string bytes = vl_test::read_file(src);
  std::string dir = vl_test::temp_dir("l2c");
  vl_test::write_file(dir + "/cut.bin", bytes.substr(0, bytes.size() / 2));
  expect_clean_failure(dir + "/cut.bin", dir + "/cut.bin", "truncated?");
  vl_test::write_file(dir + "/tiny.bin", bytes.substr(0, 10));
  expect_clean_failure(dir + "/tiny.bin", dir + "/tiny.bin", "truncated llama2.c checkpoint");
  std::string bad = bytes;
  int32_t heads = 7;  // does not divide dim 64
  std::memcpy(&bad[12], &heads, 4);
  vl_test::write_file(dir + "/heads.bin", bad);
  expect_clean_failure(dir + "/heads.bin", dir + "/heads.bin", "n_heads 7 does not divide dim 64");
}

TEST_CASE("directory without weights or config") {
  std::string dir = vl_test::temp_dir("empty");
  expect_clean_failure(dir, dir, "no config.json");
  vl_test::write_file(dir + "/config.json", tiny_gpt2_config().dump());
  expect_clean_failure(dir, dir, "no weights found");
}

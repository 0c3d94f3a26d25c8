// tests/fuzz_regression_test.cpp — inputs found by the libFuzzer harnesses (tests/fuzz/) stay fixed.
//
// 1. Every file under tests/fuzz/regressions/<harness>/ is replayed through exactly the code of that
//    harness (tests/fuzz/targets.hpp): it must be accepted or refused with a one-line vocablens::Error.
//    In the sanitizer build (scripts/sanitize.sh) this also re-checks for the memory errors / UB found.
// 2. Each bug found and fixed has a named test below with its minimised input embedded, asserting the
//    precise behaviour now expected.
// 3. The seed corpora (tests/fuzz/make_seeds.py) are checked to parse: a fuzzer that starts from
//    rejected seeds explores little.
#define VOCABLENS_FUZZ_WITH_TORCH
#include "fuzz/targets.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "fixtures.hpp"

namespace {

namespace fs = std::filesystem;

std::vector<std::string> files_under(const std::string& dir) {
  std::vector<std::string> out;
  if (!fs::is_directory(dir)) return out;
  for (auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename().string()[0] != '.') out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

const std::string kRegressions = std::string(VOCABLENS_SOURCE_DIR) + "/tests/fuzz/regressions";

void replay(const std::string& harness, int (*target)(const uint8_t*, size_t)) {
  for (const auto& f : files_under(kRegressions + "/" + harness)) {
    INFO(f);
    const std::string bytes = vl_test::read_file(f);
    CHECK(target(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()) == 0);
  }
}

std::string config_text(const std::string& fields) {
  return R"({"architectures": ["GPT2LMHeadModel"], "n_layer": 1, "n_head": 2, "vocab_size": 10, "n_positions": 8)" + fields + "}";
}

template <class F>
std::string format_error_of(F&& f) {
  try {
    f();
  } catch (const vocablens::FormatError& e) { return e.what(); }
  return "<no FormatError>";
}

}  // namespace

TEST_CASE("fuzz regressions: every saved input replays cleanly through its harness", "[fuzz]") {
  replay("fuzz_config", fuzz::config);
  replay("fuzz_safetensors", fuzz::safetensors);
  replay("fuzz_gguf", fuzz::gguf);
  replay("fuzz_torch_zip", fuzz::torch_zip);
  replay("fuzz_llama2c", fuzz::llama2c);
  replay("fuzz_bpe_files", fuzz::bpe_files);
  replay("fuzz_llama2c_tokenizer", fuzz::llama2c_tokenizer);
  replay("fuzz_results", fuzz::results);
  replay("fuzz_results_multi", fuzz::results_multi);
  replay("fuzz_spm_model", fuzz::spm_model);
  replay("fuzz_sae", fuzz::sae);
  replay("fuzz_transcoders", fuzz::transcoders);
  std::string gpt2 = vl_test::fixture("gpt2-tiny");
  if (gpt2.empty()) return;
  auto tok = vocablens::load_tokenizer(gpt2);
  for (const auto& f : files_under(kRegressions + "/fuzz_bpe_encode")) {
    INFO(f);
    const std::string bytes = vl_test::read_file(f);
    CHECK(fuzz::bpe_encode(*tok, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()) == 0);
  }
  for (const auto& f : files_under(kRegressions + "/fuzz_prompts_corpus")) {
    INFO(f);
    const std::string bytes = vl_test::read_file(f);
    CHECK(fuzz::prompts_corpus(*tok, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()) == 0);
  }
}

// Found by fuzz_config (UBSan: signed integer overflow in model_config.cpp, `4 * c.d_model`): a huge
// n_embd without n_inner computed the default MLP size before the range checks ran.
// Minimised input: tests/fuzz/regressions/fuzz_config/n_embd_overflow.json.
TEST_CASE("config.json: a huge n_embd is refused without overflowing the default MLP size", "[fuzz]") {
  for (const char* v : {"4611686018427387904", "9223372036854775807", "-9223372036854775808", "2305843009213693952"}) {
    std::string msg =
        format_error_of([&] { vocablens::parse_hf_config(config_text(std::string(", \"n_embd\": ") + v), "c.json"); });
    INFO(v << ": " << msg);
    // The message gives the value and the bound ("must be positive" was wrong for huge values).
    CHECK(msg.find(std::string("c.json: hidden size is ") + v + ";") == 0);
  }
}

// Found while fuzzing config.json: an unsigned value above INT64_MAX wrapped to a negative number, so
// "bos_token_id": 18446744073709551615 was silently read as -1 ("no BOS").
TEST_CASE("config.json: integers above INT64_MAX are refused, not wrapped", "[fuzz]") {
  std::string msg = format_error_of(
      [&] { vocablens::parse_hf_config(config_text(", \"n_embd\": 8, \"bos_token_id\": 18446744073709551615"), "c.json"); });
  CHECK(msg == "c.json: config field 'bos_token_id' is out of range");
  msg = format_error_of(
      [&] { vocablens::parse_hf_config(config_text(", \"n_embd\": 8, \"n_inner\": 9223372036854775808"), "c.json"); });
  CHECK(msg == "c.json: config field 'n_inner' is out of range");
}

// Found while fuzzing config.json: head_dim was accepted unchecked (0 or negative passed to the runner).
TEST_CASE("config.json: head_dim must be positive", "[fuzz]") {
  for (const char* v : {"0", "-4", "4294967296"}) {
    std::string text = R"({"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 1, "hidden_size": 8,
      "num_attention_heads": 2, "vocab_size": 10, "max_position_embeddings": 8, "intermediate_size": 16, "head_dim": )" +
                       std::string(v) + "}";
    std::string msg = format_error_of([&] { vocablens::parse_hf_config(text, "c.json"); });
    INFO(v);
    CHECK(msg.find("c.json: head_dim must be positive") == 0);
  }
}

// Found by fuzz_bpe_files (out-of-memory: a 32 GB allocation in bpe_tokenizer.cpp Builder::put): token ids
// index dense tables, so {"a": 1073741823} in a 20-byte vocab.json resized them to 2^30 entries.
// Minimised input: tests/fuzz/regressions/fuzz_bpe_files/huge_token_id.
TEST_CASE("vocab.json / tokenizer.json: an id far beyond the number of entries is refused", "[fuzz]") {
  std::string dir = vl_test::temp_dir("hugeid");
  vl_test::write_file(dir + "/vocab.json", R"({"a": 1073741823})");
  vl_test::write_file(dir + "/merges.txt", "#version: 0.2\n");
  std::string msg =
      format_error_of([&] { vocablens::BpeTokenizer::from_vocab_merges(dir + "/vocab.json", dir + "/merges.txt"); });
  CHECK(msg == dir + "/vocab.json: token a has id 1073741823, out of range (the file has only 1 entries)");
  vl_test::write_file(dir + "/tokenizer.json", R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
    "added_tokens": [{"id": 999999999, "content": "<x>"}], "pre_tokenizer": {"type": "ByteLevel"}})");
  msg = format_error_of([&] { vocablens::BpeTokenizer::from_tokenizer_json(dir + "/tokenizer.json"); });
  CHECK(msg.find(dir + "/tokenizer.json: token <x> has id 999999999, out of range") == 0);
  fs::remove_all(dir);
}

// Found by fuzz_config (the one-line property): "activation_function": "Jelu_\\...\new" decodes to a
// string with a newline, which the "unsupported activation function '...'" message quoted as is, so the
// error spanned two lines. Every vocablens::Error now escapes control characters in its message.
// Minimised input: tests/fuzz/regressions/fuzz_config/activation_with_newline.json.
TEST_CASE("errors quoting file contents stay on one line", "[fuzz]") {
  std::string msg = format_error_of([&] {
    vocablens::parse_hf_config(config_text(", \"n_embd\": 8, \"activation_function\": \"a\\nb\\r\\u0001c\""), "c.json");
  });
  CHECK(msg == "c.json: unsupported activation function 'a\\nb\\r\\x01c'");
  CHECK(vocablens::UsageError("x\ny").what() == std::string("x\\ny"));
  vocablens::FormatError fe("dir\n/file", "bad\tvalue");
  CHECK(std::string(fe.what()) == "dir\\n/file: bad\\tvalue");
  CHECK(fe.problem() == "bad\tvalue");  // the raw parts stay available
}

// Found by fuzz_bpe_files (an uncaught nlohmann::json::type_error ended the process): a value of an
// unexpected JSON type where the reader called json::value() — "model": {"type": 5} — escaped as a
// non-vocablens exception (the CLI would have said "internal error"). Minimised input:
// tests/fuzz/regressions/fuzz_bpe_files/model_type_not_a_string.
TEST_CASE("tokenizer.json: values of unexpected JSON types are one-line format errors", "[fuzz]") {
  std::string dir = vl_test::temp_dir("jsontype");
  const std::string path = dir + "/tokenizer.json";
  for (const char* text : {R"({"model": {"type": 5, "vocab": {"a": 0}, "merges": []}})",
                           R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "normalizer": 5})",
                           R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a a"], "ignore_merges": "yes"},
               "pre_tokenizer": {"type": "ByteLevel"}})",
                           R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a a"]},
               "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": "no"}})"}) {
    INFO(text);
    vl_test::write_file(path, text);
    std::string msg = format_error_of([&] { vocablens::BpeTokenizer::from_tokenizer_json(path); });
    CHECK(msg.find(path + ": ") == 0);
    CHECK(msg.find('\n') == std::string::npos);
  }
  // (The harness input itself is replayed by the first test case, with every saved input.)
}

// Found by fuzz_llama2c_tokenizer (a timeout-class input): building the merge-pair table cost O(len^2)
// per piece, one 60 KB piece 12 s under ASan. Input: tests/fuzz/regressions/fuzz_llama2c_tokenizer/.
TEST_CASE("llama2.c tokenizer: long pieces load in linear time", "[fuzz]") {
  std::string dir = vl_test::temp_dir("longpiece");
  std::string data;
  auto i32 = [&](int32_t v) { data.append(reinterpret_cast<const char*>(&v), 4); };
  auto piece = [&](const std::string& p) {
    float score = 0;
    data.append(reinterpret_cast<const char*>(&score), 4);
    i32(static_cast<int32_t>(p.size()));
    data += p;
  };
  i32(65536);
  for (const char* p : {"<unk>", "<s>", "</s>", "a", "aa"}) piece(p);
  for (int i = 0; i < 8; ++i) piece(std::string(65000 - i, 'a'));  // 8 x 64 KB: ~30 G byte-ops before the fix
  vl_test::write_file(dir + "/tok.bin", data);
  auto t0 = std::chrono::steady_clock::now();
  auto tok = vocablens::load_tokenizer(dir + "/tok.bin");
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(secs < 10);
  CHECK(tok->vocab_size() == 13);
  // The pair table is unchanged in meaning: "aaaa" still merges to ids of a/aa as before.
  CHECK(tok->encode("aaaa", {}).size() >= 2);
  fs::remove_all(dir);
}

// Found by fuzz_results (ASan heap-buffer-overflow): an inline array in a result JSON whose shape claims more
// elements than its data — {"shape": [6], "data": [0.7, 0.2, 0.1, 0.0]} — was copied by the shape, reading
// past the data. Input: tests/fuzz/regressions/fuzz_results/inline_array_shape_exceeds_data.
TEST_CASE("result JSON: inline arrays whose shape disagrees with their data are refused", "[fuzz]") {
  std::string dir = vl_test::temp_dir("inlinearr");
  auto write = [&](const std::string& array_entry, const std::string& tables = "[]") {
    vl_test::write_file(dir + "/r.json",
                        R"({"format": "vocablens.result", "format_version": 1, "kind": "k", "settings": {},
                            "provenance": {}, "summary": {}, "arrays": {"x": )" +
                            array_entry + R"(}, "tables": )" + tables + "}");
  };
  for (const char* entry : {R"({"dtype": "<f8", "shape": [6], "data": [0.7, 0.2, 0.1, 0.0]})",
                            R"({"dtype": "<f8", "shape": [2, -2], "data": [1, 2, 3, 4]})",
                            R"({"dtype": "<f8", "shape": [4294967296, 4294967296, 0], "data": []})",
                            R"({"dtype": "<f8", "shape": [2], "data": [1, 2, 3]})"}) {
    INFO(entry);
    write(entry);
    std::string msg = format_error_of([&] { vocablens::read_run_directory(dir); });
    CHECK(msg.find(dir + "/r.json: array 'x': ") == 0);
  }
  write(R"({"dtype": "<f8", "shape": [2, 2], "data": [[1, 2], [3, null]]})");
  auto rs = vocablens::read_run_directory(dir);
  REQUIRE(rs.size() == 1);
  CHECK(rs[0].arrays.at("x").shape == std::vector<int64_t>{2, 2});
  CHECK(std::isnan(vocablens::ndarray_value(rs[0].arrays.at("x"), 3)));
  CHECK(vocablens::ndarray_value(rs[0].arrays.at("x"), 2) == 3.0);
  // Inline table rows must have one cell per column (the report indexes rows by column).
  write(R"({"dtype": "<f8", "shape": [1], "data": [1]})", R"([{"name": "t", "columns": ["a", "b"], "rows": [[1, 2], [3]]}])");
  CHECK(format_error_of([&] { vocablens::read_run_directory(dir); }) == dir + "/r.json: table 't': row 2 has 1 cells, 2 columns");
  fs::remove_all(dir);
}

// Found by fuzz_results (an uncaught nlohmann out_of_range ended the process): a number beyond double's
// range in a result JSON, 55E555555555555555. Input: tests/fuzz/regressions/fuzz_results/json_number_overflow.
TEST_CASE("result JSON: numbers out of double's range are a one-line format error", "[fuzz]") {
  std::string dir = vl_test::temp_dir("jsonnum");
  vl_test::write_file(dir + "/r.json", R"({"format": "vocablens.result", "format_version": 1, "x": 55E555555555555555})");
  std::string msg = format_error_of([&] { vocablens::read_run_directory(dir); });
  CHECK(msg.find(dir + "/r.json: not valid JSON: ") == 0);
  CHECK(msg.find("number overflow") != std::string::npos);
  fs::remove_all(dir);
}

// Found by fuzz_results (an out-of-memory: the tick list grew without end): a line chart of values near
// ±1.8e308. The axis ticks were made by repeated `v += step`, which stops advancing when step is below
// the spacing of doubles at v. Input: tests/fuzz/regressions/fuzz_results/axis_ticks_near_dbl_max.
TEST_CASE("report: charts of values near the ends of double's range render", "[fuzz]") {
  for (std::vector<double> v :
       {std::vector<double>{1e304, 1e304 * (1 + 1e-15), 1e304}, std::vector<double>{-1.7e308, 1.7e308, 0.0},
        std::vector<double>{3.4e304, 3.4e304, 3.4000000000001e304, 1e-300}}) {
    vocablens::Result r;
    r.kind = "my_analysis";
    r.arrays["curve"] = vocablens::NdArray::f64({static_cast<int64_t>(v.size())}, v.data());
    auto t0 = std::chrono::steady_clock::now();
    std::string html = vocablens::render_report_html({r});
    CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 5);
    CHECK(html.find("<svg class=\"chart\"") != std::string::npos);
    CHECK(html.size() < 200000);
  }
}

// The seeds of tests/fuzz/make_seeds.py must be valid inputs (else the fuzzers explore little).
TEST_CASE("fuzz seeds: the hand-made seeds parse", "[fuzz]") {
  std::string fixtures = vl_test::fixtures_root();
  if (fixtures.empty()) {
    vl_test::fixture("gpt2-tiny");  // fails or skips loudly, as every fixture test does
    return;
  }
  std::string out = vl_test::temp_dir("seeds");
  std::string log;
  int rc = vl_test::run_command(
      "/usr/bin/python3 '" + std::string(VOCABLENS_SOURCE_DIR) + "/tests/fuzz/make_seeds.py' '" + fixtures + "' '" + out + "'",
      log);
  INFO(log);
  REQUIRE(rc == 0);
  auto st = vocablens::read_torch_zip(out + "/fuzz_torch_zip/handmade_state_dict.bin");
  CHECK(st.tensors.size() == 5);
  CHECK(st.get("t").sizes() == at::IntArrayRef({2, 2}));
  CHECK(st.get("b").scalar_type() == at::kFloat);  // F16 converted
  auto ck = vocablens::read_torch_zip(out + "/fuzz_torch_zip/handmade_ckpt.pt");
  CHECK(ck.metadata.value("model_args.dim", 0) == 4);
  CHECK(ck.has("model.w"));
  for (const char* f : {"f32.safetensors", "mixed.safetensors"})
    CHECK_NOTHROW(vocablens::read_safetensors(out + "/fuzz_safetensors/" + f));
  for (const char* f : {"gpt2.gguf", "llama-quant.gguf"}) {  // hand-written GGUF models load and run
    INFO(f);
    auto m = vocablens::load_model(out + "/fuzz_gguf/" + f);
    CHECK(m.config().vocab_size == 4);
    CHECK(m.forward(at::zeros({1, 2}, at::kLong)).logits.isfinite().all().item<bool>());
  }
  {
    const vocablens::GgufFile kq = vocablens::read_gguf(out + "/fuzz_gguf/kquants.gguf");
    CHECK(kq.tensors.size() == 9);
    // The MXFP4 seed: two valid blocks, then one whose scale byte is E8M0's NaN (0xFF).
    const vocablens::GgufTensorInfo* mx = kq.find("mxfp4");
    REQUIRE(mx != nullptr);
    CHECK(mx->type == vocablens::GgmlType::MXFP4);
    std::vector<float> v(96);
    vocablens::dequantize_row(mx->type, kq.tensor_data(*mx), v.data(), 96);
    CHECK(v[1] == 0.5f);  // block 0: scale byte 127 (2^-1), its byte 1 = 0x01: value 1 is code 1 (ggml's kvalue 1) x 2^-1
    for (int i = 0; i < 64; ++i) CHECK(std::isfinite(v[static_cast<size_t>(i)]));
    for (int i = 64; i < 96; ++i) CHECK(std::isnan(v[static_cast<size_t>(i)]));
  }
  for (const char* f : {"tiny_v0.bin", "tiny_v1.bin", "tiny_untied.bin"}) {
    INFO(f);
    auto m = vocablens::load_model(out + "/fuzz_llama2c/" + f);
    CHECK(m.config().vocab_size == 6);
  }
  for (const char* f : {"pair", "tokenizer_json", "tokenizer_json_split"}) {
    // Accepted by the reader: the harness input minus its 5-byte prefix.
    std::string bytes = vl_test::read_file(out + "/fuzz_bpe_files/" + f);
    std::string dir = out + "/bpe-" + f;
    fs::create_directories(dir);
    std::unique_ptr<vocablens::BpeTokenizer> tok;
    INFO(f);
    if (bytes[0] & 1) {
      vl_test::write_file(dir + "/tokenizer.json", bytes.substr(5));
      CHECK_NOTHROW(tok = vocablens::BpeTokenizer::from_tokenizer_json(dir + "/tokenizer.json"));
    } else {
      uint32_t n;
      std::memcpy(&n, bytes.data() + 1, 4);
      vl_test::write_file(dir + "/vocab.json", bytes.substr(5, n));
      vl_test::write_file(dir + "/merges.txt", bytes.substr(5 + n));
      CHECK_NOTHROW(tok = vocablens::BpeTokenizer::from_vocab_merges(dir + "/vocab.json", dir + "/merges.txt"));
    }
    // tokenizer_json has ByteLevel(add_prefix_space = true): decode shows the added space.
    if (tok) CHECK(tok->decode(tok->encode("the hello")) == (std::string(f) == "tokenizer_json" ? " the hello" : "the hello"));
  }
  for (const char* f : {"logit_lens", "spectrum", "heads", "generic"}) {
    // [u16 json][u16 npy][json][npy][csv]: split as the harness does and read back as a run directory.
    INFO(f);
    std::string bytes = vl_test::read_file(out + "/fuzz_results/" + f);
    const size_t nj = static_cast<uint8_t>(bytes[0]) | (static_cast<uint8_t>(bytes[1]) << 8);
    const size_t nn = static_cast<uint8_t>(bytes[2]) | (static_cast<uint8_t>(bytes[3]) << 8);
    std::string dir = out + "/run-" + f;
    fs::create_directories(dir);
    vl_test::write_file(dir + "/r.json", bytes.substr(4, nj));
    vl_test::write_file(dir + "/a.npy", bytes.substr(4 + nj, nn));
    vl_test::write_file(dir + "/t.csv", bytes.substr(4 + nj + nn));
    std::vector<vocablens::Result> rs;
    CHECK_NOTHROW(rs = vocablens::read_run_directory(dir));
    REQUIRE(rs.size() == 1);
    CHECK(rs[0].kind == (std::string(f) == "generic" ? "my_analysis" : f));
    CHECK(!rs[0].arrays.empty());
  }
  // fuzz_prompts_corpus: the prompts seeds are files read_lens_prompts accepts; every seed passes the harness's
  // properties (the corpus pieces concatenate to the file) in the normal build too.
  const std::string gpt2 = vl_test::fixture("gpt2-tiny");
  REQUIRE(!gpt2.empty());
  auto gpt2_tok = vocablens::load_tokenizer(gpt2);
  const std::vector<std::pair<const char*, size_t>> prompt_seeds = {
      {"prompts-jsonl", 4}, {"prompts-plain", 3}, {"prompts-escapes", 2}};
  for (auto [f, n] : prompt_seeds) {
    INFO(f);
    const std::string bytes = vl_test::read_file(out + "/fuzz_prompts_corpus/" + f);
    vl_test::write_file(out + "/prompts.txt", bytes.substr(1));
    CHECK(vocablens::read_lens_prompts(out + "/prompts.txt").size() == n);
  }
  for (const auto& f : files_under(out + "/fuzz_prompts_corpus")) {
    INFO(f);
    const std::string bytes = vl_test::read_file(f);
    CHECK(fuzz::prompts_corpus(*gpt2_tok, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()) == 0);
  }
  fs::remove_all(out);
}

// Tokenizers' files: the three GPT-2 layouts (encoder.json + vocab.bpe, tokenizer.json with either merges
// form) give one tokenizer, models find theirs, and missing or malformed files give one-line errors.
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "fixture_tokenizers.hpp"
#include "fixtures.hpp"
#include "vocablens/bpe_tokenizer.hpp"
#include "vocablens/error.hpp"
#include "vocablens/llama2c_tokenizer.hpp"
#include "vocablens/tokenizer.hpp"

using vocablens::BpeTokenizer;
using vocablens::EncodeOptions;
using vocablens::FormatError;
using vocablens::Llama2cTokenizer;
using json = nlohmann::json;

using vl_test::gpt2_tokenizer;

namespace {

std::vector<int64_t> ids_in(const json& j) { return j.get<std::vector<int64_t>>(); }

std::string hex_of_text(const std::string& s) {
  std::string out;
  char b[4];
  for (unsigned char c : s) std::snprintf(b, sizeof b, "%02x", c), out += b;
  return out;
}

/// Checks that f() throws FormatError whose what() is one line and names `path`.
template <class F>
void require_one_line_file_error(F&& f, const std::string& path, const std::string& needle = "") {
  try {
    f();
    FAIL("no FormatError for " << path);
  } catch (const FormatError& e) {
    std::string what = e.what();
    INFO(what);
    CHECK(what.find('\n') == std::string::npos);
    CHECK(what.find(path) != std::string::npos);
    if (!needle.empty()) CHECK(what.find(needle) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("GPT-2 BPE: the three file layouts give the same tokenizer", "[tokenizer][gpt2]") {
  std::string dir = vl_test::fixture("gpt2-tiny");
  std::string vec_path = vl_test::fixture("tokenizer/gpt2_vectors.json");
  if (dir.empty() || vec_path.empty()) return;
  std::string tmp = vl_test::temp_dir("tok-layouts");
  std::string vocab = vl_test::read_file(dir + "/vocab.json"), merges = vl_test::read_file(dir + "/merges.txt");

  // OpenAI layout: encoder.json + vocab.bpe (byte-identical contents, other names)
  vl_test::write_file(tmp + "/encoder.json", vocab);
  vl_test::write_file(tmp + "/vocab.bpe", merges);

  // Hugging Face tokenizer.json, merges once as "a b" strings, once as ["a", "b"] pairs (tokenizers >= 0.20)
  json vj = json::parse(vocab);
  json m_str = json::array(), m_pair = json::array();
  {
    std::istringstream in(merges);
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line.rfind("#version", 0) == 0) continue;
      m_str.push_back(line);
      auto sp = line.find(' ');
      m_pair.push_back(json::array({line.substr(0, sp), line.substr(sp + 1)}));
    }
  }
  auto tokenizer_json = [&](const json& merges_j, const json& pre) {
    return json{{"version", "1.0"},
                {"added_tokens", json::array({json{{"id", 50256},
                                                   {"content", "<|endoftext|>"},
                                                   {"single_word", false},
                                                   {"lstrip", false},
                                                   {"rstrip", false},
                                                   {"normalized", true},
                                                   {"special", true}}})},
                {"normalizer", nullptr},
                {"pre_tokenizer", pre},
                {"post_processor", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}}},
                {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}}},
                {"model",
                 {{"type", "BPE"},
                  {"dropout", nullptr},
                  {"unk_token", nullptr},
                  {"continuing_subword_prefix", ""},
                  {"end_of_word_suffix", ""},
                  {"fuse_unk", false},
                  {"vocab", vj},
                  {"merges", merges_j}}}}
        .dump();
  };
  json bytelevel = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  json split_seq = {
      {"type", "Sequence"},
      {"pretokenizers",
       json::array(
           {json{{"type", "Split"},
                 {"pattern", {{"Regex", R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)"}}},
                 {"behavior", "Isolated"},
                 {"invert", false}},
            json{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}};
  std::string hf1 = tmp + "/hf1", hf2 = tmp + "/hf2";
  REQUIRE(system(("mkdir -p " + hf1 + " " + hf2).c_str()) == 0);
  vl_test::write_file(hf1 + "/tokenizer.json", tokenizer_json(m_str, bytelevel));
  vl_test::write_file(hf2 + "/tokenizer.json", tokenizer_json(m_pair, split_seq));

  auto openai = vocablens::load_tokenizer_for(tmp);  // directory search finds encoder.json + vocab.bpe
  auto hf_str = vocablens::load_tokenizer_for(hf1);
  auto hf_pair = vocablens::load_tokenizer(hf2 + "/tokenizer.json");
  auto via_merges_file = vocablens::load_tokenizer(dir + "/merges.txt");
  CHECK(openai->source().find("encoder.json") != std::string::npos);
  CHECK(hf_str->source().find("tokenizer.json") != std::string::npos);
  for (auto* t : {openai.get(), hf_str.get(), hf_pair.get(), via_merges_file.get()}) {
    CHECK(t->kind() == "gpt2-bpe");
    CHECK(t->vocab_size() == 50257);
    CHECK(t->bos_id() == 50256);
  }
  json vectors = json::parse(vl_test::read_file(vec_path));
  for (const auto& v : vectors) {
    std::string text = v["text"].get<std::string>();
    auto want = ids_in(v["ids"]);
    INFO("hex " << hex_of_text(text));
    CHECK(openai->encode(text) == want);
    CHECK(hf_str->encode(text) == want);
    CHECK(hf_pair->encode(text) == want);
    CHECK(via_merges_file->encode(text) == want);
  }
  EncodeOptions special;
  special.special_tokens = true;
  CHECK(hf_str->encode("hello <|endoftext|>", special) == std::vector<int64_t>{31373, 220, 50256});
  CHECK(hf_str->is_special(50256));

  // add_prefix_space (HF ByteLevel option): "Hello" is encoded as " Hello"
  json prefixed = bytelevel;
  prefixed["add_prefix_space"] = true;
  std::string hf3 = tmp + "/hf3";
  REQUIRE(system(("mkdir -p " + hf3).c_str()) == 0);
  vl_test::write_file(hf3 + "/tokenizer.json", tokenizer_json(m_str, prefixed));
  CHECK(vocablens::load_tokenizer_for(hf3)->encode("Hello") == std::vector<int64_t>{18435});
  CHECK(vocablens::load_tokenizer_for(hf3)->encode(" Hello") == std::vector<int64_t>{18435});
}

TEST_CASE("models find their tokenizer", "[tokenizer]") {
  std::string root = vl_test::fixtures_root();
  if (vl_test::fixture("stories260K").empty() || vl_test::fixture("gpt2-tiny").empty()) return;
  CHECK(vocablens::load_tokenizer_for(root + "/gpt2-tiny")->kind() == "gpt2-bpe");
  CHECK(vocablens::load_tokenizer_for(root + "/gpt2-tiny/model.safetensors")->kind() == "gpt2-bpe");
  CHECK(vocablens::load_tokenizer_for(root + "/gpt2-tiny/vocab.json")->kind() == "gpt2-bpe");
  auto t = vocablens::load_tokenizer_for(root + "/stories260K/stories260K.bin");
  CHECK(t->kind() == "llama2c");
  CHECK(t->source() == root + "/stories260K/tok512.bin");
  CHECK(vocablens::load_tokenizer_for(root + "/stories260K")->vocab_size() == 512);
  CHECK(vocablens::load_tokenizer_for(root + "/stories260K/tok512.bin")->vocab_size() == 512);
  if (!vl_test::fixture("stories260K-hf").empty())
    CHECK(vocablens::load_tokenizer_for(root + "/stories260K-hf")->kind() == "llama2c");
  if (!vl_test::fixture("llama2xs").empty()) {
    CHECK(vocablens::load_tokenizer_for(root + "/llama2xs/model.bin")->kind() == "llama2c");
    CHECK(vocablens::load_tokenizer_for(root + "/llama2xs/ckpt.pt")->kind() == "llama2c");
  }
  // an explicit tokenizer wins
  CHECK(vocablens::load_tokenizer_for(root + "/stories260K/stories260K.bin", root + "/gpt2-tiny")->kind() == "gpt2-bpe");
  if (!vl_test::fixture("gpt2-tiny-prefixed").empty())
    require_one_line_file_error([&] { vocablens::load_tokenizer_for(root + "/gpt2-tiny-prefixed"); },
                                root + "/gpt2-tiny-prefixed", "no tokenizer found");
  require_one_line_file_error([&] { vocablens::load_tokenizer_for("/nonexistent/model"); }, "/nonexistent/model");
}

TEST_CASE("missing or malformed vocabulary files give a one-line FormatError naming the file", "[tokenizer]") {
  std::string dir = vl_test::fixture("gpt2-tiny");
  if (dir.empty()) return;
  std::string tmp = vl_test::temp_dir("tok-bad");
  const std::string merges = dir + "/merges.txt", vocab = dir + "/vocab.json";

  // missing files
  require_one_line_file_error([&] { BpeTokenizer::from_vocab_merges(tmp + "/nope.json", merges); }, tmp + "/nope.json",
                              "no such file");
  require_one_line_file_error([&] { BpeTokenizer::from_vocab_merges(vocab, tmp + "/nope.txt"); }, tmp + "/nope.txt",
                              "no such file");
  require_one_line_file_error([&] { Llama2cTokenizer::load(tmp + "/nope.bin"); }, tmp + "/nope.bin", "no such file");
  require_one_line_file_error([&] { BpeTokenizer::from_tokenizer_json(tmp + "/tokenizer.json"); }, tmp + "/tokenizer.json");

  // malformed vocab.json / merges.txt
  auto write = [&](const std::string& name, const std::string& bytes) {
    vl_test::write_file(tmp + "/" + name, bytes);
    return tmp + "/" + name;
  };
  std::string not_json = write("not_json.json", "{\"a\": 1,\n  oops");
  require_one_line_file_error([&] { BpeTokenizer::from_vocab_merges(not_json, merges); }, not_json, "not valid JSON");
  std::string array_json = write("array.json", "[1, 2, 3]");
  require_one_line_file_error([&] { BpeTokenizer::from_vocab_merges(array_json, merges); }, array_json);
  std::string bad_id = write("bad_id.json", "{\"a\": \"x\"}");
  require_one_line_file_error([&] { BpeTokenizer::from_vocab_merges(bad_id, merges); }, bad_id, "not an integer");
  std::string small = write("small.json", "{\"a\": 0, \"b\": 1}");
  require_one_line_file_error([&] { BpeTokenizer::from_vocab_merges(small, merges); }, small);
  std::string bad_merges = write("bad_merges.txt", "#version: 0.2\n\xC4\xA0 t\nthis line has three\n");
  require_one_line_file_error([&] { BpeTokenizer::from_vocab_merges(vocab, bad_merges); }, bad_merges, "line 3");
  std::string unknown_merge = write("unknown_merge.txt", "#version: 0.2\nqqqqzzz xxxyyy\n");
  require_one_line_file_error([&] { BpeTokenizer::from_vocab_merges(vocab, unknown_merge); }, unknown_merge, "line 2");
  std::string empty_merges = write("empty_merges.txt", "");
  require_one_line_file_error([&] { BpeTokenizer::from_vocab_merges(vocab, empty_merges); }, empty_merges);

  // malformed tokenizer.json
  std::string tj_bad = write("t1.json", "{\"model\": ");
  require_one_line_file_error([&] { BpeTokenizer::from_tokenizer_json(tj_bad); }, tj_bad, "not valid JSON");
  std::string tj_wp = write("t2.json", R"({"model": {"type": "WordPiece", "vocab": {"a": 0}}})");
  require_one_line_file_error([&] { BpeTokenizer::from_tokenizer_json(tj_wp); }, tj_wp, "WordPiece");
  std::string tj_nomodel = write("t3.json", R"({"version": "1.0"})");
  require_one_line_file_error([&] { vocablens::load_tokenizer(tj_nomodel); }, tj_nomodel);
  std::string tj_norm = write(
      "t4.json", R"({"normalizer": {"type": "BertNormalizer"}, "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})");
  require_one_line_file_error([&] { BpeTokenizer::from_tokenizer_json(tj_norm); }, tj_norm, "BertNormalizer");

  // a pair layout with one half missing
  std::string lonely = tmp + "/lonely";
  REQUIRE(system(("mkdir -p " + lonely).c_str()) == 0);
  vl_test::write_file(lonely + "/vocab.json", vl_test::read_file(vocab));
  require_one_line_file_error([&] { vocablens::load_tokenizer(lonely + "/vocab.json"); }, lonely + "/vocab.json", "merges.txt");

  // malformed llama2.c tokenizers
  std::string tok = vl_test::fixture("stories260K/tok512.bin");
  if (tok.empty()) return;
  std::string good = vl_test::read_file(tok);
  std::string empty_bin = write("empty.bin", "");
  require_one_line_file_error([&] { Llama2cTokenizer::load(empty_bin); }, empty_bin, "too short");
  std::string truncated = write("truncated.bin", good.substr(0, good.size() - 3));
  require_one_line_file_error([&] { Llama2cTokenizer::load(truncated); }, truncated);
  std::string cut_header = write("cut.bin", good.substr(0, 4 + 8 + 2));
  require_one_line_file_error([&] { Llama2cTokenizer::load(cut_header); }, cut_header);
  std::string garbage = write("garbage.bin", std::string(100, '\xFF'));
  require_one_line_file_error([&] { Llama2cTokenizer::load(garbage); }, garbage);
  // a model file is not a tokenizer
  std::string model = vl_test::fixture("stories260K/stories260K.bin");
  if (!model.empty()) require_one_line_file_error([&] { Llama2cTokenizer::load(model); }, model);
}

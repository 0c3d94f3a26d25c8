// The table families' tokenizers: Hugging Face tokenizer.json features beyond GPT-2 (SentencePiece-style BPE,
// normalizers, pre-tokenizer chains, added-token flags, BOS/EOS configuration), SentencePiece models through
// libsentencepiece, and tokenizers built from in-memory (GGUF) vocabulary data.
// Expected ids here are worked out by hand from the algorithms on tiny vocabularies; the agreement with real
// vocabularies and independent implementations (llama.cpp, transformers.js) is tests/tokenizer_refs.
#include <algorithm>
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "fixtures.hpp"
#include "vocablens/bpe_tokenizer.hpp"
#include "vocablens/error.hpp"
#include "vocablens/sentencepiece_tokenizer.hpp"
#include "vocablens/tokenizer.hpp"
#include "vocablens/vocab_spec.hpp"

using json = nlohmann::json;
using vocablens::EncodeOptions;
using vocablens::FormatError;
using Ids = std::vector<int64_t>;

namespace {

const std::string U = "\xE2\x96\x81";  // ▁

template <class F>
std::string format_error_of(F&& f) {
  try {
    f();
  } catch (const FormatError& e) { return e.what(); }
  return "(no FormatError)";
}

// A Llama-2-style vocabulary: <unk> <s> </s>, two byte-fallback pieces, characters and merged pieces.
json spm_vocab() {
  return json{{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}, {"<0x0A>", 3}, {"<0xC3>", 4}, {"<0xA9>", 5},
              {U, 6},       {"a", 7},   {"b", 8},    {U + "a", 9},  {"ab", 10},    {U + "ab", 11}};
}
json spm_merges() { return json::array({json::array({U, "a"}), "a b", json::array({U + "a", "b"})}); }

json spm_tokenizer_json(const json& normalizer, const json& pre, bool byte_fallback) {
  return json{{"added_tokens", json::array({json{{"id", 0}, {"content", "<unk>"}, {"special", true}},
                                            json{{"id", 1}, {"content", "<s>"}, {"special", true}},
                                            json{{"id", 2}, {"content", "</s>"}, {"special", true}}})},
              {"normalizer", normalizer},
              {"pre_tokenizer", pre},
              {"post_processor",
               {{"type", "TemplateProcessing"},
                {"single", json::array({json{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                        json{{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
                {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", json::array({1})}, {"tokens", json::array({"<s>"})}}}}}}},
              {"decoder", nullptr},
              {"model",
               {{"type", "BPE"},
                {"unk_token", "<unk>"},
                {"fuse_unk", true},
                {"byte_fallback", byte_fallback},
                {"vocab", spm_vocab()},
                {"merges", spm_merges()}}}};
}

json llama2_normalizer() {
  return json{{"type", "Sequence"},
              {"normalizers", json::array({json{{"type", "Prepend"}, {"prepend", U}},
                                           json{{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", U}}})}};
}

std::string write_dir(const std::string& tag, const json& tj, const json& cfg = nullptr) {
  std::string dir = vl_test::temp_dir(tag);
  vl_test::write_file(dir + "/tokenizer.json", tj.dump());
  if (!cfg.is_null()) vl_test::write_file(dir + "/tokenizer_config.json", cfg.dump());
  return dir;
}

}  // namespace

TEST_CASE("tokenizer.json: SentencePiece-style BPE (Prepend/Replace normalizer, byte fallback, unk)", "[tokenizer]") {
  auto dir = write_dir("spm-json", spm_tokenizer_json(llama2_normalizer(), nullptr, true));
  auto tok = vocablens::load_tokenizer(dir + "/tokenizer.json");
  CHECK(tok->kind() == "gpt2-bpe");
  CHECK(tok->bos_id() == 1);
  // "ab ab" -> "▁ab▁ab": ▁+a (rank 0) twice, then ▁a+b (rank 2) twice; BOS from the TemplateProcessing
  CHECK(tok->encode("ab ab") == Ids{1, 11, 11});
  EncodeOptions no_bos;
  no_bos.add_bos = false;
  CHECK(tok->encode("ab ab", no_bos) == Ids{11, 11});
  // "ba": ▁ + b a; no merge applies to (▁, b) or (b, a)
  CHECK(tok->encode("ba", no_bos) == Ids{6, 8, 7});
  // byte fallback: "\n" -> <0x0A>; "é" = C3 A9 -> <0xC3> <0xA9>
  CHECK(tok->encode("a\n", no_bos) == Ids{9, 3});
  CHECK(tok->encode("\xC3\xA9", no_bos) == Ids{6, 4, 5});
  // a character whose bytes lack pieces ("ü" = C3 BC: no <0xBC>) is <unk>; consecutive <unk> fuse
  CHECK(tok->encode("\xC3\xBC\xC3\xBC"
                    "a",
                    no_bos) == Ids{6, 0, 7});
  // decode: pieces' bytes, the normalizer's leading space removed, the default BOS left out
  CHECK(tok->decode(tok->encode("ab ab")) == "ab ab");
  CHECK(tok->decode(tok->encode("a\n\xC3\xA9")) == "a\n\xC3\xA9");
  CHECK(tok->display(11) ==
        "\xE2\x90\xA3"
        "ab");  // ␣ab
  CHECK(tok->piece(11) == U + "ab");
  CHECK(tok->token_to_id(" ab") == 11);
  // special tokens in text: only with the option, then the Prepend applies to each stretch (as in HF)
  EncodeOptions sp;
  sp.special_tokens = true;
  sp.add_bos = false;
  CHECK(tok->encode("ab</s>ab", sp) == Ids{11, 2, 11});

  // without byte_fallback the same character is <unk>
  auto dir2 = write_dir("spm-json-nofb", spm_tokenizer_json(llama2_normalizer(), nullptr, false));
  auto tok2 = vocablens::load_tokenizer(dir2);
  CHECK(tok2->encode("\xC3\xA9", no_bos) == Ids{6, 0});
}

TEST_CASE("tokenizer.json: Metaspace pre-tokenizer (prepend_scheme first, split)", "[tokenizer]") {
  json meta = {{"type", "Metaspace"}, {"replacement", U}, {"prepend_scheme", "first"}, {"split", true}};
  auto dir = write_dir("metaspace", spm_tokenizer_json(nullptr, meta, true));
  auto tok = vocablens::load_tokenizer(dir);
  EncodeOptions o;
  o.add_bos = false;
  CHECK(tok->encode("ab ab", o) == Ids{11, 11});
  CHECK(tok->encode(" ab", o) == Ids{11});            // no second ▁ when the text starts with a space
  CHECK(tok->encode("ab  ab", o) == Ids{11, 6, 11});  // split before every ▁: "▁ab" "▁" "▁ab"
  o.special_tokens = true;
  CHECK(tok->encode("</s>ab", o) == Ids{2, 10});  // "first": only the stretch at offset 0 gets the ▁
}

TEST_CASE("tokenizer.json: NFC normalizer, Split chain, added-token flags, tokenizer_config.json", "[tokenizer]") {
  std::string vocab_path = vl_test::fixture("gpt2-tiny/vocab.json");
  if (vocab_path.empty()) return;
  json vj = json::parse(vl_test::read_file(vocab_path));
  json merges = json::array();
  {
    std::istringstream in(vl_test::read_file(vl_test::fixture("gpt2-tiny/merges.txt")));
    std::string line;
    while (std::getline(in, line))
      if (!line.empty() && line.rfind("#version", 0) != 0) merges.push_back(line);
  }
  auto reference = vocablens::load_tokenizer_for(vl_test::fixture("gpt2-tiny"));
  json pre = {{"type", "Sequence"},
              {"pretokenizers", json::array({json{{"type", "Digits"}, {"individual_digits", true}},
                                             json{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}})}};
  json tj = {{"added_tokens", json::array({json{{"id", 50256}, {"content", "<|endoftext|>"}, {"special", true}, {"rstrip", true}},
                                           json{{"id", 50257}, {"content", "<tag>"}, {"special", false}, {"lstrip", true}}})},
             {"normalizer", {{"type", "NFC"}}},
             {"pre_tokenizer", pre},
             {"model", {{"type", "BPE"}, {"vocab", vj}, {"merges", merges}}}};
  json cfg = {{"add_bos_token", true}, {"bos_token", {{"content", "<|endoftext|>"}}}, {"eos_token", "<|endoftext|>"}};
  auto dir = write_dir("nfc", tj, cfg);
  auto tok = vocablens::load_tokenizer(dir);
  CHECK(tok->vocab_size() == 50258);
  EncodeOptions o;
  o.add_bos = false;
  // NFC: "e" + U+0301 becomes "é" before BPE
  CHECK(tok->encode("caf"
                    "e\xCC\x81",
                    o) == reference->encode("caf\xC3\xA9"));
  // Digits(individual) before GPT-2's expression: "2024" -> 2 0 2 4
  CHECK(tok->encode("2024", o) == Ids{17, 15, 17, 19});
  // BOS by tokenizer_config.json
  CHECK(tok->encode("a") == Ids{50256, 64});
  // "<tag>" (special=false) is always matched and swallows the spaces before it (lstrip)
  CHECK(tok->encode("a  <tag>b", o) == Ids{64, 50257, 65});
  // "<|endoftext|>" (special) only with the option; rstrip swallows the spaces after it
  CHECK(tok->encode("<|endoftext|>", o) != Ids{50256});
  o.special_tokens = true;
  CHECK(tok->encode("a<|endoftext|>  b", o) == Ids{64, 50256, 65});
  CHECK(tok->encode("a<|endoftext|>  b", o) != reference->encode("a<|endoftext|>  b", o));
}

TEST_CASE("tokenizer.json: unknown model types and unsupported features name themselves", "[tokenizer]") {
  std::string dir = vl_test::temp_dir("hf-bad");
  auto bad = [&](const std::string& name, const json& j, const std::string& needle) {
    std::string p = dir + "/" + name + ".json";
    vl_test::write_file(p, j.dump());
    std::string msg = format_error_of([&] { vocablens::load_tokenizer(p); });
    INFO(msg);
    CHECK(msg.find(p + ": ") == 0);
    CHECK(msg.find('\n') == std::string::npos);
    CHECK(msg.find(needle) != std::string::npos);
  };
  bad("unigram", {{"model", {{"type", "Unigram"}, {"vocab", json::array()}}}}, "\"Unigram\"");
  bad("precompiled",
      {{"normalizer", {{"type", "Precompiled"}}}, {"model", {{"type", "BPE"}, {"vocab", {{"a", 0}}}, {"merges", json::array()}}}},
      "Precompiled");
  bad("whitespace",
      {{"pre_tokenizer", {{"type", "WhitespaceSplit"}}},
       {"model", {{"type", "BPE"}, {"vocab", {{"a", 0}}}, {"merges", json::array()}}}},
      "WhitespaceSplit");
  bad("unk", {{"model", {{"type", "BPE"}, {"unk_token", "<unk>"}, {"vocab", {{"a", 0}}}, {"merges", json::array()}}}},
      "unk_token");
  // tokenizer.model: empty, not a protobuf
  for (const std::string& bytes : {std::string(), std::string("\x0a\xff\xff\xff\x0f garbage", 15)}) {
    std::string p = dir + "/tokenizer.model";
    vl_test::write_file(p, bytes);
    std::string msg = format_error_of([&] { vocablens::load_tokenizer_for(dir); });
    INFO(msg);
    CHECK(msg.find(p + ": ") == 0);
    CHECK(msg.find('\n') == std::string::npos);
    CHECK(msg.find("SentencePiece model") != std::string::npos);
  }
}

TEST_CASE("tokenizer_from_vocab: SentencePiece (llama) vocabulary through libsentencepiece", "[tokenizer]") {
  vocablens::VocabSpec v;
  v.source = "mem.gguf";
  v.model = "llama";
  v.tokens = {"<unk>", "<s>", "</s>", "<0x0A>", U, "a", "b", U + "a", "ab", U + "ab"};
  v.scores = {0, 0, 0, 0, -10, -11, -12, -2, -3, -1};
  v.token_types = {2, 3, 3, 6, 1, 1, 1, 1, 1, 1};
  v.bos_id = 1, v.eos_id = 2, v.unk_id = 0;
  auto tok = vocablens::tokenizer_from_vocab(v);
  CHECK(tok->kind() == "sentencepiece");
  CHECK(tok->vocab_size() == 10);
  // "ab ab" -> "▁ab▁ab": best pair ▁a (-2) leftmost, again, then ▁ab (-1) twice; BOS by default
  CHECK(tok->encode("ab ab") == Ids{1, 9, 9});
  EncodeOptions o;
  o.add_bos = false;
  o.add_eos = true;
  // ▁ b a, "\n" unknown (libsentencepiece falls back to bytes only when all 256 <0xNN> pieces exist), </s>
  CHECK(tok->encode("ba\n", o) == Ids{4, 6, 5, 0, 2});
  CHECK(tok->encode("c", EncodeOptions{false, false, false}) == Ids{4, 0});  // unknown character, no byte piece
  CHECK(tok->decode(Ids{1, 9, 9}) == "ab ab");
  CHECK(tok->token_bytes(4) == " ");
  CHECK(tok->display(1) == "<s>");
  CHECK(tok->is_special(1));
  CHECK(tok->token_to_id(" ab") == 9);
  o.special_tokens = true;
  o.add_eos = false;
  CHECK(tok->encode("ab</s>ab", o) == Ids{9, 2, 9});  // each stretch gets the dummy prefix, as llama.cpp does

  v.add_space_prefix = false;  // Gemma
  CHECK(vocablens::tokenizer_from_vocab(v)->encode("ab ab") == Ids{1, 8, 9});

  auto msg = [&](vocablens::VocabSpec w) { return format_error_of([&] { vocablens::tokenizer_from_vocab(w); }); };
  vocablens::VocabSpec w = v;
  w.scores.pop_back();
  CHECK(msg(w).find("mem.gguf: tokenizer.ggml.scores has 9 entries for 10 tokens") == 0);
  w = v;
  w.model = "rwkv";
  CHECK(msg(w).find("\"rwkv\"") != std::string::npos);
  w = v;
  w.unk_id = -1;
  w.token_types[0] = 3;
  CHECK(msg(w).find("unknown token") != std::string::npos);
}

TEST_CASE("tokenizer_from_vocab: byte-level (gpt2) vocabulary with a named pre-tokenizer", "[tokenizer]") {
  std::string vocab_path = vl_test::fixture("gpt2-tiny/vocab.json");
  if (vocab_path.empty()) return;
  json vj = json::parse(vl_test::read_file(vocab_path));
  vocablens::VocabSpec v;
  v.source = "gpt2.gguf";
  v.model = "gpt2";
  v.pre = "gpt-2";
  v.tokens.resize(vj.size());
  v.token_types.assign(vj.size(), 1);
  for (auto it = vj.begin(); it != vj.end(); ++it) v.tokens[it.value().get<size_t>()] = it.key();
  v.token_types[50256] = 3;
  std::istringstream in(vl_test::read_file(vl_test::fixture("gpt2-tiny/merges.txt")));
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line.rfind("#version", 0) != 0) v.merges.push_back(line);
  v.bos_id = v.eos_id = 50256;
  auto tok = vocablens::tokenizer_from_vocab(v);
  auto reference = vocablens::load_tokenizer_for(vl_test::fixture("gpt2-tiny"));
  for (const char* text : {"Hello world!", "The Eiffel Tower is in Paris.\n\n  x", "I'll 2024 \xE6\x97\xA5\xE6\x9C\xAC"})
    CHECK(tok->encode(text) == reference->encode(text));
  EncodeOptions o;
  o.special_tokens = true;
  CHECK(tok->encode("a<|endoftext|>", o) == Ids{64, 50256});
  // llama-bpe: Llama-3's expression (digits in groups of three) and BOS by default
  v.pre = "llama-bpe";
  auto l3 = vocablens::tokenizer_from_vocab(v);
  CHECK(l3->encode("12345") == Ids{50256, 10163, 2231});  // BOS "123" "45"
  v.pre = "no-such-pre";
  std::string msg = format_error_of([&] { vocablens::tokenizer_from_vocab(v); });
  CHECK(msg.find("gpt2.gguf: unknown pre-tokenizer \"no-such-pre\"") == 0);
  CHECK(msg.find("llama-bpe") != std::string::npos);
  // a vocabulary without tokens for bytes that never occur in UTF-8 (GPT-NeoX): loads; such input is refused
  v.pre = "gpt-2";
  auto it = std::find(v.tokens.begin(), v.tokens.end(), "\xC3\x80");  // byte 0xC0 in GPT-2's alphabet ("À")
  REQUIRE(it != v.tokens.end());
  v.token_types[it - v.tokens.begin()] = 5;
  *it = "[unused]";
  v.merges.erase(std::remove_if(v.merges.begin(), v.merges.end(),
                                [](const std::string& m) { return m.find("\xC3\x80") != std::string::npos; }),
                 v.merges.end());
  auto neox = vocablens::tokenizer_from_vocab(v);
  CHECK(neox->encode("abc") == reference->encode("abc"));
  CHECK_THROWS_AS(neox->encode("a\xC0"), vocablens::UsageError);
}

TEST_CASE("tokenizer_from_vocab: gemma4 (SentencePiece-style BPE with merges, newline runs whole)", "[tokenizer]") {
  vocablens::VocabSpec v;
  v.source = "g4.gguf";
  v.model = "gemma4";
  v.tokens = {"<pad>", "<eos>", "<bos>", "<unk>", "\n", "\n\n", U, "a", "b", U + "b", "<0x63>", "<start>"};
  v.token_types = {3, 3, 3, 3, 1, 1, 1, 1, 1, 1, 6, 3};
  v.merges = {U + " b"};
  v.bos_id = 2, v.eos_id = 1, v.unk_id = 3;
  auto tok = vocablens::tokenizer_from_vocab(v);
  // "a b\n\nbc" -> "a▁b" "\n\n" "bc": a ▁b | \n\n whole | b <0x63> (byte fallback); BOS by default
  CHECK(tok->encode("a b\n\nbc") == Ids{2, 7, 9, 5, 8, 10});
  EncodeOptions o;
  o.special_tokens = true;
  o.add_bos = false;
  CHECK(tok->encode("<start> b", o) == Ids{11, 9});  // no dummy prefix (Gemma)
  CHECK(tok->decode(Ids{7, 9, 5}) == "a b\n\n");
}

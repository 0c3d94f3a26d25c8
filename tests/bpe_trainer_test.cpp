// The BPE trainer: GPT-2-style byte-level files that vocablens's own tokenizer reads and encodes exactly
// as the trainer segmented the text.
#include <nlohmann/json.hpp>

#include "fixtures.hpp"
#include "vocablens/bpe_tokenizer.hpp"
#include "vocablens/bpe_trainer.hpp"
#include "vocablens/error.hpp"
#include "vocablens/synthetic.hpp"
#include "vocablens/tokenizer.hpp"

namespace {

std::string sample_text() {
  std::string t;
  for (int i = 0; i < 40; ++i)
    t += "the capital of france is paris\nthe cat sat on the mat, the cat is fat.\nhello world 123 456!\n";
  t += "café naïve — unicode ok\n";
  return t;
}

}  // namespace

TEST_CASE("gpt2_spelling follows bytes_to_unicode", "[bpe_trainer]") {
  CHECK(vocablens::gpt2_spelling(" paris") == "\xC4\xA0paris");         // Ġparis
  CHECK(vocablens::gpt2_spelling("\n") == "\xC4\x8A");                  // Ċ
  CHECK(vocablens::gpt2_spelling(std::string(1, '\0')) == "\xC4\x80");  // Ā (U+0100)
  CHECK(vocablens::gpt2_spelling("a!~") == "a!~");
}

TEST_CASE("gpt2_pretokenize splits like GPT-2", "[bpe_trainer]") {
  auto p = vocablens::gpt2_pretokenize("the cat's 12 hats!\n\nok");
  // "\n\nok": \s+(?!\S) takes the first newline, \s+ the second, then "ok" (as GPT-2's encoder.py).
  std::vector<std::string> want = {"the", " cat", "'s", " 12", " hats", "!", "\n", "\n", "ok"};
  CHECK(p == want);
}

TEST_CASE("train_bpe: vocabulary layout, sizes and determinism", "[bpe_trainer]") {
  vocablens::BpeTrainerOptions o;
  o.vocab_size = 300;
  auto v = vocablens::train_bpe(sample_text(), o);
  REQUIRE(v.size() <= 300);
  CHECK(v.size() == 300);  // plenty of pairs: the size is reached
  for (int b = 0; b < 256; ++b) CHECK(v.tokens[static_cast<size_t>(b)] == std::string(1, static_cast<char>(b)));
  CHECK(v.endoftext_id == v.size() - 1);
  CHECK(v.tokens.back() == "<|endoftext|>");
  CHECK(static_cast<int64_t>(v.merges.size()) >= v.size() - 257);
  for (size_t r = 0; r < v.merges.size(); ++r) {
    // every merge's result is a token
    bool found = false;
    for (auto& t : v.tokens) found |= t == v.merges[r].first + v.merges[r].second;
    CHECK(found);
  }
  auto w = vocablens::train_bpe(sample_text(), o);
  CHECK(w.vocab_json() == v.vocab_json());
  CHECK(w.merges_txt() == v.merges_txt());
  CHECK(v.merges_txt().rfind("#version: 0.2\n", 0) == 0);
}

TEST_CASE("train_bpe: min_frequency stops merging rare pairs", "[bpe_trainer]") {
  vocablens::BpeTrainerOptions o;
  o.vocab_size = 5000;
  o.min_frequency = 2;
  auto v = vocablens::train_bpe("abcdef abcdef xyz", o);
  // "abcdef" (and " abcdef" pieces) occur twice; "xyz" once: x-y and y-z are never merged.
  for (auto& m : v.merges) {
    CHECK(m.first + m.second != "xy");
    CHECK(m.first + m.second != " x");
  }
  o.min_frequency = 1;
  auto all = vocablens::train_bpe("abcdef abcdef xyz", o);
  CHECK(all.size() > v.size());
}

TEST_CASE("trained files load in BpeTokenizer and encode as the trainer segments", "[bpe_trainer]") {
  vocablens::BpeTrainerOptions o;
  o.vocab_size = 330;
  const std::string text = sample_text();
  auto v = vocablens::train_bpe(text, o);
  std::string dir = vl_test::temp_dir("bpe");
  v.write(dir);
  auto tok = vocablens::load_tokenizer_for(dir);
  REQUIRE(tok->kind() == "gpt2-bpe");
  CHECK(tok->vocab_size() == v.size());
  CHECK(tok->eos_id() == v.endoftext_id);
  CHECK(tok->is_special(v.endoftext_id));
  std::vector<int64_t> want;
  for (auto& piece : vocablens::gpt2_pretokenize(text))
    for (int64_t id : v.segment(piece)) want.push_back(id);
  auto got = tok->encode(text);
  CHECK(got == want);
  CHECK(tok->decode(got) == text);
  // Frequent words became single tokens.
  for (const char* w : {" capital", " paris", "the", " cat"}) {
    INFO(w);
    CHECK(tok->token_to_id(w).has_value());
  }
  // Bytes never seen in training still round-trip (byte-level fallback).
  std::string odd = "zebra \x01\xff QUIZ";
  CHECK(tok->decode(tok->encode(odd)) == odd);
  // vocab.json is a {spelling: id} object in id order, as Hugging Face writes it.
  auto j = nlohmann::json::parse(vl_test::read_file(dir + "/vocab.json"));
  CHECK(j.size() == static_cast<size_t>(v.size()));
  CHECK(j["\xC4\xA0paris"].get<int64_t>() == *tok->token_to_id(" paris"));
}

TEST_CASE("train_bpe: the synthetic corpus's words are single tokens at the default size", "[bpe_trainer]") {
  vocablens::SyntheticOptions so;
  so.lines = 20000;
  auto c = vocablens::synthetic_corpus(so);
  vocablens::BpeTrainerOptions o;  // vocab_size 1024
  auto v = vocablens::train_bpe(c.text, o);
  CHECK(v.size() < 1024);  // merging stopped because every word was whole
  CHECK(v.size() > 300);
  std::string dir = vl_test::temp_dir("bpe-syn");
  v.write(dir);
  auto tok = vocablens::load_tokenizer_for(dir);
  for (auto& w : c.words) {
    INFO(w);  // line-initial words ("we", "count") have no leading space
    CHECK((tok->token_to_id(" " + w).has_value() || tok->token_to_id(w).has_value()));
  }
  for (auto& [w, cls] : c.classes) {
    INFO(w);  // every entity, attribute and number occurs after a space
    CHECK(tok->token_to_id(" " + w).has_value());
  }
}

TEST_CASE("train_bpe: bad options", "[bpe_trainer]") {
  vocablens::BpeTrainerOptions o;
  o.vocab_size = 256;
  CHECK_THROWS_AS(vocablens::train_bpe("abc", o), vocablens::UsageError);
  o.add_endoftext = false;
  CHECK_NOTHROW(vocablens::train_bpe("abc", o));
  o.min_frequency = 0;
  CHECK_THROWS_AS(vocablens::train_bpe("abc", o), vocablens::UsageError);
  o.min_frequency = 1;
  auto v = vocablens::train_bpe("", o);
  CHECK(v.size() == 256);
  CHECK(v.merges.empty());
}

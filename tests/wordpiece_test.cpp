// WordPiece: the BERT tokenizer on hand-made vocabularies (every expected id worked out by hand from BERT's
// rules), its bad input, the vocabulary trainer, and `train --tokenizer-algo wordpiece`. The id-for-id check
// against transformers.js on real text is tests/wordpiece_crosscheck/ (CTest wordpiece_crosscheck).
#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "fixtures.hpp"
#include "vocablens/error.hpp"
#include "vocablens/synthetic.hpp"
#include "vocablens/tokenizer.hpp"
#include "vocablens/train.hpp"
#include "vocablens/wordpiece_tokenizer.hpp"
#include "vocablens/wordpiece_trainer.hpp"

namespace {

// id = position
const std::vector<std::string> kVocab = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un",    "##aff", "##able",
                                         "want",  "##ed",  "runn",  "##ing", ",",      "!",     "cafe",  "東",
                                         "京",    "a",     "##a",   "σας",   "the",    "hello", "."};

std::string write_vocab(const std::string& tag, const std::vector<std::string>& v, const std::string& config = "") {
  const std::string dir = vl_test::temp_dir(tag);
  std::string txt;
  for (auto& t : v) txt += t + "\n";
  vl_test::write_file(dir + "/vocab.txt", txt);
  if (!config.empty()) vl_test::write_file(dir + "/tokenizer_config.json", config);
  return dir;
}

std::vector<int64_t> enc(const vocablens::Tokenizer& t, const std::string& s) {
  vocablens::EncodeOptions o;
  return t.encode(s, o);
}

}  // namespace

TEST_CASE("wordpiece: greedy longest match first, ## pieces, [UNK], BERT's pre-tokenization", "[wordpiece]") {
  const std::string dir = write_vocab("wp_basic", kVocab);
  auto tok = vocablens::load_tokenizer(dir);  // a directory with vocab.txt: WordPiece
  REQUIRE(tok->kind() == "wordpiece");
  CHECK(tok->vocab_size() == static_cast<int64_t>(kVocab.size()));
  CHECK(enc(*tok, "unaffable") == std::vector<int64_t>{5, 6, 7});                    // un ##aff ##able
  CHECK(enc(*tok, "UNwanted,running!") == std::vector<int64_t>{1, 12, 10, 11, 13});  // unwanted: no "##want" -> [UNK]
  CHECK(enc(*tok, "wanted") == std::vector<int64_t>{8, 9});
  CHECK(enc(*tok, "  Café\t\n") == std::vector<int64_t>{14});  // lower-cased, accent stripped
  CHECK(enc(*tok, "東京") == std::vector<int64_t>{15, 16});    // CJK: one word per ideograph
  CHECK(enc(*tok, "aaa") == std::vector<int64_t>{17, 18, 18});
  CHECK(enc(*tok,
            "a\x01"
            "a\xEF\xBF\xBD"
            "a") == std::vector<int64_t>{17, 18, 18});                // controls and U+FFFD removed
  CHECK(enc(*tok, "ΣΑΣ") == std::vector<int64_t>{19});                // final sigma: σας
  CHECK(enc(*tok, "hello.the") == std::vector<int64_t>{21, 22, 20});  // punctuation splits words
  CHECK(enc(*tok, "xyz") == std::vector<int64_t>{1});
  // max_input_chars_per_word (100): a longer word is one [UNK] even when it could be covered
  CHECK(enc(*tok, std::string(100, 'a')).size() == 100);
  CHECK(enc(*tok, std::string(101, 'a')) == std::vector<int64_t>{1});
  // special tokens: [CLS]/[SEP] as bos/eos, and in text only when asked
  CHECK(tok->bos_id() == 2);
  CHECK(tok->eos_id() == 3);
  vocablens::EncodeOptions both;
  both.add_bos = true;
  both.add_eos = true;
  CHECK(tok->encode("the", both) == std::vector<int64_t>{2, 20, 3});
  vocablens::EncodeOptions sp;
  sp.special_tokens = true;
  CHECK(tok->encode("the [MASK] hello", sp) == std::vector<int64_t>{20, 4, 21});
  CHECK(enc(*tok, "[MASK]").size() == 3);  // otherwise "[", "mask" ([UNK]), "]"
  CHECK(tok->decode({5, 6, 7, 13, 20}) == "unaffable ! the");
  CHECK(tok->piece(6) == "##aff");
  CHECK(tok->token_bytes(6) == "aff");
  CHECK(tok->token_to_id("##able") == 7);
  CHECK(tok->is_special(1));
  CHECK_FALSE(tok->is_special(20));
}

TEST_CASE("wordpiece: tokenizer_config.json decides lower-casing and accents", "[wordpiece]") {
  std::vector<std::string> v = kVocab;
  v.push_back("Café");
  v.push_back("The");
  const std::string cased = write_vocab("wp_cased", v, R"({"do_lower_case": false})");
  auto tok = vocablens::load_tokenizer(cased + "/vocab.txt");
  CHECK(enc(*tok, "Café The the") == std::vector<int64_t>{23, 24, 20});
  const std::string strip = write_vocab("wp_strip", v, R"({"do_lower_case": false, "strip_accents": true})");
  auto tok2 = vocablens::load_tokenizer(strip);
  CHECK(enc(*tok2, "Café") == std::vector<int64_t>{1});  // "Cafe": not in the vocabulary
  const std::string keep = write_vocab("wp_keep", v, R"({"do_lower_case": true, "strip_accents": false})");
  auto tok3 = vocablens::load_tokenizer(keep);
  CHECK(enc(*tok3, "CAFE") == std::vector<int64_t>{14});
  CHECK(enc(*tok3, "café") == std::vector<int64_t>{1});
}

TEST_CASE("wordpiece: bad vocabularies are refused with one line naming the file", "[wordpiece]") {
  std::vector<std::string> v = kVocab;
  v.erase(v.begin() + 1);  // no [UNK]
  const std::string dir = write_vocab("wp_nounk", v);
  try {
    vocablens::load_tokenizer(dir + "/vocab.txt");
    FAIL("expected FormatError");
  } catch (const vocablens::FormatError& e) {
    const std::string m = e.what();
    CHECK(m.find(dir + "/vocab.txt") != std::string::npos);
    CHECK(m.find("[UNK]") != std::string::npos);
    CHECK(m.find('\n') == std::string::npos);
  }
  const std::string bad = write_vocab("wp_badmax", kVocab, R"({"max_input_chars_per_word": 0})");
  CHECK_THROWS_AS(vocablens::load_tokenizer(bad), vocablens::FormatError);
}

TEST_CASE("wordpiece trainer: specials, alphabet, likelihood merges; the training words never become [UNK]",
          "[wordpiece][train]") {
  vocablens::SyntheticOptions so;
  so.lines = 3000;
  const std::string text = vocablens::strip_prompt_markers(vocablens::synthetic_corpus(so).text);
  vocablens::WordPieceTrainerOptions o;
  o.vocab_size = 300;
  vocablens::WordPieceVocabulary v = vocablens::train_wordpiece(text, o);
  REQUIRE(v.size() == 300);
  CHECK(v.tokens[0] == "[PAD]");
  CHECK(v.tokens[1] == "[UNK]");
  CHECK(v.tokens[4] == "[MASK]");
  CHECK(v.merges >= 300 - 5 - v.alphabet);
  // likelihood, not frequency: cohesive rare words ("stockholm") come before frequent ones made of frequent parts
  auto has = [&](const std::string& t) { return std::find(v.tokens.begin(), v.tokens.end(), t) != v.tokens.end(); };
  CHECK(has("stockholm"));
  CHECK_FALSE(has("the"));
  const std::string dir = vl_test::temp_dir("wp_trained");
  v.write(dir);
  auto tok = vocablens::load_tokenizer(dir);
  REQUIRE(tok->kind() == "wordpiece");
  auto ids = tok->encode(text.substr(0, 20000));
  CHECK(std::count(ids.begin(), ids.end(), int64_t(1)) == 0);
  // with room for every merge, each word seen at least twice (min_frequency 2) becomes one token
  vocablens::WordPieceTrainerOptions big;
  big.vocab_size = 5000;
  auto vb = vocablens::train_wordpiece(text, big);
  CHECK(vb.size() < 5000);  // stopped when no pair occurred twice
  const std::string dirb = vl_test::temp_dir("wp_trained_big");
  vb.write(dirb);
  CHECK(vocablens::load_tokenizer(dirb)->encode("the capital of france is paris").size() == 6);
  // a word longer than max_input_chars_per_word is not learned, and counted
  vocablens::WordPieceVocabulary w = vocablens::train_wordpiece(text.substr(0, 5000) + " " + std::string(150, 'q'), o);
  CHECK(w.skipped_long_words == 1);
  CHECK(w.first_skipped == std::string(150, 'q'));
}

TEST_CASE("wordpiece trainer: the merge order of a corpus worked out by hand", "[wordpiece][train]") {
  // units: a 3, ##b 3, c 2, ##d 2, x 1, ##y 1; pairs: (a, ##b) 3 -> 3 / (3 * 3) = 1/3, (c, ##d) 2 -> 2 / (2 * 2) =
  // 1/2, (x, ##y) 1 < min_frequency. So "cd" first (higher score despite the lower count), then "ab", then none.
  vocablens::WordPieceTrainerOptions o;
  o.vocab_size = 100;
  vocablens::WordPieceVocabulary v = vocablens::train_wordpiece("ab ab AB cd cd xy", o);
  CHECK(v.alphabet == 6);
  REQUIRE(v.size() == 5 + 6 + 2);
  CHECK(v.tokens[5] == "##b");  // alphabet sorted: ##b ##d ##y a c x
  CHECK(v.tokens[8] == "a");
  CHECK(v.tokens[11] == "cd");
  CHECK(v.tokens[12] == "ab");
  CHECK(v.merges == 2);
}

TEST_CASE("train --tokenizer-algo wordpiece: a GPT over a trained WordPiece; long words reported", "[wordpiece][cli]") {
  const std::string cli = vl_test::cli_path();
  REQUIRE_FALSE(cli.empty());
  const std::string corpus = vl_test::temp_dir("wp_corpus") + "/c.txt";
  std::string text;
  for (int i = 0; i < 300; ++i) text += "the capital of france is paris and the dog says woof\n";
  text += std::string(120, 'z') + "\n";
  vl_test::write_file(corpus, text);
  const std::string out = vl_test::temp_dir("wp_gpt");
  std::string log;
  const int rc = vl_test::run_command(cli + " train --model gpt -q --corpus " + corpus +
                                          " --tokenizer-algo wordpiece --vocab-size 60 --steps 3 --ctx 8 --batch 2 --d-model 16"
                                          " --layers 1 --heads 2 --out " +
                                          out + "/m 2>&1",
                                      log);
  INFO(log);
  REQUIRE(rc == 0);
  CHECK(std::filesystem::exists(out + "/m/vocab.txt"));
  CHECK_FALSE(std::filesystem::exists(out + "/m/vocab.json"));
  CHECK(log.find("longer than max_input_chars_per_word (100 characters)") != std::string::npos);
  auto tok = vocablens::load_tokenizer_for(out + "/m");
  CHECK(tok->kind() == "wordpiece");
  CHECK(vocablens::load_tokenizer(out + "/m")->vocab_size() == 60);
}

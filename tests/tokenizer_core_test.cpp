// Tokenizers: the fixture vectors (GPT-2 BPE, special tokens, llama2.c tok512), round trips of arbitrary
// bytes, display forms and look-ups. The files they are read from: tokenizer_files_core_test.cpp.
#include <algorithm>
#include <fstream>
#include <map>
#include <random>
#include <thread>

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
using vocablens::Tokenizer;
using vocablens::UsageError;
using json = nlohmann::json;

using vl_test::gpt2_tokenizer;
using vl_test::tok512_tokenizer;

namespace {

std::vector<int64_t> ids_of(const json& j) { return j.get<std::vector<int64_t>>(); }

std::string hex_of(const std::string& s) {
  std::string out;
  char b[4];
  for (unsigned char c : s) std::snprintf(b, sizeof b, "%02x", c), out += b;
  return out;
}

/// merges.txt as (left, right) -> rank, for the naive oracle below.
std::map<std::pair<std::string, std::string>, size_t> read_ranks(const std::string& merges_path) {
  std::map<std::pair<std::string, std::string>, size_t> ranks;
  std::ifstream f(merges_path);
  std::string line;
  size_t r = 0;
  while (std::getline(f, line)) {
    if (line.empty() || line.rfind("#version", 0) == 0) continue;
    auto sp = line.find(' ');
    ranks[{line.substr(0, sp), line.substr(sp + 1)}] = r++;
  }
  return ranks;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------

TEST_CASE("GPT-2 BPE: all 340 fixture vectors encode and decode exactly", "[tokenizer][gpt2]") {
  auto path = vl_test::fixture("tokenizer/gpt2_vectors.json");
  if (path.empty() || !gpt2_tokenizer()) return;
  json vectors = json::parse(vl_test::read_file(path));
  REQUIRE(vectors.size() == 340);
  size_t ok = 0;
  for (const auto& v : vectors) {
    std::string text = v["text"].get<std::string>();
    std::vector<int64_t> want = ids_of(v["ids"]);
    std::vector<int64_t> got = gpt2_tokenizer()->encode(text);
    INFO("text hex " << hex_of(text) << " source " << v["source"].get<std::string>());
    CHECK(got == want);
    CHECK(gpt2_tokenizer()->decode(want) == text);
    ok += got == want;
  }
  CHECK(ok == 340);
}

TEST_CASE("GPT-2 BPE: <|endoftext|> as a special token only when asked", "[tokenizer][gpt2]") {
  auto path = vl_test::fixture("tokenizer/gpt2_special_tokens.json");
  if (path.empty() || !gpt2_tokenizer()) return;
  json vectors = json::parse(vl_test::read_file(path));
  REQUIRE(vectors.size() == 3);
  EncodeOptions special;
  special.special_tokens = true;
  for (const auto& v : vectors) {
    std::string text = v["text"].get<std::string>();
    INFO(text);
    CHECK(gpt2_tokenizer()->encode(text) == ids_of(v["ids_plain_bpe"]));
    CHECK(gpt2_tokenizer()->encode(text, special) == ids_of(v["ids_with_special_tokens"]));
    CHECK(gpt2_tokenizer()->decode(ids_of(v["ids_with_special_tokens"])) == text);
  }
  CHECK(gpt2_tokenizer()->bos_id() == 50256);
  CHECK(gpt2_tokenizer()->eos_id() == 50256);
  CHECK(gpt2_tokenizer()->is_special(50256));
  CHECK_FALSE(gpt2_tokenizer()->is_special(198));
  EncodeOptions bos_eos;
  bos_eos.add_bos = true;
  bos_eos.add_eos = true;
  CHECK(gpt2_tokenizer()->encode("Hello world!", bos_eos) == std::vector<int64_t>{50256, 15496, 995, 0, 50256});
  // adjacent and repeated special tokens
  CHECK(gpt2_tokenizer()->encode("<|endoftext|><|endoftext|>a<|endoftext|>", special) ==
        std::vector<int64_t>{50256, 50256, 64, 50256});
}

TEST_CASE("llama2.c tok512: all 23 fixture vectors match run.c's encode()", "[tokenizer][llama2c]") {
  auto path = vl_test::fixture("tokenizer/tok512_stories260K_vectors.json");
  if (path.empty() || !tok512_tokenizer()) return;
  json vectors = json::parse(vl_test::read_file(path));
  REQUIRE(vectors.size() == 23);
  CHECK(tok512_tokenizer()->vocab_size() == 512);
  CHECK(tok512_tokenizer()->kind() == "llama2c");
  size_t ok = 0;
  for (const auto& v : vectors) {
    std::string text = v["text"].get<std::string>();
    std::vector<int64_t> want = ids_of(v["ids"]);
    std::vector<int64_t> got = tok512_tokenizer()->encode(text);
    INFO("text: " << text);
    CHECK(got == want);
    ok += got == want;
    auto pieces = v["pieces"].get<std::vector<std::string>>();
    REQUIRE(pieces.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) CHECK(tok512_tokenizer()->piece(want[i]) == pieces[i]);
    CHECK(tok512_tokenizer()->decode(want) == text);
  }
  CHECK(ok == 23);
  EncodeOptions no_bos;
  no_bos.add_bos = false;
  CHECK(tok512_tokenizer()->encode("Once upon a time", no_bos) == std::vector<int64_t>{403, 407, 261, 378});
  EncodeOptions eos;
  eos.add_eos = true;
  CHECK(tok512_tokenizer()->encode("The end.", eos).back() == 2);
}

TEST_CASE("llama2.c: random texts agree with a literal port of run.c's encode()", "[tokenizer][llama2c]") {
  if (!tok512_tokenizer()) return;
  const auto& t = dynamic_cast<const Llama2cTokenizer&>(*tok512_tokenizer());
  const int64_t V = t.vocab_size();
  // run.c, statement by statement (sorted-vocabulary bsearch replaced by a map; same strings, same ids)
  std::map<std::string, int64_t> lookup;
  for (int64_t id = V - 1; id >= 0; --id) lookup[t.piece(id)] = id;
  auto str_lookup = [&](const std::string& s) -> int64_t {
    auto it = lookup.find(s);
    return it == lookup.end() ? -1 : it->second;
  };
  auto run_c_encode = [&](const std::string& text) {
    std::vector<int64_t> tokens{1};
    if (!text.empty()) tokens.push_back(str_lookup(" "));
    std::string buf;
    for (size_t c = 0; c < text.size(); ++c) {
      if ((text[c] & 0xC0) != 0x80) buf.clear();
      buf += text[c];
      if (c + 1 < text.size() && (text[c + 1] & 0xC0) == 0x80 && buf.size() < 4) continue;
      int64_t id = str_lookup(buf);
      if (id != -1) {
        tokens.push_back(id);
      } else {
        for (unsigned char b : buf) tokens.push_back(b + 3);
      }
      buf.clear();
    }
    for (;;) {
      float best_score = -1e10f;
      int64_t best_id = -1, best_idx = -1;
      for (size_t i = 0; i + 1 < tokens.size(); ++i) {
        int64_t id = str_lookup(t.piece(tokens[i]) + t.piece(tokens[i + 1]));
        if (id != -1 && t.score(id) > best_score) best_score = t.score(id), best_id = id, best_idx = static_cast<int64_t>(i);
      }
      if (best_idx == -1) break;
      tokens[best_idx] = best_id;
      tokens.erase(tokens.begin() + best_idx + 1);
    }
    return tokens;
  };
  std::mt19937 rng(99);
  const std::vector<std::string> atoms = {"a",
                                          "e",
                                          "t",
                                          "h",
                                          "o",
                                          "n",
                                          "s",
                                          "i",
                                          "r",
                                          "l",
                                          "d",
                                          " ",
                                          " ",
                                          " the",
                                          "ing",
                                          "Lily",
                                          ".",
                                          ",",
                                          "!",
                                          "'",
                                          "\n",
                                          "\xC3\xAF",
                                          "\xE6\x97\xA5",
                                          "\xF0\x9F\x98\x80",
                                          "\x80",
                                          "\xFF",
                                          "\xC3",
                                          "T",
                                          "B",
                                          "1",
                                          "2",
                                          "\t",
                                          "  "};
  for (int round = 0; round < 2000; ++round) {
    std::string s;
    int n = std::uniform_int_distribution<int>(0, 60)(rng);
    for (int k = 0; k < n; ++k) s += atoms[rng() % atoms.size()];
    INFO("hex " << hex_of(s));
    REQUIRE(t.encode(s) == run_c_encode(s));
  }
}

TEST_CASE("empty input", "[tokenizer]") {
  if (!gpt2_tokenizer() || !tok512_tokenizer()) return;
  CHECK(gpt2_tokenizer()->encode("").empty());
  CHECK(gpt2_tokenizer()->decode(std::vector<int64_t>{}).empty());
  CHECK(tok512_tokenizer()->encode("") == std::vector<int64_t>{1});
  EncodeOptions no_bos;
  no_bos.add_bos = false;
  CHECK(tok512_tokenizer()->encode("", no_bos).empty());
  CHECK(tok512_tokenizer()->decode(std::vector<int64_t>{1}).empty());
}

TEST_CASE("arbitrary bytes round-trip (invalid UTF-8, NUL, long runs)", "[tokenizer]") {
  if (!gpt2_tokenizer() || !tok512_tokenizer()) return;
  std::mt19937 rng(12345);
  const std::vector<std::string> atoms = {"a",
                                          "Z",
                                          " ",
                                          "  ",
                                          "\n",
                                          "\r\n",
                                          "\t",
                                          "'s",
                                          "'",
                                          "1",
                                          "42",
                                          ".",
                                          ",",
                                          "\xC3\xA9",
                                          "\xE6\x97\xA5",
                                          "\xF0\x9F\x98\x80",
                                          "\xE2\x80\x85",
                                          "\xC2\x85",
                                          "\xEF\xBB\xBF",
                                          "\x00",
                                          "\xFF",
                                          "\xFE",
                                          "\x80",
                                          "\xC3",
                                          "\xE6\x97",
                                          "\xF0\x9F",
                                          "\xED\xA0\x80" /* surrogate */,
                                          "\xC0\xAF" /* overlong */,
                                          "\xF4\x90\x80\x80",
                                          " hello",
                                          "world",
                                          "<|endoftext|>",
                                          "\x1C",
                                          "\x7F"};
  for (int round = 0; round < 3000; ++round) {
    std::string s;
    int n = std::uniform_int_distribution<int>(0, 40)(rng);
    for (int k = 0; k < n; ++k) {
      if (rng() % 4 == 0) {
        s += static_cast<char>(rng() & 0xFF);  // a fully random byte
      } else {
        s += atoms[rng() % atoms.size()];
      }
    }
    INFO("hex " << hex_of(s));
    REQUIRE(gpt2_tokenizer()->decode(gpt2_tokenizer()->encode(s)) == s);
    EncodeOptions special;
    special.special_tokens = true;
    REQUIRE(gpt2_tokenizer()->decode(gpt2_tokenizer()->encode(s, special)) == s);
    REQUIRE(tok512_tokenizer()->decode(tok512_tokenizer()->encode(s)) == s);
  }
  // long runs go through the O(n log n) merge path
  for (std::string s : {std::string(5000, ' '), std::string(3000, 'a'), std::string(2000, '\xFF'), std::string(1000, '\n') + "x",
                        std::string(700, '7')}) {
    CHECK(gpt2_tokenizer()->decode(gpt2_tokenizer()->encode(s)) == s);
    CHECK(tok512_tokenizer()->decode(tok512_tokenizer()->encode(s)) == s);
  }
  // every single byte
  for (int b = 0; b < 256; ++b) {
    std::string s(1, static_cast<char>(b));
    auto ids = gpt2_tokenizer()->encode(s);
    CHECK(ids.size() == 1);
    CHECK(gpt2_tokenizer()->decode(ids) == s);
    CHECK(tok512_tokenizer()->decode(tok512_tokenizer()->encode(s)) == s);
  }
}

TEST_CASE("GPT-2 BPE: long words agree with a naive encoder.py merge loop", "[tokenizer][gpt2]") {
  std::string merges = vl_test::fixture("gpt2-tiny/merges.txt");
  if (merges.empty() || !gpt2_tokenizer()) return;
  // The oracle: encoder.py's bpe() over spelled tokens; spelled token -> id through piece() of all ids.
  std::map<std::string, int64_t> id_of_spelling;
  for (int64_t id = 0; id < gpt2_tokenizer()->vocab_size(); ++id) id_of_spelling[gpt2_tokenizer()->piece(id)] = id;
  const auto ranks = read_ranks(merges);
  auto oracle = [&](const std::string& word) {
    std::vector<std::string> w;
    for (unsigned char c : word)
      w.push_back(gpt2_tokenizer()->piece(*gpt2_tokenizer()->token_to_id(std::string(1, static_cast<char>(c)))));
    while (w.size() > 1) {
      size_t best = SIZE_MAX;
      std::pair<std::string, std::string> bp;
      for (size_t i = 0; i + 1 < w.size(); ++i) {
        auto it = ranks.find({w[i], w[i + 1]});
        if (it != ranks.end() && it->second < best) best = it->second, bp = it->first;
      }
      if (best == SIZE_MAX) break;
      std::vector<std::string> nw;
      for (size_t i = 0; i < w.size();) {
        if (i + 1 < w.size() && w[i] == bp.first && w[i + 1] == bp.second) {
          nw.push_back(w[i] + w[i + 1]);
          i += 2;
        } else {
          nw.push_back(w[i++]);
        }
      }
      w.swap(nw);
    }
    std::vector<int64_t> ids;
    for (auto& s : w) ids.push_back(id_of_spelling.at(s));
    return ids;
  };
  std::mt19937 rng(7);
  const std::string letters = "abcdefghijklmnopqrstuvwxyzeeeeaaaiioonnrrsstt";
  for (int round = 0; round < 60; ++round) {
    size_t len = std::uniform_int_distribution<size_t>(2, 400)(rng);  // both sides of the 128-byte switch
    std::string word;
    for (size_t i = 0; i < len; ++i) word += letters[rng() % letters.size()];
    INFO(word);
    CHECK(gpt2_tokenizer()->encode(word) == oracle(word));
    std::string spaces(len, ' ');  // "\s+(?!\S)" at the end of the text: one pre-token
    CHECK(gpt2_tokenizer()->encode(spaces) == oracle(spaces));
  }
}

TEST_CASE("GPT-2 pre-tokenizer uses Unicode White_Space, like tiktoken", "[tokenizer][gpt2]") {
  if (!gpt2_tokenizer()) return;
  auto* b = dynamic_cast<const BpeTokenizer*>(gpt2_tokenizer());
  REQUIRE(b);
  CHECK(b->pretokenize("Hello world's  end\n\n") == std::vector<std::string>{"Hello", " world", "'s", " ", " end", "\n\n"});
  // U+180E MONGOLIAN VOWEL SEPARATOR is not White_Space (PCRE2's own \s would say it is)
  CHECK(b->pretokenize("a \xE1\xA0\x8E"
                       "b") == std::vector<std::string>{"a", " \xE1\xA0\x8E", "b"});
  // U+0085 is White_Space, U+FEFF is not
  CHECK(b->pretokenize("a \xC2\x85"
                       "b") == std::vector<std::string>{"a", " ", "\xC2\x85", "b"});
  CHECK(b->pretokenize("a \xEF\xBB\xBF"
                       "b") == std::vector<std::string>{"a", " \xEF\xBB\xBF", "b"});
  // invalid bytes become pieces of their own and never swallow valid text
  CHECK(b->pretokenize("ab\xFF\xFE"
                       "cd") == std::vector<std::string>{"ab", "\xFF\xFE", "cd"});
}

TEST_CASE("encode is safe to call from several threads", "[tokenizer]") {
  if (!gpt2_tokenizer()) return;
  std::string text;
  for (int i = 0; i < 300; ++i) text += "Thread " + std::to_string(i * 7919) + " says: caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC!\n";
  const auto want = gpt2_tokenizer()->encode(text);
  std::vector<std::vector<int64_t>> got(4);
  std::vector<std::thread> th;
  for (int k = 0; k < 4; ++k)
    th.emplace_back([&, k] {
      for (int r = 0; r < 5; ++r) got[k] = gpt2_tokenizer()->encode(text);
    });
  for (auto& t : th) t.join();
  for (auto& g : got) CHECK(g == want);
}

TEST_CASE("vocablens tokenize (CLI)", "[tokenizer][cli]") {
  std::string cli = vl_test::require_cli();
  std::string root = vl_test::fixtures_root();
  if (cli.empty()) return;
  if (vl_test::fixture("gpt2-tiny").empty() || vl_test::fixture("stories260K").empty()) return;
  std::string out;
  REQUIRE(vl_test::run_command("'" + cli + "' tokenize '" + root + "/gpt2-tiny' 'Hello world!'", out) == 0);
  CHECK(out.find("ids: [15496, 995, 0]") != std::string::npos);
  CHECK(out.find("␣world") != std::string::npos);
  REQUIRE(vl_test::run_command("'" + cli + "' tokenize '" + root + "/gpt2-tiny' --ids 15496 995 0", out) == 0);
  CHECK(out == "Hello world!\n");
  REQUIRE(vl_test::run_command("'" + cli + "' tokenize '" + root + "/stories260K/stories260K.bin' 'Once upon a time' --json",
                               out) == 0);
  auto j = json::parse(out);
  CHECK(ids_of(j["ids"]) == std::vector<int64_t>{1, 403, 407, 261, 378});
  CHECK(j["tokens"][0] == "<s>");
  // text from stdin, special tokens; then an error: one line on stderr, non-zero exit (each run loads LibTorch: few)
  REQUIRE(vl_test::run_command(
              "printf 'hello <|endoftext|>' | '" + cli + "' tokenize '" + root + "/gpt2-tiny' - --special --json", out) == 0);
  CHECK(ids_of(json::parse(out)["ids"]) == std::vector<int64_t>{31373, 220, 50256});
  CHECK(vl_test::run_command("'" + cli + "' tokenize /nonexistent/model 'x'", out) == 1);
  CHECK(std::count(out.begin(), out.end(), '\n') == 1);
  CHECK(out.find("/nonexistent/model") != std::string::npos);
}

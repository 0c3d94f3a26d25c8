// The built-in synthetic corpus: deterministic, well-formed, and its planted structure is where the
// documentation says; prompt markers become untrained tokens.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "fixtures.hpp"
#include "vocablens/bpe_trainer.hpp"
#include "vocablens/error.hpp"
#include "vocablens/synthetic.hpp"
#include "vocablens/tokenizer.hpp"
#include "vocablens/train.hpp"

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream ss(text);
  std::string l;
  while (std::getline(ss, l)) out.push_back(l);
  return out;
}

std::vector<std::string> words_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream ss(s);
  std::string w;
  while (ss >> w) out.push_back(w);
  return out;
}

}  // namespace

TEST_CASE("synthetic corpus: deterministic for a seed", "[synthetic]") {
  vocablens::SyntheticOptions o;
  o.lines = 3000;
  auto a = vocablens::synthetic_corpus(o), b = vocablens::synthetic_corpus(o);
  CHECK(a.text == b.text);
  o.seed = 2;
  CHECK(vocablens::synthetic_corpus(o).text != a.text);
  CHECK(lines_of(a.text).size() == 3000);
  CHECK(a.text.back() == '\n');
}

TEST_CASE("synthetic corpus: lowercase ASCII words from the world's vocabulary", "[synthetic]") {
  vocablens::SyntheticOptions o;
  o.lines = 5000;
  auto c = vocablens::synthetic_corpus(o);
  std::set<std::string> vocab(c.words.begin(), c.words.end());
  for (unsigned char ch : c.text)
    CHECK((ch == '\n' || ch == ' ' || ch == ':' || ch == '<' || ch == '>' || ch == '/' || (ch >= 'a' && ch <= 'z') ||
           (ch >= '0' && ch <= '9')));
  for (auto& w : words_of(vocablens::strip_prompt_markers(c.text))) {
    INFO(w);
    CHECK(vocab.count(w) == 1);
  }
  CHECK(c.words.size() < 300);  // a small vocabulary: a few hundred BPE tokens cover it
}

TEST_CASE("synthetic corpus: facts are true and appear as sentences", "[synthetic]") {
  vocablens::SyntheticOptions o;
  o.lines = 20000;
  auto c = vocablens::synthetic_corpus(o);
  REQUIRE(c.facts.size() == 26 * 3 + 14 * 2 + 12);
  auto find = [&](const std::string& prompt) -> std::string {
    for (auto& f : c.facts)
      if (f.prompt == prompt) return f.answer;
    return "";
  };
  CHECK(find("the capital of france is") == "paris");
  CHECK(find("people in japan speak") == "japanese");
  CHECK(find("the country kenya is in") == "africa");
  CHECK(find("the dog says") == "woof");
  CHECK(find("the bee has") == "six");
  CHECK(find("the colour of the lime is") == "green");
  const std::string text = c.text;
  int seen = 0;
  for (auto& f : c.facts) seen += text.find("\n" + f.prompt + " " + f.answer + f.rest + "\n") != std::string::npos;
  CHECK(text.find("\nthe bee has six legs\n") != std::string::npos);
  CHECK(seen >= static_cast<int>(c.facts.size()) - 2);  // 20000 lines: (almost) every fact occurs
  // Every subject and answer is a word of its class.
  for (auto& f : c.facts) {
    INFO(f.prompt);
    CHECK(c.classes.count(f.subject) == 1);
    CHECK(c.classes.count(f.answer) == 1);
  }
  CHECK(c.classes.at("paris") == "city");
  CHECK(c.classes.at("france") == "country");
  CHECK(c.classes.at("dog") == "animal");
  CHECK(c.classes.at("17") == "number");
  CHECK(vocablens::synthetic_class_members("country").size() == 26);
  CHECK(vocablens::synthetic_class_members("nothing").empty());
}

TEST_CASE("synthetic corpus: line kinds follow the mixture; copies repeat their span", "[synthetic]") {
  vocablens::SyntheticOptions o;
  o.lines = 20000;
  auto c = vocablens::synthetic_corpus(o);
  std::map<std::string, int> kinds;
  for (auto& l : lines_of(c.text)) {
    if (l.rfind("<prompt>repeat", 0) == 0) {
      ++kinds["copy"];
      auto close = l.find(" :</prompt>");
      REQUIRE(close != std::string::npos);
      std::string first = l.substr(std::string("<prompt>repeat").size(), close - std::string("<prompt>repeat").size());
      std::string second = l.substr(close + std::string(" :</prompt>").size());
      CHECK(first == second);
      auto n = words_of(first).size();
      CHECK((n >= 3 && n <= 7));
    } else if (l.rfind("count", 0) == 0 || l.rfind("after", 0) == 0) {
      ++kinds["counting"];
      auto w = words_of(l);
      if (w[0] == "count")
        for (size_t i = 2; i < w.size(); ++i) CHECK(std::stoi(w[i]) == std::stoi(w[i - 1]) + 1);
      else CHECK(std::stoi(w[3]) == std::stoi(w[1]) + 1);
    } else if (l.find("visited") != std::string::npos || l.find("flew") != std::string::npos ||
               l.find("animals") != std::string::npos || l.find("like") != std::string::npos ||
               l.find("ate") != std::string::npos || l.rfind("people speak", 0) == 0) {
      ++kinds["classes"];
    } else {
      ++kinds["facts"];
    }
  }
  auto share = [&](const char* k) { return kinds[k] / 20000.0; };
  CHECK(std::abs(share("facts") - 0.6) < 0.02);
  CHECK(std::abs(share("classes") - 0.1) < 0.02);
  CHECK(std::abs(share("counting") - 0.1) < 0.02);
  CHECK(std::abs(share("copy") - 0.2) < 0.02);
  o.mark_prompts = false;
  auto plain = vocablens::synthetic_corpus(o);
  CHECK(plain.text.find("<prompt>") == std::string::npos);
  CHECK(plain.text == vocablens::strip_prompt_markers(c.text));
}

TEST_CASE("synthetic corpus: bad options", "[synthetic]") {
  vocablens::SyntheticOptions o;
  o.facts = o.classes = o.counting = o.copying = 0;
  CHECK_THROWS_AS(vocablens::synthetic_corpus(o), vocablens::UsageError);
  o = {};
  o.copy_min = 5;
  o.copy_max = 4;
  CHECK_THROWS_AS(vocablens::synthetic_corpus(o), vocablens::UsageError);
  o = {};
  o.lines = -1;
  CHECK_THROWS_AS(vocablens::synthetic_corpus(o), vocablens::UsageError);
  o = {};
  o.lines = 0;
  CHECK(vocablens::synthetic_corpus(o).text.empty());
}

TEST_CASE("prompt markers: tokens inside <prompt> spans are not targets", "[synthetic]") {
  vocablens::SyntheticOptions so;
  so.lines = 4000;
  auto c = vocablens::synthetic_corpus(so);
  auto v = vocablens::train_bpe(vocablens::strip_prompt_markers(c.text), {});
  std::string dir = vl_test::temp_dir("marked");
  v.write(dir);
  auto tok = vocablens::load_tokenizer_for(dir);
  auto s = vocablens::tokenize_marked_text(*tok, "<prompt>repeat dog 12 :</prompt> dog 12\nthe dog says woof\n");
  auto id = [&](const char* t) { return *tok->token_to_id(t); };
  std::vector<int64_t> want = {id("repeat"), id(" dog"), id(" 12"),  id(" :"),    id(" dog"),  id(" 12"),
                               id("\n"),     id("the"),  id(" dog"), id(" says"), id(" woof"), id("\n")};
  CHECK(s.ids == want);
  std::vector<uint8_t> target = {0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
  CHECK(s.target == target);
  CHECK(s.line_starts == std::vector<int64_t>{0, 7});
  CHECK(s.line_ends == std::vector<int64_t>{6, 11});
  // The whole corpus tokenises to the same ids as the marker-free text does with the plain tokenizer.
  auto whole = vocablens::tokenize_marked_text(*tok, c.text);
  CHECK(whole.ids == tok->encode(vocablens::strip_prompt_markers(c.text)));
  CHECK(vocablens::strip_prompt_markers("a <prompt>b</prompt> c") == "a b c");
  CHECK_THROWS_AS(vocablens::tokenize_marked_text(*tok, "a <prompt>b\nc</prompt>\n"), vocablens::UsageError);
  CHECK_THROWS_AS(vocablens::tokenize_marked_text(*tok, "a </prompt>\n"), vocablens::UsageError);
  CHECK_THROWS_AS(vocablens::tokenize_marked_text(*tok, "<prompt><prompt>a</prompt>\n"), vocablens::UsageError);
}

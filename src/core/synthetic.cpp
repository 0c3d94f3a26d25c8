// The built-in synthetic corpus (see vocablens/synthetic.hpp): a small fixed world, sentences drawn
// from it with a seeded std::mt19937_64 (portable: no std:: distributions, whose results differ
// between standard libraries).
#include "vocablens/synthetic.hpp"

#include <algorithm>
#include <random>
#include <set>
#include <sstream>

#include "vocablens/error.hpp"

namespace vocablens {
namespace {

struct Country {
  const char* name;
  const char* capital;
  const char* language;
  const char* continent;
};
constexpr Country kCountries[] = {
    {"france", "paris", "french", "europe"},
    {"germany", "berlin", "german", "europe"},
    {"italy", "rome", "italian", "europe"},
    {"spain", "madrid", "spanish", "europe"},
    {"portugal", "lisbon", "portuguese", "europe"},
    {"poland", "warsaw", "polish", "europe"},
    {"greece", "athens", "greek", "europe"},
    {"sweden", "stockholm", "swedish", "europe"},
    {"norway", "oslo", "norwegian", "europe"},
    {"russia", "moscow", "russian", "europe"},
    {"japan", "tokyo", "japanese", "asia"},
    {"china", "beijing", "chinese", "asia"},
    {"india", "delhi", "hindi", "asia"},
    {"korea", "seoul", "korean", "asia"},
    {"thailand", "bangkok", "thai", "asia"},
    {"turkey", "ankara", "turkish", "asia"},
    {"iran", "tehran", "persian", "asia"},
    {"egypt", "cairo", "arabic", "africa"},
    {"kenya", "nairobi", "swahili", "africa"},
    {"morocco", "rabat", "arabic", "africa"},
    {"brazil", "brasilia", "portuguese", "america"},
    {"peru", "lima", "spanish", "america"},
    {"chile", "santiago", "spanish", "america"},
    {"canada", "ottawa", "english", "america"},
    {"cuba", "havana", "spanish", "america"},
    {"australia", "canberra", "english", "oceania"},
};

struct Animal {
  const char* name;
  const char* sound;
  const char* legs;
};
constexpr Animal kAnimals[] = {
    {"dog", "woof", "four"},   {"cat", "meow", "four"},    {"cow", "moo", "four"},   {"duck", "quack", "two"},
    {"sheep", "baa", "four"},  {"pig", "oink", "four"},    {"lion", "roar", "four"}, {"owl", "hoot", "two"},
    {"frog", "croak", "four"}, {"horse", "neigh", "four"}, {"snake", "hiss", "no"},  {"bee", "buzz", "six"},
    {"crow", "caw", "two"},    {"goat", "bleat", "four"},
};

struct Fruit {
  const char* name;
  const char* colour;
};
constexpr Fruit kFruits[] = {
    {"banana", "yellow"}, {"apple", "red"},  {"lemon", "yellow"}, {"grape", "purple"},  {"lime", "green"}, {"cherry", "red"},
    {"plum", "purple"},   {"pear", "green"}, {"kiwi", "brown"},   {"coconut", "brown"}, {"tomato", "red"}, {"apricot", "orange"},
};

// Function words of the templates below (kept in one place so that `words` is complete).
constexpr const char* kTemplateWords[] = {"the",     "capital", "of",    "is",    "city",    "people", "in",   "speak",
                                          "country", "says",    "has",   "legs",  "colour",  "and",    "are",  "we",
                                          "visited", "flew",    "from",  "to",    "animals", "i",      "like", "she",
                                          "ate",     "a",       "count", "after", "comes",   "repeat", ":"};

uint64_t below(std::mt19937_64& rng, uint64_t n) { return rng() % n; }
double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * (1.0 / 9007199254740992.0); }

template <class T, size_t N>
constexpr size_t count_of(const T (&)[N]) {
  return N;
}

std::vector<std::string> distinct(std::vector<std::string> v) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (auto& s : v)
    if (seen.insert(s).second) out.push_back(s);
  return out;
}

std::vector<std::string> class_members(const std::string& cls) {
  std::vector<std::string> v;
  if (cls == "country")
    for (auto& c : kCountries) v.push_back(c.name);
  else if (cls == "city")
    for (auto& c : kCountries) v.push_back(c.capital);
  else if (cls == "language")
    for (auto& c : kCountries) v.push_back(c.language);
  else if (cls == "continent")
    for (auto& c : kCountries) v.push_back(c.continent);
  else if (cls == "animal")
    for (auto& a : kAnimals) v.push_back(a.name);
  else if (cls == "sound")
    for (auto& a : kAnimals) v.push_back(a.sound);
  else if (cls == "legs")
    for (auto& a : kAnimals) v.push_back(a.legs);
  else if (cls == "fruit")
    for (auto& f : kFruits) v.push_back(f.name);
  else if (cls == "colour")
    for (auto& f : kFruits) v.push_back(f.colour);
  return distinct(std::move(v));
}

}  // namespace

std::vector<std::string> synthetic_class_members(const std::string& cls) { return class_members(cls); }

SyntheticCorpus synthetic_corpus(const SyntheticOptions& o) {
  if (o.lines < 0) throw UsageError("synthetic corpus: lines must be >= 0");
  for (double w : {o.facts, o.classes, o.counting, o.copying})
    if (!(w >= 0)) throw UsageError("synthetic corpus: mixture weights must be >= 0");
  const double wsum = o.facts + o.classes + o.counting + o.copying;
  if (!(wsum > 0)) throw UsageError("synthetic corpus: the mixture weights sum to 0");
  if (o.max_number < 1 || o.max_number > 999) throw UsageError("synthetic corpus: max_number must be in 1..999");
  if (o.copy_min < 1 || o.copy_max < o.copy_min || o.copy_max > 64)
    throw UsageError("synthetic corpus: need 1 <= copy_min <= copy_max <= 64");

  SyntheticCorpus c;
  c.options = o;
  // ---- the world's facts, in a fixed order ----
  for (auto& k : kCountries)
    c.facts.push_back({"capital", k.name, std::string("the capital of ") + k.name + " is", k.capital, ""});
  for (auto& k : kCountries)
    c.facts.push_back({"language", k.name, std::string("people in ") + k.name + " speak", k.language, ""});
  for (auto& k : kCountries)
    c.facts.push_back({"continent", k.name, std::string("the country ") + k.name + " is in", k.continent, ""});
  for (auto& a : kAnimals) c.facts.push_back({"sound", a.name, std::string("the ") + a.name + " says", a.sound, ""});
  for (auto& a : kAnimals) c.facts.push_back({"legs", a.name, std::string("the ") + a.name + " has", a.legs, " legs"});
  for (auto& f : kFruits) c.facts.push_back({"colour", f.name, std::string("the colour of the ") + f.name + " is", f.colour, ""});

  for (const char* cls : {"country", "city", "language", "continent", "animal", "sound", "legs", "fruit", "colour"})
    for (auto& w : class_members(cls)) c.classes.emplace(w, cls);  // first class wins ("orange" is only a colour)
  for (int64_t n = 0; n <= o.max_number; ++n) c.classes.emplace(std::to_string(n), "number");

  std::set<std::string> words(std::begin(kTemplateWords), std::end(kTemplateWords));
  for (auto& kv : c.classes) words.insert(kv.first);
  c.words.assign(words.begin(), words.end());

  // Words a copying span draws from: every entity, attribute and number.
  std::vector<std::string> pool;
  for (auto& kv : c.classes) pool.push_back(kv.first);

  std::mt19937_64 rng(o.seed);
  auto pick = [&](const std::vector<std::string>& v) -> const std::string& { return v[below(rng, v.size())]; };
  auto two_distinct = [&](const std::vector<std::string>& v) {
    size_t a = below(rng, v.size()), b = below(rng, v.size() - 1);
    if (b >= a) ++b;
    return std::pair<const std::string&, const std::string&>(v[a], v[b]);
  };
  const auto countries = class_members("country"), cities = class_members("city"), languages = class_members("language"),
             animals = class_members("animal"), fruits = class_members("fruit");

  std::string& t = c.text;
  t.reserve(static_cast<size_t>(o.lines) * 36);
  const double c1 = o.facts / wsum, c2 = c1 + o.classes / wsum, c3 = c2 + o.counting / wsum;
  for (int64_t line = 0; line < o.lines; ++line) {
    const double u = uniform01(rng);
    if (u < c1) {
      // A fact: one of the forward facts, or the reverse capital sentence.
      const size_t n = c.facts.size() + count_of(kCountries);
      size_t i = below(rng, n);
      if (i < c.facts.size()) {
        t += c.facts[i].prompt + " " + c.facts[i].answer + c.facts[i].rest;
      } else {
        const Country& k = kCountries[i - c.facts.size()];
        t += std::string("the city ") + k.capital + " is the capital of " + k.name;
      }
    } else if (u < c2) {
      switch (below(rng, 5)) {
        case 0: {
          auto [a, b] = two_distinct(countries);
          t += "we visited " + a + " and " + b;
          break;
        }
        case 1: {
          auto [a, b] = two_distinct(cities);
          t += "we flew from " + a + " to " + b;
          break;
        }
        case 2: {
          auto [a, b] = two_distinct(animals);
          t += "the " + a + " and the " + b + " are animals";
          break;
        }
        case 3: {
          auto [a, b] = two_distinct(fruits);
          t += below(rng, 2) ? "i like the " + a : "she ate a " + a + " and a " + b;
          break;
        }
        default: {
          auto [a, b] = two_distinct(languages);
          t += "people speak " + a + " and " + b;
          break;
        }
      }
    } else if (u < c3) {
      if (below(rng, 2)) {
        const int64_t len = 4 + static_cast<int64_t>(below(rng, 6));  // 4..9 numbers
        const int64_t start =
            static_cast<int64_t>(below(rng, static_cast<uint64_t>(o.max_number - len + 2 > 0 ? o.max_number - len + 2 : 1)));
        t += "count";
        for (int64_t k = 0; k < len && start + k <= o.max_number; ++k) t += " " + std::to_string(start + k);
      } else {
        const int64_t n = static_cast<int64_t>(below(rng, static_cast<uint64_t>(o.max_number)));  // n + 1 <= max
        t += "after " + std::to_string(n) + " comes " + std::to_string(n + 1);
      }
    } else {
      const int64_t len = o.copy_min + static_cast<int64_t>(below(rng, static_cast<uint64_t>(o.copy_max - o.copy_min + 1)));
      std::string span;
      for (int64_t k = 0; k < len; ++k) span += " " + pick(pool);
      if (o.mark_prompts) t += "<prompt>repeat" + span + " :</prompt>" + span;
      else t += "repeat" + span + " :" + span;
    }
    t += '\n';
  }
  return c;
}

}  // namespace vocablens

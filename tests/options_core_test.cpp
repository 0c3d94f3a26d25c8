// The one declaration of an analysis's options (vocablens/options.hpp): defaults, checks and the messages
// every surface gets, spellings, schema and Python signature.
#include <catch2/catch.hpp>

#include "vocablens/error.hpp"
#include "vocablens/options.hpp"

using vocablens::AnalysisDecl;
using vocablens::OptionDecl;
using vocablens::OptionType;
using vocablens::Surface;
using json = nlohmann::json;

namespace {

AnalysisDecl sample() {
  AnalysisDecl d;
  d.name = "sample";
  d.summary = "a test analysis";
  d.command = "sample";
  d.options = {
      OptionDecl{"prompt", OptionType::Prompt, nullptr, "text or ids"}.as_required(),
      {"top_k", OptionType::Integer, 30, "tokens", 1, 1000},
      {"rtol", OptionType::Real, 1e-6, "tolerance", 0.0, 1.0},
      {"keys", OptionType::Flag, true, "the keys"},
      {"bottom", OptionType::Flag, false, "also the bottom"},
      {"bos", OptionType::Flag, nullptr, "prepend BOS"},
      OptionDecl{"inverse", OptionType::Choice, "pinv", "how"}.with_choices({"pinv", "transpose"}),
      {"neurons", OptionType::Indices, nullptr, "which", 0},
      {"target", OptionType::Token, nullptr, "a token"},
      OptionDecl{"allow", OptionType::Indices, nullptr, "ids"}.spelled("--allow-list"),
  };
  return d;
}

std::string message_of(const json& given, Surface s) {
  try {
    vocablens::resolve_options(sample(), given, s);
  } catch (const vocablens::UsageError& e) { return e.what(); }
  return "";
}

}  // namespace

TEST_CASE("resolve_options fills every declared option, defaults typed, absent optional ones null", "[options]") {
  const json o = vocablens::resolve_options(sample(), {{"prompt", "Hi"}}, Surface::Python);
  CHECK(o.size() == sample().options.size());
  CHECK(o["top_k"] == 30);
  CHECK(o["top_k"].is_number_integer());
  CHECK(o["rtol"] == 1e-6);
  CHECK(o["keys"] == true);
  CHECK(o["bottom"] == false);
  CHECK(o["bos"].is_null());
  CHECK(o["inverse"] == "pinv");
  CHECK(o["neurons"].is_null());
  CHECK(o["prompt"] == "Hi");
}

TEST_CASE("given values are converted: index strings expand, whole floats become integers, ids stay ids", "[options]") {
  const json o = vocablens::resolve_options(
      sample(), {{"prompt", json::array({1, 2, 3})}, {"neurons", "0,5,7-9"}, {"top_k", 5.0}, {"target", 17}}, Surface::Http);
  CHECK(o["neurons"] == json::array({0, 5, 7, 8, 9}));
  CHECK(o["top_k"] == 5);
  CHECK(o["top_k"].is_number_integer());
  CHECK(o["prompt"] == json::array({1, 2, 3}));
  CHECK(o["target"] == 17);
}

TEST_CASE("bad options: one message naming the analysis and the option as the surface spells it", "[options]") {
  CHECK(message_of({{"prompt", "x"}, {"top_k", 0}}, Surface::Cli) == "sample: --top-k: must be >= 1 (got 0)");
  CHECK(message_of({{"prompt", "x"}, {"top_k", 0}}, Surface::Python) == "sample: top_k: must be >= 1 (got 0)");
  CHECK(message_of({{"prompt", "x"}, {"top_k", 1000000000}}, Surface::Http) == "sample: top_k: must be <= 1000 (got 1000000000)");
  CHECK(message_of({{"prompt", "x"}, {"top_k", 2.5}}, Surface::Http) == "sample: top_k: must be an integer (got 2.5)");
  CHECK(message_of({{"prompt", "x"}, {"top_k", "5"}}, Surface::Http) == "sample: top_k: must be an integer (got \"5\")");
  CHECK(message_of({{"prompt", "x"}, {"inverse", "embed"}}, Surface::Cli) ==
        "sample: --inverse: must be one of pinv, transpose (got 'embed')");
  CHECK(message_of({{"prompt", "x"}, {"keys", 1}}, Surface::Cli) == "sample: --no-keys: must be true or false (got 1)");
  CHECK(message_of({{"prompt", "x"}, {"topk", 3}}, Surface::Python) == "sample: unknown option 'topk'; did you mean 'top_k'?");
  CHECK(message_of({{"prompt", "x"}, {"zzz", 3}}, Surface::Python) == "sample: unknown option 'zzz'");
  CHECK(message_of({{"top_k", 3}}, Surface::Python) == "sample: prompt: is required");
  CHECK(message_of({{"prompt", ""}}, Surface::Python) == "sample: prompt: is empty: it needs at least one character of text");
  CHECK(message_of({{"prompt", json::array({1, -2})}}, Surface::Python) == "sample: prompt: a token id must be >= 0 (got -2)");
  CHECK(message_of({{"prompt", "x"}, {"rtol", 2.0}}, Surface::Python) == "sample: rtol: must be <= 1.0 (got 2.0)");
  CHECK(message_of({{"prompt", "x"}, {"neurons", "0-99999999999"}}, Surface::Python).find("more than") != std::string::npos);
  CHECK(message_of({{"prompt", "x"}, {"neurons", "3,x"}}, Surface::Python) ==
        "sample: neurons: cannot read index list '3,x' (expected e.g. 0,5,10-20)");
  CHECK(message_of(json::array({1}), Surface::Http).rfind("sample: options must be a JSON object", 0) == 0);
}

TEST_CASE("CLI spellings and text conversion", "[options]") {
  const AnalysisDecl d = sample();
  CHECK(vocablens::spelling(*d.find("top_k"), Surface::Cli) == "--top-k");
  CHECK(vocablens::spelling(*d.find("keys"), Surface::Cli) == "--no-keys");
  CHECK(vocablens::spelling(*d.find("bottom"), Surface::Cli) == "--bottom");
  CHECK(vocablens::spelling(*d.find("allow"), Surface::Cli) == "--allow-list");
  CHECK(vocablens::spelling(*d.find("allow"), Surface::Http) == "allow");
  CHECK(vocablens::parse_option_text(d, *d.find("top_k"), "12") == 12);
  CHECK(vocablens::parse_option_text(d, *d.find("rtol"), "1e-3") == 1e-3);
  CHECK_THROWS_WITH(vocablens::parse_option_text(d, *d.find("top_k"), "12x"), "sample: --top-k: must be an integer (got '12x')");
  CHECK(vocablens::parse_option_text(d, *d.find("neurons"), "0-2") == "0-2");  // expanded by resolve_options
}

TEST_CASE("schema and Python signature come from the declaration", "[options]") {
  const json s = vocablens::option_schema(sample());
  CHECK(s["name"] == "sample");
  CHECK(s["options"].size() == sample().options.size());
  CHECK(s["options"][1]["name"] == "top_k");
  CHECK(s["options"][1]["default"] == 30);
  CHECK(s["options"][1]["min"] == 1);
  CHECK(s["options"][1]["cli"] == "--top-k");
  CHECK(s["options"][6]["choices"] == json::array({"pinv", "transpose"}));
  const std::string sig = vocablens::python_signature(sample());
  CHECK(sig.rfind("sample(model, prompt: Union[str, Sequence[int]], *, top_k: int = 30, rtol: float = 1e-06, keys: bool = True, ",
                  0) == 0);
  CHECK(sig.find("bos: Optional[bool] = None") != std::string::npos);
  CHECK(sig.find("inverse: Literal[\"pinv\", \"transpose\"] = \"pinv\"") != std::string::npos);
  CHECK(sig.substr(sig.size() - 9) == "-> Result");
}

TEST_CASE("parse_index_list bounds before expanding", "[options]") {
  CHECK(vocablens::parse_index_list("0,5,10-12") == std::vector<int64_t>{0, 5, 10, 11, 12});
  CHECK_THROWS_WITH(vocablens::parse_index_list("3-5", 5, "layer"), "layer 5 in '3-5' is out of range (0..4)");
  CHECK_THROWS_AS(vocablens::parse_index_list(""), vocablens::UsageError);
  CHECK_THROWS_AS(vocablens::parse_index_list("5-3"), vocablens::UsageError);
}

TEST_CASE("what a server reads of a declaration: replayable forwards and alias routes", "[options]") {
  AnalysisDecl d = sample();
  d.options.push_back(OptionDecl{"ablate", OptionType::Texts, nullptr, "edits"}.editing_forward());
  const json plain = vocablens::resolve_options(d, {{"prompt", "x"}}, Surface::Http);
  const json edited = vocablens::resolve_options(d, {{"prompt", "x"}, {"ablate", "0.1"}}, Surface::Http);
  CHECK_FALSE(vocablens::forward_replayable(d, plain));  // not declared a reader of the forward
  d.reads_forward_only = true;
  CHECK(vocablens::forward_replayable(d, plain));
  CHECK_FALSE(vocablens::forward_replayable(d, edited));  // an option that edits the forward is given

  const vocablens::HttpAlias a{
      "short/route", {"prompt", "top_k", "neurons"}, {"neurons"}, {{"bottom", true}}, {{"neurons", 3}, {"top_k", 100}}};
  const json given = vocablens::alias_request(a, {{"prompt", "x"}, {"neurons", "0-2"}});
  CHECK(given == json({{"prompt", "x"}, {"neurons", "0-2"}, {"bottom", true}}));
  CHECK_THROWS_WITH(vocablens::alias_request(a, {{"prompt", "x"}, {"neurons", 1}, {"rtol", 0.1}}),
                    "short/route: unknown option 'rtol' (known: prompt, top_k, neurons)");
  CHECK_THROWS_WITH(vocablens::alias_request(a, {{"prompt", "x"}}), "short/route: neurons: is required");
  CHECK_THROWS_AS(vocablens::alias_request(a, json::array()), vocablens::UsageError);
  CHECK_NOTHROW(vocablens::check_alias_bounds(d, a, vocablens::resolve_options(d, given, Surface::Http)));
  CHECK_THROWS_WITH(
      vocablens::check_alias_bounds(d, a, vocablens::resolve_options(d, {{"prompt", "x"}, {"neurons", "0-3"}}, Surface::Http)),
      "short/route: neurons: give 1 to 3 per request (got 4)");
  CHECK_THROWS_WITH(vocablens::check_alias_bounds(
                        d, a, vocablens::resolve_options(d, {{"prompt", "x"}, {"neurons", 0}, {"top_k", 101}}, Surface::Http)),
                    "short/route: top_k: must be <= 100 on this route (got 101)");
}

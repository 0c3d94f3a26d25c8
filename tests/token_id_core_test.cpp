// Tokens as text and text as tokens: display forms (␣Paris, ⏎, <0xE6>), token_to_id / require_token_id, and
// the one text -> token id rule every command uses (single_token_id, vocablens/token_id.hpp).
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "fixture_tokenizers.hpp"
#include "fixtures.hpp"
#include "vocablens/error.hpp"
#include "vocablens/token_id.hpp"
#include "vocablens/tokenizer.hpp"

using vl_test::gpt2_tokenizer;
using vl_test::tok512_tokenizer;
using vocablens::Tokenizer;
using vocablens::UsageError;

TEST_CASE("display forms and look-ups", "[tokenizer]") {
  if (!gpt2_tokenizer() || !tok512_tokenizer()) return;
  using vocablens::display_text;
  using vocablens::undisplay_text;
  CHECK(display_text(" Paris") == "␣Paris");
  CHECK(display_text("\n") == "⏎");
  CHECK(display_text("\t\t") == "⇥⇥");
  CHECK(display_text("a\rb") == "a<0x0D>b");
  CHECK(display_text(std::string("\x00", 1)) == "<0x00>");
  CHECK(display_text("\x7F") == "<0x7F>");
  CHECK(display_text("\xC2\x85") == "<U+0085>");
  CHECK(display_text("\xE6\x97") == "<0xE6><0x97>");
  CHECK(display_text("caf\xC3\xA9") == "café");
  CHECK(display_text("") == "");
  for (std::string s : {std::string(" Paris\n\t"), std::string("\xE6\x97 \xC2\x85\r", 7), std::string("\x00\x01", 2)})
    CHECK(undisplay_text(display_text(s)) == s);

  const Tokenizer& g = *gpt2_tokenizer();
  CHECK(g.token_to_id(" Paris") == 6342);
  CHECK(g.token_to_id("␣Paris") == 6342);
  CHECK(g.token_to_id("\n") == 198);
  CHECK(g.token_to_id("⏎") == 198);
  CHECK_FALSE(g.token_to_id(" Parisxyz").has_value());
  CHECK(g.require_token_id(" Paris") == 6342);
  CHECK_THROWS_AS(g.require_token_id(" Parisxyzzy"), UsageError);
  CHECK(g.display(6342) == "␣Paris");
  CHECK(g.display(198) == "⏎");
  CHECK(g.display(197) == "⇥");
  CHECK(g.display(50256) == "<|endoftext|>");
  CHECK(g.display(220) == "␣");
  CHECK(g.display(60000) == "<id 60000?>");  // a padded vocabulary's extra rows
  CHECK(g.display(-1) == "<id -1?>");
  CHECK(g.piece(6342) == "\xC4\xA0Paris");  // "ĠParis"
  CHECK(g.token_bytes(6342) == " Paris");
  // a token that is half of a character: 日 = E6 97 A5 is two tokens in GPT-2
  auto ids = g.encode("\xE6\x97\xA5");
  REQUIRE(ids.size() == 2);
  CHECK(g.display(ids[0]).find("<0x") != std::string::npos);
  CHECK_THROWS_AS(g.decode(std::vector<int64_t>{50257}), UsageError);
  CHECK_THROWS_AS(g.token_bytes(-3), UsageError);

  const Tokenizer& t = *tok512_tokenizer();
  CHECK(t.display(1) == "<s>");
  CHECK(t.display(2) == "</s>");
  CHECK(t.display(0) == "<unk>");
  CHECK(t.display(3 + 0x0A) == "⏎");
  CHECK(t.display(3 + 0xE6) == "<0xE6>");
  CHECK(t.piece(3 + 0x0A) == "<0x0A>");
  CHECK(t.token_bytes(3 + 0x0A) == "\n");
  CHECK(t.token_to_id(" Once") == 403);
  CHECK(t.token_to_id("␣Once") == 403);
  CHECK(t.token_to_id("<s>") == 1);
  CHECK(t.token_to_id("\n") == 3 + 0x0A);
  CHECK(t.display(403) == "␣Once");
  CHECK(t.is_special(1));
  CHECK_FALSE(t.is_special(403));
  CHECK(t.bos_id() == 1);
  CHECK(t.eos_id() == 2);
  CHECK_THROWS_AS(t.decode(std::vector<int64_t>{512}), UsageError);
  // run.c strips one leading space only right after BOS
  CHECK(t.decode(std::vector<int64_t>{1, 403}) == "Once");
  CHECK(t.decode(std::vector<int64_t>{403}) == " Once");
}

TEST_CASE("single_token_id: a token as it stands, else a one-token encoding; otherwise the pieces", "[tokenizer]") {
  if (!gpt2_tokenizer() || !tok512_tokenizer()) return;
  const Tokenizer& g = *gpt2_tokenizer();
  std::vector<int64_t> pieces = {99};
  CHECK(vocablens::single_token_id(g, " Paris", &pieces) == 6342);
  CHECK(pieces.empty());                                   // matched as a token: no encoding needed
  CHECK(vocablens::single_token_id(g, "␣Paris") == 6342);  // the display form
  CHECK_FALSE(vocablens::single_token_id(g, " Parisxyzzy", &pieces).has_value());
  CHECK(pieces == g.encode(" Parisxyzzy", [] {
    vocablens::EncodeOptions o;
    o.add_bos = false;
    return o;
  }()));
  REQUIRE(pieces.size() > 1);
  CHECK(vocablens::display_ids(g, pieces) ==
        g.display(pieces[0]) + " " + g.display(pieces[1]) + (pieces.size() > 2 ? " " + g.display(pieces[2]) : std::string()));
  std::vector<int64_t> many(10, 6342);
  CHECK(vocablens::display_ids(g, many, 2) == "␣Paris ␣Paris ...");
  CHECK(vocablens::display_ids(g, many, 2, false) == "␣Paris ␣Paris");
  // llama2.c: " Once" is a piece; "Once" is not, but its encoding (dummy prefix added) is that one token.
  const Tokenizer& t = *tok512_tokenizer();
  CHECK_FALSE(t.token_to_id("Once").has_value());
  CHECK(vocablens::single_token_id(t, "Once", &pieces) == 403);
  CHECK(pieces == std::vector<int64_t>{403});
  // require_token_id is the same rule, throwing with the encoding in its message.
  CHECK(t.require_token_id("Once") == 403);
  try {
    g.require_token_id(" Parisxyzzy");
    FAIL("no exception");
  } catch (const UsageError& e) { CHECK(std::string(e.what()).find("is not a single token") != std::string::npos); }
}

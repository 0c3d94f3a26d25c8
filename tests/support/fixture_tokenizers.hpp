// tests/support/fixture_tokenizers.hpp — the fixtures' tokenizers, loaded once per test program (loading the
// GPT-2 one takes ~0.2 s) and shared by the tokenizer tests. nullptr when the fixture is missing (and
// VOCABLENS_ALLOW_MISSING_FIXTURES allows it; otherwise vl_test::fixture has already failed the test).
//
//   const vocablens::Tokenizer* t = vl_test::gpt2_tokenizer();
//   if (!t) return;
//   CHECK(t->encode(" Paris").size() == 1);
#pragma once
#include <memory>
#include <string>

#include "fixtures.hpp"
#include "vocablens/tokenizer.hpp"

namespace vl_test {

/// The byte-level BPE tokenizer of the gpt2-tiny fixture (GPT-2's 50 257 tokens).
inline const vocablens::Tokenizer* gpt2_tokenizer() {
  static std::unique_ptr<vocablens::Tokenizer> t = [] {
    std::string dir = fixture("gpt2-tiny");
    return dir.empty() ? nullptr : vocablens::load_tokenizer_for(dir);
  }();
  return t.get();
}

/// The 512-token llama2.c tokenizer of the stories260K fixture (tok512.bin).
inline const vocablens::Tokenizer* tok512_tokenizer() {
  static std::unique_ptr<vocablens::Tokenizer> t = [] {
    std::string p = fixture("stories260K/tok512.bin");
    return p.empty() ? nullptr : vocablens::load_tokenizer(p);
  }();
  return t.get();
}

}  // namespace vl_test

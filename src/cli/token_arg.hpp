// src/cli/token_arg.hpp — flags that name one token (--target " Paris") or carry a prompt, shared by the
// intervention commands (patch, ablate, attribute, generate --steer).
//
//   int64_t t = resolve_token(*tok, " Paris", "--target");     // the token's bytes, its display form, or
//                                                               // text that encodes to exactly one token
//   auto ids = encode_prompt(*tok, text, "--clean", bos);      // UsageError on empty text
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "vocablens/tokenizer.hpp"

namespace vocablens::cli {

/// One token from a flag's value: its bytes (" Paris"), its display form ("␣Paris"), "#id" / a bare id
/// with `allow_id`, or text the tokenizer encodes (without BOS) to exactly one token. Otherwise one
/// UsageError naming the flag and the tokens the text is.
int64_t resolve_token(const Tokenizer& tok, const std::string& s, const std::string& flag);

/// The first `width` code points of UTF-8 text (display tokens in fixed-width table cells).
std::string first_columns(const std::string& s, size_t width);

/// BOS handling: -1 = the tokenizer's convention, 0 = never, 1 = always.
std::vector<int64_t> encode_prompt(const Tokenizer& tok, const std::string& text, const std::string& flag, int bos = -1);

}  // namespace vocablens::cli

// vocablens/token_id.hpp — text -> one token id: the one rule every command and analysis uses (lens --target,
// heads --token, neighbour terms, the demo's words, Tokenizer::require_token_id).
//
// `text` as a token (Tokenizer::token_to_id: its bytes, or its display form "␣Paris"), else its encoding
// without BOS when that is exactly one token (llama2.c's dummy prefix makes " Paris" the token "Paris").
//
//   std::vector<int64_t> pieces;
//   if (auto id = vocablens::single_token_id(*tok, " Paris", &pieces)) ...   // 6342 for GPT-2
//   else throw UsageError("' Paris' is " + std::to_string(pieces.size()) + " tokens: " + vocablens::display_ids(*tok, pieces));
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace vocablens {

class Tokenizer;

/// The id of `text` as one token, or nullopt; `pieces`, when given, receives the encoding (no BOS; empty when
/// the text is a token as it stands).
std::optional<int64_t> single_token_id(const Tokenizer& tok, std::string_view text, std::vector<int64_t>* pieces = nullptr);

/// The first `max` of `ids` in display form, space-separated, with " ..." when there are more (unless
/// `ellipsis` is false): for error messages about multi-token text.
std::string display_ids(const Tokenizer& tok, const std::vector<int64_t>& ids, size_t max = 8, bool ellipsis = true);

}  // namespace vocablens

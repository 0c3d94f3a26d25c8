// vocablens/token_filter.hpp — which tokens a projection may report (Dar et al. restrict tables to readable
// tokens), and token classes that treat " Paris", "Paris" and "paris" as one.
//
// A TokenFilter becomes a sorted allow-list of ids in [0, V) (or nullopt: everything allowed), which the
// projections pass to TopkStreamOptions::cols / rows; normalized_token_classes() feeds row_class /
// col_class so that a head mapping " Paris" to "Paris" is not reported as a match of a token with itself.
//
//   vocablens::TokenFilter f;  f.alpha_only = true;
//   auto allowed = vocablens::allowed_tokens(V, f, tok.get());   // std::optional<std::vector<int64_t>>
//   f.allow = vocablens::read_token_id_list("ids.txt");          // "# comment\n 464 1110 ..."
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace vocablens {

class Tokenizer;

/// Which tokens may appear in a projection's results.
struct TokenFilter {
  /// Only tokens whose bytes, after at most one leading space, are ASCII letters (at least one).
  bool alpha_only = false;
  /// Only these token ids (nullopt = no allow-list). Combined with alpha_only by intersection.
  std::optional<std::vector<int64_t>> allow;
  bool active() const { return alpha_only || allow.has_value(); }
};

/// The allowed ids in [0, V), ascending, or nullopt when the filter allows everything. alpha_only needs
/// a tokenizer (UsageError otherwise); ids the tokenizer does not know are not alphabetic. Allow-list ids
/// outside [0, V) are a UsageError.
std::optional<std::vector<int64_t>> allowed_tokens(int64_t V, const TokenFilter& f, const Tokenizer* tok);

/// True when token `id`'s bytes are one optional leading space followed by ASCII letters only.
bool is_alphabetic_token(const Tokenizer& tok, int64_t id);

/// One class id per token in [0, V): tokens equal after dropping leading spaces and ASCII-lowercasing
/// share a class (" Paris", "Paris", "paris"); tokens that normalise to "" and ids the tokenizer does not
/// know get -1 (never equal). For TopkStreamOptions::row_class / col_class.
std::vector<int64_t> normalized_token_classes(const Tokenizer& tok, int64_t V);

/// Reads a token allow-list file: whitespace-separated decimal ids; '#' starts a comment to end of line.
/// Throws FormatError naming the file on anything else.
std::vector<int64_t> read_token_id_list(const std::string& path);

}  // namespace vocablens

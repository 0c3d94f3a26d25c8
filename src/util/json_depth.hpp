// src/util/json_depth.hpp — refuse deeply nested JSON before nlohmann sees it (private to vocablens).
//
// nlohmann 3.11 parses and destroys iteratively, but copying a json value and dump() recurse once per
// nesting level, so a file of 10^5 '[' (found for result directories: `vocablens report` crashed with a
// stack overflow) must be refused before it becomes a json. Every reader of untrusted JSON calls this.
//
//   vocablens::detail::check_json_depth(text, path);           // throws FormatError(path, "JSON nested ...")
//   auto j = nlohmann::json::parse(text);
#pragma once
#include <string_view>
#include <string>

namespace vocablens::detail {

/// Default bound: far above any real file (config.json, tokenizer.json and results nest < 10 levels).
inline constexpr int kMaxJsonDepth = 256;

/// Throws FormatError(path, "JSON nested deeper than N levels") when brackets outside strings nest deeper
/// than max_depth. Linear, allocation-free, and indifferent to whether the rest of the text is valid JSON.
void check_json_depth(std::string_view text, const std::string& path, int max_depth = kMaxJsonDepth);

}  // namespace vocablens::detail

// src/util/nearest.hpp — "did you mean": the names closest to a mistyped one, the one rule every surface uses
// (CLI commands and flags, declared options from Python and the HTTP API).
//
//   nearest_names("topk", {"top_k", "layers", "prompt"});   // {"top_k"}
//
// Names are compared after dropping '-' and '_' and case ("--top-k" ~ "top_k" ~ "TopK"); a candidate is
// close when its edit distance is at most a third of the word's length (at least 1), or, for words of 3+
// characters, when one contains the other. At most 3, best first; empty when nothing is close.
#pragma once
#include <string>
#include <vector>

namespace vocablens::detail {

std::vector<std::string> nearest_names(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace vocablens::detail

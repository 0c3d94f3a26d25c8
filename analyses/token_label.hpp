// analyses/token_label.hpp — how the analyses name a token in their tables and reports: its display form
// ("␣Paris", "⏎", see Tokenizer::display) when a tokenizer is at hand, else "#<id>" (a bare checkpoint).
//
//   row.push_back(token_label(tok, id));   // "␣Paris", or "#6342" without a tokenizer
#pragma once
#include <cstdint>
#include <string>

#include "vocablens/tokenizer.hpp"

namespace vocablens {

inline std::string token_label(const Tokenizer* tok, int64_t id) { return tok ? tok->display(id) : "#" + std::to_string(id); }

}  // namespace vocablens

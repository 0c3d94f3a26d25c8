// Recognising a WordPiece vocabulary in a directory: what load_tokenizer (tokenizer.cpp) asks of
// wordpiece_tokenizer.cpp, private to the library.
#pragma once
#include <memory>
#include <string>

#include "vocablens/tokenizer.hpp"

namespace vocablens {
namespace detail {
/// A WordPiece tokenizer in `dir` (tokenizer.json with a WordPiece model, or vocab.txt without vocab.json
/// beside it), or nullptr when the directory holds no WordPiece vocabulary.
std::unique_ptr<Tokenizer> find_wordpiece(const std::string& dir);
/// True when `path` is a tokenizer.json whose model type is WordPiece.
bool is_wordpiece_tokenizer_json(const std::string& path);
}  // namespace detail
}  // namespace vocablens

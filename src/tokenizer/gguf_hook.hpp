// The GGUF tokenizer hook: how load_tokenizer()/load_tokenizer_for() (vocablens_core, no LibTorch) reach the
// GGUF reader (src/checkpoint/gguf.cpp, in the LibTorch library vocablens). The reader sets the pointer at
// start-up whenever its object file is linked (it is whenever a program calls load_model() or read_gguf(): the
// CLI, the Python module), so a GGUF's own tokenizer.ggml.* vocabulary is used by every command; a program
// without the reader (vocablens::core alone) gets a clear error naming the file instead.
#pragma once
#include <memory>
#include <string>

namespace vocablens {
class Tokenizer;
namespace detail {

/// Builds the tokenizer of a GGUF file from its tokenizer.ggml.* metadata; nullptr when the file has none.
/// Throws FormatError naming the file when the metadata is malformed.
using GgufTokenizerLoader = std::unique_ptr<Tokenizer> (*)(const std::string& path);
extern GgufTokenizerLoader gguf_tokenizer_loader;

}  // namespace detail
}  // namespace vocablens

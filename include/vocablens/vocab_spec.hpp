// vocablens/vocab_spec.hpp — a tokenizer built from vocabulary data held in memory (GGUF metadata
// `tokenizer.ggml.*`, or any other container), without files.
//
// Three kinds, named as llama.cpp's `tokenizer.ggml.model` names them:
//   "gpt2"  — byte-level BPE (GPT-2, Llama-3, Qwen2, GPT-NeoX, ...): tokens spelled in GPT-2's
//             byte-to-unicode alphabet ("Ġthe"), merges "left right" in rank order, and the pre-tokenizer
//             named by `tokenizer.ggml.pre` ("gpt-2", "llama-bpe", "qwen2", ...; see known_bpe_pre_names());
//   "llama" — SentencePiece (Llama-2, Mistral, Gemma-1/2, Phi-3): pieces with "▁" for space, scores, token
//             types; encoded by libsentencepiece (BPE by scores, byte fallback) from a model built in memory;
//   "gemma4" — Gemma-4: pieces with "▁", merges in rank order, <0xNN> byte fallback, split at newline runs.
//
//   vocablens::VocabSpec v;
//   v.source = "model.gguf";                      // for messages and Tokenizer::source()
//   v.model = "gpt2";  v.pre = "llama-bpe";
//   v.tokens = {...};  v.token_types = {...};  v.merges = {"Ġ Ġ", "Ġ t", ...};
//   v.bos_id = 128000; v.eos_id = 128001;  v.add_bos = true;
//   std::unique_ptr<vocablens::Tokenizer> tok = vocablens::tokenizer_from_vocab(v);
//   tok->encode("Hello");                         // [128000, 9906]  (= llama.cpp llama_tokenize)
//
// Token types are GGUF's / SentencePiece's numbering: 1 normal, 2 unknown, 3 control, 4 user-defined,
// 5 unused, 6 byte. Control tokens are special (matched in text only with EncodeOptions::special_tokens);
// user-defined tokens are always matched as whole tokens (llama.cpp and Hugging Face do the same).
// What the caller may expect: ids equal llama.cpp's llama_tokenize(add_special = add_bos, parse_special =
// EncodeOptions::special_tokens) on the cross-check corpus (docs/tokenizers.md gives the counts).
// Errors: FormatError(source, one line) for inconsistent data (sizes differ, a merge naming an unknown
// token, an unknown model or pre-tokenizer name — the message lists the known ones).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "vocablens/tokenizer.hpp"

namespace vocablens {

struct VocabSpec {
  std::string source;                ///< where the data came from (file name), for messages
  std::string model;                 ///< "gpt2", "llama" or "gemma4" (tokenizer.ggml.model)
  std::string pre;                   ///< gpt2 only: tokenizer.ggml.pre; "" = "default" (GPT-2's expression)
  std::vector<std::string> tokens;   ///< id -> token text (tokenizer.ggml.tokens)
  std::vector<float> scores;         ///< llama: id -> score (tokenizer.ggml.scores); may be empty for gpt2
  std::vector<int32_t> token_types;  ///< id -> type (tokenizer.ggml.token_type); empty = all normal
  std::vector<std::string> merges;   ///< gpt2, gemma4: "left right" in rank order (tokenizer.ggml.merges)
  int64_t bos_id = -1, eos_id = -1, unk_id = -1, pad_id = -1;  ///< -1 = none
  std::optional<bool> add_bos;                                 ///< tokenizer.ggml.add_bos_token; unset: llama yes, gpt2 per `pre`
  std::optional<bool> add_eos;                                 ///< tokenizer.ggml.add_eos_token; unset: no
  std::optional<bool> add_space_prefix;  ///< llama: tokenizer.ggml.add_space_prefix; unset: yes (Gemma: false)
};

/// Builds the tokenizer. Throws FormatError(spec.source, ...) as described above.
std::unique_ptr<Tokenizer> tokenizer_from_vocab(const VocabSpec& spec);

/// The `tokenizer.ggml.pre` names tokenizer_from_vocab() understands for model "gpt2".
std::vector<std::string> known_bpe_pre_names();

}  // namespace vocablens

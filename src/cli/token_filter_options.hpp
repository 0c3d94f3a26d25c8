// src/cli/token_filter_options.hpp — the token flags the projection commands share (heads, neurons, project):
//
//   --alpha-only       only tokens made of ASCII letters (after one optional space)
//   --allow-list FILE  only these token ids (whitespace-separated ids, # comments)
//   --tokenizer PATH   tokenizer file or directory (default: found beside the model)
//
//   TokenFilterFlags tf;                                  // in the command's options struct
//   add_token_filter_options(sub, tf);                     // when the subcommand is declared
//   opts.filter = token_filter(tf);                        // reads the allow-list file
//   auto tok = load_tokenizer(model_path, tf, /*required=*/false);
#pragma once
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "vocablens/tokenizer.hpp"
#include "vocablens/token_filter.hpp"
#include "vocablens/unembed.hpp"

namespace vocablens::cli {

struct TokenFilterFlags {
  bool alpha_only = false;
  std::string allow_list;  ///< path of an id list; empty = no allow-list
  std::string tokenizer;   ///< file or directory; empty = found beside the model
};

/// Declares --alpha-only, --allow-list and --tokenizer on `sub`, bound to `f` (which must outlive parsing).
void add_token_filter_options(CLI::App& sub, TokenFilterFlags& f);

/// The TokenFilter the flags ask for. Reads the --allow-list file; a bad one is a FormatError naming it.
TokenFilter token_filter(const TokenFilterFlags& f);

/// The tokenizer for `model_path` (--tokenizer when given). When none is found and nothing needs one
/// (`required` false, no --tokenizer, no --alpha-only) returns nullptr so that the command can still show
/// token ids; otherwise the loader's FormatError propagates.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& model_path, const TokenFilterFlags& f, bool required);

}  // namespace vocablens::cli

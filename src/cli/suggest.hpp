// src/cli/suggest.hpp — "did you mean" for mistyped commands and options.
//
//   vocablens lense ...          -> vocablens: error: unknown command 'lense'; did you mean 'lens'?      (exit 2)
//   vocablens heads M --topk 5   -> vocablens: error: heads: unknown option '--topk'; did you mean '--top-k'? (exit 2)
#pragma once
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace vocablens::cli {

/// The candidates closest to `word` (edit distance after ignoring '-' and '_' and case, at most a third of
/// the word's length, at least 1; a candidate that contains the word or is contained in it also counts),
/// best first; empty when nothing is close.
std::vector<std::string> nearest(const std::string& word, const std::vector<std::string>& candidates);

/// When argv names no known command (argv[1] is not an option and not a subcommand of `app`), the one-line
/// error with suggestions; "" otherwise.
std::string unknown_command_message(const CLI::App& app, int argc, char** argv);

/// After a parse error of a known command: the one-line error naming the first argument that is not an
/// option of that command, with suggestions; "" when none is found (CLI11's own message is used then).
std::string unknown_option_message(const CLI::App& app, int argc, char** argv);

}  // namespace vocablens::cli

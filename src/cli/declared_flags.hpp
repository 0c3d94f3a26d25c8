// src/cli/declared_flags.hpp — the command-line flags of a declared analysis (vocablens/options.hpp), made
// from its declaration: `--top-k N`, `--no-keys` (a flag whose default is true), `--bos` / `--no-bos` (a
// flag without a default), positionals, `--allow-list FILE` (an option read from a file on the CLI), and for
// a prompt option `--prompt TEXT` and `--prompt-ids IDS` (the same option given as token ids, used exactly as
// given: the one spelling of ids on every command that reads a prompt).
//
//   auto flags = std::make_shared<vocablens::cli::DeclaredFlags>(vocablens::find_analysis("neurons").decl);
//   flags->add_to(sub);                       // when the subcommand is declared
//   nlohmann::json given = flags->given();    // after parsing: only what was typed, as typed values
//   auto r = vocablens::run_analysis(a, model, tok, given, vocablens::Surface::Cli);
//
// Values are only converted here (text to number, a file to its ids); every check is resolve_options's.
#pragma once
#include <CLI/CLI.hpp>

#include <deque>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vocablens/options.hpp"

namespace vocablens::cli {

class DeclaredFlags {
 public:
  explicit DeclaredFlags(AnalysisDecl d);
  /// Adds every declared option to `sub`, with its help text and default shown (storage is this object's:
  /// it must outlive parsing). Options named in `optional_here` are not required on this command line (the
  /// command fills them from another flag, e.g. lens's --prompt from --prompt-ids; resolve_options still checks).
  void add_to(CLI::App& sub, const std::vector<std::string>& optional_here = {});
  /// The options given on the command line, as JSON values of their declared types.
  nlohmann::json given() const;
  const AnalysisDecl& decl() const { return decl_; }

 private:
  struct Slot {
    const OptionDecl* opt = nullptr;
    std::string text;
    std::vector<std::string> texts;
    std::vector<int64_t> ids;  // a prompt's --NAME-ids
    CLI::Option* cli_ids = nullptr;
    bool on = false, off = false;  // flags: --x / --no-x
    CLI::Option* cli = nullptr;
    CLI::Option* cli_off = nullptr;
  };
  AnalysisDecl decl_;
  std::deque<Slot> slots_;
};

/// `d` holding only the options that `base` does not declare: the flags a command running several analyses adds
/// for its other forms (features --prompt / --corpus beside feature_logits's flags).
AnalysisDecl options_not_in(AnalysisDecl d, const AnalysisDecl& base);

/// "Tokens per vector (default 30)": the help line the CLI shows for a declared option.
std::string help_line(const OptionDecl& o);

}  // namespace vocablens::cli

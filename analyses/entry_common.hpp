// analyses/entry_common.hpp — option declarations and readers several analyses' entries share (private to
// analyses/*_entry.cpp; see vocablens/analysis_registry.hpp).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vocablens/options.hpp"
#include "vocablens/token_filter.hpp"
#include "vocablens/unembed.hpp"

namespace vocablens {
class Model;
class Tokenizer;
}

namespace vocablens::entry {

/// alpha_only, allow (CLI: --alpha-only, --allow-list FILE).
std::vector<OptionDecl> token_filter_decls();
TokenFilter token_filter_of(const nlohmann::json& o);

/// inverse (pinv | transpose | embed), pinv_rtol.
std::vector<OptionDecl> inverse_decls(const std::string& what);
InverseKind inverse_of(const nlohmann::json& o);

/// A layer option read against the model: negative counts from the end; UsageError naming the option when
/// out of range.
int64_t layer_of(const nlohmann::json& o, const char* name, const Model& m, const std::string& analysis);

/// prompt (Prompt, required) and bos (tri-state Flag): the input of a forward-pass analysis.
std::vector<OptionDecl> prompt_decls();
/// The prompt's ids: text encoded with the tokenizer (BOS as `bos` says, else the tokenizer's convention),
/// or ids checked against the vocabulary; UsageError when longer than the model's context.
std::vector<int64_t> prompt_of(const nlohmann::json& o, const Tokenizer* tok, const Model& m, const std::string& analysis);
/// The prompt's text ("" when it was given as ids), for the Result's settings.
std::string prompt_text(const nlohmann::json& o);

/// One token: an id (checked against the vocabulary), "#ID", its bytes or display form, or text that the
/// tokenizer encodes to exactly one token. UsageError naming the option otherwise.
int64_t token_of(const nlohmann::json& v, const Tokenizer* tok, const Model& m, const std::string& analysis,
                 const std::string& option);

/// Appends `more` to `into` (declarations are built from shared pieces).
void append(std::vector<OptionDecl>& into, const std::vector<OptionDecl>& more);

}  // namespace vocablens::entry

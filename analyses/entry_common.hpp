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
struct AnalysisRequest;
}

namespace vocablens::entry {

/// alpha_only, allow (CLI: --alpha-only, --allow-list FILE).
std::vector<OptionDecl> token_filter_decls();
TokenFilter token_filter_of(const nlohmann::json& o);

/// inverse (pinv | transpose | embed), pinv_rtol.
std::vector<OptionDecl> inverse_decls(const std::string& what);
InverseKind inverse_of(const nlohmann::json& o);

/// A layer option read against the model: negative counts from the end; UsageError naming the option (as the
/// request's surface spells it) when out of range.
int64_t layer_of(const AnalysisRequest& q, const char* name);

/// An Indices option of layers (or heads) checked against the model's count: UsageError
/// "<analysis>: <option>: layer 7 is out of range (0..4)".
std::vector<int64_t> indices_below(const AnalysisRequest& q, const char* name, int64_t count, const std::string& what);

/// prompt (Prompt, required) and bos (tri-state Flag): the input of a forward-pass analysis.
std::vector<OptionDecl> prompt_decls();
/// The prompt's ids: text encoded with the tokenizer (BOS as `bos` says, else the tokenizer's convention),
/// or ids checked against the vocabulary; UsageError when longer than the model's context.
std::vector<int64_t> prompt_of(const AnalysisRequest& q);
/// The prompt's text for the Result's settings: as given, or the ids decoded when given as ids (and a
/// tokenizer is there).
std::string prompt_text(const AnalysisRequest& q, const std::vector<int64_t>& ids);
/// True when the prompt was given as token ids (the Result then also records them as settings.prompt_ids).
bool prompt_is_ids(const nlohmann::json& o);

/// One token: an id (checked against the vocabulary), "#ID", its bytes or display form, or text that the
/// tokenizer encodes to exactly one token. UsageError naming the option otherwise.
int64_t token_of(const AnalysisRequest& q, const nlohmann::json& v, const std::string& option);

/// Appends `more` to `into` (declarations are built from shared pieces).
void append(std::vector<OptionDecl>& into, const std::vector<OptionDecl>& more);

}  // namespace vocablens::entry

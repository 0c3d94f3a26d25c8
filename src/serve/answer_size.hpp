// src/serve/answer_size.hpp — how many values an analysis's answer will hold in its largest array, from its
// resolved options, before it runs.
//
// A `lens` with top_k 50257 over 21 tokens of a 12-layer model is 13.7 million (token, probability) entries;
// its JSON answer and the tree that builds it took gigabytes and, beside a `heads` request with top_k 10^6,
// ended the server. The explorer refuses such a request (413) before any work, naming the estimate and the
// limit (`serve --max-answer-values`). The estimate counts the answer's largest array: an analysis whose answer
// grows otherwise declares how (AnalysisDecl::answer_size, vocablens/options.hpp: the lens's layers, the heads'
// pairs); for the others, top_k (or k) × positions of the prompt (if any) × the length of each list option given.
//
//   AnswerSize s = estimate_answer_size(analysis, resolved, model, tok);
//   if (s.values > limit) return error_answer(413, ...s.how...);
#pragma once
#include <nlohmann/json.hpp>

#include "vocablens/options.hpp"

namespace vocablens {
class Model;
class Tokenizer;
struct DeclaredAnalysis;
}  // namespace vocablens

namespace vocablens::serve {

/// Throws what the analysis itself would for a bad prompt (UsageError), so the caller answers 400 as before.
AnswerSize estimate_answer_size(const DeclaredAnalysis& a, const nlohmann::json& resolved, const Model& model,
                                const Tokenizer* tok);

}  // namespace vocablens::serve

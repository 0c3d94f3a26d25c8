// src/serve/answer_size.hpp — how many values an analysis's answer will hold in its largest array, from its
// resolved options, before it runs.
//
// A `lens` with top_k 50257 over 21 tokens of a 12-layer model is 13.7 million (token, probability) entries;
// its JSON answer and the tree that builds it took gigabytes and, beside a `heads` request with top_k 10^6,
// ended the server. The explorer refuses such a request (413) before any work, naming the estimate and the
// limit (`serve --max-answer-values`). The estimate counts the answer's largest array:
//   lens    top_ids: top_k × positions × (layers + 1) (× 2 with resid_mid)
//   heads   pair_ids: 2 × (top_k + per-token lists) × layers × heads × kinds (both = 2)
//   others  top_k (or k) × positions of the prompt (if any) × the length of each list option given
//
//   AnswerSize s = estimate_answer_size(analysis, resolved, model, tok);
//   if (s.values > limit) return error_answer(413, ...s.how...);
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace vocablens {
class Model;
class Tokenizer;
struct DeclaredAnalysis;
}  // namespace vocablens

namespace vocablens::serve {

struct AnswerSize {
  double values = 0;  ///< double: products of hostile values do not wrap
  std::string how;    ///< "top_k 50257 × 21 positions × 13 layers"
};

/// Throws what the analysis itself would for a bad prompt (UsageError), so the caller answers 400 as before.
AnswerSize estimate_answer_size(const DeclaredAnalysis& a, const nlohmann::json& resolved, const Model& model,
                                const Tokenizer* tok);

}  // namespace vocablens::serve

// `direct_path`: the zero-layer ("direct path") bigram reading of Elhage et al. 2021, "A Mathematical Framework
// for Transformer Circuits": for each token t of a prompt, the logits that the embedding alone writes,
//
//   logits(t) = W_U · final_norm(W_E[t]) (+ b_U, then the model's final soft-cap where it has one)
//
// i.e. the model's own last step applied to the raw embedding row, every block skipped — what the direct path
// from the embedding to the unembedding predicts as the next token. Positions, BOS and the blocks play no
// part; a model's embedding scale (Gemma) changes nothing up to the norm's epsilon, since the final norm
// divides it out. Declared here with its run function and its estimate, and nowhere else: the CLI command
// (src/cli/cmd_declared.cpp), the Python function and method, the stub and POST /api/direct_path come from the
// declaration.
//
// Result "direct_path": arrays ids [T], top_ids / top_logits [T, k] (logit descending, token id ascending on
// ties) and, unless bottom is false, bottom_ids / bottom_logits [T, k] (ascending); table top_k (position,
// token_id, token, direction, rank, next_id, next_token, logit). Non-finite logits are refused, naming the
// token.
#include "entry_common.hpp"

#include <fmt/format.h>

#include <ATen/ATen.h>

#include "token_label.hpp"
#include "vocablens/analysis_estimate.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/tokenizer.hpp"

namespace vocablens::entries {
namespace {

Result direct_path_result(const AnalysisRequest& q) {
  at::NoGradGuard no_grad;
  const auto ids = entry::prompt_of(q);
  const int64_t T = static_cast<int64_t>(ids.size());
  const int64_t V = q.model.config().vocab_size;
  const int64_t k = std::min<int64_t>(q.options.at("top_k").get<int64_t>(), V);
  const bool bottom = q.options.at("bottom").get<bool>();
  const at::Tensor idx = at::tensor(ids, at::kLong);
  const at::Tensor x = q.model.W_E().index_select(0, idx).to(at::kFloat);                        // [T, d]
  const at::Tensor logits = q.model.unembed(q.model.final_norm(x)).to(at::kFloat).contiguous();  // [T, V]
  const at::Tensor finite = at::isfinite(logits).all(1);
  for (int64_t t = 0; t < T; ++t)
    if (!finite[t].item<bool>())
      throw FormatError(q.model.source(),
                        fmt::format("direct_path: the logits of token {} ({}) are not finite: its embedding row or "
                                    "the final norm holds NaN or Inf",
                                    ids[static_cast<size_t>(t)], token_label(q.tok, ids[static_cast<size_t>(t)])));
  Result r;
  r.kind = "direct_path";
  r.settings = {{"prompt", entry::prompt_text(q, ids)},
                {"top_k", k},
                {"bottom", bottom},
                {"definition",
                 "logits(t) = W_U final_norm(W_E[t]) (+ b_U, soft-cap): the embedding alone, every "
                 "block skipped (Elhage et al. 2021, the zero-layer path)"}};
  Table tab{"top_k", {"position", "token_id", "token", "direction", "rank", "next_id", "next_token", "logit"}, {}};
  nlohmann::json tokens = nlohmann::json::array();
  for (int64_t t = 0; t < T; ++t) tokens.push_back(token_label(q.tok, ids[static_cast<size_t>(t)]));
  r.summary["tokens"] = tokens;
  r.arrays["ids"] = NdArray::i64({T}, ids.data());
  for (const bool descending : {true, false}) {
    if (!descending && !bottom) break;
    // A stable sort keeps equal logits in token-id order: ties are broken by the lower id, on every machine.
    const auto sorted = at::sort(logits, /*stable=*/true, /*dim=*/1, descending);
    const at::Tensor vals = std::get<0>(sorted).narrow(1, 0, k).to(at::kDouble).contiguous();
    const at::Tensor top = std::get<1>(sorted).narrow(1, 0, k).contiguous();
    const char* dir = descending ? "top" : "bottom";
    r.arrays[std::string(dir) + "_ids"] = NdArray::i64({T, k}, top.data_ptr<int64_t>());
    r.arrays[std::string(dir) + "_logits"] = NdArray::f64({T, k}, vals.data_ptr<double>());
    const int64_t* ti = top.data_ptr<int64_t>();
    const double* tv = vals.data_ptr<double>();
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = 0; j < k; ++j) {
        const int64_t id = ids[static_cast<size_t>(t)], next = ti[t * k + j];
        tab.rows.push_back({t, id, token_label(q.tok, id), dir, j + 1, next, token_label(q.tok, next), tv[t * k + j]});
      }
  }
  r.tables.push_back(std::move(tab));
  if (q.tok) r.provenance["tokenizer"] = q.tok->source();
  return r;
}

}  // namespace

void register_direct_path_entry(AnalysisRegistry& r) {
  AnalysisDecl d;
  d.name = "direct_path";
  d.command = "direct-path";
  d.input = "prompt";
  d.summary =
      "The direct path (zero-layer bigrams): the next tokens each prompt token's embedding alone predicts, "
      "W_U final_norm(W_E[t])";
  d.options = entry::prompt_decls();
  entry::append(d.options,
                {
                    {"top_k", OptionType::Integer, 10, "Next tokens listed per token and direction", 1, 1e6},
                    {"bottom", OptionType::Flag, true, "Also the tokens the embedding suppresses most (the lowest logits)"},
                });
  r.add({std::move(d), direct_path_result,
         // The embedding rows and the [T, V] logits, sorted twice (values and indices: 3 more [T, V]).
         [](const AnalysisRequest& q) {
           const auto T = static_cast<double>(entry::prompt_of(q).size());
           const auto& cf = q.model.config();
           const double V = static_cast<double>(cf.vocab_size), d = static_cast<double>(cf.d_model);
           return entry::weights_phase_estimate(q, "direct_path: W_E and W_U as float32, the [T, V] logits and their sort",
                                                (2 * V * d + 4 * T * V) * 4 + T * V * 8,
                                                fmt::format("the direct path of {} tokens", static_cast<int64_t>(T)),
                                                "a shorter " + q.spelled("prompt"));
         }});
}

}  // namespace vocablens::entries

// vocablens/analysis_estimate.hpp — the peak memory a declared analysis will need, before any work.
//
// An analysis declares, beside its options and its run function (vocablens/analysis_registry.hpp), how to
// estimate a request's peak memory from shapes alone. Every surface reads that one estimate: the CLI's
// `--dry-run` and its up-front refusal, Python's `vocablens.estimate(...)`, the server's memory budget.
//
//   const auto& a = vocablens::find_analysis("lens");
//   vocablens::AnalysisEstimate e = vocablens::estimate_analysis(a, model, tok.get(), {{"prompt", "Hello"}},
//                                                              vocablens::Surface::Python);
//   e.memory.total();            // bytes at the peak: runtime, weights as stored, the largest phase
//   fmt::print("{}", e.memory.table());
//   e.what;                      // "the lens of 2 tokens of gpt2-tiny"
//   e.reduce;                    // how to need less, in the surface's spelling: "a shorter prompt, or two_pass ..."
//
// An analysis that declares no estimate gets the runtime and the weights as stored (model_memory()).
// Guarantees: the options are resolved (and so checked) exactly as run_analysis resolves them; nothing is
// computed that the run would compute (a prompt is tokenised, files named by options may be opened), unless
// `computed` says what (graph: the forward and the encoders, to count the active features).
#pragma once
#include <atomic>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "vocablens/memory_estimate.hpp"
#include "vocablens/options.hpp"

namespace vocablens {

class Model;
class Tokenizer;
struct AnalysisInputs;
struct DeclaredAnalysis;

struct AnalysisEstimate {
  MemoryEstimate memory;
  std::string what;    ///< the work estimated, for messages: "the lens of 12 tokens of gpt2-tiny"
  std::string reduce;  ///< how a request needs less, in its surface's spelling; may be empty
  /// How to fit within `limit` bytes, in the surface's spelling (graph: the largest max_feature_nodes that fits,
  /// from the same terms); empty function when the analysis cannot say more than `reduce`. A surface that
  /// refuses a request (the CLI's check, the server's budget) shows it in place of `reduce`.
  std::function<std::string(double limit)> reduce_within;
  std::string note;  ///< shown after a dry run (an alternative and its size); may be empty
  /// What the estimate itself had to compute, for the dry run's last line ("forward and encoders only; no
  /// attribution computed"); empty when it computed nothing (the usual case: shapes alone).
  std::string computed;
};

/// The runtime and the model's weights as stored, no activations: what every analysis needs at least.
MemoryEstimate model_memory(const Model& m);

/// resolve_options + the analysis's declared estimate (model_memory() when it declares none).
AnalysisEstimate estimate_analysis(const DeclaredAnalysis& a, const Model& m, const Tokenizer* tok, const nlohmann::json& given,
                                   Surface surface, const AnalysisInputs* inputs = nullptr);

}  // namespace vocablens

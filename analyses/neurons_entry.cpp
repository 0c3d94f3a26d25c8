// `neurons`: its options, declared once, and the call every surface makes (vocablens/analysis_registry.hpp).
#include "entry_common.hpp"
#include "vocablens/analysis_estimate.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/neurons.hpp"
#include "vocablens/tokenizer.hpp"

namespace vocablens::entries {

void register_neurons_entry(AnalysisRegistry& r) {
  AnalysisDecl d;
  d.name = d.command = "neurons";
  d.summary = "MLP neurons in vocabulary space: top tokens of each key, gate and value vector, with their norms";
  d.options = {
      OptionDecl{"layer", OptionType::Integer, nullptr, "Layer (0-based; negative counts from the end)"}.as_required(),
      {"neurons", OptionType::Indices, nullptr, "Neurons, e.g. 0,5,10-20 (default: all of the layer)", 0},
      {"top_k", OptionType::Integer, 30, "Tokens per vector", 1, 1e6},
  };
  entry::append(d.options, entry::inverse_decls("Keys/gates"));
  entry::append(d.options, {
                               {"keys", OptionType::Flag, true, "The keys (columns of W_in)"},
                               {"gates", OptionType::Flag, true, "The gates (gated MLPs)"},
                               {"values", OptionType::Flag, true, "The values (rows of W_out)"},
                               {"bottom", OptionType::Flag, false, "Also the lowest-scoring tokens of each vector"},
                           });
  entry::append(d.options, entry::token_filter_decls());
  r.add({std::move(d),
         [](const AnalysisRequest& q) {
           const auto& o = q.options;
           NeuronsOptions no;
           no.layer = entry::layer_of(q, "layer");
           if (!o.at("neurons").is_null()) no.neurons = o.at("neurons").get<std::vector<int64_t>>();
           no.top_k = o.at("top_k").get<int64_t>();
           no.inverse = entry::inverse_of(o);
           no.pinv.rtol = o.at("pinv_rtol").get<double>();
           no.keys = o.at("keys").get<bool>();
           no.gates = o.at("gates").get<bool>();
           no.values = o.at("values").get<bool>();
           no.bottom = o.at("bottom").get<bool>();
           no.filter = entry::token_filter_of(o);
           no.progress = q.progress;
           if (!no.keys && !no.values && !no.gates)
             throw UsageError("neurons: keys, gates and values all off leave nothing to show");
           auto r = analyze_neurons(q.model, no, q.tok).to_result(q.tok);
           if (q.tok) r.provenance["tokenizer"] = q.tok->source();  // as `vocablens neurons` writes it
           return r;
         },
         // W_U in float32 and one layer's key / gate / value vectors through it, in blocks of 1 024.
         [](const AnalysisRequest& q) {
           const auto& cf = q.model.config();
           const double d = static_cast<double>(cf.d_model), V = static_cast<double>(cf.vocab_size);
           return entry::weights_phase_estimate(q, "neurons: W_U in float32 and one layer's vectors through it, in blocks",
                                                (d * V + 3 * static_cast<double>(cf.d_mlp) * d + 1024 * V) * 4,
                                                "the neurons of " + q.model.source(),
                                                "nothing reduces it (W_U in float32 is most of it)");
         }});
}

}  // namespace vocablens::entries

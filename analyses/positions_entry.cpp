// `positions`: its options, declared once, and the call every surface makes (vocablens/analysis_registry.hpp).
#include <algorithm>

#include "entry_common.hpp"
#include "vocablens/analysis_estimate.hpp"
#include "vocablens/analysis_registry.hpp"
#include "declared_options.hpp"
#include "vocablens/model.hpp"
#include "vocablens/positions.hpp"

namespace vocablens::entries {

PositionOptions position_options(const nlohmann::json& o) {
  PositionOptions po;
  po.source = position_source_from_string(o.at("kind").get<std::string>());
  po.max_positions = o.at("max_positions").get<int64_t>();
  po.k = o.at("k").get<int64_t>();
  po.components = o.at("components").get<int64_t>();
  return po;
}

void register_positions_entry(AnalysisRegistry& r) {
  AnalysisDecl d;
  d.name = d.command = "positions";
  d.summary = "Geometry of the positional encoding: spectrum, position x position cosines, periodic components";
  d.options = {
      OptionDecl{"kind", OptionType::Choice, "auto",
                 "auto (the model's own), learned (W_pos), sinusoidal or rotary (computed analytically for the "
                 "model's sizes)"}
          .with_choices({"auto", "learned", "sinusoidal", "rotary"}),
      {"max_positions", OptionType::Integer, 2048, "Analyse at most this many positions (0 = all)", 0, 1e9},
      {"k", OptionType::Integer, 16, "Singular values reported", 1, 1e6},
      {"components", OptionType::Integer, 8, "Principal components analysed for periodicity", 1, 1e6},
  };
  r.add({std::move(d),
         [](const AnalysisRequest& q) {
           Result res = position_structure(q.model, position_options(q.options)).to_result();
           // A model with segment embeddings (BERT's token types): their geometry beside the positions'.
           if (q.model.W_seg().defined()) segment_structure(q.model, 8).add_to(res);
           return res;
         },
         // The position embeddings (and their centred copies) and their P x P Gram matrix. Beyond 2^15 positions
         // position_structure refuses by itself, naming max_positions: no Gram phase is counted then, so that its
         // message, not a memory refusal, is what the user sees.
         [](const AnalysisRequest& q) {
           const auto& cf = q.model.config();
           const PositionOptions po = position_options(q.options);
           const double d = static_cast<double>(cf.d_model);
           const double P = static_cast<double>(po.max_positions > 0 ? std::min<int64_t>(po.max_positions, cf.n_ctx) : cf.n_ctx);
           return entry::weights_phase_estimate(
               q, "positions: the position embeddings and their Gram matrix", P <= 32768.0 ? (3 * P * d + P * P) * 4 : 0.0,
               "the position structure of " + q.model.source(), q.spelled("max_positions") + " (fewer positions)");
         }});
}

}  // namespace vocablens::entries

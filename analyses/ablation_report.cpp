// Ablation in the report and notebook: its entry in the registry of result kinds (vocablens/result_kinds.hpp).
// The generic rendering shows it whole: settings (sites, mode), the before/after predictions of the summary
// and the side-by-side top-k table.
#include "vocablens/result_kinds.hpp"

namespace vocablens::kinds {

void register_ablation_report(ResultKinds& k) { k.add({"ablation", "Ablation", 13, "Ablation", nullptr, "", nullptr, {}}); }

}  // namespace vocablens::kinds

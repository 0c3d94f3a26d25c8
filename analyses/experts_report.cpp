// Experts of a mixture of experts in the report (the load of each expert per layer as a heatmap) and notebook.
// Its entry in the registry of result kinds (vocablens/result_kinds.hpp): title, order, report figure, notebook cell.
#include <string>
#include <vector>

#include "notebooks-export/report_blocks.hpp"
#include "vocablens/result_kinds.hpp"

namespace vocablens::kinds {
namespace {

using namespace report_detail;  // NOLINT: the report's building blocks and figures

void render_experts(Section& sec) {
  const NdArray* load = sec.array({"load"});
  Grid g;
  if (!load || !as_grid(*load, g)) return;
  std::vector<std::string> rows, cols;
  if (const NdArray* layers = sec.array({"layers"}))
    for (double v : as_vector(*layers)) rows.push_back("layer " + std::to_string(static_cast<int64_t>(v)));
  for (int64_t e = 0; e < g.cols; ++e) cols.push_back(std::to_string(e));
  sec.html += array_heatmap(sec, "load", g, Cmap::Viridis, "Load: fraction of tokens routed to each expert", rows, cols, 0.0,
                            kNaN, "layer", "expert");
  sec.used_arrays.insert("load");
}

const char* kExpertsNotebook = R"PY(load = np.asarray(A["load"])
fig, ax = plt.subplots(figsize=(min(14, 2 + 0.4 * load.shape[1]), 1 + 0.5 * load.shape[0]))
heatmap(ax, load, rows=[f"layer {int(l)}" for l in A["layers"]], cols=[str(e) for e in range(load.shape[1])],
        cmap="viridis", vmin=0)
ax.set_title("Load: fraction of tokens routed to each expert")
ax.set_xlabel("expert")
plt.show()
show_generic(r, skip={"load", "layers"})
)PY";

}  // namespace

void register_experts_report(ResultKinds& k) {
  k.add({"experts",
         "Experts (mixture of experts)",
         45,
         "Experts",
         render_experts,
         kExpertsNotebook,
         {},
         {{"layers", "L"}, {"load", "L E"}, {"mean_weight", "L E"}}});
}

}  // namespace vocablens::kinds

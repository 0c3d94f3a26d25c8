// Activation patching in the report (the layer x position / layer x head heatmap of the restored logit
// difference) and notebook. Its entry in the registry of result kinds (vocablens/result_kinds.hpp).
#include <string>
#include <vector>

#include "notebooks-export/report_blocks.hpp"
#include "vocablens/result_kinds.hpp"

namespace vocablens::kinds {
namespace {

using namespace report_detail;  // NOLINT: the report's building blocks and figures

void render_patching(Section& sec) {
  const NdArray* a = sec.array({"restored"});
  Grid g;
  if (!a || !as_grid(*a, g)) return;
  std::vector<std::string> rows, cols;
  if (const json* r = find_key(sec.r.summary, {"rows"}))
    for (const auto& x : *r) rows.push_back(x.is_string() ? x.get<std::string>() : cell_string(x));
  if (const json* c = find_key(sec.r.summary, {"columns"}))
    for (const auto& x : *c) cols.push_back(x.is_string() ? x.get<std::string>() : cell_string(x));
  for (auto& r : rows) {  // "blocks.3.hook_resid_pre" -> "3"
    auto p = r.find('.'), q = r.find('.', p + 1);
    if (r.rfind("blocks.", 0) == 0 && q != std::string::npos) r = r.substr(p + 1, q - p - 1);
  }
  if (static_cast<int64_t>(rows.size()) != g.rows) rows.clear();
  if (static_cast<int64_t>(cols.size()) != g.cols) cols.clear();
  const json* kind = find_key(sec.r.summary, {"column_kind"});
  const std::string col_axis = kind && kind->is_string() ? kind->get<std::string>() : "position";
  sec.html += array_heatmap(sec, "restored", g, Cmap::Diverging, "restored (0 = corrupt, 1 = clean)", rows, cols, -1.0, 1.0,
                            "layer", col_axis);
  sec.use(a);
  if (const NdArray* m = sec.array({"metric"})) sec.use(m);  // the same cells before normalisation (CSV/npy)
}

const char* kPatchingNotebook = R"PY(m = as_grid(A["restored"])
rows = [str(x).split(".")[1] if str(x).startswith("blocks.") else str(x) for x in S.get("rows", [])]
cols = [str(x) for x in S.get("columns", [])]
fig, ax = plt.subplots(figsize=(max(5, 0.55 * m.shape[1] + 2), max(3, 0.45 * m.shape[0] + 1.5)))
heatmap(ax, m, rows=rows or None, cols=cols or None, cmap="RdBu_r", vmin=-1, vmax=1)
ax.set_title("activation patching: restored logit difference (0 = corrupt, 1 = clean)")
ax.set_xlabel(S.get("column_kind", "position"))
ax.set_ylabel("layer")
plt.show()
print("clean", S.get("clean_metric"), "corrupt", S.get("corrupt_metric"))
show_generic(r, skip={"restored", "metric"})
)PY";

}  // namespace

void register_patching_report(ResultKinds& k) {
  k.add({"activation_patching",
         "Activation patching",
         11,
         "Activation patching",
         render_patching,
         kPatchingNotebook,
         nullptr,
         {{"restored", "R C"}, {"metric", "R C"}}});
}

}  // namespace vocablens::kinds

// The tuned lens beside the logit lens (`vocablens tuned-lens eval`, kind "tuned_lens_eval") in the report and
// the notebook: per-layer curves with both lenses on one chart, and the layer x position heatmaps of KL to
// the final layer side by side on one colour scale.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "notebooks-export/report_blocks.hpp"
#include "vocablens/result_kinds.hpp"

namespace vocablens::kinds {
namespace {

using namespace report_detail;  // NOLINT: the report's building blocks and figures

void render_tuned_eval(Section& sec) {
  const Result& r = sec.r;
  std::string figs;
  const struct {
    const char* stem;
    const char* title;
  } metrics[] = {{"kl_bpb", "KL to the final layer (bits per byte)"},
                 {"ce_bpb", "cross-entropy to the next token (bits per byte)"},
                 {"entropy_bpb", "entropy (bits per byte)"}};
  int64_t n = 0;
  for (const auto& m : metrics) {
    const NdArray* a = sec.array({(std::string("logit_") + m.stem).c_str()});
    const NdArray* b = sec.array({(std::string("tuned_") + m.stem).c_str()});
    if (!a || !b) continue;
    LineChart c;
    c.series = {{"logit lens", as_vector(*a)}, {"tuned lens", as_vector(*b)}};
    n = static_cast<int64_t>(c.series[0].y.size());
    c.x_labels = layer_labels(r, n);
    c.x_label = "layer";
    c.y_label = m.title;
    sec.use(a);
    sec.use(b);
    figs += "<div class=\"chartbox\">" + figure(m.title, svg_line_chart(c), "", false) + "</div>";
  }
  if (!figs.empty()) sec.html += "<h3>Logit lens and tuned lens per layer</h3><div class=\"charts\">" + figs + "</div>";
  const NdArray* hl = sec.array({"logit_kl_by_position"});
  const NdArray* ht = sec.array({"tuned_kl_by_position"});
  Grid gl, gt;
  if (hl && ht && as_grid(*hl, gl) && as_grid(*ht, gt)) {
    double lo1, hi1, lo2, hi2;
    finite_range(gl.v, lo1, hi1);
    finite_range(gt.v, lo2, hi2);
    const double lo = std::min(lo1, lo2), hi = std::max(hi1, hi2);
    const auto rows = layer_labels(r, gl.rows);
    sec.html += "<h3>KL to the final layer by layer and position (nats; one colour scale)</h3>";
    sec.html += array_heatmap(sec, "logit_kl_by_position", gl, Cmap::Magma, "logit lens", rows, {}, lo, hi, "layer",
                              "position in window");
    sec.html += array_heatmap(sec, "tuned_kl_by_position", gt, Cmap::Magma, "tuned lens", rows, {}, lo, hi, "layer",
                              "position in window");
  }
}

const char* kTunedLensNotebook = R"PY(labels = layer_labels(r, len(A["logit_kl_bpb"]))
fig, axes = plt.subplots(1, 3, figsize=(15, 3.4))
for ax, stem, title in zip(axes, ["kl_bpb", "ce_bpb", "entropy_bpb"],
                           ["KL to final (bits/byte)", "cross-entropy (bits/byte)", "entropy (bits/byte)"]):
    ax.plot(labels, A["logit_" + stem], "o-", label="logit lens")
    ax.plot(labels, A["tuned_" + stem], "o-", label="tuned lens")
    ax.set_title(title); ax.set_xlabel("layer"); ax.legend()
plt.tight_layout(); plt.show()
if "logit_kl_by_position" in A:
    hi = float(np.nanmax([np.nanmax(A["logit_kl_by_position"]), np.nanmax(A["tuned_kl_by_position"])]))
    fig, axes = plt.subplots(1, 2, figsize=(14, 3.4))
    for ax, name in zip(axes, ["logit", "tuned"]):
        heatmap(ax, A[name + "_kl_by_position"], rows=labels, cmap="magma", vmin=0, vmax=hi)
        ax.set_title(name + " lens: KL to final (nats)"); ax.set_xlabel("position in window"); ax.set_ylabel("layer")
    plt.tight_layout(); plt.show()
show_generic(r, skip={"logit_kl_bpb", "tuned_kl_bpb", "logit_ce_bpb", "tuned_ce_bpb", "logit_entropy_bpb",
                      "tuned_entropy_bpb", "logit_kl_by_position", "tuned_kl_by_position"})
)PY";

}  // namespace

void register_tuned_lens_report(ResultKinds& k) {
  k.add({"tuned_lens_eval",
         "Tuned lens and logit lens",
         1,
         "Tuned lens and logit lens",
         render_tuned_eval,
         kTunedLensNotebook,
         nullptr,
         {{"logit_ce_bpb", "L"},
          {"tuned_ce_bpb", "L"},
          {"logit_entropy_bpb", "L"},
          {"tuned_entropy_bpb", "L"},
          {"logit_kl_bpb", "L"},
          {"tuned_kl_bpb", "L"},
          {"logit_kl_by_position", "L N"},
          {"tuned_kl_by_position", "L M"}}});
}

}  // namespace vocablens::kinds

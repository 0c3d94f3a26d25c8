// The logit lens over a corpus in the report (per-layer curves) and notebook.
// Its entry in the registry of result kinds (vocablens/result_kinds.hpp): title, order, report figures, notebook cell.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "notebooks-export/report_blocks.hpp"
#include "vocablens/result_kinds.hpp"

namespace vocablens::kinds {
namespace {

using namespace report_detail;  // NOLINT: the report's building blocks and figures

// Per-layer curves of every 1-D array of one length (cross-entropy, bits per byte, KL, entropy, accuracy).
void render_lens_corpus(Section& sec) {
  const Result& r = sec.r;
  std::vector<std::pair<std::string, const NdArray*>> m;
  int64_t L = -1;
  for (const auto& [name, a] : r.arrays)
    if (squeezed_shape(a).size() == 1 && a.dtype != "|b1") {
      if (L < 0) L = a.numel();
      if (a.numel() == L) {
        m.push_back({name, &a});
        sec.used_arrays.insert(name);
      }
    }
  if (L > 0) curves_per_layer(sec, m, layer_labels(r, L));
}

const char* kLensCorpusNotebook = R"PY(per_layer = [n for n, a in A.items() if np.squeeze(a).ndim == 1 and a.dtype.kind == "f"]
n = len(np.squeeze(A[per_layer[0]])) if per_layer else 0
per_layer = [p for p in per_layer if len(np.squeeze(A[p])) == n]
per_layer_curves({p: np.squeeze(A[p]) for p in per_layer}, per_layer, layer_labels(r, n))
show_generic(r, skip=set(per_layer))
)PY";

}  // namespace

void register_lens_corpus_report(ResultKinds& k) {
  k.add({"logit_lens_corpus",
         "Logit lens over a corpus",
         1,
         "Logit lens over a corpus",
         render_lens_corpus,
         kLensCorpusNotebook,
         nullptr,
         {{"mean_cross_entropy", "L"},
          {"bits_per_byte", "L"},
          {"mean_kl_final", "L"},
          {"mean_entropy", "L"},
          {"top1_accuracy", "L"},
          {"kl_by_position", "L N"}}});
}

}  // namespace vocablens::kinds

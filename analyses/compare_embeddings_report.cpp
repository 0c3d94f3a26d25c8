// Two embedding spaces compared, in the report (generic: summary, moved tokens, overlap histogram, spectra
// side by side) and the notebook (both spectra, k-NN agreement, aligned cosines).
// Its entry in the registry of result kinds (vocablens/result_kinds.hpp): title, order, report figures, notebook cell.
#include "vocablens/result_kinds.hpp"

namespace vocablens::kinds {
namespace {

const char* kCompareEmbeddingsNotebook = R"PY(fig, axes = plt.subplots(1, 3, figsize=(16, 4))
if "singular_values_a" in A and "singular_values_b" in A:
    for key, lab in (("singular_values_a", "A"), ("singular_values_b", "B")):
        sv = A[key]
        axes[0].semilogy(np.arange(sv.size), sv / sv[0], label=f"{lab}: {r['settings'].get('model_' + lab.lower(), lab)}")
    axes[0].set_title("Singular values (relative to the first)")
    axes[0].set_xlabel("index (0-based)")
    axes[0].legend(fontsize=7)
k = int(S.get("k", 1))
axes[1].hist(A["knn_overlap"] * k, bins=np.arange(k + 2) - 0.5)
axes[1].set_title(f"Agreeing neighbours of {k} (mean share {S.get('knn_overlap_mean', 0):.3f})")
axes[1].set_xlabel("neighbours in both lists")
axes[2].hist(A["aligned_cosine"], bins=50)
axes[2].set_title(f"cos(a R, b) after Procrustes (CKA {S.get('cka', float('nan')):.3f})")
for ax in axes:
    ax.grid(alpha=0.3)
fig.tight_layout()
plt.show()
show_generic(r, skip={"rotation", "singular_values_a", "singular_values_b", "knn_overlap", "aligned_cosine",
                      "aligned_distance", "ids_a", "ids_b"})
)PY";

}  // namespace

void register_compare_embeddings_report(ResultKinds& k) {
  k.add({"compare_embeddings",
         "Two embedding spaces compared",
         14,
         "Embedding spaces compared",
         nullptr,
         kCompareEmbeddingsNotebook,
         nullptr,
         {{"rotation", "A B"},
          {"ids_a", "M"},
          {"ids_b", "M"},
          {"knn_overlap", "M"},
          {"aligned_cosine", "M"},
          {"aligned_distance", "M"},
          {"procrustes_singular_values", "S"},
          {"singular_values_a", "SA"},
          {"singular_values_b", "SB"}}});
}

}  // namespace vocablens::kinds

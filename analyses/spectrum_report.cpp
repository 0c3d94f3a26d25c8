// The singular spectrum in the report (spectrum, explained variance, row norms) and notebook.
// Its entry in the registry of result kinds (vocablens/result_kinds.hpp): title, order, report figures, notebook cell.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "notebooks-export/report_blocks.hpp"
#include "notebooks-export/report_examples.hpp"
#include "vocablens/result_kinds.hpp"

namespace vocablens::kinds {
namespace {

using namespace report_detail;  // NOLINT: the report's building blocks and figures

const char* kSpectrumNotebook = R"PY(drawn = set()
sv = next((A[n] for n in ("all_singular_values", "singular_values", "eigenvalues", "spectrum") if n in A), None)
fig, axes = plt.subplots(1, 3, figsize=(16, 4))
if sv is not None:
    axes[0].semilogy(np.arange(sv.size), sv, marker="." if sv.size <= 64 else None, label="singular values")
    if "covariance_eigenvalues" in A:
        ev = np.clip(A["covariance_eigenvalues"], 0, None)
        axes[0].semilogy(np.arange(ev.size), np.sqrt(ev), label="sqrt covariance eigenvalues (centred)")
    axes[0].set_title("Singular value spectrum")
    axes[0].set_xlabel("index (0-based)")
    axes[0].legend(fontsize=8)
    drawn |= {"all_singular_values", "singular_values", "covariance_eigenvalues", "eigenvalues", "spectrum"}
evr = next((A[n] for n in ("explained_variance_ratio", "explained_variance", "energy_ratio") if n in A), None)
if evr is not None:
    x = np.arange(evr.size)
    axes[1].plot(x, evr, label="explained variance ratio")
    axes[1].plot(x, np.cumsum(np.nan_to_num(evr)), label="cumulative")
    axes[1].set_ylim(0, 1.02)
    axes[1].set_title("Explained variance")
    axes[1].set_xlabel("component (0-based)")
    axes[1].legend(fontsize=8)
    drawn |= {"explained_variance_ratio", "explained_variance", "energy_ratio"}
norms = A.get("row_norms", A.get("norms"))
if norms is not None:
    axes[2].plot(np.linspace(0, 100, norms.size), np.sort(norms))
    axes[2].set_title("Row norms (sorted)")
    axes[2].set_xlabel("percentile of rows")
    drawn |= {"row_norms", "norms"}
for ax in axes:
    ax.grid(alpha=0.3)
fig.tight_layout()
plt.show()
show_generic(r, skip=drawn | {"right_vectors", "left_vectors", "mean_row"})
)PY";

// A synthetic result shaped like the analysis's own (for `vocablens report --example`).
Result spectrum_example(const ExampleInput&) {
  Result r;
  r.kind = "spectrum";
  r.settings = {{"matrix", "W_E"}, {"k", 16}, {"method", "auto"}};
  r.provenance = example_provenance("vocablens spectrum fixtures/gpt2-tiny --matrix W_E --out run");
  const int64_t k = 16, n = 64, rows = 512;
  std::vector<double> sv(static_cast<size_t>(n)), evr(static_cast<size_t>(n)), cov(static_cast<size_t>(n)),
      energy(static_cast<size_t>(k));
  double tot = 0;
  for (int64_t i = 0; i < n; ++i) {
    sv[static_cast<size_t>(i)] = 40.0 * std::exp(-0.08 * static_cast<double>(i)) + 0.5;
    cov[static_cast<size_t>(i)] = sv[static_cast<size_t>(i)] * sv[static_cast<size_t>(i)] / rows * 0.9;
    tot += cov[static_cast<size_t>(i)];
  }
  double e2 = 0;
  for (double s : sv) e2 += s * s;
  for (int64_t i = 0; i < n; ++i) evr[static_cast<size_t>(i)] = cov[static_cast<size_t>(i)] / tot;
  for (int64_t i = 0; i < k; ++i) energy[static_cast<size_t>(i)] = sv[static_cast<size_t>(i)] * sv[static_cast<size_t>(i)] / e2;
  std::vector<double> topk(sv.begin(), sv.begin() + k);
  r.arrays["singular_values"] = NdArray::f64({k}, topk.data());
  r.arrays["all_singular_values"] = NdArray::f64({n}, sv.data());
  r.arrays["covariance_eigenvalues"] = NdArray::f64({n}, cov.data());
  r.arrays["explained_variance_ratio"] = NdArray::f64({n}, evr.data());
  r.arrays["energy_ratio"] = NdArray::f64({k}, energy.data());
  ExampleLcg rng{3};
  std::vector<float> norms(static_cast<size_t>(rows));
  for (auto& x : norms) x = static_cast<float>(2 + rng.next() + rng.next());
  r.arrays["row_norms"] = NdArray::f32({rows}, norms.data());
  std::vector<double> rv(static_cast<size_t>(k * n));
  for (auto& x : rv) x = rng.next() - 0.5;
  r.arrays["right_vectors"] = NdArray::f64({k, n}, rv.data());
  Table sv_t{"singular_values", {"component", "sigma", "energy_ratio"}, {}};
  for (int64_t i = 0; i < k; ++i) sv_t.rows.push_back({i, sv[static_cast<size_t>(i)], energy[static_cast<size_t>(i)]});
  Table load{"loadings", {"component", "sign", "rank", "row", "name", "projection"}, {}};
  for (int64_t c = 0; c < 4; ++c)
    for (const char* sign : {"+", "-"})
      for (int64_t i = 0; i < 5; ++i)
        load.rows.push_back({c, sign, i + 1, (c * 31 + i * 7) % rows,
                             kExampleVocab[static_cast<size_t>((c * 3 + i) % kExampleVocab.size())],
                             (sign[0] == '+' ? 1 : -1) * (3.0 - 0.3 * i)});
  r.tables.push_back(std::move(sv_t));
  r.tables.push_back(std::move(load));
  r.summary = {{"matrix", "W_E"},         {"rows", rows}, {"cols", n}, {"effective_rank", 31.7}, {"participation_ratio", 12.25},
               {"solver", "gram+spectra"}};
  return r;
}

}  // namespace

void register_spectrum_report(ResultKinds& k) {
  k.add({"spectrum",
         "Spectrum",
         6,
         "Spectrum",
         spectrum_figures,
         kSpectrumNotebook,
         spectrum_example,
         {{"singular_values", "K"}, {"right_vectors", "K D"}, {"energy_ratio", "K"}, {"row_norms", "R"}}});
}

}  // namespace vocablens::kinds

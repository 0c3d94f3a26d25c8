// Python bindings of the batch and comparison analyses: compare-embeddings (two models) and compare (two lens runs, no
// model: a module function, not a registered analysis).
#include <algorithm>

#include "analyses.hpp"
#include "vocablens/compare.hpp"
#include "vocablens/compare_embeddings.hpp"
#include "vocablens/error.hpp"
#include "vocablens/export.hpp"
#include "vocablens/spectrum.hpp"

namespace vlpy {
namespace {

RegisterAnalysis compare_embeddings_reg{
    "compare_embeddings",
    "Two embedding spaces on their shared tokens: Procrustes, linear CKA, k-NN agreement, moved tokens, spectra",
    [](const PyModel& ma, Options& o) {
      py::object mbv = o.raw("model_b");
      if (mbv.is_none() || !py::isinstance<PyModel>(mbv))
        o.type_error("model_b", "a vocablens.Model (the second model, or a later checkpoint)");
      const PyModel& mb = mbv.cast<const PyModel&>();
      std::string matrix = o.choice("matrix", "W_E", {"W_E", "W_U"});
      vocablens::CompareEmbeddingsOptions co;
      co.k = o.integer_at_least("k", 10, 1);
      co.moved = o.integer_at_least("moved", 50, 0);
      co.spectra = o.flag("spectra", true);
      co.spectrum.k = o.integer_at_least("spectrum_k", 32, 1);
      o.finish();
      const auto& ta = ma.tokenizer();
      const auto& tb = mb.tokenizer();
      py::gil_scoped_release nogil;
      std::string kind_a, kind_b;
      at::Tensor Ea = vocablens::model_matrix(ma.model, matrix, &kind_a);
      at::Tensor Eb = vocablens::model_matrix(mb.model, matrix, &kind_b);
      auto pairs = vocablens::shared_tokens(ta, tb);
      pairs.erase(std::remove_if(pairs.begin(), pairs.end(),
                                 [&](const auto& p) { return p.first >= Ea.size(0) || p.second >= Eb.size(0); }),
                  pairs.end());
      auto c = vocablens::compare_embeddings(Ea, Eb, pairs, co);
      c.matrix = matrix;
      c.model_a = ma.model.source();
      c.model_b = mb.model.source();
      auto r = c.to_result(&tb);
      r.provenance["model_a"] = ma.model.source();
      r.provenance["model_b"] = mb.model.source();
      return r;
    }};

// A run given as a Result (logit_lens) or as a run directory path.
vocablens::Result run_from(py::handle v, const char* arg, std::string& name) {
  if (py::isinstance<py::str>(v)) {
    name = v.cast<std::string>();
    py::gil_scoped_release nogil;
    return vocablens::read_lens_run(name);
  }
  if (py::isinstance<vocablens::Result>(v)) {
    const auto& r = v.cast<const vocablens::Result&>();
    return r;
  }
  throw py::type_error(std::string("compare(): ") + arg + " must be a lens Result or a run directory (str), not " +
                       std::string(py::str(v.get_type().attr("__name__"))));
}

}  // namespace

void register_compare(py::module_& mod) {
  mod.def(
      "compare_runs",
      [](py::object a, py::object b, const std::string& align) {
        vocablens::LensCompareOptions o;
        if (align == "end") o.align = vocablens::LensAlign::End;
        else if (align == "start") o.align = vocablens::LensAlign::Start;
        else if (align != "none") throw py::value_error("compare(): align must be \"none\", \"start\" or \"end\" (got '" + align + "')");
        vocablens::Result ra = run_from(a, "a", o.name_a), rb = run_from(b, "b", o.name_b);
        auto r = std::make_shared<vocablens::Result>();
        {
          py::gil_scoped_release nogil;
          *r = vocablens::compare_lens_runs(ra, rb, o).to_result();
        }
        r->provenance = ra.provenance;
        r->provenance["run_a"] = {{"dir", o.name_a == "A" ? "" : o.name_a}, {"provenance", ra.provenance}};
        r->provenance["run_b"] = {{"dir", o.name_b == "B" ? "" : o.name_b}, {"provenance", rb.provenance}};
        r->provenance["command_line"] = "python: vocablens.compare()";
        return r;
      },
      py::arg("a"), py::arg("b"), py::arg("align") = "none");
}

}  // namespace vlpy

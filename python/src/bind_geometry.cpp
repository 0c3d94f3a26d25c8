// Python binding of the embedding-geometry analysis not yet declared in the library: spectrum (+ anisotropy), as
// `vocablens spectrum`. neighbours, knn and positions are declared (analyses/*_entry.cpp).
#include "analyses.hpp"
#include "vocablens/anisotropy.hpp"
#include "vocablens/error.hpp"
#include "vocablens/neighbours.hpp"
#include "vocablens/spectrum.hpp"

namespace vlpy {
namespace {

RegisterAnalysis spectrum_reg{
    "spectrum", "Singular spectrum, PCA, effective rank, norms, loadings and anisotropy of W_E (or W_U, W_pos, ...)",
    [](const PyModel& m, Options& o) {
      vocablens::SpectrumOptions so;
      std::string matrix = "W_E";
      at::Tensor M;
      py::object mx = o.raw("matrix");
      if (!mx.is_none() && THPVariable_Check(mx.ptr())) {
        M = THPVariable_Unpack(mx.ptr());
        if (M.dim() != 2) throw py::value_error("spectrum(): matrix must be 2-D, got " + std::to_string(M.dim()) + "-D");
        if (!at::isFloatingType(M.scalar_type())) throw py::type_error("spectrum(): matrix must be a floating-point tensor");
        matrix = "tensor";
      } else if (!mx.is_none()) {
        if (!py::isinstance<py::str>(mx)) o.type_error("matrix", "a matrix name (\"W_E\", \"W_U\", \"W_pos\", \"W_in.L\", ...) or a 2-D tensor");
        matrix = mx.cast<std::string>();
      }
      so.k = o.integer_at_least("k", 32, 1);
      std::string method = o.choice("method", "auto", {"auto", "gram", "lanczos", "dense"});
      so.method = vocablens::spectrum_method_from_string(method);
      so.ncv = o.integer_at_least("ncv", 0, 0);
      so.loadings = o.integer_at_least("loadings", 10, 0);
      so.keep_left_vectors = o.flag("left_vectors", false);
      bool anis = o.flag("anisotropy", true);
      vocablens::AnisotropyOptions ao;
      if (o.has("remove_top")) ao.remove_top = o.indices("remove_top");
      else o.raw("remove_top");
      o.finish();
      std::string kind = "row";
      py::gil_scoped_release nogil;
      if (!M.defined()) M = vocablens::model_matrix(m.model, matrix, &kind);
      auto s = vocablens::matrix_spectrum(M, so, matrix, kind);
      vocablens::Result r = s.to_result(kind == "token" ? m.tok.get() : nullptr);
      if (anis) {
        vocablens::Result ar = vocablens::anisotropy(M, ao, matrix).to_result();
        r.summary["anisotropy"] = ar.summary;
        for (auto& t : ar.tables) {
          t.name = "anisotropy";
          r.tables.push_back(std::move(t));
        }
      }
      r.settings["method"] = method;
      return r;
    }};

}  // namespace
}  // namespace vlpy

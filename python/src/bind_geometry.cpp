// Python bindings of the embedding-geometry analyses: spectrum (+ anisotropy), neighbours, knn, positions
// (as the `vocablens` commands of the same names).
#include "analyses.hpp"
#include "vocablens/anisotropy.hpp"
#include "vocablens/error.hpp"
#include "vocablens/knn.hpp"
#include "vocablens/neighbours.hpp"
#include "vocablens/positions.hpp"
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

RegisterAnalysis knn_reg{
    "knn", "Exact k-nearest-neighbour graph (cosine) of every token's embedding",
    [](const PyModel& m, Options& o) {
      vocablens::KnnOptions ko;
      ko.k = o.integer_at_least("k", 10, 1);
      ko.block = o.integer_at_least("block", 2048, 16);
      auto space = vocablens::vector_space_from_string(o.choice("space", "E", {"E", "E+", "embedding", "pinv"}));
      std::string matrix = o.choice("matrix", "W_E", {"W_E", "W_U"});
      bool edges = o.flag("edges", false);
      o.finish();
      py::gil_scoped_release nogil;
      at::Tensor X = vocablens::space_vectors(m.model, space, matrix);
      auto g = vocablens::knn_graph(X, ko);
      g.matrix = matrix;
      g.space = vocablens::to_string(space);
      return g.to_result(m.tok.get(), edges);
    }};

RegisterAnalysis positions_reg{
    "positions", "Geometry of the positional encoding: spectrum, position x position cosines, periodic components",
    [](const PyModel& m, Options& o) {
      vocablens::PositionOptions po;
      po.source = vocablens::position_source_from_string(o.choice("kind", "auto", {"auto", "learned", "sinusoidal", "rotary"}));
      po.max_positions = o.integer_at_least("max_positions", 2048, 0);
      po.k = o.integer_at_least("k", 16, 1);
      po.components = o.integer_at_least("components", 8, 1);
      o.finish();
      py::gil_scoped_release nogil;
      return vocablens::position_structure(m.model, po).to_result();
    }};

}  // namespace
}  // namespace vlpy

// Python binding of compare (two lens runs, no model: a module function, not a declared analysis; see
// docs/architecture.md). compare_embeddings is declared (analyses/compare_embeddings_entry.cpp).
#include <algorithm>

#include "analyses.hpp"
#include "vocablens/compare.hpp"
#include "vocablens/declared_options.hpp"
#include "vocablens/compare_embeddings.hpp"
#include "vocablens/error.hpp"
#include "vocablens/export.hpp"
#include "vocablens/spectrum.hpp"

namespace vlpy {
namespace {

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
  mod.def("compare_schema", [] { return json_to_py(vocablens::option_schema(vocablens::entries::compare_declaration())); },
          "compare's options (its declaration, as the CLI's flags are made from it)");
  mod.def(
      "compare_runs",
      [](py::object a, py::object b, py::dict kwargs) {
        nlohmann::json given = nlohmann::json::object();
        for (auto kv : kwargs)
          if (!kv.second.is_none()) given[std::string(py::str(kv.first))] = py_to_json(kv.second, "compare(): " + std::string(py::str(kv.first)));
        nlohmann::json resolved;
        try {
          resolved = vocablens::resolve_options(vocablens::entries::compare_declaration(), given, vocablens::Surface::Python);
        } catch (const vocablens::OptionTypeError& e) {
          throw py::type_error(e.what());
        }
        vocablens::LensCompareOptions o = vocablens::entries::compare_options(resolved);
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
      py::arg("a"), py::arg("b"), py::arg("options"));
}

}  // namespace vlpy

// Python binding of compare (two lens runs, no model: a module function, not a declared analysis; see
// docs/architecture.md). compare_embeddings is declared (analyses/compare_embeddings_entry.cpp).
#include <algorithm>

#include "analyses.hpp"
#include "vocablens/compare.hpp"
#include "analyses/declared_options.hpp"
#include "vocablens/error.hpp"
#include "vocablens/export.hpp"

namespace vlpy {
namespace {

// A run given as a Result (logit_lens) or as a run directory path (then `dir` is that path).
vocablens::Result run_from(py::handle v, const char* arg, std::string& dir) {
  if (py::isinstance<py::str>(v)) {
    dir = v.cast<std::string>();
    py::gil_scoped_release nogil;
    return vocablens::read_lens_run(dir);
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
      "compare_schema", [] { return json_to_py(vocablens::option_schema(vocablens::entries::compare_declaration())); },
      "compare's options (its declaration, as the CLI's flags are made from it)");
  mod.def(
      "compare_runs",
      [](py::object a, py::object b, py::dict kwargs) {
        nlohmann::json given = nlohmann::json::object();
        for (auto kv : kwargs)
          if (!kv.second.is_none())
            given[std::string(py::str(kv.first))] = py_to_json(kv.second, "compare(): " + std::string(py::str(kv.first)));
        nlohmann::json resolved;
        try {
          resolved = vocablens::resolve_options(vocablens::entries::compare_declaration(), given, vocablens::Surface::Python);
        } catch (const vocablens::OptionTypeError& e) { throw py::type_error(e.what()); }
        std::string dir_a, dir_b;
        vocablens::Result ra = run_from(a, "a", dir_a), rb = run_from(b, "b", dir_b);
        auto r = std::make_shared<vocablens::Result>();
        {
          py::gil_scoped_release nogil;
          *r = vocablens::entries::compare_run_results(ra, rb, dir_a, dir_b, resolved);
        }
        r->provenance["command_line"] = "python: vocablens.compare()";
        return r;
      },
      py::arg("a"), py::arg("b"), py::arg("options"));
}

}  // namespace vlpy

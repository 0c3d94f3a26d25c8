// The declared analyses (vocablens/analysis_registry.hpp) from Python: one binding for all of them. The
// Python wrappers (python/vocablens/_analyses.py) are made from analyses_schema(), so each function's
// signature shows the real defaults and a new analysis needs no line here.
#include "analyses.hpp"
#include "vocablens/analysis_registry.hpp"

namespace vlpy {

void register_declared(py::module_& mod) {
  mod.def("analyses_schema", [] { return json_to_py(vocablens::analyses_schema()); },
          "Every declared analysis's options (as `vocablens schema` prints them)");
  mod.def(
      "run_declared",
      [](const std::string& name, const std::shared_ptr<PyModel>& model, py::dict kwargs, py::object progress) {
        if (!model) throw py::type_error(name + "(): model must be a vocablens.Model (from vocablens.load_model)");
        const auto& a = vocablens::find_analysis(name);
        nlohmann::json given = nlohmann::json::object();
        for (auto kv : kwargs) {
          const std::string key = py::str(kv.first);
          if (kv.second.is_none()) continue;
          given[key] = py_to_json(kv.second, name + "(): " + key);
        }
        const std::string call = describe_call(name, kwargs);
        // Checked before any work, with the GIL held: a bad keyword costs nothing.
        vocablens::resolve_options(a.decl, given, vocablens::Surface::Python);
        Progress bar(progress, 0, name, "it");
        auto tick = [&bar](int64_t done, int64_t total) { bar.set(done, total); };
        vocablens::Result r;
        {
          py::gil_scoped_release nogil;
          r = vocablens::run_analysis(a, model->model, model->tok.get(), given, vocablens::Surface::Python, tick);
        }
        fill_provenance(r, *model, call);
        return std::make_shared<vocablens::Result>(std::move(r));
      },
      py::arg("name"), py::arg("model"), py::arg("kwargs"), py::arg("progress") = py::none());
}

}  // namespace vlpy

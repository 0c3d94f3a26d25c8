// The declared analyses (vocablens/analysis_registry.hpp) from Python: one binding for all of them. The
// Python wrappers (python/vocablens/_analyses.py) are made from analyses_schema(), so each function's
// signature shows the real defaults and a new analysis needs no line here.
#include "analyses.hpp"
#include "vocablens/analysis_estimate.hpp"
#include "vocablens/analysis_inputs.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/sae.hpp"

namespace vlpy {

namespace {

// kwargs as the declaration's JSON (None: not given). Options of type Model, Sae and Matrix take the Python
// object itself (vocablens/analysis_inputs.hpp), which goes into `inputs` (and `models`, held for the call);
// their JSON value only labels it.
nlohmann::json given_of(const std::string& name, const vocablens::DeclaredAnalysis& a, py::dict kwargs,
                        vocablens::AnalysisInputs& inputs, std::vector<std::shared_ptr<PyModel>>& models) {
  nlohmann::json given = nlohmann::json::object();
  auto type_name = [](py::handle v) { return std::string(py::str(v.get_type().attr("__name__"))); };
  for (auto kv : kwargs) {
    const std::string key = py::str(kv.first);
    if (kv.second.is_none()) continue;
    const vocablens::OptionDecl* od = a.decl.find(key);
    if (od && od->type == vocablens::OptionType::Sae) {
      if (!py::isinstance<vocablens::Sae>(kv.second))
        throw py::type_error(name + "(): " + key + " must be a vocablens.Sae (from vocablens.load_sae), not " +
                             type_name(kv.second));
      auto sae = kv.second.cast<std::shared_ptr<vocablens::Sae>>();
      inputs.saes[key] = sae;
      given[key] = sae->source.empty() ? std::string("sae") : sae->source;
      continue;
    }
    if (od && od->type == vocablens::OptionType::Model) {
      if (!py::isinstance<PyModel>(kv.second))
        throw py::type_error(name + "(): " + key + " must be a vocablens.Model (from vocablens.load_model), not " +
                             type_name(kv.second));
      auto pm = kv.second.cast<std::shared_ptr<PyModel>>();
      models.push_back(pm);
      inputs.models[key] = {&pm->model, pm->tok.get()};
      given[key] = pm->model.source();
      continue;
    }
    if (od && od->type == vocablens::OptionType::Matrix && THPVariable_Check(kv.second.ptr())) {
      inputs.tensors[key] = THPVariable_Unpack(kv.second.ptr());
      given[key] = "tensor";
      continue;
    }
    given[key] = py_to_json(kv.second, name + "(): " + key);
  }
  return given;
}

}  // namespace

void register_declared(py::module_& mod) {
  mod.def(
      "analyses_schema", [] { return json_to_py(vocablens::analyses_schema()); },
      "Every declared analysis's options (as `vocablens schema` prints them)");
  mod.def(
      "run_declared",
      [](const std::string& name, const std::shared_ptr<PyModel>& model, py::dict kwargs, py::object progress) {
        if (!model) throw py::type_error(name + "(): model must be a vocablens.Model (from vocablens.load_model)");
        const auto& a = vocablens::find_analysis(name);
        vocablens::AnalysisInputs inputs;
        std::vector<std::shared_ptr<PyModel>> models;  // held for the call
        const nlohmann::json given = given_of(name, a, kwargs, inputs, models);
        const std::string call = describe_call(name, kwargs);
        // Checked before any work, with the GIL held: a bad keyword costs nothing. A value of the wrong
        // type is Python's TypeError, a wrong value a ValueError (vocablens.UsageError).
        try {
          vocablens::resolve_options(a.decl, given, vocablens::Surface::Python);
        } catch (const vocablens::OptionTypeError& e) { throw py::type_error(e.what()); }
        Progress bar(progress, 0, name, "it");
        auto tick = [&bar](int64_t done, int64_t total) { bar.set(done, total); };
        vocablens::Result r;
        {
          py::gil_scoped_release nogil;
          r = vocablens::run_analysis(a, model->model, model->tok.get(), given, vocablens::Surface::Python, tick, nullptr,
                                      &inputs);
        }
        fill_provenance(r, *model, call);
        return std::make_shared<vocablens::Result>(std::move(r));
      },
      py::arg("name"), py::arg("model"), py::arg("kwargs"), py::arg("progress") = py::none());
  mod.def(
      "estimate_declared",
      [](const std::string& name, const std::shared_ptr<PyModel>& model, py::dict kwargs) {
        if (!model) throw py::type_error("estimate(): model must be a vocablens.Model (from vocablens.load_model)");
        const auto& a = vocablens::find_analysis(name);
        vocablens::AnalysisInputs inputs;
        std::vector<std::shared_ptr<PyModel>> models;
        const nlohmann::json given = given_of(name, a, kwargs, inputs, models);
        vocablens::AnalysisEstimate e;
        try {
          e = vocablens::estimate_analysis(a, model->model, model->tok.get(), given, vocablens::Surface::Python, &inputs);
        } catch (const vocablens::OptionTypeError& err) { throw py::type_error(err.what()); }
        auto items = [](const std::vector<vocablens::MemoryEstimate::Item>& v) {
          py::list l;
          for (const auto& it : v) l.append(py::make_tuple(it.what, it.bytes));
          return l;
        };
        const double available = vocablens::available_memory();
        py::dict d;
        d["analysis"] = name;
        d["what"] = e.what;
        d["total_bytes"] = e.memory.total();
        d["items"] = items(e.memory.items);
        d["phases"] = items(e.memory.phases);
        d["available_bytes"] = available > 0 ? py::object(py::float_(available)) : py::object(py::none());
        d["fits"] = available > 0 ? py::object(py::bool_(e.memory.total() <= available)) : py::object(py::none());
        // Refused for want of memory, what would fit, as the CLI's refusal and the server's 413 say it (graph: the
        // largest max_feature_nodes); reduce_within(limit_bytes) asks it for another limit.
        const bool refused = available > 0 && e.memory.total() > available && e.reduce_within;
        d["reduce"] = refused ? e.reduce_within(available) : e.reduce;
        if (e.reduce_within) {
          auto within = e.reduce_within;
          d["reduce_within"] =
              py::cpp_function([within](double limit_bytes) { return within(limit_bytes); }, py::arg("limit_bytes"));
        } else {
          d["reduce_within"] = py::none();
        }
        d["note"] = e.note;
        d["computed"] = e.computed;
        d["table"] = e.memory.table();
        return d;
      },
      py::arg("name"), py::arg("model"), py::arg("kwargs"));
}

}  // namespace vlpy

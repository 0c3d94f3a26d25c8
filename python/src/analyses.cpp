// The analysis registry and the one entry point Python calls (see analyses.hpp).
#include "analyses.hpp"

namespace vlpy {

std::vector<AnalysisInfo>& analysis_registry() {
  static std::vector<AnalysisInfo> r;
  return r;
}

std::optional<bool> opt_flag(Options& o, const char* name) {
  if (!o.has(name)) {
    o.raw(name);
    return std::nullopt;
  }
  return o.flag(name, false);
}

void register_analyses(py::module_& mod) {
  mod.def("analyses", [] {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& a : analysis_registry()) out.push_back({a.name, a.description});
    return out;
  });
  mod.def("run", [](const std::string& name, const std::shared_ptr<PyModel>& model, py::dict kwargs) {
    if (!model) throw py::type_error(name + "(): model must be a vocablens.Model (from vocablens.load_model)");
    for (const auto& a : analysis_registry()) {
      if (a.name != name) continue;
      std::string call = describe_call(name, kwargs);
      Options o(name, kwargs);
      auto r = std::make_shared<vocablens::Result>(a.run(*model, o));
      fill_provenance(*r, *model, call);
      return r;
    }
    std::string known;
    for (const auto& a : analysis_registry()) known += (known.empty() ? "" : ", ") + a.name;
    throw py::value_error("no analysis named '" + name + "' (known: " + known + ")");
  }, py::arg("name"), py::arg("model"), py::arg("kwargs"));
}

}  // namespace vlpy

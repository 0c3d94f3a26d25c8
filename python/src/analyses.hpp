// python/src/analyses.hpp — the analyses the Python module offers, registered once each.
//
// An analysis binding reads its keywords through Options, calls o.finish(), runs the library with the GIL
// released, and returns the Result the CLI would write (same to_result(), same settings). run() adds the
// provenance. Python reaches every registered analysis as vocablens.run(name, model, **kw) and, with a
// wrapper in python/vocablens/_analyses.py, as vocablens.<name>(model, ...) and model.<name>(...).
//
//   static vlpy::RegisterAnalysis reg{"neighbours", "Nearest tokens by cosine ...",
//     [](const vlpy::PyModel& m, vlpy::Options& o) {
//       vocablens::NeighbourOptions no;
//       no.k = o.integer_at_least("k", 20, 1);
//       std::string query = o.str("query", "");
//       o.finish();
//       py::gil_scoped_release nogil;
//       auto r = vocablens::neighbours(vocablens::space_vectors(m.model, ...), m.tok.get(), query, no);
//       return r.to_result(m.tok.get());
//     }};
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "common.hpp"
#include "vocablens/lens.hpp"

namespace vlpy {

using AnalysisFn = std::function<vocablens::Result(const PyModel&, Options&)>;

struct AnalysisInfo {
  std::string name;
  std::string description;
  AnalysisFn run;
};

std::vector<AnalysisInfo>& analysis_registry();

struct RegisterAnalysis {
  RegisterAnalysis(std::string name, std::string description, AnalysisFn fn) {
    analysis_registry().push_back({std::move(name), std::move(description), std::move(fn)});
  }
};

/// Adds run(name, model, kwargs) and analyses() to the extension module.
void register_analyses(py::module_& mod);

/// Adds analyses_schema() and run_declared(name, model, kwargs, progress): every analysis declared in the
/// library (python/src/bind_declared.cpp).
void register_declared(py::module_& mod);

/// Adds compare_runs(a, b, align) (python/src/bind_compare.cpp): two lens runs, no model.
void register_compare(py::module_& mod);

/// Adds Sae, load_sae(path, hook_name) and check_sae_fits(sae, model) (python/src/bind_sae.cpp).
void register_sae(py::module_& mod);

/// True/False/None keyword -> optional<bool>.
std::optional<bool> opt_flag(Options& o, const char* name);

}  // namespace vlpy

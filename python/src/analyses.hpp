// python/src/analyses.hpp — what the extension module adds besides the model: the declared analyses (one binding
// for all of them: analyses_schema() and run_declared(), made from the library's declarations,
// vocablens/analysis_registry.hpp), compare (two lens runs, no model) and the SAE class.
#pragma once
#include "common.hpp"

namespace vlpy {

/// Adds analyses_schema() and run_declared(name, model, kwargs, progress): every analysis declared in the
/// library (python/src/bind_declared.cpp).
void register_declared(py::module_& mod);

/// Adds compare_runs(a, b, align) (python/src/bind_compare.cpp): two lens runs, no model.
void register_compare(py::module_& mod);

/// Adds Sae, load_sae(path, hook_name) and check_sae_fits(sae, model) (python/src/bind_sae.cpp), and
/// register_transcoders' names.
void register_sae(py::module_& mod);

/// Adds TranscoderSet and load_transcoders(path) (python/src/bind_sae.cpp).
void register_transcoders(py::module_& mod);

/// Adds GraphTranscoders and load_graph_transcoders(model, dir) (python/src/bind_graph.cpp).
void register_graph(py::module_& mod);

}  // namespace vlpy

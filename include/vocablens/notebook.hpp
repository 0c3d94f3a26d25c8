// vocablens/notebook.hpp — a Jupyter notebook (nbformat 4.5) that reloads a run directory and redraws
// every figure of the report with numpy, pandas and matplotlib.
//
// The notebook loads files relative to its own location (it is written into the run directory), so the
// run directory can be moved or shared as a whole. One markdown + code cell pair per Result, using the
// same conventions as the HTML report (docs/results.md); unknown kinds get a generic cell that loads
// every array and table.
//
//   auto results = vocablens::read_run_directory("runs/eiffel");
//   std::string path = vocablens::write_notebook(results, "runs/eiffel");   // runs/eiffel/vocablens.ipynb
#pragma once
#include <string>
#include <vector>

#include "vocablens/result.hpp"

namespace vocablens {

/// The notebook JSON text (nbformat 4, minor 5) for `results`.
std::string render_notebook(const std::vector<Result>& results, const std::string& title = "vocablens run");

/// Writes the notebook atomically to `out_file` (default <run_dir>/vocablens.ipynb); returns the path.
std::string write_notebook(const std::vector<Result>& results, const std::string& run_dir, const std::string& out_file = "");

}  // namespace vocablens

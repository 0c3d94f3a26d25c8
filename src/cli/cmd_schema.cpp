// `vocablens schema [ANALYSIS]`: every analysis's options as declared once in the library (name, type, default,
// range, choices, help, CLI spelling) — the same JSON the explorer's `GET /api/analyses` answers; `--python`
// prints the Python signatures instead.
#include <fmt/format.h>

#include <memory>

#include "cli/command.hpp"
#include "vocablens/analysis_registry.hpp"

namespace {

struct SchemaCli {
  std::string analysis;
  bool python = false;
};

int run_schema(const SchemaCli& c) {
  if (!c.analysis.empty()) {
    const auto& a = vocablens::find_analysis(c.analysis);
    if (c.python) fmt::print("{}\n", vocablens::python_signature(a.decl));
    else fmt::print("{}\n", vocablens::option_schema(a.decl).dump(2));
    return 0;
  }
  if (c.python) {
    for (const auto& a : vocablens::analysis_registry().all()) fmt::print("{}\n", vocablens::python_signature(a.decl));
    return 0;
  }
  fmt::print("{}\n", vocablens::analyses_schema().dump(2));
  return 0;
}

vocablens::cli::Register registered_cmd_schema{
    "schema", "The options of every analysis as JSON (as declared once; what the Python module and HTTP API offer)",
    [](CLI::App& sub) -> vocablens::cli::Runner {
      auto c = std::make_shared<SchemaCli>();
      sub.add_option("ANALYSIS", c->analysis, "Only this analysis (default: all)");
      sub.add_flag("--python", c->python, "Print the Python signatures instead of JSON");
      return [c] { return run_schema(*c); };
    }};

}  // namespace

// tests/support/fixtures.hpp — where the shared fixtures are, and loud handling when they are not.
//
// Fixtures live in ../shared/fixtures beside the checkout (override with VOCABLENS_FIXTURES).
// One skip policy for every test: a missing fixture, tool or reference FAILS the test, unless the matching
// VOCABLENS_ALLOW_MISSING_* variable is 1 — VOCABLENS_ALLOW_MISSING_FIXTURES for fixtures(),
// VOCABLENS_ALLOW_MISSING_TOOLS for require() (the CLI, python3 modules, chromium, node) — in which case the
// test prints a loud "SKIPPED" warning and returns without asserting.
//
//   TEST_CASE("gpt2-tiny logits") {
//     auto dir = vl_test::fixture("gpt2-tiny");   // "" if missing (and allowed), else the path
//     if (dir.empty()) return;
//     ...
//   }
#pragma once
#include <string>
#include <vector>

namespace vl_test {

/// Root of the fixtures folder, or "" when not found.
std::string fixtures_root();

/// Path of fixtures_root()/rel. When missing: FAIL (default) or WARN + return "" (see above).
std::string fixture(const std::string& rel);

/// Path to the built `vocablens` CLI (from VOCABLENS_CLI, set by CTest), or "" if unknown.
std::string cli_path();

/// The skip policy for tools and references: returns `present`; when it is false the test FAILs naming
/// `what`, unless VOCABLENS_ALLOW_MISSING_TOOLS=1 (then a loud SKIPPED warning and false).
///   if (!vl_test::require(vl_test::python_has("numpy"), "/usr/bin/python3 with numpy")) return;
bool require(bool present, const std::string& what);

/// cli_path() when the CLI exists, else require()'s failure (or "" when missing tools are allowed).
std::string require_cli();

/// True when /usr/bin/python3 imports every module of `modules` (comma-separated, e.g. "numpy,jsonschema").
bool python_has(const std::string& modules);

/// True when `path` names an executable program (absolute path or found on PATH).
bool program_exists(const std::string& path);

bool file_exists(const std::string& path);

/// `s` quoted for /bin/sh (single quotes; embedded ones escaped).
std::string shq(const std::string& s);

/// Runs a shell command, returns its exit code; stdout+stderr captured into `output`.
int run_command(const std::string& cmd, std::string& output);

/// A fresh empty temporary directory (removed by the OS's tmp cleaning, not by us).
std::string temp_dir(const std::string& tag);
/// Points VOCABLENS_CACHE (the library's cache of pseudo-inverses, vocablens/linalg/pinv.hpp) at a fresh temp_dir(tag),
/// so that a test computes what it checks instead of reading an earlier run's result.
void use_temp_cache(const std::string& tag);

/// Reads a whole file as bytes.
std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& bytes);

}  // namespace vl_test

// tests/support/fixtures.hpp — where the shared fixtures are, and loud handling when they are not.
//
// Fixtures live in ../shared/fixtures beside the checkout (override with VOCABLENS_FIXTURES).
// A missing fixture FAILS the test, unless VOCABLENS_ALLOW_MISSING_FIXTURES=1, in which case the test
// prints a loud "SKIPPED: fixture missing" warning and returns without asserting.
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

/// Runs a shell command, returns its exit code; stdout+stderr captured into `output`.
int run_command(const std::string& cmd, std::string& output);

/// A fresh empty temporary directory (removed by the OS's tmp cleaning, not by us).
std::string temp_dir(const std::string& tag);

/// Reads a whole file as bytes.
std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& bytes);

}  // namespace vl_test

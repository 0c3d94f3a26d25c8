#include "fixtures.hpp"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <map>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include <catch2/catch.hpp>

namespace vl_test {

const char* source_dir_path() { return VOCABLENS_SOURCE_DIR; }
const char* binary_dir_path() { return VOCABLENS_BINARY_DIR; }

static bool is_dir(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
static bool exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

std::string fixtures_root() {
  if (const char* env = std::getenv("VOCABLENS_FIXTURES")) return is_dir(env) ? env : "";
  std::string guess = std::string(VOCABLENS_SOURCE_DIR) + "/../shared/fixtures";
  return is_dir(guess) ? guess : "";
}

std::string fixture(const std::string& rel) {
  std::string root = fixtures_root();
  std::string path = root.empty() ? "" : root + "/" + rel;
  if (!path.empty() && exists(path)) return path;
  const char* allow = std::getenv("VOCABLENS_ALLOW_MISSING_FIXTURES");
  std::string msg = "fixture missing: " + (root.empty() ? std::string("../shared/fixtures (set VOCABLENS_FIXTURES)") : path);
  if (allow && std::string(allow) == "1") {
    std::cerr << "\n!!!!!!!! SKIPPED: " << msg << " !!!!!!!!\n";
    WARN("SKIPPED: " << msg);
    return "";
  }
  FAIL(msg << " (set VOCABLENS_ALLOW_MISSING_FIXTURES=1 to skip loudly instead)");
  return "";
}

bool require(bool present, const std::string& what) {
  if (present) return true;
  const char* allow = std::getenv("VOCABLENS_ALLOW_MISSING_TOOLS");
  if (allow && std::string(allow) == "1") {
    std::cerr << "\n!!!!!!!! SKIPPED, missing: " << what << " !!!!!!!!\n";
    WARN("SKIPPED, missing: " << what);
    return false;
  }
  FAIL("missing: " << what << " (scripts/setup.sh installs it; VOCABLENS_ALLOW_MISSING_TOOLS=1 skips loudly instead)");
  return false;
}

std::string require_cli() {
  std::string cli = cli_path();
  return require(!cli.empty() && exists(cli),
                 "the vocablens CLI (" + (cli.empty() ? std::string("VOCABLENS_CLI unset") : cli) + ")")
             ? cli
             : "";
}

bool file_exists(const std::string& path) { return exists(path); }

std::string shq(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

bool python_has(const std::string& modules) {
  static std::map<std::string, bool> known;  // a python3 start per question, once per test program
  if (auto it = known.find(modules); it != known.end()) return it->second;
  std::string out;
  const bool ok = exists("/usr/bin/python3") && run_command("/usr/bin/python3 -c " + shq("import " + modules), out) == 0;
  return known[modules] = ok;
}

bool program_exists(const std::string& path) {
  if (path.find('/') != std::string::npos) return ::access(path.c_str(), X_OK) == 0;
  std::string out;
  return run_command("command -v " + shq(path) + " >/dev/null", out) == 0;
}

std::string cli_path() {
  if (const char* env = std::getenv("VOCABLENS_CLI")) return env;
  std::string guess = std::string(VOCABLENS_BINARY_DIR) + "/vocablens";
  return exists(guess) ? guess : "";
}

int run_command(const std::string& cmd, std::string& output) {
  output.clear();
  std::string full = cmd + " 2>&1";
  FILE* p = ::popen(full.c_str(), "r");
  if (!p) throw std::runtime_error("popen failed: " + cmd);
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) output.append(buf.data(), n);
  int status = ::pclose(p);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

namespace {
// Directories made by temp_dir(), removed when the test program exits (in the process that made them only:
// a forked child's exit must not delete its parent's files). VOCABLENS_KEEP_TEST_DIRS=1 keeps them.
struct TempDirs {
  pid_t owner = ::getpid();
  std::vector<std::string> dirs;
  ~TempDirs() {
    if (::getpid() != owner || std::getenv("VOCABLENS_KEEP_TEST_DIRS")) return;
    std::error_code ec;
    for (auto& d : dirs) std::filesystem::remove_all(d, ec);
  }
};
TempDirs& temp_dirs() {
  static TempDirs t;
  return t;
}
}  // namespace

std::string temp_dir(const std::string& tag) {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/vocablens-" + tag + "-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!::mkdtemp(buf.data())) throw std::runtime_error("mkdtemp failed for " + tmpl);
  temp_dirs().dirs.push_back(buf.data());
  return buf.data();
}

void use_temp_cache(const std::string& tag) { ::setenv("VOCABLENS_CACHE", temp_dir(tag).c_str(), 1); }

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw std::runtime_error("cannot write " + path);
}

}  // namespace vl_test

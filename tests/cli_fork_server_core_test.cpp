// The test suite's fork servers (tests/support/fork_server.cpp, fork_client.cpp; docs/testing.md): a CLI run
// through it must be indistinguishable, for the test that made it, from the real `vocablens` process. The
// reference is the real binary itself, run the same way: the same exit status (code, or the signal it died of),
// stdout and stderr, and — read from /proc while both wait on their stdin — the same cwd, umask, resource
// limits, ignored and blocked signals. Then the client's own contract: signals forwarded, a killed client's
// worker killed, the fallback to the real binary, the server's start, stop and idle exit; and a test program
// served by its own server through vl_test_client, as CTest runs the LibTorch ones.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "fixtures.hpp"

namespace fs = std::filesystem;

namespace {

std::string real_cli() { return std::string(VOCABLENS_BINARY_DIR) + "/vocablens"; }
std::string server_program() { return std::string(VOCABLENS_BINARY_DIR) + "/tests/vl_cli_server"; }

// The client and the suite's server, as CTest hands them to the tests that run the CLI.
std::string client() {
  const std::string c = vl_test::cli_path();
  REQUIRE(c.find("vl_cli_client") != std::string::npos);  // registered with the fork server (tests/CMakeLists.txt)
  REQUIRE(std::getenv("VOCABLENS_CLI_SERVER") != nullptr);
  return c;
}

struct Run {
  int status = -1;  // as waitpid gives it
  std::string out, err;
};

struct Setup {
  std::vector<std::string> env;  // NAME=VALUE set, or NAME alone: unset
  std::string cwd;
  std::string stdin_text;
  std::function<void()> in_child;  // limits, signals, umask (after fork, before exec)
};

void apply_env(const std::vector<std::string>& env) {
  for (const auto& e : env) {
    const auto eq = e.find('=');
    if (eq == std::string::npos) ::unsetenv(e.c_str());
    else ::setenv(e.substr(0, eq).c_str(), e.substr(eq + 1).c_str(), 1);
  }
}

// Runs `program args` with stdin from a file, stdout and stderr to files; waits.
Run run(const std::string& program, const std::vector<std::string>& args, const Setup& s = {}) {
  const std::string dir = vl_test::temp_dir("fork-run");
  vl_test::write_file(dir + "/in", s.stdin_text);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const int in = ::open((dir + "/in").c_str(), O_RDONLY);
    const int out = ::open((dir + "/out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = ::open((dir + "/err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(in, 0), ::dup2(out, 1), ::dup2(err, 2);
    apply_env(s.env);
    if (!s.cwd.empty() && ::chdir(s.cwd.c_str()) != 0) ::_exit(120);
    if (s.in_child) s.in_child();
    std::vector<char*> argv{const_cast<char*>(program.c_str())};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(program.c_str(), argv.data());
    ::_exit(121);
  }
  Run r;
  REQUIRE(::waitpid(pid, &r.status, 0) == pid);
  r.out = vl_test::read_file(dir + "/out");
  r.err = vl_test::read_file(dir + "/err");
  return r;
}

std::string describe(int status) {
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("killed by ") + ::strsignal(WTERMSIG(status));
  return "status " + std::to_string(status);
}

const std::vector<std::string> kThroughServer = {"VL_CLI_CLIENT_REQUIRE_SERVER=1"};

// `vocablens --version` run by the real binary in the test's own state: the reference of several test cases,
// run once (each start of the real binary is ~0.45 s of LibTorch's start-up).
const Run& real_version() {
  static const Run r = run(real_cli(), {"--version"});
  return r;
}

// The client (through the server, never falling back) and the real binary give the same result.
void check_same(const std::vector<std::string>& args, Setup s = {}) {
  const bool plain_version =
      args == std::vector<std::string>{"--version"} && s.env.empty() && s.cwd.empty() && s.stdin_text.empty() && !s.in_child;
  const Run real = plain_version ? real_version() : run(real_cli(), args, s);
  s.env.insert(s.env.end(), kThroughServer.begin(), kThroughServer.end());
  const Run forked = run(client(), args, s);
  std::string joined;
  for (const auto& a : args) joined += " " + a;
  INFO("vocablens" << joined << "\nreal: " << describe(real.status) << "\n"
                   << real.err << "\nforked: " << describe(forked.status) << "\n"
                   << forked.err);
  CHECK(forked.status == real.status);
  CHECK(forked.out == real.out);
  CHECK(forked.err == real.err);
}

// ---- a process that waits on its stdin, seen from /proc -------------------------------------------------------

struct Waiting {
  pid_t child = -1;    // what we started (the client, or the real binary)
  pid_t process = -1;  // the process that runs the CLI (the worker, or the real binary itself)
  int stdin_w = -1;    // our end of its stdin
  std::string dir;
};

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string status_field(pid_t pid, const std::string& name) {
  std::istringstream in(slurp("/proc/" + std::to_string(pid) + "/status"));
  for (std::string line; std::getline(in, line);)
    if (line.rfind(name + ":", 0) == 0) return line.substr(name.size() + 1);
  return "";
}

// The pids whose fd 0 is the pipe `ino` (only the processes of this user are readable; that is enough).
std::vector<pid_t> pipe_readers(ino_t ino) {
  std::vector<pid_t> out;
  const std::string want = "pipe:[" + std::to_string(ino) + "]";
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    char buf[256];
    const ssize_t n = ::readlink((e.path().string() + "/fd/0").c_str(), buf, sizeof buf - 1);
    if (n > 0 && std::string(buf, static_cast<size_t>(n)) == want) out.push_back(std::stoi(name));
  }
  return out;
}

// Starts `program tokenize gpt2-tiny -` with its stdin a pipe that we keep open, and waits until the process
// that runs the CLI is blocked reading it.
Waiting start_waiting(const std::string& program, const std::string& model, const Setup& s) {
  Waiting w;
  w.dir = vl_test::temp_dir("fork-wait");
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  struct stat st {};
  REQUIRE(::fstat(fds[0], &st) == 0);
  w.child = ::fork();
  REQUIRE(w.child >= 0);
  if (w.child == 0) {
    ::dup2(fds[0], 0);
    ::close(fds[0]);
    ::close(fds[1]);
    const int out = ::open((w.dir + "/out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = ::open((w.dir + "/err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(out, 1), ::dup2(err, 2);
    apply_env(s.env);
    if (!s.cwd.empty() && ::chdir(s.cwd.c_str()) != 0) ::_exit(120);
    if (s.in_child) s.in_child();
    const char* argv[] = {program.c_str(), "tokenize", model.c_str(), "-", nullptr};
    ::execv(program.c_str(), const_cast<char**>(argv));
    ::_exit(121);
  }
  ::close(fds[0]);
  w.stdin_w = fds[1];
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    for (pid_t p : pipe_readers(st.st_ino)) {
      // The worker is the reader that is not the client; the real binary is the child itself.
      if (program == real_cli() ? p != w.child : p == w.child) continue;
      if (slurp("/proc/" + std::to_string(p) + "/wchan").find("pipe_read") != std::string::npos) w.process = p;
    }
    if (w.process > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  REQUIRE(w.process > 0);
  return w;
}

Run finish(Waiting& w, const std::string& text) {
  if (!text.empty()) REQUIRE(::write(w.stdin_w, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
  ::close(w.stdin_w);
  Run r;
  REQUIRE(::waitpid(w.child, &r.status, 0) == w.child);
  r.out = vl_test::read_file(w.dir + "/out");
  r.err = vl_test::read_file(w.dir + "/err");
  return r;
}

// What a process inherits at exec that a worker must be given instead.
std::map<std::string, std::string> process_state(pid_t pid) {
  const std::string proc = "/proc/" + std::to_string(pid);
  std::map<std::string, std::string> s;
  for (const char* f : {"Umask", "SigIgn", "SigBlk"}) s[f] = status_field(pid, f);
  s["cwd"] = fs::read_symlink(proc + "/cwd").string();
  std::istringstream limits(slurp(proc + "/limits"));
  for (std::string line; std::getline(limits, line);)
    for (const char* l : {"Max cpu time", "Max file size", "Max data size", "Max stack size", "Max core file size",
                          "Max open files", "Max address space"})
      if (line.rfind(l, 0) == 0) s[l] = line;
  return s;
}

void lower_limit(int resource, rlim_t to) {
  struct rlimit rl {};
  ::getrlimit(resource, &rl);
  if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > to) rl.rlim_cur = to;
  ::setrlimit(resource, &rl);
}

// The caller's state a test may set before running the CLI: all of it must reach the worker.
Setup unusual_state(const std::string& cwd) {
  Setup s;
  s.cwd = cwd;
  s.in_child = [] {
    ::umask(027);
    lower_limit(RLIMIT_AS, rlim_t{48} << 30);
    lower_limit(RLIMIT_FSIZE, rlim_t{1} << 30);
    lower_limit(RLIMIT_NOFILE, 512);
    lower_limit(RLIMIT_CPU, 3600);
    lower_limit(RLIMIT_CORE, 0);
    ::signal(SIGUSR2, SIG_IGN);
    ::signal(SIGHUP, SIG_IGN);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGWINCH);
    sigaddset(&set, SIGUSR1);
    ::sigprocmask(SIG_BLOCK, &set, nullptr);
  };
  return s;
}

bool gone(pid_t pid) { return ::kill(pid, 0) != 0 || status_field(pid, "State").find("zombie") != std::string::npos; }

bool wait_gone(pid_t pid, int seconds) {
  for (int i = 0; i < seconds * 50 && !gone(pid); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return gone(pid);
}

}  // namespace

TEST_CASE("fork server: exit codes, stdout and stderr are the real binary's", "[cli_server]") {
  const std::string model = vl_test::fixture("gpt2-tiny");
  REQUIRE_FALSE(model.empty());
  check_same({"--version"});
  check_same({"--help"});
  check_same({"tokenize", "--help"});
  check_same({"tokenise", model, "x"});           // "did you mean", exit 2
  check_same({"inspect", "/nonexistent/model"});  // one error line, exit 1
  check_same({"inspect", model, "--json"});
  check_same({"tokenize", model, "Hello world, hello fork"});
}

TEST_CASE("fork server: stdin, cwd and environment reach the worker", "[cli_server]") {
  const std::string model = vl_test::fixture("gpt2-tiny");
  REQUIRE_FALSE(model.empty());
  // One run for three things the caller hands over (each start of the real binary is ~0.45 s): the text on
  // stdin, a model path relative to the caller's cwd, and a variable the CLI reads at run time (VOCABLENS_DTYPE,
  // which tokenize accepts and does not use). A worker missing any of them differs from the real binary.
  Setup s;
  s.stdin_text = "Text from standard input\n";
  s.cwd = fs::path(model).parent_path().string();
  s.env = {"VOCABLENS_DTYPE=bfloat16"};
  check_same({"tokenize", fs::path(model).filename().string(), "-", "--json"}, s);
  // A variable the CLI reads at run time, where it shows: inspect refuses VOCABLENS_DTYPE=float64, naming it.
  Setup env;
  env.env = {"VOCABLENS_DTYPE=float64"};
  check_same({"inspect", model}, env);
}

TEST_CASE("fork server: the worker has the caller's cwd, umask, limits, ignored and blocked signals", "[cli_server]") {
  const std::string model = vl_test::fixture("gpt2-tiny");
  REQUIRE_FALSE(model.empty());
  const std::string cwd = vl_test::temp_dir("fork-cwd");
  const Setup s = unusual_state(cwd);
  Waiting real = start_waiting(real_cli(), model, s);
  const auto want = process_state(real.process);
  const Run real_run = finish(real, "Hello");
  Setup through = s;
  through.env = kThroughServer;
  Waiting forked = start_waiting(client(), model, through);
  const auto got = process_state(forked.process);
  CHECK(forked.process != forked.child);  // really a worker of the server
  const Run forked_run = finish(forked, "Hello");
  for (const auto& [k, v] : want) {
    INFO(k);
    CHECK(got.at(k) == v);
  }
  CHECK(want.at("cwd") == fs::canonical(cwd).string());
  CHECK(want.at("Umask") == "\t0027");
  CHECK(forked_run.status == real_run.status);
  CHECK(forked_run.out == real_run.out);
  CHECK(forked_run.err == real_run.err);
  CHECK(WIFEXITED(real_run.status));
}

TEST_CASE("fork server: signals reach the worker, and its death is the client's", "[cli_server]") {
  const std::string model = vl_test::fixture("gpt2-tiny");
  REQUIRE_FALSE(model.empty());
  Setup s;
  s.in_child = [] { lower_limit(RLIMIT_CORE, 0); };  // SIGQUIT would dump core
  Setup through = s;
  through.env = kThroughServer;
  // SIGINT, SIGTERM: the CLI's own handler (exit 128 + N, "vocablens: interrupted"); SIGQUIT, SIGUSR1: the
  // default action, death by that signal.
  for (int sig : {SIGINT, SIGTERM, SIGQUIT, SIGUSR1}) {
    INFO("signal " << ::strsignal(sig));
    Waiting real = start_waiting(real_cli(), model, s);
    REQUIRE(::kill(real.child, sig) == 0);
    const Run want = finish(real, "");
    Waiting forked = start_waiting(client(), model, through);
    REQUIRE(::kill(forked.child, sig) == 0);  // to the client, as a test or a terminal would
    // The client forwards the signal from its poll loop: closing stdin before the worker has it would let
    // the worker read end-of-input and exit 0 first (seen on a loaded machine). Every signal here ends it.
    CHECK(wait_gone(forked.process, 10));
    const Run got = finish(forked, "");
    INFO("real: " << describe(want.status) << ", forked: " << describe(got.status));
    CHECK(got.status == want.status);
    CHECK(got.err == want.err);
    if (sig == SIGINT || sig == SIGTERM) CHECK(want.status == (128 + sig) << 8);
    else CHECK((WIFSIGNALED(want.status) && WTERMSIG(want.status) == sig));
  }
  // A limit that kills: stdout to a file beyond RLIMIT_FSIZE is SIGXFSZ.
  Setup small = s;
  small.in_child = [] {
    lower_limit(RLIMIT_CORE, 0);
    lower_limit(RLIMIT_FSIZE, 512);
  };
  const Run want = run(real_cli(), {"--help"}, small);
  small.env = kThroughServer;
  const Run got = run(client(), {"--help"}, small);
  CHECK((WIFSIGNALED(want.status) && WTERMSIG(want.status) == SIGXFSZ));
  CHECK(got.status == want.status);
  CHECK(got.out == want.out);
}

TEST_CASE("fork server: a killed client's worker is killed", "[cli_server]") {
  const std::string model = vl_test::fixture("gpt2-tiny");
  REQUIRE_FALSE(model.empty());
  Setup s;
  s.env = kThroughServer;
  Waiting w = start_waiting(client(), model, s);
  REQUIRE(::kill(w.child, SIGKILL) == 0);
  int status = 0;
  REQUIRE(::waitpid(w.child, &status, 0) == w.child);
  CHECK(wait_gone(w.process, 10));
  ::close(w.stdin_w);
}

TEST_CASE("fork server: without a server, or for load-time variables, the real binary runs", "[cli_server]") {
  const std::string c = client();
  const Run& real = real_version();
  for (const std::vector<std::string>& env :
       std::vector<std::vector<std::string>>{{"VOCABLENS_CLI_SERVER"}, {"VOCABLENS_CLI_SERVER=/nonexistent/vl.sock"}}) {
    Setup s;
    s.env = env;
    const Run got = run(c, {"--version"}, s);
    CHECK(got.status == real.status);
    CHECK(got.out == real.out);
    s.env.push_back("VL_CLI_CLIENT_REQUIRE_SERVER=1");  // the switch that proves the other tests used the server
    CHECK(run(c, {"--version"}, s).status == 125 << 8);
  }
  // OpenBLAS reads OPENBLAS_VERBOSE when it loads, which a worker of the server did long ago: the real binary
  // runs, and prints what OpenBLAS prints at load.
  Setup verbose;
  verbose.env = {"OPENBLAS_VERBOSE=2"};
  const Run want = run(real_cli(), {"--version"}, verbose);
  const Run got = run(c, {"--version"}, verbose);
  CHECK(got.status == want.status);
  CHECK(got.out == want.out);
  CHECK(got.err == want.err);
  verbose.env.push_back("VL_CLI_CLIENT_REQUIRE_SERVER=1");
  CHECK(run(c, {"--version"}, verbose).status == 125 << 8);
}

TEST_CASE("fork server: start, replace, stop, idle exit, a socket path longer than sun_path", "[cli_server]") {
  const std::string c = client();
  const std::string dir = vl_test::temp_dir("fork-server") + "/" + std::string(120, 'd');
  fs::create_directories(dir);
  const std::string sock = dir + "/s.sock", pid_file = dir + "/s.pid";
  REQUIRE(sock.size() > 108);
  auto server = [&](const std::vector<std::string>& args) { return run(server_program(), args).status; };
  auto pid_of = [&] { return static_cast<pid_t>(std::stol(vl_test::read_file(pid_file))); };
  Setup via;
  via.env = {"VOCABLENS_CLI_SERVER=" + sock, "VL_CLI_CLIENT_REQUIRE_SERVER=1"};
  const Run& real = real_version();

  REQUIRE(server({"--vl-cli-server", "start", sock, pid_file, "60"}) == 0);
  const pid_t first = pid_of();
  CHECK(run(c, {"--version"}, via).out == real.out);
  REQUIRE(server({"--vl-cli-server", "start", sock, pid_file, "2"}) == 0);  // replaces the first
  const pid_t second = pid_of();
  CHECK(second != first);
  CHECK(wait_gone(first, 10));
  CHECK(run(c, {"--version"}, via).out == real.out);
  CHECK(wait_gone(second, 15));  // idle for 2 s: gone, and its files with it
  CHECK_FALSE(fs::exists(sock));
  CHECK_FALSE(fs::exists(pid_file));
  CHECK(run(c, {"--version"}, via).status == 125 << 8);

  REQUIRE(server({"--vl-cli-server", "start", sock, pid_file, "60"}) == 0);
  const pid_t third = pid_of();
  REQUIRE(server({"--vl-cli-server", "stop", sock, pid_file}) == 0);
  CHECK(wait_gone(third, 10));
  CHECK_FALSE(fs::exists(sock));
  CHECK(server({"--vl-cli-server", "bogus"}) == 2 << 8);
}

// A test program through its own fork server, as CTest runs vl_tests_model & co. (this program, vl_tests_core,
// has the same main() and server mode): the same exit status and output as the program run directly, for a
// passing run, a filter matching nothing (`-w NoTests`: 2) and a bad option; the client's --stop.
TEST_CASE("fork server: a test program through vl_test_client", "[cli_server]") {
  const std::string program = std::string(VOCABLENS_BINARY_DIR) + "/tests/vl_tests_core";
  const std::string test_client = std::string(VOCABLENS_BINARY_DIR) + "/tests/vl_test_client";
  const std::string dir = vl_test::temp_dir("test-server");
  const std::string sock = dir + "/t.sock", pid_file = dir + "/t.pid";
  REQUIRE(run(program, {"--vl-test-server", "start", sock, pid_file, "60"}).status == 0);
  const pid_t server = static_cast<pid_t>(std::stol(vl_test::read_file(pid_file)));
  Setup via;
  via.env = {"VL_CLI_CLIENT_REQUIRE_SERVER=1"};
  // Catch2's closing line carries no timing; the counts and every message must match.
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"-w", "NoTests", "-#", "[#options_core_test]~[.]"},
                                             {"-w", "NoTests", "[#no_such_file_test]"},
                                             {"--no-such-option"}}) {
    INFO(args.back());
    const Run direct = run(program, args);
    std::vector<std::string> through{sock, program};
    through.insert(through.end(), args.begin(), args.end());
    const Run served = run(test_client, through, via);
    CHECK(served.status == direct.status);
    CHECK(served.out == direct.out);
    CHECK(served.err == direct.err);
  }
  CHECK(run(program, {"-w", "NoTests", "[#no_such_file_test]"}).status == 2 << 8);
  CHECK(run(test_client, {"--stop", sock, pid_file, program}).status == 0);
  CHECK(wait_gone(server, 10));
  CHECK_FALSE(fs::exists(sock));
  CHECK(run(test_client, {sock, program, "--list-tags"}, via).status == 125 << 8);  // no server: refused as asked
}

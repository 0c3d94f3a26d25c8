// The test suite's fork server (test infrastructure; docs/testing.md, "The fork servers"): a daemon with the
// program's libraries (LibTorch) loaded already, which forks a worker per run and has it call the program's own
// main — so that a run skips the ~0.5 s of CPU every LibTorch process pays before main(). Two programs serve
// themselves with it: the CLI's (tests/support/cli_server.cpp, the CLI's objects with run_main) and the LibTorch
// test programs (tests/support/test_main.cpp, Catch2's session); their runs come from fork_client.cpp.
//
//   PROGRAM FLAG start SOCKET PIDFILE IDLE_S    a daemon on the unix socket SOCKET; replaces the server of
//                                               PIDFILE; returns once it listens
//   PROGRAM FLAG stop SOCKET PIDFILE            stops it (and removes both files)
//
// Per connection (protocol in fork_wire.hpp) the server forks a session, which reads the request and forks the
// worker: fds 0/1/2, cwd, umask, lowered resource limits, signal dispositions and mask, the environment — then
// exit(entry(argc, argv)), as a process that had just started. The session reports the worker's pid and later
// its wait status, and SIGKILLs the worker when the client's connection closes (the client was killed). The
// server itself never runs the program's code: no LibTorch (OpenMP) thread exists when it forks. It stops after
// IDLE_S seconds without a session, on SIGTERM, and when its own binary was replaced by a rebuild (a session then
// answers "fall back to the real binary" rather than run stale code).
//
// What differs from a real start, so what a request falls back for: variables read when the libraries are
// loaded (OMP_*, OPENBLAS_*, LD_*, MALLOC_*, ...) are the server's; a request whose such variables differ from
// the server's is refused and the client execs the real binary. Fds above 2 are not passed; the worker has no
// controlling terminal; its parent is the session.
#include <dirent.h>
#include <limits.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "fork_server.hpp"
#include "fork_wire.hpp"

extern char** environ;

namespace {

using vl_fork_wire::Message;
using vl_fork_wire::Request;

volatile sig_atomic_t g_stop = 0;
const char* g_program = "fork server";    // for messages
vl_fork_server::Entry g_entry = nullptr;  // what a worker runs
extern "C" void on_stop(int) { g_stop = 1; }

void log_error(const char* what) { std::fprintf(stderr, "%s[%d]: %s: %s\n", g_program, ::getpid(), what, std::strerror(errno)); }

bool send_message(int fd, uint32_t kind, int32_t value) {
  Message m{kind, value};
  return ::send(fd, &m, sizeof m, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof m);
}

bool read_all(int fd, char* p, size_t n) {
  while (n > 0) {
    ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// Environment variables read while the process starts (library constructors: libgomp, OpenBLAS, glibc's
// loader and malloc, LibTorch's static initialisers, the sanitizers): in a worker they have the server's values.
bool load_time_variable(const std::string& name) {
  static const char* kPrefixes[] = {"OMP_",  "GOMP_",   "KMP_",  "OPENBLAS_", "GOTO",           "MKL_",   "BLIS_",
                                    "DNNL_", "ONEDNN_", "LD_",   "MALLOC_",   "GLIBC_TUNABLES", "TORCH_", "PYTORCH_",
                                    "ASAN_", "UBSAN_",  "LSAN_", "TSAN_",     "MSAN_"};
  for (const char* p : kPrefixes)
    if (name.compare(0, std::strlen(p), p) == 0) return true;
  return false;
}

std::map<std::string, std::string> load_time_environment(char* const* env, size_t n) {
  std::map<std::string, std::string> out;
  for (size_t i = 0; i < n && env[i]; ++i) {
    const char* eq = std::strchr(env[i], '=');
    std::string name = eq ? std::string(env[i], static_cast<size_t>(eq - env[i])) : std::string(env[i]);
    if (load_time_variable(name)) out[name] = eq ? eq + 1 : "";
  }
  return out;
}

std::string first_difference(const std::map<std::string, std::string>& a, const std::map<std::string, std::string>& b) {
  for (const auto* x : {&a, &b}) {
    const auto* y = x == &a ? &b : &a;
    for (const auto& [name, value] : *x)
      if (auto it = y->find(name); it == y->end() || it->second != value) return name;
  }
  return "";
}

// True when this program's file was replaced (relinked) since it started: its workers would run old code.
bool binary_replaced() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return false;
  buf[n] = 0;
  return std::strstr(buf, " (deleted)") != nullptr;
}

int pidfd_open(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

// Registered by the worker before it runs the program, so run by exit() after every handler and destructor that the
// run registered (those run last-registered first) and before those registered while the libraries
// loaded: LibTorch's static destructors deregister its ~2000 operators one by one, 80 ms of CPU per run on the
// 2-core machine, copy-on-write faults included, for a process about to vanish. Flush what exit() would flush
// after them (C++ streams, then stdio) and end here.
void end_worker(int status, void*) {
  std::cout.flush();
  std::cerr.flush();
  std::clog.flush();
  std::fflush(nullptr);
  ::_exit(status);
}

// The worker, in the session's fork: becomes the process the client would have exec'd, then runs the program.
[[noreturn]] void become_worker(const Request& req, const std::vector<int>& fds, std::vector<char*>& argv,
                                std::vector<char*>& env) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // the session gone (killed): so is the worker
  size_t k = 0;
  for (int fd = 0; fd < 3; ++fd) {
    if (req.fds & (1u << fd)) {
      if (::dup2(fds[k++], fd) < 0) ::_exit(126);
    } else {
      ::close(fd);
    }
  }
  if (::fchdir(fds[k]) != 0) ::_exit(126);
  ::close_range(3, ~0u, 0);  // the connection, the received copies, anything of the server's
  ::umask(static_cast<mode_t>(req.umask));
  for (int i = 0; i < vl_fork_wire::kLimitCount; ++i) {
    struct rlimit have {};
    if (::getrlimit(vl_fork_wire::kLimits[i], &have) != 0) continue;
    struct rlimit want = have;
    if (req.limit_cur[i] < have.rlim_cur) want.rlim_cur = static_cast<rlim_t>(req.limit_cur[i]);
    if (req.limit_max[i] < have.rlim_max) want.rlim_max = static_cast<rlim_t>(req.limit_max[i]);
    if (want.rlim_cur > want.rlim_max) want.rlim_cur = want.rlim_max;
    if (want.rlim_cur != have.rlim_cur || want.rlim_max != have.rlim_max) ::setrlimit(vl_fork_wire::kLimits[i], &want);
  }
  // Signal dispositions as exec leaves them: default, except what the caller ignored; the caller's mask.
  sigset_t mask;
  sigemptyset(&mask);
  for (int sig = 1; sig < 64 && sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    ::signal(sig, (req.ignored_signals >> (sig - 1)) & 1 ? SIG_IGN : SIG_DFL);
    if ((req.blocked_signals >> (sig - 1)) & 1) sigaddset(&mask, sig);
  }
  ::sigprocmask(SIG_SETMASK, &mask, nullptr);
  env.push_back(nullptr);
  environ = env.data();
  argv.push_back(nullptr);
  // As main() returning: exit() runs the atexit handlers and flushes stdio — except the destructors of what
  // the libraries constructed when they loaded, in the server, before this fork (see end_worker).
  ::on_exit(end_worker, nullptr);
  std::exit(g_entry(static_cast<int>(argv.size() - 1), argv.data()));
}

// One connection: read the request, fork the worker, report its pid and its end.
[[noreturn]] void run_session(int conn, const std::map<std::string, std::string>& server_env) {
  Request req;
  char control[CMSG_SPACE(sizeof(int) * 4)];
  iovec iov{&req, sizeof req};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  do n = ::recvmsg(conn, &msg, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  if (n <= 0) ::_exit(0);
  std::vector<int> fds;
  for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm))
    if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
      const size_t count = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof fd);
        fds.push_back(fd);
      }
    }
  if (static_cast<size_t>(n) < sizeof req && !read_all(conn, reinterpret_cast<char*>(&req) + n, sizeof req - n)) ::_exit(0);
  const size_t want_fds = static_cast<size_t>(__builtin_popcount(req.fds & 7u)) + 1;
  if (req.magic != vl_fork_wire::kMagic || fds.size() != want_fds || req.argc < 1 || req.payload > (64u << 20)) {
    send_message(conn, vl_fork_wire::kFallBack, 1);
    ::_exit(0);
  }
  static std::string payload;  // lives as long as the worker's argv and environ point into it
  payload.resize(req.payload);
  if (!read_all(conn, payload.data(), payload.size())) ::_exit(0);
  std::vector<char*> strings;
  for (size_t pos = 0; pos < payload.size();) {
    strings.push_back(payload.data() + pos);
    const size_t end = payload.find('\0', pos);
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  if (strings.size() != size_t{req.argc} + req.envc || payload.empty() || payload.back() != '\0') {
    send_message(conn, vl_fork_wire::kFallBack, 1);
    ::_exit(0);
  }
  std::vector<char*> argv(strings.begin(), strings.begin() + req.argc);
  std::vector<char*> env(strings.begin() + req.argc, strings.end());
  // What a worker cannot reproduce: the real binary runs instead.
  if (const auto mine = load_time_environment(env.data(), env.size()); mine != server_env) {
    // Logged (SOCKET.log), so that a test suite that falls back often shows why.
    std::fprintf(stderr, "%s: ran the real binary for `%s`: %s differs from the server's\n", g_program,
                 argv.size() > 1 ? argv[1] : argv[0], first_difference(mine, server_env).c_str());
    send_message(conn, vl_fork_wire::kFallBack, 2);
    ::_exit(0);
  }
  if (binary_replaced()) {
    send_message(conn, vl_fork_wire::kFallBack, 3);
    ::_exit(0);
  }

  const pid_t worker = ::fork();
  if (worker < 0) {
    send_message(conn, vl_fork_wire::kFallBack, 4);
    ::_exit(0);
  }
  if (worker == 0) become_worker(req, fds, argv, env);
  for (int fd : fds) ::close(fd);
  const int pidfd = pidfd_open(worker);
  if (pidfd < 0 || !send_message(conn, vl_fork_wire::kStarted, worker)) {
    ::kill(worker, SIGKILL);
    ::waitpid(worker, nullptr, 0);
    ::_exit(0);
  }
  for (;;) {
    pollfd p[2] = {{conn, POLLIN, 0}, {pidfd, POLLIN, 0}};
    if (::poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      ::kill(worker, SIGKILL);
    }
    if (p[1].revents) break;  // the worker ended
    if (p[0].revents) {
      char buf[256];
      const ssize_t r = ::recv(conn, buf, sizeof buf, MSG_DONTWAIT);
      if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR) || (p[0].revents & (POLLHUP | POLLERR))) {
        ::kill(worker, SIGKILL);  // the client is gone: nobody waits for this run any more
        ::waitpid(worker, nullptr, 0);
        ::_exit(0);
      }
    }
  }
  int status = 0;
  while (::waitpid(worker, &status, 0) < 0 && errno == EINTR) {}
  send_message(conn, vl_fork_wire::kExited, status);
  ::_exit(0);
}

pid_t read_pid_file(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return -1;
  long pid = -1;
  if (std::fscanf(f, "%ld", &pid) != 1) pid = -1;
  std::fclose(f);
  return static_cast<pid_t>(pid);
}

// The path of /proc/PID/exe ("self" or a pid), without the " (deleted)" of a binary replaced since it started.
std::string program_of(const std::string& pid) {
  char buf[4096];
  const ssize_t n = ::readlink(("/proc/" + pid + "/exe").c_str(), buf, sizeof buf - 1);
  std::string x = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  const std::string deleted = " (deleted)";
  if (x.size() > deleted.size() && x.compare(x.size() - deleted.size(), deleted.size(), deleted) == 0)
    x.resize(x.size() - deleted.size());
  return x;
}

std::string own_program() { return program_of("self"); }

// True when `pid` runs the program `exe` (not a recycled pid of something else).
bool is_server(pid_t pid, const std::string& exe) { return pid > 0 && !exe.empty() && program_of(std::to_string(pid)) == exe; }

int stop_server(const std::string& socket_path, const std::string& pid_file, const std::string& exe) {
  const pid_t pid = read_pid_file(pid_file);
  if (is_server(pid, exe) && ::kill(pid, SIGTERM) == 0) {
    for (int i = 0; i < 1000 && ::kill(pid, 0) == 0 && is_server(pid, exe); ++i) ::usleep(10000);
    if (::kill(pid, 0) == 0 && is_server(pid, exe)) ::kill(pid, SIGKILL);
  }
  ::unlink(socket_path.c_str());
  ::unlink(pid_file.c_str());
  return 0;
}

// The daemon's life: accept, fork a session per connection, reap them, stop when idle or asked.
int serve(int listener, const std::string& socket_path, const std::string& pid_file, int idle_seconds) {
  const auto server_env = load_time_environment(environ, static_cast<size_t>(-1));
  auto now = [] {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec;
  };
  time_t last_active = now();
  int sessions = 0;
  while (!g_stop) {
    for (pid_t p; (p = ::waitpid(-1, nullptr, WNOHANG)) > 0;) --sessions;
    if (sessions > 0) last_active = now();
    if (now() - last_active >= idle_seconds || binary_replaced()) break;
    pollfd p{listener, POLLIN, 0};
    const int r = ::poll(&p, 1, 1000);
    if (r <= 0) continue;
    const int conn = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) continue;
    last_active = now();
    const pid_t session = ::fork();
    if (session == 0) {
      ::close(listener);
      for (int sig : {SIGTERM, SIGINT, SIGHUP}) ::signal(sig, SIG_DFL);
      run_session(conn, server_env);
    }
    if (session > 0) ++sessions;
    else log_error("fork");
    ::close(conn);
  }
  ::close(listener);
  if (read_pid_file(pid_file) == ::getpid()) {
    ::unlink(socket_path.c_str());
    ::unlink(pid_file.c_str());
  }
  return 0;
}

// Replaces the server of `pid_file` with a new daemon; returns when it listens (0) or failed (1).
int start_server(const std::string& socket_path, const std::string& pid_file, int idle_seconds) {
  stop_server(socket_path, pid_file, own_program());
  int ready[2];
  if (::pipe2(ready, O_CLOEXEC) != 0) {
    log_error("pipe");
    return 1;
  }
  const pid_t child = ::fork();
  if (child < 0) {
    log_error("fork");
    return 1;
  }
  if (child > 0) {
    ::close(ready[1]);
    char ok = 0;
    const bool up = read_all(ready[0], &ok, 1) && ok == 1;
    ::waitpid(child, nullptr, 0);
    if (!up) std::fprintf(stderr, "%s: the server did not start (see %s.log)\n", g_program, socket_path.c_str());
    return up ? 0 : 1;
  }
  // The daemon: its own session, no terminal, stdin/stdout on /dev/null, stderr to SOCKET.log.
  ::close(ready[0]);
  ::setsid();
  if (::fork() != 0) ::_exit(0);
  const int null = ::open("/dev/null", O_RDWR);
  const int log = ::open((socket_path + ".log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  ::dup2(null, 0);
  ::dup2(null, 1);
  ::dup2(log >= 0 ? log : null, 2);
  if (null > 2) ::close(null);
  if (log > 2) ::close(log);
  struct sigaction sa {};
  sa.sa_handler = on_stop;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) ::sigaction(sig, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  ::signal(SIGCHLD, SIG_DFL);
  const int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr;
  int dir_fd = -1;
  if (listener < 0 || !vl_fork_wire::socket_address(socket_path, addr, dir_fd)) {
    log_error("socket");
    ::_exit(1);
  }
  ::unlink(socket_path.c_str());
  const bool bound = ::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 && ::listen(listener, 64) == 0;
  if (dir_fd >= 0) ::close(dir_fd);
  if (!bound) {
    log_error(("bind " + socket_path).c_str());
    ::_exit(1);
  }
  FILE* f = std::fopen(pid_file.c_str(), "w");
  if (!f || std::fprintf(f, "%d\n", ::getpid()) < 0 || std::fclose(f) != 0) {
    log_error(("write " + pid_file).c_str());
    ::_exit(1);
  }
  const char ok = 1;
  ssize_t ignored = ::write(ready[1], &ok, 1);
  (void)ignored;
  ::close(ready[1]);
  ::_exit(serve(listener, socket_path, pid_file, idle_seconds));
}

}  // namespace

int vl_fork_server::command(const char* program, Entry entry, int argc, char** argv) {
  g_program = program;
  g_entry = entry;
  const std::string verb = argc > 0 ? argv[0] : "";
  if (verb == "start" && argc == 4) return start_server(argv[1], argv[2], std::atoi(argv[3]) > 0 ? std::atoi(argv[3]) : 60);
  if (verb == "stop" && argc == 3) return stop_server(argv[1], argv[2], own_program());
  std::fprintf(stderr, "usage: %s start SOCKET PIDFILE IDLE_SECONDS | stop SOCKET PIDFILE\n", program);
  return 2;
}

int vl_fork_server::stop(const char* socket_path, const char* pid_file, const char* program) {
  char buf[PATH_MAX];
  if (!::realpath(program, buf)) return 0;  // no such program: no server of it either
  return stop_server(socket_path, pid_file, buf);
}

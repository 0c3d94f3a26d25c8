// The test suite's fork client (test infrastructure; docs/testing.md, "The fork servers"), with no LibTorch in
// it, built twice:
//   vl_cli_client ARGS...                   what the tests run as "the vocablens CLI" (VOCABLENS_CLI); its server
//                                           is named by VOCABLENS_CLI_SERVER, its real binary compiled in
//                                           (VL_REAL_CLI)
//   vl_test_client SOCKET PROGRAM ARGS...   how CTest runs a LibTorch test program (`PROGRAM ARGS...`) through
//                                           the program's own server on SOCKET
//   vl_test_client --stop SOCKET PIDFILE PROGRAM   stops that server (CTest's cleanup) without loading LibTorch
//
// Every LibTorch process pays ~0.5 s of CPU before main() (285 shared libraries bound, LibTorch's operators
// registered); the test suite starts hundreds. This client starts in a millisecond and hands its process
// state — argv, environment, cwd, umask, resource limits, ignored and blocked signals, fds 0/1/2 — to the fork
// server (fork_server.cpp), whose worker runs the program with LibTorch already loaded. Then it behaves as that
// worker: forwards SIGINT/SIGTERM/SIGHUP/SIGQUIT/SIGUSR1/SIGUSR2 to it, and ends as it ended (the same exit code,
// or the same signal raised on itself), so its caller's wait status is the real binary's.
//
// No server reachable (no socket named, nothing listening, the server refused): exec the real binary, so a test
// program run by hand works unchanged. VL_CLI_CLIENT_REQUIRE_SERVER=1 turns that fallback into an error (exit
// 125), for the clients' own test.
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "fork_server.hpp"
#include "fork_wire.hpp"

extern char** environ;

namespace {

int g_signal_pipe[2] = {-1, -1};
const char* g_real = nullptr;  // the real binary: what a fallback execs, the worker's argv[0]

extern "C" void on_signal(int sig) {
  const int saved = errno;
  const unsigned char b = static_cast<unsigned char>(sig);
  ssize_t ignored = ::write(g_signal_pipe[1], &b, 1);
  (void)ignored;
  errno = saved;
}

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "vl_fork_client: %s: %s\n", what, std::strerror(errno));
  std::_Exit(125);
}

// Signals received before the worker's pid was known (or before falling back).
std::vector<int> g_pending;
std::vector<int> g_handled;  // the forwarded signals whose handler this client installed

void drain_signals() {
  unsigned char buf[64];
  ssize_t n;
  while ((n = ::read(g_signal_pipe[0], buf, sizeof buf)) > 0)
    for (ssize_t i = 0; i < n; ++i) g_pending.push_back(buf[i]);
}

// The real binary, as if the client had never been there: default handlers back, a signal that arrived in the
// meantime delivered to ourselves (it would have reached the real process), then exec.
[[noreturn]] void run_real_binary(char** argv) {
  if (std::getenv("VL_CLI_CLIENT_REQUIRE_SERVER")) {
    std::fprintf(stderr, "vl_fork_client: no fork server for %s (VL_CLI_CLIENT_REQUIRE_SERVER is set)\n", g_real);
    std::_Exit(125);
  }
  if (g_signal_pipe[0] >= 0) drain_signals();
  for (int sig : g_handled) ::signal(sig, SIG_DFL);
  for (int sig : g_pending) ::raise(sig);
  ::execv(g_real, argv);
  die((std::string("exec ") + g_real).c_str());
}

// Ends this process as the worker ended: same exit code, or death by the same signal.
[[noreturn]] void end_like(int status) {
  if (WIFEXITED(status)) std::_Exit(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    // No core file of this client (the worker wrote its own, if any).
    ::prctl(PR_SET_DUMPABLE, 0);
    struct rlimit no_core {
      0, 0
    };
    ::setrlimit(RLIMIT_CORE, &no_core);
    ::signal(sig, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    ::sigprocmask(SIG_UNBLOCK, &set, nullptr);
    ::raise(sig);
    std::_Exit(128 + sig);  // a signal whose default is not to terminate (cannot be a WTERMSIG, but be safe)
  }
  std::_Exit(125);
}

bool read_message(int fd, vl_fork_wire::Message& m) {
  size_t got = 0;
  auto* p = reinterpret_cast<char*>(&m);
  while (got < sizeof m) {
    ssize_t n = ::read(fd, p + got, sizeof m - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    got += static_cast<size_t>(n);
  }
  return true;
}

bool write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
#ifdef VL_REAL_CLI
  g_real = VL_REAL_CLI;
  const char* where = std::getenv("VOCABLENS_CLI_SERVER");
#else
  if (argc == 5 && std::strcmp(argv[1], "--stop") == 0) return vl_fork_server::stop(argv[2], argv[3], argv[4]);
  if (argc < 3) {
    std::fprintf(stderr, "usage: vl_test_client SOCKET PROGRAM [ARGS...] | --stop SOCKET PIDFILE PROGRAM\n");
    return 125;
  }
  const char* where = argv[1];
  g_real = argv[2];
  argc -= 2;
  argv += 2;
#endif
  // The worker sees the real binary's path as argv[0] (CLI11 prints it in usage lines), as does the fallback.
  std::vector<char*> args(argv, argv + argc);
  args.push_back(nullptr);
  args[0] = const_cast<char*>(g_real);
  if (!where || !*where) run_real_binary(args.data());

  vl_fork_wire::Request req;
  // The caller's signal state, read before this client installs its own handlers.
  sigset_t blocked;
  ::sigprocmask(SIG_BLOCK, nullptr, &blocked);
  for (int sig = 1; sig < 64 && sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) req.ignored_signals |= 1ull << (sig - 1);
    if (sigismember(&blocked, sig) == 1) req.blocked_signals |= 1ull << (sig - 1);
  }
  if (::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) die("pipe");
  for (int sig : vl_fork_wire::kForwarded) {
    if (req.ignored_signals & (1ull << (sig - 1))) continue;  // ignored by the caller: the worker ignores it too
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    ::sigaction(sig, &sa, nullptr);
    g_handled.push_back(sig);
  }

  const int sock = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (sock < 0) run_real_binary(args.data());
  sockaddr_un addr;
  int dir_fd = -1;
  if (!vl_fork_wire::socket_address(where, addr, dir_fd)) run_real_binary(args.data());
  int rc;
  do rc = ::connect(sock, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  while (rc != 0 && errno == EINTR);
  if (dir_fd >= 0) ::close(dir_fd);
  if (rc != 0) {
    ::close(sock);
    run_real_binary(args.data());
  }

  // The request: header and fds in one message, then the strings.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  req.umask = mask;
  for (int i = 0; i < vl_fork_wire::kLimitCount; ++i) {
    struct rlimit rl {};
    ::getrlimit(vl_fork_wire::kLimits[i], &rl);
    req.limit_cur[i] = rl.rlim_cur;
    req.limit_max[i] = rl.rlim_max;
  }
  std::vector<int> fds;
  for (int fd = 0; fd < 3; ++fd)
    if (::fcntl(fd, F_GETFD) != -1) {
      req.fds |= 1u << fd;
      fds.push_back(fd);
    }
  const int cwd = ::open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (cwd < 0) run_real_binary(args.data());  // a cwd this client cannot open: let the real binary meet it
  fds.push_back(cwd);
  std::string payload;
  for (int i = 0; i < argc; ++i) payload.append(args[i], std::strlen(args[i]) + 1);
  req.argc = static_cast<uint32_t>(argc);
  for (char** e = environ; *e; ++e, ++req.envc) payload.append(*e, std::strlen(*e) + 1);
  req.payload = payload.size();

  iovec iov{&req, sizeof req};
  std::vector<char> control(CMSG_SPACE(sizeof(int) * fds.size()));
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.data();
  msg.msg_controllen = control.size();
  cmsghdr* cm = CMSG_FIRSTHDR(&msg);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
  std::memcpy(CMSG_DATA(cm), fds.data(), sizeof(int) * fds.size());
  ssize_t sent;
  do sent = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
  while (sent < 0 && errno == EINTR);
  // A server that accepted nothing yet ran nothing: the real binary is still a faithful answer.
  if (sent != static_cast<ssize_t>(sizeof req)) run_real_binary(args.data());
  ::close(cwd);
  if (!write_all(sock, payload.data(), payload.size())) run_real_binary(args.data());

  pid_t worker = -1;
  for (;;) {
    pollfd p[2] = {{sock, POLLIN, 0}, {g_signal_pipe[0], POLLIN, 0}};
    if (::poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      die("poll");
    }
    if (p[1].revents) {
      drain_signals();
      if (worker > 0) {
        for (int sig : g_pending) ::kill(worker, sig);
        g_pending.clear();
      }
    }
    if (!p[0].revents) continue;
    vl_fork_wire::Message m{};
    if (!read_message(sock, m)) {
      if (worker < 0) run_real_binary(args.data());  // the session ended before starting anything
      errno = ECONNRESET;
      die("the fork server's session ended before the worker did");
    }
    switch (m.kind) {
      case vl_fork_wire::kStarted:
        worker = m.value;
        drain_signals();
        for (int sig : g_pending) ::kill(worker, sig);
        g_pending.clear();
        break;
      case vl_fork_wire::kFallBack: ::close(sock); run_real_binary(args.data());
      case vl_fork_wire::kExited: end_like(m.value);
      default: errno = EPROTO; die("unexpected message from the fork server");
    }
  }
}

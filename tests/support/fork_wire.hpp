// tests/support/fork_wire.hpp — the few bytes between the test suite's fork clients and its fork servers.
//
// Test infrastructure only (docs/testing.md, "The fork servers"): a test that runs the `vocablens` CLI runs
// vl_cli_client instead (VOCABLENS_CLI), and CTest runs each LibTorch test program through vl_test_client (both
// tests/support/fork_client.cpp), which hand their whole process state to a server of the program
// (tests/support/fork_server.cpp) that has LibTorch loaded already and forks a worker calling the program's
// main. One unix stream connection per run:
//
//   client -> server  one sendmsg: Request + SCM_RIGHTS [the open ones of fds 0, 1, 2 (Request::fds), cwd],
//                     then Request::payload bytes: argc NUL-terminated argv strings, envc environment strings
//   server -> client  Message{kStarted, worker pid}  then  Message{kExited, wait status}
//                     or Message{kFallBack, reason} at any point before kStarted: the client runs the real binary
//   client closes     the session SIGKILLs the worker (the client was killed: so is what it ran)
//
// Signals go from the client straight to the worker's pid with kill(2). No byte order or versioning: both ends
// are built from the same tree, in the same build.
#pragma once
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>

namespace vl_fork_wire {

/// argv[1] of vl_cli_server that selects server mode; anything else runs the CLI (run_main).
inline constexpr const char* kCliServerFlag = "--vl-cli-server";
/// argv[1] of a test program that selects server mode; anything else runs its tests.
inline constexpr const char* kTestServerFlag = "--vl-test-server";

inline constexpr uint32_t kMagic = 0x766c6331;  // "vlc1"

/// The caller's resource limits that the worker takes on (only where lower than the server's own).
inline constexpr int kLimits[] = {RLIMIT_AS, RLIMIT_DATA, RLIMIT_FSIZE, RLIMIT_NOFILE, RLIMIT_CPU, RLIMIT_STACK, RLIMIT_CORE};
inline constexpr int kLimitCount = sizeof kLimits / sizeof kLimits[0];

/// The signals the client forwards to the worker (SIGKILL/SIGSTOP cannot be caught: a killed client's closed
/// socket makes the session SIGKILL the worker instead).
inline constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

struct Request {
  uint32_t magic = kMagic;
  uint32_t fds = 0;  // bit i: fd i (0, 1, 2) was open and travels in SCM_RIGHTS, in this order, before the cwd
  uint32_t umask = 022;
  uint32_t argc = 0;
  uint32_t envc = 0;
  uint32_t reserved = 0;
  uint64_t payload = 0;          // bytes of strings after the header
  uint64_t ignored_signals = 0;  // bit (sig - 1): SIG_IGN in the caller (kept over exec by a real process)
  uint64_t blocked_signals = 0;  // bit (sig - 1): blocked in the caller
  uint64_t limit_cur[kLimitCount] = {};
  uint64_t limit_max[kLimitCount] = {};
};

enum Kind : uint32_t { kStarted = 1, kFallBack = 2, kExited = 3 };

struct Message {
  uint32_t kind;
  int32_t value;
};

/// Fills `addr` for a socket at `path`. A path longer than sun_path (108 bytes) is reached through its
/// directory: `dir_fd` is opened (O_PATH; close it after bind/connect) and the address is
/// /proc/self/fd/N/<name>. Returns false when even that does not fit or the directory cannot be opened.
inline bool socket_address(const std::string& path, sockaddr_un& addr, int& dir_fd) {
  std::memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  dir_fd = -1;
  std::string where = path;
  if (where.size() >= sizeof addr.sun_path) {
    const size_t slash = path.rfind('/');
    if (slash == std::string::npos) return false;
    dir_fd = ::open(slash == 0 ? "/" : path.substr(0, slash).c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd < 0) return false;
    where = "/proc/self/fd/" + std::to_string(dir_fd) + path.substr(slash);
    if (where.size() >= sizeof addr.sun_path) {
      ::close(dir_fd);
      dir_fd = -1;
      return false;
    }
  }
  std::memcpy(addr.sun_path, where.c_str(), where.size() + 1);
  return true;
}

}  // namespace vl_fork_wire

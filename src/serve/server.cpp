// `vocablens serve`: the explorer's HTTP server (see server.hpp). This file checks the options, sets up
// cpp-httplib (threads, limits, timeouts), the access guards every request passes before its route (token,
// Host, content type), the error and exception handlers, and binds. The routes are explorer.cpp's, the
// page and headers static_page.cpp's, the worker pool and cancellation worker_pool.cpp's.
#include "serve/server.hpp"

#include <arpa/inet.h>
#include <malloc.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "serve/connections.hpp"
#include "serve/explorer.hpp"
#include "vocablens/error.hpp"
#include "vocablens/model.hpp"

namespace vocablens::serve {

bool is_loopback_host(const std::string& host) {
  if (host == "localhost" || host == "::1" || host == "[::1]") return true;
  in_addr a{};
  if (::inet_pton(AF_INET, host.c_str(), &a) == 1) return (ntohl(a.s_addr) >> 24) == 127;
  return false;
}

namespace {

// "pid 123 (vocablens)" for the process listening on TCP `port`, when this user may see it; "" otherwise.
// Read from /proc: the listening socket's inode in /proc/net/tcp{,6}, then the process holding that inode.
std::string port_holder(int port) {
  std::string inode;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream f(table);
    std::string line;
    std::getline(f, line);  // column names
    while (inode.empty() && std::getline(f, line)) {
      std::istringstream w(line);
      std::string sl, local, remote, state, skip;
      if (!(w >> sl >> local >> remote >> state)) continue;
      const auto colon = local.rfind(':');
      if (state != "0A" || colon == std::string::npos) continue;  // 0A: LISTEN
      if (std::strtol(local.c_str() + colon + 1, nullptr, 16) != port) continue;
      for (int i = 0; i < 5; ++i) w >> skip;  // tx:rx, tr:when, retrnsmt, uid, timeout
      w >> inode;
    }
    if (!inode.empty()) break;
  }
  if (inode.empty()) return "";
  const std::string target = "socket:[" + inode + "]";
  std::error_code ec;
  for (const auto& proc : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string pid = proc.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::error_code ec2;
    for (const auto& fd : std::filesystem::directory_iterator(proc.path() / "fd", ec2)) {
      std::error_code ec3;
      if (std::filesystem::read_symlink(fd.path(), ec3).string() != target) continue;
      std::string comm;
      std::getline(std::ifstream(proc.path() / "comm"), comm);
      return "pid " + pid + (comm.empty() ? "" : " (" + comm + ")") + " listens on it";
    }
  }
  return "another process listens on it";
}

}  // namespace

int run_server(const ServeOptions& given) {
  ServeOptions o = given;
  if (o.port < 0 || o.port > 65535) throw UsageError("--port must be in [0, 65535] (got " + std::to_string(o.port) + ")");
  if (o.workers < 1 || o.workers > 64) throw UsageError("--workers must be in [1, 64] (got " + std::to_string(o.workers) + ")");
  if (o.queue < 0 || o.queue > 1024) throw UsageError("--queue must be in [0, 1024] (got " + std::to_string(o.queue) + ")");
  if (o.forward_cache < 0 || o.forward_cache > 1024)
    throw UsageError("--forward-cache must be in [0, 1024] (got " + std::to_string(o.forward_cache) + ")");
  if (o.forward_cache_mb < 0 || o.forward_cache_mb > (int64_t(1) << 20))
    throw UsageError("--forward-cache-mb must be in [0, 1048576] (got " + std::to_string(o.forward_cache_mb) + ")");
  if (o.max_body < 1 || o.max_body > (int64_t(1) << 30))
    throw UsageError("--max-body must be in [1, 1073741824] bytes (got " + std::to_string(o.max_body) + ")");
  if (o.max_connections < 1 || o.max_connections > 4096)
    throw UsageError("--max-connections must be in [1, 4096] (got " + std::to_string(o.max_connections) + ")");
  if (o.max_client_connections < 1 || o.max_client_connections > o.max_connections)
    throw UsageError("--max-client-connections must be in [1, --max-connections = " + std::to_string(o.max_connections) +
                     "] (got " + std::to_string(o.max_client_connections) + ")");
  if (o.request_timeout < 1 || o.request_timeout > 600)
    throw UsageError("--request-timeout must be in [1, 600] seconds (got " + std::to_string(o.request_timeout) + ")");
  if (o.write_timeout < 1 || o.write_timeout > 600)
    throw UsageError("--write-timeout must be in [1, 600] seconds (got " + std::to_string(o.write_timeout) + ")");
  if (o.memory_budget_mb < 0 || o.memory_budget_mb > (int64_t(1) << 30))
    throw UsageError("--memory-budget must be in [0, 1073741824] MiB (got " + std::to_string(o.memory_budget_mb) + ")");
  if (o.max_answer_values < 1 || o.max_answer_values > 100000000)
    throw UsageError("--max-answer-values must be in [1, 100000000] (got " + std::to_string(o.max_answer_values) + ")");
  // An empty address would bind every interface: say which one is meant instead.
  if (o.host.empty()) throw UsageError("--host is empty: give an address to bind (127.0.0.1 for this machine only)");
  if (o.model.empty() && o.run_dirs.empty()) throw UsageError("serve: give a MODEL, or run directories to browse");
  const bool loopback = is_loopback_host(o.host);
  if ((!loopback || o.require_token) && o.token.empty()) o.token = random_token();

  // glibc gives each new thread its own malloc arena, up to 8 per core: a hundred connection threads that each
  // copied a multi-MB answer once kept ~40 MB in arenas malloc_trim could not hand back (hostile_http: resident
  // memory 212 -> 256 MB over its abuse; with two arenas 212 -> 219 MB). Analyses allocate large tensors
  // (mmap'd, outside the arenas) and the handlers little, so two arenas cost no measurable contention.
  ::mallopt(M_ARENA_MAX, 2);
  Explorer ex(o);  // loads the model / reads the run directories before binding: errors are one line, exit 1

  ConnectionLimits limits;
  limits.max_connections = static_cast<size_t>(o.max_connections);
  limits.max_per_client = static_cast<size_t>(o.max_client_connections);
  limits.max_body = static_cast<size_t>(o.max_body);
  limits.request_timeout_s = o.request_timeout;
  limits.write_timeout_s = o.write_timeout;
  GuardedServer svr(limits);
  // Handler threads: one per allowed connection (connections.cpp), so the page and small requests are
  // answered while analyses wait in the pool and slow clients hold their own connections. Started here,
  // before the URL is printed: cpp-httplib would start them only once listening, after "serving ...", and a
  // failure there hung the server. listen_after_bind() takes the queue and deletes it when it returns.
  std::unique_ptr<httplib::TaskQueue> threads(svr.make_task_queue());
  svr.new_task_queue = [&threads] { return threads.release(); };
  svr.set_payload_max_length(static_cast<size_t>(o.max_body));
  // What cpp-httplib sets on each accepted socket (SO_RCVTIMEO / SO_SNDTIMEO); GuardedServer's own stream
  // keeps the stricter per-request deadline.
  svr.set_read_timeout(limits.request_timeout_s, 0);
  svr.set_write_timeout(limits.write_timeout_s, 0);
  svr.set_default_headers(security_headers());
  const std::string token = o.token;
  svr.set_pre_routing_handler([token, loopback](const httplib::Request& req, httplib::Response& res) {
    if (!token.empty()) {
      std::string t = req.get_param_value("token");
      if (t.empty()) t = req.get_header_value("X-Vocablens-Token");
      const std::string auth = req.get_header_value("Authorization");
      if (t.empty() && auth.rfind("Bearer ", 0) == 0) t = auth.substr(7);
      if (!same_secret(t, token)) {
        send(res,
             error_answer(401, "this server needs its access token: ?token=... in the URL, or the X-Vocablens-Token header"));
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    if (req.get_header_value_count("Host") > 1) {
      // Two Host headers: which one the guards below read would be the library's choice, not the client's.
      send(res, error_answer(400, "two Host headers: send one"));
      return httplib::Server::HandlerResponse::Handled;
    }
    if (req.method == "POST" && !is_json_media_type(req.get_header_value("Content-Type"))) {
      // Also what keeps a page of another site from starting analyses: it cannot send this type without a
      // CORS preflight, which this server never grants.
      send(res, error_answer(415, "POST " + shorten(req.path) + ": send a JSON object with Content-Type: application/json"));
      return httplib::Server::HandlerResponse::Handled;
    }
    if (token.empty() && loopback) {
      // A page of another site cannot reach us through a name that resolves to 127.0.0.1 (DNS rebinding).
      const std::string h = host_name_of(req.get_header_value("Host"));
      if (!h.empty() && !is_loopback_host(h)) {
        send(res, error_answer(403, "Host '" + shorten(h) + "' refused: this server answers on the loopback only"));
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  const std::string too_large =
      "request too large: the body may hold " + std::to_string(o.max_body) + " bytes (--max-body), chunked or not";
  const std::string too_slow = "request timeout: a request must arrive whole within " + std::to_string(o.request_timeout) +
                               " s of its first byte (--request-timeout)";
  svr.set_error_handler(
      httplib::Server::HandlerWithResponse([too_large, too_slow](const httplib::Request& req, httplib::Response& res) {
        // The library saw a read fail (400); it was one of our limits (connections.cpp).
        const ReadLimit limit = take_read_limit();
        if (limit != ReadLimit::None) {
          res.status = limit == ReadLimit::OverBudget ? 413 : 408;
          res.body.clear();
        }
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;  // our own JSON error
        std::string msg = res.status == 404   ? "no such page: " + shorten(req.path)
                          : res.status == 413 ? too_large
                          : res.status == 408 ? too_slow
                                              : "HTTP " + std::to_string(res.status);
        send(res, error_answer(res.status, msg));
        return httplib::Server::HandlerResponse::Handled;
      }));
  svr.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    try {
      std::rethrow_exception(ep);
    } catch (...) { send(res, answer_for_current_exception()); }
  });
  ex.routes(svr);

  // cpp-httplib 0.11 listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG, compiled into Debian's library).
  // A burst of more simultaneous connections (the page's parallel requests, 16 concurrent clients) overflows
  // it: the kernel then drops SYNs and answers with SYN cookies, and a handshake completed by a cookie while
  // the accept queue is still full can end in a reset that the client sees (ConnectionResetError, counted in
  // /proc/net/netstat as ListenOverflows / SyncookiesFailed). The listening socket is therefore remembered
  // here (the options hook sees only sockets the server binds) and its backlog raised after binding:
  // listen() on a listening socket only changes its backlog.
  int listen_fd = -1;
  svr.set_socket_options([&listen_fd](socket_t sock) {
    // SO_REUSEADDR (a restart binds while old connections linger in TIME_WAIT) but not cpp-httplib's default
    // SO_REUSEPORT: with it a second server bound the same port and the kernel split the requests between
    // the two models.
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    listen_fd = sock;
  });
  int port = o.port;
  if (port == 0) {
    port = svr.bind_to_any_port(o.host);
    if (port <= 0) throw UsageError("serve: cannot bind " + o.host + " (is it an address of this machine?)");
  } else if (!svr.bind_to_port(o.host, port)) {
    const std::string holder = port_holder(port);
    if (!holder.empty())
      throw UsageError("serve: port " + std::to_string(port) + " is in use (" + holder + "); --port 0 picks a free one");
    throw UsageError("serve: cannot bind " + o.host + ":" + std::to_string(port) +
                     " (in use, or not an address of this "
                     "machine? --port 0 picks a free port)");
  }
  if (listen_fd >= 0 && ::listen(listen_fd, SOMAXCONN) != 0)
    std::fprintf(stderr,
                 "vocablens: warning: serve: could not raise the listen backlog (%s); bursts of connections may be reset\n",
                 std::strerror(errno));
  const std::string shown_host = o.host.find(':') != std::string::npos ? "[" + o.host + "]" : o.host;
  const std::string url = "http://" + shown_host + ":" + std::to_string(port) + "/" + (token.empty() ? "" : "?token=" + token);
  if (!loopback)
    std::fprintf(stderr,
                 "vocablens: warning: serving on %s, reachable from other machines: anyone with the URL below (it holds "
                 "the access token) can run analyses here; requests without the token are refused\n",
                 o.host.c_str());
  if (ex.model()) std::printf("vocablens: serving %s at %s (Ctrl-C stops)\n", ex.model()->source().c_str(), url.c_str());
  else
    std::printf("vocablens: serving %zu result(s) of %zu run director%s at %s (Ctrl-C stops)\n", ex.n_results(),
                o.run_dirs.size(), o.run_dirs.size() == 1 ? "y" : "ies", url.c_str());
  std::fflush(stdout);
  if (!svr.listen_after_bind()) throw Error("serve: the server stopped unexpectedly");
  return 0;
}

}  // namespace vocablens::serve

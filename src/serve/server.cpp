// `vocablens serve`: the explorer's HTTP server (see server.hpp). This file checks the options, sets up
// cpp-httplib (threads, limits, timeouts), the access guards every request passes before its route (token,
// Host, content type), the error and exception handlers, and binds. The routes are explorer.cpp's, the
// page and headers static_page.cpp's, the worker pool and cancellation worker_pool.cpp's.
#include "serve/server.hpp"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cstdio>

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

int run_server(const ServeOptions& given) {
  ServeOptions o = given;
  if (o.port < 0 || o.port > 65535) throw UsageError("--port must be in [0, 65535] (got " + std::to_string(o.port) + ")");
  if (o.workers < 1 || o.workers > 64) throw UsageError("--workers must be in [1, 64] (got " + std::to_string(o.workers) + ")");
  if (o.queue < 0 || o.queue > 1024) throw UsageError("--queue must be in [0, 1024] (got " + std::to_string(o.queue) + ")");
  if (o.forward_cache < 0 || o.forward_cache > 1024)
    throw UsageError("--forward-cache must be in [0, 1024] (got " + std::to_string(o.forward_cache) + ")");
  if (o.forward_cache_mb < 0 || o.forward_cache_mb > (int64_t(1) << 20))
    throw UsageError("--forward-cache-mb must be in [0, 1048576] (got " + std::to_string(o.forward_cache_mb) + ")");
  if (o.model.empty() && o.run_dirs.empty()) throw UsageError("serve: give a MODEL, or run directories to browse");
  const bool loopback = is_loopback_host(o.host);
  if ((!loopback || o.require_token) && o.token.empty()) o.token = random_token();

  Explorer ex(o);  // loads the model / reads the run directories before binding: errors are one line, exit 1

  httplib::Server svr;
  // Handler threads: enough that the page and small requests are answered while analyses wait in the pool.
  const size_t handler_threads = static_cast<size_t>(std::max(16, 2 * (o.workers + o.queue) + 8));
  svr.new_task_queue = [handler_threads] { return new httplib::ThreadPool(handler_threads); };
  svr.set_payload_max_length(o.max_body);
  svr.set_read_timeout(10, 0);
  svr.set_write_timeout(30, 0);
  svr.set_keep_alive_max_count(100);
  svr.set_keep_alive_timeout(5);
  svr.set_default_headers(security_headers());
  const std::string token = o.token;
  svr.set_pre_routing_handler([token, loopback](const httplib::Request& req, httplib::Response& res) {
    if (!token.empty()) {
      std::string t = req.get_param_value("token");
      if (t.empty()) t = req.get_header_value("X-Vocablens-Token");
      const std::string auth = req.get_header_value("Authorization");
      if (t.empty() && auth.rfind("Bearer ", 0) == 0) t = auth.substr(7);
      if (!same_secret(t, token)) {
        send(res, error_answer(401, "this server needs its access token: ?token=... in the URL, or the X-Vocablens-Token header"));
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    if (req.method == "POST" && req.get_header_value("Content-Type").rfind("application/json", 0) != 0) {
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
  svr.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;  // our own JSON error
    std::string msg = res.status == 404 ? "no such page: " + shorten(req.path)
                      : res.status == 413 ? "request body too large"
                                          : "HTTP " + std::to_string(res.status);
    send(res, error_answer(res.status, msg));
    return httplib::Server::HandlerResponse::Handled;
  }));
  svr.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    try {
      std::rethrow_exception(ep);
    } catch (...) {
      send(res, answer_for_current_exception());
    }
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
    httplib::default_socket_options(sock);  // what cpp-httplib does without a hook (SO_REUSEPORT)
    listen_fd = sock;
  });
  int port = o.port;
  if (port == 0) {
    port = svr.bind_to_any_port(o.host);
    if (port <= 0) throw UsageError("serve: cannot bind " + o.host + " (is it an address of this machine?)");
  } else if (!svr.bind_to_port(o.host, port)) {
    throw UsageError("serve: cannot bind " + o.host + ":" + std::to_string(port) + " (in use? --port 0 picks a free one)");
  }
  if (listen_fd >= 0 && ::listen(listen_fd, SOMAXCONN) != 0)
    std::fprintf(stderr, "vocablens: warning: serve: could not raise the listen backlog (%s); bursts of connections may be reset\n",
                 std::strerror(errno));
  const std::string shown_host = o.host.find(':') != std::string::npos ? "[" + o.host + "]" : o.host;
  const std::string url = "http://" + shown_host + ":" + std::to_string(port) + "/" + (token.empty() ? "" : "?token=" + token);
  if (!loopback)
    std::fprintf(stderr,
                 "vocablens: warning: serving on %s, reachable from other machines: anyone with the URL below (it holds "
                 "the access token) can run analyses here; requests without the token are refused\n",
                 o.host.c_str());
  if (ex.model())
    std::printf("vocablens: serving %s at %s (Ctrl-C stops)\n", ex.model()->source().c_str(), url.c_str());
  else
    std::printf("vocablens: serving %zu result(s) of %zu run director%s at %s (Ctrl-C stops)\n", ex.n_results(),
                o.run_dirs.size(), o.run_dirs.size() == 1 ? "y" : "ies", url.c_str());
  std::fflush(stdout);
  if (!svr.listen_after_bind()) throw Error("serve: the server stopped unexpectedly");
  return 0;
}

}  // namespace vocablens::serve

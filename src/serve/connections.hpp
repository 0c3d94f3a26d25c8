// src/serve/connections.hpp — the explorer's connections: how many, from whom, for how long.
//
// cpp-httplib 0.11 gives each connection a thread of its pool and reads it with a timeout per read only: a
// client that sends one header byte every few seconds (slowloris) holds its thread for ever, sixty of them
// held every thread, and a chunked body was buffered whatever --max-body said. GuardedServer is cpp-httplib's
// Server with its one per-connection hook, process_and_close_socket, replaced (the request parsing, routing
// and answers stay the library's, called through its protected process_request), so that:
//   * a connection beyond `max_connections` in all, or beyond `max_per_client` from one address, is answered
//     503 and closed at once (the pool has threads for the allowed ones and a few more that only refuse);
//   * each request must arrive whole (request line, headers, body) within `request_timeout_s` of its first
//     byte, and read at most max_body + 64 KB (headers) — a chunked body too: over it the request is 413 and
//     the connection closed;
//   * an answer the client does not read within `write_timeout_s` (no byte accepted) drops the connection;
//   * nothing thrown while reading or writing a connection (an allocation failure) leaves its thread.
//
//   GuardedServer svr(limits);
//   httplib::TaskQueue* q = svr.make_task_queue();   // before the URL is printed: an Error if threads fail
//   svr.new_task_queue = [q] { return q; };           // cpp-httplib owns it from there
#pragma once
#include <pthread.h>

#include <condition_variable>
#include <cstddef>
#include <ctime>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

namespace vocablens::serve {

struct ConnectionLimits {
  size_t max_connections = 128;   ///< open connections in all; more are answered 503 and closed
  size_t max_per_client = 64;     ///< open connections from one remote address
  time_t request_timeout_s = 10;  ///< a request's line, headers and body must arrive within this of its first byte
  time_t write_timeout_s = 10;    ///< an answer not read for this long drops the connection
  time_t keep_alive_s = 5;        ///< an idle connection waits this long for its next request
  size_t keep_alive_requests = 100;
  size_t max_body = 1 << 20;  ///< request body bytes (Content-Length or chunked)
};

/// Why reading the request handled on this thread failed, if a limit of ours made it fail (then reset): the
/// error handler answers 413 (over the byte budget) or 408 (past the deadline) instead of the library's 400.
enum class ReadLimit { None, OverBudget, TimedOut };
ReadLimit take_read_limit();

/// cpp-httplib's task queue on `n` threads of `stack_bytes` stacks. Unlike httplib::ThreadPool, a thread that
/// cannot be created (a process limit, the address space) is an Error from the constructor, with the threads
/// already started stopped: ThreadPool's constructor then left them waiting on a destroyed condition
/// variable and the server hung.
class ConnectionThreads : public httplib::TaskQueue {
 public:
  ConnectionThreads(size_t n, size_t stack_bytes);
  ~ConnectionThreads() override;
  void enqueue(std::function<void()> fn) override;
  void shutdown() override;

 private:
  void run();
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::vector<pthread_t> threads_;
  bool stopping_ = false;
};

class GuardedServer : public httplib::Server {
 public:
  explicit GuardedServer(const ConnectionLimits& l) : limits_(l) {}
  /// The threads cpp-httplib runs connections on: max_connections plus a few that only refuse.
  httplib::TaskQueue* make_task_queue() const;
  /// {"open", "max", "max_per_client", "refused"} for /api/status.
  nlohmann::json stats();

 private:
  bool process_and_close_socket(socket_t sock) override;
  /// True when the connection should close lingering (a request refused for its size, its body unread).
  bool serve_connection(int fd);

  ConnectionLimits limits_;
  std::mutex m_;
  size_t open_ = 0;
  size_t refused_ = 0;
  std::map<std::string, size_t> per_client_;
};

}  // namespace vocablens::serve

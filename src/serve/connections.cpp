// The explorer's connections: caps, request deadlines, byte budgets, write timeouts (see connections.hpp).
#include "serve/connections.hpp"

#include <malloc.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "serve/http_util.hpp"
#include "vocablens/error.hpp"

namespace vocablens::serve {
namespace {

using Clock = std::chrono::steady_clock;

thread_local ReadLimit t_read_limit = ReadLimit::None;

// Header bytes a request may send besides its body: cpp-httplib reads lines of up to 8 KB and any number of
// them, so the count of header lines is bounded by this budget, not by the library.
constexpr size_t kHeaderBudget = 64 << 10;

std::string numeric_address(int fd, bool peer, int* port) {
  sockaddr_storage sa{};
  socklen_t len = sizeof sa;
  const int rc = peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&sa), &len)
                      : ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  *port = -1;
  if (rc != 0) return "";
  char host[NI_MAXHOST] = {0}, serv[NI_MAXSERV] = {0};
  // The same numeric form cpp-httplib gives req.remote_addr (worker_pool.cpp finds a request's socket by it).
  if (::getnameinfo(reinterpret_cast<sockaddr*>(&sa), len, host, sizeof host, serv, sizeof serv,
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return "";
  *port = std::atoi(serv);
  return host;
}

int poll_ms(int fd, short events, long ms) {
  pollfd p{fd, events, 0};
  int rc;
  do rc = ::poll(&p, 1, static_cast<int>(std::max(0L, ms)));
  while (rc < 0 && errno == EINTR);
  return rc > 0 && (p.revents & (events | POLLHUP | POLLERR)) ? 1 : rc < 0 ? -1 : 0;
}

// cpp-httplib's Stream over the connection's socket, with a deadline and a byte budget per request.
// The library reads the request line and headers one byte at a time: reads are served from a 4 KB buffer.
class GuardedStream : public httplib::Stream {
 public:
  GuardedStream(int fd, const ConnectionLimits& l) : fd_(fd), l_(l) {}

  /// A new request begins: its deadline and byte budget start now.
  void begin_request() {
    deadline_ = Clock::now() + std::chrono::seconds(l_.request_timeout_s);
    delivered_ = 0;
  }
  bool over_budget() const { return over_budget_; }
  bool timed_out() const { return timed_out_; }
  /// Bytes written since the last call.
  size_t take_written() {
    const size_t w = written_;
    written_ = 0;
    return w;
  }
  bool has_buffered() const { return pos_ < end_; }

  bool is_readable() const override { return has_buffered() || poll_ms(fd_, POLLIN, ms_left()) > 0; }
  bool is_writable() const override { return poll_ms(fd_, POLLOUT, long(l_.write_timeout_s) * 1000) > 0; }

  ssize_t read(char* ptr, size_t size) override {
    const size_t budget = kHeaderBudget + l_.max_body;
    if (delivered_ >= budget) {
      over_budget_ = true;  // answered 413 (error handler), then the connection is closed
      t_read_limit = ReadLimit::OverBudget;
      return -1;
    }
    size = std::min(size, budget - delivered_);
    if (!has_buffered()) {
      // The request's remaining time, not a fresh timeout per read: a trickle of bytes cannot extend it.
      if (poll_ms(fd_, POLLIN, ms_left()) <= 0) {
        timed_out_ = true;  // answered 408 (error handler), then the connection is closed
        t_read_limit = ReadLimit::TimedOut;
        return -1;
      }
      ssize_t n;
      do n = ::recv(fd_, buf_, sizeof buf_, 0);
      while (n < 0 && errno == EINTR);
      if (n <= 0) return n;
      pos_ = 0;
      end_ = static_cast<size_t>(n);
    }
    const size_t n = std::min(size, end_ - pos_);
    std::memcpy(ptr, buf_ + pos_, n);
    pos_ += n;
    delivered_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    // A client that accepts no byte for write_timeout_s is dropped (its answer stays unread). The send never
    // blocks (MSG_DONTWAIT): the wait is the poll's alone, not the poll's plus a blocked send's.
    for (;;) {
      if (poll_ms(fd_, POLLOUT, long(l_.write_timeout_s) * 1000) <= 0) return -1;
      const ssize_t n = ::send(fd_, ptr, size, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n >= 0) written_ += static_cast<size_t>(n);
      if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return n;
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { ip = numeric_address(fd_, true, &port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { ip = numeric_address(fd_, false, &port); }
  socket_t socket() const override { return fd_; }

 private:
  long ms_left() const {
    return static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now()).count());
  }

  int fd_;
  const ConnectionLimits& l_;
  Clock::time_point deadline_ = Clock::now();
  size_t delivered_ = 0;
  bool over_budget_ = false;
  bool timed_out_ = false;
  size_t written_ = 0;
  char buf_[4096];
  size_t pos_ = 0, end_ = 0;
};

void refuse(int fd, const std::string& message) {
  const std::string body = error_answer(503, message).body;
  const std::string head =
      "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json; charset=utf-8\r\n"
      "Retry-After: 1\r\nConnection: close\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n";
  const std::string all = head + body;
  (void)::send(fd, all.data(), all.size(), MSG_NOSIGNAL | MSG_DONTWAIT);  // small: fits the socket buffer
}

}  // namespace

ReadLimit take_read_limit() {
  const ReadLimit r = t_read_limit;
  t_read_limit = ReadLimit::None;
  return r;
}

ConnectionThreads::ConnectionThreads(size_t n, size_t stack_bytes) {
  pthread_attr_t attr;
  ::pthread_attr_init(&attr);
  ::pthread_attr_setstacksize(&attr, stack_bytes);
  int err = 0;
  for (size_t i = 0; i < n && err == 0; ++i) {
    pthread_t t;
    err = ::pthread_create(
        &t, &attr,
        [](void* self) -> void* {
          static_cast<ConnectionThreads*>(self)->run();
          return nullptr;
        },
        this);
    if (err == 0) threads_.push_back(t);
  }
  ::pthread_attr_destroy(&attr);
  if (err != 0) {
    const size_t started = threads_.size();
    // Those started are stopped and joined, so nothing is left waiting on a destroyed condition variable.
    shutdown();
    throw Error("serve: could not start " + std::to_string(n) + " connection threads (" + std::strerror(err) + " after " +
                std::to_string(started) + "); lower --max-connections or raise the limits");
  }
}

ConnectionThreads::~ConnectionThreads() { shutdown(); }

void ConnectionThreads::enqueue(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> l(m_);
    jobs_.push_back(std::move(fn));
  }
  cv_.notify_one();
}

void ConnectionThreads::shutdown() {
  {
    std::lock_guard<std::mutex> l(m_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  for (pthread_t t : threads_) ::pthread_join(t, nullptr);
  threads_.clear();
}

void ConnectionThreads::run() {
  for (;;) {
    std::function<void()> fn;
    {
      std::unique_lock<std::mutex> l(m_);
      cv_.wait(l, [&] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping, nothing left
      fn = std::move(jobs_.front());
      jobs_.pop_front();
    }
    fn();  // process_and_close_socket: catches everything itself
  }
}

httplib::TaskQueue* GuardedServer::make_task_queue() const {
  // Threads for every allowed connection, plus some that only write a refusal: a connection over the caps
  // must reach process_and_close_socket to be refused rather than wait in the queue. 2 MB stacks (the
  // handlers' deepest path is JSON of at most 256 levels): the default 8 MB each would cost a GB of address
  // space.
  return new ConnectionThreads(limits_.max_connections + 8, size_t(2) << 20);
}

nlohmann::json GuardedServer::stats() {
  std::lock_guard<std::mutex> l(m_);
  return {{"open", open_}, {"max", limits_.max_connections}, {"max_per_client", limits_.max_per_client}, {"refused", refused_}};
}

bool GuardedServer::process_and_close_socket(socket_t sock) {
  int port = -1;
  const std::string client = numeric_address(sock, true, &port);
  std::string refusal;
  {
    std::lock_guard<std::mutex> l(m_);
    size_t& mine = per_client_[client];
    if (open_ >= limits_.max_connections)
      refusal = "busy: " + std::to_string(open_) + " connections open, the server's limit; try again shortly";
    else if (mine >= limits_.max_per_client)
      refusal =
          "busy: " + std::to_string(mine) + " connections open from " + client + ", the limit per client; try again shortly";
    if (refusal.empty()) {
      ++open_;
      ++mine;
    } else {
      ++refused_;
      if (mine == 0) per_client_.erase(client);
    }
  }
  if (!refusal.empty()) {
    try {
      refuse(sock, refusal);
    } catch (...) {  // an allocation failure while refusing: the connection is closed all the same
    }
  } else {
    try {
      if (serve_connection(sock)) {
        // A request refused for its size while the client still sends the rest: closing at once with unread
        // data would reset the connection, and the client might lose the 413 before reading it. So stop
        // sending, then read and drop what comes for a little while (a lingering close).
        ::shutdown(sock, SHUT_WR);
        char sink[16384];
        const auto until = Clock::now() + std::chrono::seconds(2);
        size_t drained = 0;
        while (drained < (size_t(8) << 20) && Clock::now() < until && poll_ms(sock, POLLIN, 200) > 0) {
          const ssize_t n = ::recv(sock, sink, sizeof sink, 0);
          if (n <= 0) break;
          drained += static_cast<size_t>(n);
        }
      }
    } catch (...) {
      // Whatever escaped the library's own handling (an allocation failure while reading a body or writing
      // an answer) ends this connection, never the process.
    }
    std::lock_guard<std::mutex> l(m_);
    --open_;
    if (--per_client_[client] == 0) per_client_.erase(client);
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return true;
}

bool GuardedServer::serve_connection(int fd) {
  GuardedStream strm(fd, limits_);
  // The first request's time starts at the connection; a later one's at its first byte.
  strm.begin_request();
  for (size_t count = limits_.keep_alive_requests; count > 0 && svr_sock_ != INVALID_SOCKET; --count) {
    if (count != limits_.keep_alive_requests) {
      if (!strm.has_buffered() && poll_ms(fd, POLLIN, long(limits_.keep_alive_s) * 1000) <= 0) return false;
      strm.begin_request();
    }
    bool closed = false;
    t_read_limit = ReadLimit::None;
    const bool ok = process_request(strm, /*close_connection=*/count == 1, closed, nullptr);
    // The copies of a large answer this thread made (the response, its headers) are free now, in this thread's
    // malloc arena, which keeps them: give them back to the system (worker_pool.cpp does so for the work).
    if (strm.take_written() >= (size_t(1) << 20)) ::malloc_trim(0);
    // Over budget: the rest of its body is never read; timed out: what it sends next is no request.
    if (strm.over_budget()) return true;
    if (!ok || closed || strm.timed_out()) return false;
  }
  return false;
}

}  // namespace vocablens::serve

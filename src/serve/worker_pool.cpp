// The explorer's bounded worker pool and cancellation (see worker_pool.hpp).
#include "serve/worker_pool.hpp"

#include <dirent.h>
#include <malloc.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <iterator>

#include "vocablens/interrupt.hpp"

namespace vocablens::serve {
namespace {

// ---- is the client still there? ----------------------------------------------------------------------------
// cpp-httplib 0.11 does not hand the connection's socket to a handler, so it is found by its addresses:
// the one socket of this process whose peer is (remote_addr, remote_port) and whose local port is
// local_port (a TCP connection is unique by these). While the handler runs, that socket is its own.

std::string numeric_host(const sockaddr* sa, socklen_t len, int* port) {
  char host[NI_MAXHOST] = {0}, serv[NI_MAXSERV] = {0};
  if (::getnameinfo(sa, len, host, sizeof host, serv, sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV) != 0) return "";
  *port = std::atoi(serv);
  return host;
}

int find_client_socket(const httplib::Request& req) {
  DIR* d = ::opendir("/proc/self/fd");
  if (!d) return -1;
  int found = -1;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    int fd = std::atoi(e->d_name);
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    sockaddr_storage peer{}, self{};
    socklen_t pl = sizeof peer, sl = sizeof self;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &pl) != 0) continue;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &sl) != 0) continue;
    int pport = -1, sport = -1;
    std::string paddr = numeric_host(reinterpret_cast<sockaddr*>(&peer), pl, &pport);
    numeric_host(reinterpret_cast<sockaddr*>(&self), sl, &sport);
    if (pport == req.remote_port && sport == req.local_port && paddr == req.remote_addr) {
      found = fd;
      break;
    }
  }
  ::closedir(d);
  return found;
}

// True once the peer closed its side (or the connection broke). Data waiting (a pipelined request) is not
// a disconnection.
bool client_gone(int fd) {
  if (fd < 0) return false;
  pollfd p{fd, POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

constexpr size_t kTrimAfterBytes = size_t(1) << 20;

}  // namespace

WorkerPool::WorkerPool(int workers, size_t max_queue) : max_queue_(max_queue) {
  for (int i = 0; i < workers; ++i) threads_.emplace_back([this] { loop(); });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> l(m_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

bool WorkerPool::submit(const std::shared_ptr<Job>& j) {
  {
    std::lock_guard<std::mutex> l(m_);
    if (q_.size() >= max_queue_) return false;
    q_.push_back(j);
  }
  cv_.notify_one();
  return true;
}

json WorkerPool::status() {
  std::lock_guard<std::mutex> l(m_);
  return {{"workers", threads_.size()},
          {"running", running_},
          {"queued", q_.size()},
          {"queue_limit", max_queue_},
          {"cancelled", cancelled_}};
}

void WorkerPool::loop() {
  for (;;) {
    std::shared_ptr<Job> j;
    {
      std::unique_lock<std::mutex> l(m_);
      cv_.wait(l, [&] { return stop_ || !q_.empty(); });
      if (stop_) return;
      j = q_.front();
      q_.pop_front();
      ++running_;
    }
    Answer a;
    if (j->cancel.load()) {
      a = error_answer(503, "cancelled: the client went away before the analysis started");
    } else {
      try {
        CancelScope scope(&j->cancel);  // the forward pass, the lens, heads and neurons poll it between their steps
        a = j->work(&j->cancel);
      } catch (...) {
        try {
          a = answer_for_current_exception();
        } catch (...) {  // no memory even for the message: an empty 503 rather than std::terminate
          a = Answer{503};
        }
      }
    }
    const bool cancelled = j->cancel.load();
    // The work and what it holds (its progress entry, its memory reservation) are let go before the answer is
    // handed over: a client that asks /api/progress or /api/status right after its answer finds them gone. Held
    // by the job instead, they lived until this thread next ran, and a thread descheduled after handing the answer
    // over (a busy machine) left /api/progress answering 200 for a finished request.
    j->work = nullptr;
    // A large answer's JSON tree and the analysis's buffers were freed into glibc's arenas, which keep them:
    // resident memory grew by every large answer and was never given back. Return it to the system (a few
    // milliseconds, once per large answer).
    if (a.body.size() >= kTrimAfterBytes) ::malloc_trim(0);
    // The worker is free before its answer is handed over: a client that reads /api/status right after its
    // answer sees the job gone (counted the other way round, the status could still say "1 running").
    {
      std::lock_guard<std::mutex> l(m_);
      --running_;
      cancelled_ += cancelled;
    }
    {
      std::lock_guard<std::mutex> l(j->m);
      j->answer = std::move(a);
      j->done = true;
    }
    j->cv.notify_all();
  }
}

Answer await_answer(Job& job, const httplib::Request& req) {
  const int fd = find_client_socket(req);
  std::unique_lock<std::mutex> l(job.m);
  while (!job.cv.wait_for(l, std::chrono::milliseconds(50), [&] { return job.done; })) {
    if (client_gone(fd)) {
      job.cancel = true;  // the analysis stops at its next step; nobody reads this answer
      return error_answer(503, "cancelled: the client went away");
    }
  }
  return std::move(job.answer);
}

std::shared_ptr<JobProgress> ProgressBoard::track(const httplib::Request& req, const std::string& analysis) {
  const std::string id = req.get_header_value("X-Vocablens-Progress");
  if (id.empty() || id.size() > 64 ||
      id.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != std::string::npos)
    return nullptr;
  auto p = std::make_shared<JobProgress>();
  p->analysis = analysis;
  std::lock_guard<std::mutex> l(m_);
  for (auto it = jobs_.begin(); it != jobs_.end();) it = it->second.expired() ? jobs_.erase(it) : std::next(it);
  // Bounded: a client cannot grow the board without bound by sending ids (each live entry is a waiting request,
  // themselves bounded by the connection caps; this is a second fence).
  if (jobs_.size() >= 1024) return nullptr;
  jobs_[id] = p;
  return p;
}

json ProgressBoard::get(const std::string& id) {
  std::shared_ptr<JobProgress> p;
  {
    std::lock_guard<std::mutex> l(m_);
    auto it = jobs_.find(id);
    if (it != jobs_.end()) p = it->second.lock();
  }
  if (!p) return nullptr;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - p->since).count();
  return {{"analysis", p->analysis},
          {"state", p->started.load() ? "running" : "queued"},
          {"done", p->done.load()},
          {"total", p->total.load()},
          {"seconds", s},
          {"estimate", p->estimate},
          {"need_mib", p->need_bytes / 1048576.0}};
}

std::function<void(int64_t, int64_t)> cancel_on_progress(const std::atomic<bool>* cancel, std::shared_ptr<JobProgress> progress) {
  return [cancel, progress](int64_t done, int64_t total) {
    if (progress) {
      progress->done = done;
      progress->total = total;
    }
    if (cancel && cancel->load())
      throw Interrupted(
          0, "cancelled: the client went away (at step " + std::to_string(done) + " of " + std::to_string(total) + ")");
  };
}

}  // namespace vocablens::serve

// src/serve/worker_pool.hpp — the explorer's bounded worker pool, and the cancellation of work whose client
// went away.
//
// Analyses run on `workers` threads with at most `max_queue` waiting: submit() refuses beyond that (the
// route answers 503 at once), so a burst of requests costs a bounded amount of memory and CPU, and the HTTP
// threads that serve the page never run an analysis themselves. The HTTP thread that will answer waits in
// await_answer(), which watches its connection: when the client closes it (a closed tab, a superseded click
// that the page aborted), the job's cancel flag is set. A queued job then never starts; a running one stops
// where the analysis polls the flag or reports progress (cancel_on_progress() turns a progress report into
// a stop), else it runs to its end and its answer is dropped.
//
//   WorkerPool pool(2, 8);
//   auto job = std::make_shared<Job>();
//   job->work = [](const std::atomic<bool>* cancel) { return Answer{200, "{}"}; };
//   if (!pool.submit(job)) return error_answer(503, "busy");
//   return await_answer(*job, req);   // 503 "cancelled" if the client left first
#pragma once
#include <atomic>
#include <chrono>
#include <map>
#include <string>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "serve/http_util.hpp"

namespace vocablens::serve {

struct Job {
  std::function<Answer(const std::atomic<bool>* cancel)> work;
  std::atomic<bool> cancel{false};
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  Answer answer;
};

class WorkerPool {
 public:
  WorkerPool(int workers, size_t max_queue);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;
  /// False when max_queue jobs are already waiting.
  bool submit(const std::shared_ptr<Job>& j);
  /// {"workers", "running", "queued", "queue_limit", "cancelled"}.
  json status();

 private:
  void loop();

  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> q_;
  std::vector<std::thread> threads_;
  size_t max_queue_;
  size_t running_ = 0;
  size_t cancelled_ = 0;  ///< jobs whose client left (counted when the worker reaches them)
  bool stop_ = false;
};

/// Waits for the job's answer while watching the request's connection; if the client goes away first, sets
/// job.cancel and returns 503 "cancelled" (nobody reads it). Called on the request's HTTP thread.
Answer await_answer(Job& job, const httplib::Request& req);

/// What a running analysis has reported, for GET /api/progress/<id> (a page polls it while its request
/// waits): its (done, total) steps, whether a worker has started it, its declared memory estimate.
struct JobProgress {
  std::atomic<int64_t> done{0}, total{0};
  std::atomic<bool> started{false};
  std::chrono::steady_clock::time_point since = std::chrono::steady_clock::now();
  std::string analysis;
  std::string estimate;  ///< "about N MiB beyond the loaded model: <what>" ("" when none is declared)
  double need_bytes = 0;
};

/// The analyses in progress under the ids their clients chose (header X-Vocablens-Progress): an id names its
/// request's JobProgress while the request holds it, and nothing once the answer is sent (entries are weak).
class ProgressBoard {
 public:
  /// A record for the request's id, or null without a valid id (1-64 of [A-Za-z0-9_-]) or when 1024 are held.
  std::shared_ptr<JobProgress> track(const httplib::Request& req, const std::string& analysis);
  /// {"analysis", "state": "queued"|"running", "done", "total", "seconds", "estimate", "need_mib"}, or null.
  json get(const std::string& id);

 private:
  std::mutex m_;
  std::map<std::string, std::weak_ptr<JobProgress>> jobs_;
};

/// A progress callback (an analysis's (done, total) reports) that throws Interrupted once `cancel` is set:
/// every analysis that reports progress stops at its next report when its client has gone. With `progress`,
/// each report is also recorded there.
std::function<void(int64_t, int64_t)> cancel_on_progress(const std::atomic<bool>* cancel,
                                                         std::shared_ptr<JobProgress> progress = nullptr);

}  // namespace vocablens::serve

// `vocablens serve`: the explorer's HTTP server (see server.hpp).
#include "serve/server.hpp"

#include <arpa/inet.h>
#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <new>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "util/json_depth.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/error.hpp"
#include "vocablens/export.hpp"
#include "vocablens/hooks.hpp"
#include "vocablens/interrupt.hpp"
#include "vocablens/model.hpp"
#include "vocablens/nonfinite.hpp"
#include "vocablens/provenance.hpp"
#include "vocablens/tokenizer.hpp"

namespace vocablens::serve {
namespace {

using json = nlohmann::json;

// ---- answers ---------------------------------------------------------------------------------------------

// JSON text that stays valid whatever bytes a token or a prompt holds (like the CLI's --format json).
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

struct Answer {
  Answer(int s = 200, std::string b = "", std::string c = "") : status(s), body(std::move(b)), cache(std::move(c)) {}
  int status;
  std::string body;   ///< JSON
  std::string cache;  ///< analyses: "hit" (answered from the cache) or "miss"
};

Answer error_answer(int status, const std::string& message) {
  return {status, dump({{"error", message}, {"status", status}}) + "\n"};
}

// The current exception as an HTTP answer: the library's one-line message, a 4xx for what the caller can
// fix, a 5xx for the rest. Never rethrows.
Answer answer_for_current_exception() {
  try {
    throw;
  } catch (const UsageError& e) {
    return error_answer(400, e.what());
  } catch (const NonFiniteError& e) {
    return error_answer(422, e.what());
  } catch (const FormatError& e) {
    return error_answer(422, e.what());
  } catch (const Interrupted& e) {
    return error_answer(503, e.what());
  } catch (const Error& e) {
    return error_answer(400, e.what());
  } catch (const json::exception& e) {
    return error_answer(400, std::string("request: ") + e.what());
  } catch (const std::bad_alloc&) {
    return error_answer(503, "out of memory");
  } catch (const std::exception& e) {
    std::string msg = e.what();
    if (auto nl = msg.find('\n'); nl != std::string::npos) msg = msg.substr(0, nl);
    return error_answer(500, "internal error: " + msg);
  } catch (...) {
    return error_answer(500, "internal error");
  }
}

void send(httplib::Response& res, const Answer& a) {
  res.status = a.status;
  if (!a.cache.empty()) res.set_header("X-Vocablens-Cache", a.cache);
  res.set_content(a.body, "application/json; charset=utf-8");
}

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
    struct stat st{};
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

// ---- the bounded worker pool ---------------------------------------------------------------------------------

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
  WorkerPool(int workers, size_t max_queue) : max_queue_(max_queue) {
    for (int i = 0; i < workers; ++i) threads_.emplace_back([this] { loop(); });
  }
  ~WorkerPool() {
    {
      std::lock_guard<std::mutex> l(m_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  /// False when max_queue jobs are already waiting.
  bool submit(const std::shared_ptr<Job>& j) {
    {
      std::lock_guard<std::mutex> l(m_);
      if (q_.size() >= max_queue_) return false;
      q_.push_back(j);
    }
    cv_.notify_one();
    return true;
  }
  json status() {
    std::lock_guard<std::mutex> l(m_);
    return {{"workers", threads_.size()}, {"running", running_}, {"queued", q_.size()}, {"queue_limit", max_queue_}};
  }

 private:
  void loop() {
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
          a = j->work(&j->cancel);
        } catch (...) {
          a = answer_for_current_exception();
        }
      }
      {
        std::lock_guard<std::mutex> l(j->m);
        j->answer = std::move(a);
        j->done = true;
      }
      j->cv.notify_all();
      std::lock_guard<std::mutex> l(m_);
      --running_;
    }
  }

  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> q_;
  std::vector<std::thread> threads_;
  size_t max_queue_;
  size_t running_ = 0;
  bool stop_ = false;
};

// ---- answers kept per (analysis, resolved options): a click on the current prompt costs no forward ----------

class AnswerCache {
 public:
  explicit AnswerCache(size_t entries, size_t bytes = size_t(256) << 20) : max_entries_(entries), max_bytes_(bytes) {}
  std::shared_ptr<const std::string> get(const std::string& key) {
    std::lock_guard<std::mutex> l(m_);
    for (auto it = items_.begin(); it != items_.end(); ++it)
      if (it->first == key) {
        items_.splice(items_.begin(), items_, it);  // most recently used first
        return it->second;
      }
    return nullptr;
  }
  void put(const std::string& key, std::shared_ptr<const std::string> v) {
    if (max_entries_ == 0 || v->size() > max_bytes_) return;
    std::lock_guard<std::mutex> l(m_);
    for (auto it = items_.begin(); it != items_.end(); ++it)
      if (it->first == key) {
        bytes_ -= it->second->size();
        items_.erase(it);
        break;
      }
    bytes_ += v->size();
    items_.emplace_front(key, std::move(v));
    while (!items_.empty() && (items_.size() > max_entries_ || bytes_ > max_bytes_)) {
      bytes_ -= items_.back().second->size();
      items_.pop_back();
    }
  }

 private:
  std::mutex m_;
  std::list<std::pair<std::string, std::shared_ptr<const std::string>>> items_;
  size_t max_entries_, max_bytes_, bytes_ = 0;
};

// ---- request helpers ---------------------------------------------------------------------------------------

std::string random_token() {
  std::random_device rd;  // /dev/urandom on Linux
  std::string t;
  for (int i = 0; i < 4; ++i) t += fmt::format("{:08x}", static_cast<uint32_t>(rd()));
  return t;
}

bool same_secret(const std::string& a, const std::string& b) {  // constant time in the length of b
  unsigned diff = a.size() != b.size();
  for (size_t i = 0; i < b.size(); ++i) diff |= static_cast<unsigned char>(i < a.size() ? a[i] : 0) ^ static_cast<unsigned char>(b[i]);
  return diff == 0;
}

std::string host_name_of(const std::string& host_header) {  // "127.0.0.1:8765" -> "127.0.0.1", "[::1]:80" -> "::1"
  if (!host_header.empty() && host_header[0] == '[') {
    auto close = host_header.find(']');
    return close == std::string::npos ? host_header : host_header.substr(1, close - 1);
  }
  return host_header.substr(0, host_header.find(':'));
}

// The request body as a JSON object ({} for an empty body). Throws UsageError naming the problem.
json parse_body(const httplib::Request& req) {
  if (req.body.empty()) return json::object();
  detail::check_json_depth(req.body, "request body");
  json j;
  try {
    j = json::parse(req.body);
  } catch (const json::parse_error& e) {
    std::string m = e.what();
    throw UsageError("request body: invalid JSON (" + m.substr(m.find(':') == std::string::npos ? 0 : m.find(':') + 2) + ")");
  }
  if (!j.is_object()) throw UsageError(std::string("request body: expected a JSON object of options, got ") + j.type_name());
  return j;
}

std::string shorten(const std::string& s, size_t n = 60) { return s.size() > n ? s.substr(0, n - 3) + "..." : s; }

// ---- the server --------------------------------------------------------------------------------------------

// Options an analysis may declare that name files on the server: the HTTP API never opens a path a client
// sent. `tuned` is the exception by value: true means the directory given to `serve --tuned`.
const std::set<std::string> kServerFileOptions = {"corpus", "prompts", "tokenizer", "out", "allow", "allow_list",
                                                  "sae", "path", "file", "tuned_lens"};

class Explorer {
 public:
  explicit Explorer(const ServeOptions& o) : o_(o), pool_(std::max(1, o.workers), static_cast<size_t>(std::max(0, o.queue))),
                                             cache_(o.cache_entries) {
    if (!o.model.empty()) {
      model_ = std::make_unique<Model>(load_model(o.model));
      adapt_threads_to(*model_);
      tok_ = load_tokenizer_for(o.model, o.tokenizer);
      Result probe;
      fill_provenance(probe, *model_, "");
      model_info_ = probe.provenance;
    }
    for (const auto& d : o.run_dirs) runs_.push_back({d, read_run_directory(d)});
  }

  void routes(httplib::Server& svr) {
    svr.Get("/", [this](const httplib::Request&, httplib::Response& res) { page(res); });
    svr.Get("/index.html", [this](const httplib::Request&, httplib::Response& res) { page(res); });
    svr.Get("/favicon.ico", [](const httplib::Request&, httplib::Response& res) { res.status = 204; });
    svr.Get("/api/analyses", [this](const httplib::Request&, httplib::Response& res) {
      send(res, guarded([&] { return Answer{200, dump(model_ ? analyses_schema() : json::array()) + "\n"}; }));
    });
    svr.Get("/api/model", [this](const httplib::Request&, httplib::Response& res) { send(res, guarded([&] { return model_answer(); })); });
    svr.Get("/api/status", [this](const httplib::Request&, httplib::Response& res) {
      send(res, Answer{200, dump(pool_.status()) + "\n"});
    });
    svr.Get("/api/runs", [this](const httplib::Request&, httplib::Response& res) { send(res, guarded([&] { return runs_answer(); })); });
    svr.Get(R"(/api/runs/([0-9]{1,6})/([A-Za-z0-9_.\-]{1,80}))", [this](const httplib::Request& req, httplib::Response& res) {
      send(res, guarded([&] { return run_result_answer(req.matches[1], req.matches[2]); }));
    });
    svr.Post("/api/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
      send(res, guarded([&] { return tokenize_answer(req); }));
    });
    svr.Post(R"(/api/([A-Za-z0-9_\-]{1,64}))", [this](const httplib::Request& req, httplib::Response& res) {
      send(res, analysis_answer(req, req.matches[1]));
    });
    // The API's other methods: a JSON 405 rather than httplib's HTML 404.
    svr.Get(R"(/api/([A-Za-z0-9_\-]{1,64}))", [](const httplib::Request& req, httplib::Response& res) {
      send(res, error_answer(405, std::string(req.matches[1]) + ": analyses are run with POST and a JSON object of options"));
    });
  }

  const Model* model() const { return model_.get(); }
  size_t n_results() const {
    size_t n = 0;
    for (const auto& r : runs_) n += r.results.size();
    return n;
  }

 private:
  struct Run {
    std::string dir;
    std::vector<Result> results;
  };

  template <class F>
  static Answer guarded(F&& f) {
    try {
      return f();
    } catch (...) {
      return answer_for_current_exception();
    }
  }

  void page(httplib::Response& res) {
    res.set_content(kPageHtml, "text/html; charset=utf-8");
  }

  Answer no_model() const {
    return error_answer(404, "no model loaded: this server browses run directories (start `vocablens serve MODEL` to run analyses)");
  }

  Answer model_answer() {
    if (!model_) return no_model();
    json hooks = json::array();
    std::istringstream lines(hook_name_list(model_->config()));
    for (std::string line; std::getline(lines, line);) {
      std::istringstream w(line);
      std::string name, short_name, shape;
      if (!(w >> name >> short_name) || name[0] == '(') continue;
      std::getline(w, shape);
      shape.erase(0, shape.find_first_not_of(' '));
      hooks.push_back({{"name", name}, {"short", short_name}, {"shape", shape}});
    }
    json analyses = json::array();
    for (const auto& a : analysis_registry().all()) analyses.push_back(a.decl.name);
    json out = {{"model", model_->source()},
                {"config", model_info_.value("model", json::object())},
                {"config_sha256", model_info_.value("config_sha256", "")},
                {"hooks", hooks},
                {"n_layers", model_->config().n_layers},
                {"tokenizer", {{"kind", tok_->kind()}, {"source", tok_->source()}, {"vocab_size", tok_->vocab_size()},
                               {"bos_id", tok_->bos_id()}, {"eos_id", tok_->eos_id()}}},
                {"tuned", o_.tuned.empty() ? json(nullptr) : json(o_.tuned)},
                {"analyses", analyses},
                {"vocablens_version", VOCABLENS_VERSION}};
    return {200, dump(out) + "\n"};
  }

  Answer runs_answer() {
    json runs = json::array();
    for (size_t i = 0; i < runs_.size(); ++i) {
      json results = json::array();
      for (const auto& r : runs_[i].results) results.push_back({{"kind", r.kind}, {"settings", r.settings}});
      runs.push_back({{"index", i}, {"dir", runs_[i].dir}, {"results", results}});
    }
    return {200, dump({{"mode", model_ ? "model" : "runs"}, {"runs", runs}}) + "\n"};
  }

  Answer run_result_answer(const std::string& index, const std::string& kind) {
    size_t i = std::stoul(index);
    if (i >= runs_.size()) return error_answer(404, "no run directory " + index + " (" + std::to_string(runs_.size()) + " served)");
    for (const auto& r : runs_[i].results)
      if (r.kind == kind) return {200, result_to_json(r, /*inline_arrays=*/true)};
    return error_answer(404, runs_[i].dir + ": no '" + shorten(kind) + "' result");
  }

  // What `vocablens tokenize MODEL TEXT --json` prints; {"ids": [...]} decodes like `--ids`.
  Answer tokenize_answer(const httplib::Request& req) {
    if (!model_) return no_model();
    json b = parse_body(req);
    for (auto it = b.begin(); it != b.end(); ++it)
      if (it.key() != "text" && it.key() != "ids" && it.key() != "special" && it.key() != "bos" && it.key() != "eos")
        throw UsageError("tokenize: unknown option '" + shorten(it.key()) + "' (known: text, ids, special, bos, eos)");
    if (b.contains("text") == b.contains("ids")) throw UsageError("tokenize: give either text or ids (one of them)");
    if (b.contains("ids")) {
      if (!b["ids"].is_array()) throw UsageError("tokenize: ids: expected a list of token ids");
      std::vector<int64_t> ids;
      for (const auto& v : b["ids"]) {
        if (!v.is_number_integer()) throw UsageError("tokenize: ids: expected integers, got " + shorten(v.dump()));
        int64_t id = v.get<int64_t>();
        if (id < 0 || id >= tok_->vocab_size())
          throw UsageError("tokenize: ids: " + std::to_string(id) + " is outside [0, " + std::to_string(tok_->vocab_size()) + ")");
        ids.push_back(id);
      }
      json tokens = json::array();
      for (int64_t id : ids) tokens.push_back(tok_->display(id));
      return {200, dump({{"tokenizer", tok_->source()}, {"kind", tok_->kind()}, {"ids", ids}, {"tokens", tokens},
                         {"text", tok_->decode(ids)}}) + "\n"};
    }
    if (!b["text"].is_string()) throw UsageError("tokenize: text: expected a string");
    auto flag = [&](const char* k) -> std::optional<bool> {
      if (!b.contains(k) || b[k].is_null()) return std::nullopt;
      if (!b[k].is_boolean()) throw UsageError(std::string("tokenize: ") + k + ": expected true or false");
      return b[k].get<bool>();
    };
    const std::string text = b["text"].get<std::string>();
    EncodeOptions eo;
    eo.special_tokens = flag("special").value_or(false);
    eo.add_bos = flag("bos");
    eo.add_eos = flag("eos");
    std::vector<int64_t> ids = tok_->encode(text, eo);
    json tokens = json::array(), pieces = json::array();
    for (int64_t id : ids) {
      tokens.push_back(tok_->display(id));
      pieces.push_back(tok_->piece(id));
    }
    return {200, dump({{"tokenizer", tok_->source()}, {"kind", tok_->kind()}, {"ids", ids}, {"tokens", tokens},
                       {"pieces", pieces}, {"bytes", text.size()}}) + "\n"};
  }

  Answer analysis_answer(const httplib::Request& req, const std::string& name) {
    std::shared_ptr<Job> job;
    const DeclaredAnalysis* analysis = nullptr;
    json resolved;
    std::string key;
    try {
      if (!model_) return no_model();
      analysis = &find_analysis(name);  // UsageError "no analysis named ..." -> 404 below
      json given = parse_body(req);
      for (auto it = given.begin(); it != given.end(); ++it) {
        if (kServerFileOptions.count(it.key()))
          throw UsageError(name + ": " + it.key() + ": names a file on the server, which the HTTP API does not open "
                           "(use the command line, or start the server with the file)");
      }
      if (given.contains("save_probs") && given["save_probs"] == true)
        throw UsageError(name + ": save_probs: the full distributions (layers x positions x vocabulary) are too big for "
                         "a JSON answer; use the command line's --save-probs --out DIR");
      if (given.contains("tuned") && analysis->decl.find("tuned")) {
        // {"tuned": true} = the server's --tuned DIR; false/null = the logit lens.
        const json v = given["tuned"];
        if (v.is_boolean() && v.get<bool>()) {
          if (o_.tuned.empty()) throw UsageError(name + ": tuned: this server has no tuned lens (start it with --tuned DIR)");
          given["tuned"] = o_.tuned;
        } else if (v.is_null() || (v.is_boolean() && !v.get<bool>())) {
          given.erase("tuned");
        } else {
          throw UsageError(name + ": tuned: give true to use the server's tuned lens (--tuned DIR), or false");
        }
      }
      resolved = resolve_options(analysis->decl, given, Surface::Http);
      key = name + "\n" + resolved.dump();
      if (auto hit = cache_.get(key)) return cached_answer(*hit, "hit");
      job = std::make_shared<Job>();
      job->work = [this, analysis, resolved, name](const std::atomic<bool>* cancel) {
        Result r = run_analysis(*analysis, *model_, tok_.get(), resolved, Surface::Http, {}, cancel);
        fill_provenance(r, *model_, "POST /api/" + name);
        return Answer{200, result_to_json(r, /*inline_arrays=*/true)};
      };
    } catch (const UsageError& e) {
      const std::string m = e.what();
      return error_answer(m.rfind("no analysis named", 0) == 0 ? 404 : 400, m);
    } catch (...) {
      return answer_for_current_exception();
    }
    if (!pool_.submit(job))
      return error_answer(503, "busy: " + std::to_string(o_.workers) + " analyses running and " + std::to_string(o_.queue) +
                                   " waiting; try again shortly");
    const int fd = find_client_socket(req);
    std::unique_lock<std::mutex> l(job->m);
    while (!job->cv.wait_for(l, std::chrono::milliseconds(50), [&] { return job->done; })) {
      if (client_gone(fd)) {
        job->cancel = true;  // the analysis stops at its next step; nobody reads this answer
        return error_answer(503, "cancelled: the client went away");
      }
    }
    Answer a = std::move(job->answer);
    l.unlock();
    if (a.status == 200) {
      auto shared = std::make_shared<const std::string>(std::move(a.body));
      cache_.put(key, shared);
      return cached_answer(*shared, "miss");
    }
    return a;
  }

  static Answer cached_answer(const std::string& body, const char* how) { return {200, body, how}; }

  ServeOptions o_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tok_;
  json model_info_;
  std::vector<Run> runs_;
  WorkerPool pool_;
  AnswerCache cache_;
};

}  // namespace

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
  svr.set_default_headers({
      {"X-Content-Type-Options", "nosniff"},
      {"Cache-Control", "no-store"},
      {"Referrer-Policy", "no-referrer"},  // the URL may carry the access token
      {"X-Frame-Options", "DENY"},
      {"Content-Security-Policy",
       "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; connect-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"},
  });
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

  int port = o.port;
  if (port == 0) {
    port = svr.bind_to_any_port(o.host);
    if (port <= 0) throw UsageError("serve: cannot bind " + o.host + " (is it an address of this machine?)");
  } else if (!svr.bind_to_port(o.host, port)) {
    throw UsageError("serve: cannot bind " + o.host + ":" + std::to_string(port) + " (in use? --port 0 picks a free one)");
  }
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

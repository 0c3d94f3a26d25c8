// The explorer's routes and the API's answers (see explorer.hpp).
#include "serve/explorer.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "serve/answer_size.hpp"
#include "serve/connections.hpp"

#include "vocablens/analysis_estimate.hpp"
#include "vocablens/analysis_inputs.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/error.hpp"
#include "vocablens/export.hpp"
#include "vocablens/forward_memo.hpp"
#include "vocablens/hooks.hpp"
#include "vocablens/model.hpp"
#include "vocablens/provenance.hpp"
#include "vocablens/sae.hpp"
#include "vocablens/tokenizer.hpp"
#include "vocablens/tuned_lens.hpp"
#include "vocablens/weight.hpp"

namespace vocablens::serve {

const std::set<std::string> kServerFileOptions = {"corpus",     "prompts", "tokenizer", "out",  "allow",
                                                  "allow_list", "sae",     "path",      "file", "tuned_lens"};

namespace {

// The process's mapped address space now (VmSize), in bytes; -1 when /proc does not say.
double address_space_in_use() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmSize:", 0) == 0) {
      std::istringstream is(line.substr(7));
      double kb = -1;
      is >> kb;
      return kb < 0 ? -1 : kb * 1024.0;
    }
  return -1;
}

// Without --memory-budget: what the machine has available, and, when the address space is capped (RLIMIT_AS,
// `ulimit -v`), at most what is left of it once the connection threads' stacks (2 MB each) and two malloc
// arenas (64 MB each) are counted. Under a cap, an allocation past it fails — and where it fails inside
// libgomp or OpenBLAS the process aborts or spins (docs/serve.md, "Never dies") — so requests are refused
// before that edge, not after it.
double default_budget(const ServeOptions& o) {
  double budget = available_memory();
  struct rlimit rl {};
  if (::getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    const double used = address_space_in_use();
    if (used > 0) {
      const double threads = (static_cast<double>(o.max_connections) + 8) * 2 * 1048576.0 + 2 * 64 * 1048576.0;
      const double left = std::max(1.0 * 1048576.0, static_cast<double>(rl.rlim_cur) - used - threads);
      budget = budget > 0 ? std::min(budget, left) : left;
    }
  }
  return budget;
}

}  // namespace

Explorer::Explorer(const ServeOptions& o)
    : o_(o),
      pool_(std::max(1, o.workers), static_cast<size_t>(std::max(0, o.queue))),
      cache_(o.cache_entries),
      forward_(std::make_unique<ForwardMemo>(static_cast<size_t>(std::max(0, o.forward_cache)),
                                             static_cast<size_t>(std::max<int64_t>(0, o.forward_cache_mb)) << 20)) {
  if (!o.model.empty()) {
    model_ = std::make_unique<Model>(load_model(o.model));
    adapt_threads_to(*model_);
    tok_ = load_tokenizer_for(o.model, o.tokenizer);
    Result probe;
    fill_provenance(probe, *model_, "");
    model_info_ = probe.provenance;
    if (!o.tuned.empty()) {
      // Read once at start-up, so that `--tuned /etc` (or another model's lens) is refused here, not by the
      // first request that asks for it.
      try {
        load_tuned_lens(o.tuned).check_model(*model_);
      } catch (const Error& e) { throw UsageError(std::string("--tuned: ") + e.what()); }
    }
    load_sae_and_corpus();
    check_served_options();
    // The memory budget: what the declared estimates of the analyses running at once may add to the model.
    resident_ = model_memory(*model_).total();
    memory_budget_ = o.memory_budget_mb > 0 ? static_cast<double>(o.memory_budget_mb) * 1048576.0 : default_budget(o);
  }
  for (const auto& d : o.run_dirs) runs_.push_back({d, read_run_directory(d)});
}

Explorer::~Explorer() = default;

// Each served option's value is checked once, by its declaration's hook, before the server binds: a value the
// model cannot use (another model's files) stops it here in one line naming the flag, not at the first request.
void Explorer::check_served_options() {
  for (const OptionDecl* od : served_options()) {
    auto v = o_.served.find(od->name);
    if (v == o_.served.end() || v->second.empty()) continue;
    try {
      served_info_[od->name] = od->server->check(*model_, v->second);
    } catch (const Error& e) { throw UsageError(spelling(*od, Surface::Cli) + ": " + e.what()); }
  }
}

// {"<option>": true} = the value serve was given; a path would name a file (or a folder) on the server.
std::string Explorer::served_value(const std::string& analysis, const OptionDecl& od, const json& given) const {
  const std::string flag = spelling(od, Surface::Cli) + " " + od.server->value_name;
  const std::string what = analysis + ": " + od.name + ": ";
  if (!given.is_boolean() || !given.get<bool>())
    throw UsageError(what + "give true to use the server's " + od.name + " (" + flag + "); a path names a " +
                     (od.server->value_name == "DIR" ? "folder" : "file") + " on the server, which the HTTP API does not open");
  auto v = o_.served.find(od.name);
  if (v == o_.served.end() || v->second.empty())
    throw UsageError(what + "this server has no " + od.name + " (start it with " + flag + ")");
  return v->second;
}

size_t Explorer::n_results() const {
  size_t n = 0;
  for (const auto& r : runs_) n += r.results.size();
  return n;
}

void Explorer::routes(httplib::Server& svr) {
  add_page_routes(svr);
  svr.Get("/api/analyses", [this](const httplib::Request&, httplib::Response& res) {
    send(res, guarded([&] { return Answer{200, dump(model_ ? analyses_schema() : json::array()) + "\n"}; }));
  });
  svr.Get("/api/model",
          [this](const httplib::Request&, httplib::Response& res) { send(res, guarded([&] { return model_answer(); })); });
  auto* connections = dynamic_cast<GuardedServer*>(&svr);  // connections.hpp: its counts, when it is one
  svr.Get("/api/status", [this, connections](const httplib::Request&, httplib::Response& res) {
    json st = pool_.status();
    if (connections) st["connections"] = connections->stats();
    const ForwardMemo::Stats f = forward_->stats();
    st["forward_cache"] = {{"passes", f.records},      {"bytes", f.bytes},       {"max_passes", f.max_records},
                           {"max_bytes", f.max_bytes}, {"replayed", f.replayed}, {"computed", f.recorded},
                           {"not_kept", f.not_kept}};
    {
      std::lock_guard<std::mutex> lk(memory_mu_);
      st["memory"] = {{"budget_mib", memory_budget_ / 1048576.0}, {"in_use_mib", memory_in_use_ / 1048576.0}};
    }
    const AnswerCache::Stats a = cache_.stats();
    st["answer_cache"] = {{"answers", a.entries},
                          {"bytes", a.bytes},
                          {"max_answers", a.max_entries},
                          {"max_bytes", a.max_bytes},
                          {"max_answer_bytes", a.max_answer_bytes}};
    send(res, Answer{200, dump(st) + "\n"});
  });
  // A long analysis's progress, polled by the page while its POST waits (the POST named the id in its
  // X-Vocablens-Progress header); 404 once it is answered.
  svr.Get(R"(/api/progress/([A-Za-z0-9_\-]{1,64}))", [this](const httplib::Request& req, httplib::Response& res) {
    json p = progress_.get(req.matches[1]);
    send(res, p.is_null() ? error_answer(404, "no analysis in progress under this id (answered, or never asked)")
                          : Answer{200, dump(p) + "\n"});
  });
  svr.Get("/api/runs",
          [this](const httplib::Request&, httplib::Response& res) { send(res, guarded([&] { return runs_answer(); })); });
  svr.Get(R"(/api/runs/([0-9]{1,6})/([A-Za-z0-9_.\-]{1,80}))", [this](const httplib::Request& req, httplib::Response& res) {
    send(res, guarded([&] { return run_result_answer(req.matches[1], req.matches[2]); }));
  });
  svr.Post("/api/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
    send(res, guarded([&] { return tokenize_answer(req); }));
  });
  // The analyses' declared short routes (the page's /api/sae/features, /api/sae/lens): each is its analysis's own
  // POST with a narrower contract.
  for (const auto& a : analysis_registry().all())
    for (const auto& alias : a.decl.http_aliases)
      svr.Post("/api/" + alias.path, [this, name = a.decl.name, alias](const httplib::Request& req, httplib::Response& res) {
        send(res, analysis_answer(req, name, &alias));
      });
  svr.Post("/api/top_activations",
           [this](const httplib::Request& req, httplib::Response& res) { send(res, top_activations_answer(req)); });
  svr.Post(R"(/api/([A-Za-z0-9_\-]{1,64}))",
           [this](const httplib::Request& req, httplib::Response& res) { send(res, analysis_answer(req, req.matches[1])); });
  // The API's other methods: a JSON 405 rather than httplib's HTML 404.
  svr.Get(R"(/api/([A-Za-z0-9_\-]{1,64}))", [](const httplib::Request& req, httplib::Response& res) {
    send(res, error_answer(405, std::string(req.matches[1]) + ": analyses are run with POST and a JSON object of options"));
  });
}

Answer Explorer::no_model() const {
  return error_answer(404,
                      "no model loaded: this server browses run directories (start `vocablens serve MODEL` to run analyses)");
}

Answer Explorer::model_answer() {
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
              // A mixture of experts' router: the page's routing view asks POST /api/experts only where there is one.
              {"experts", model_->config().n_experts > 0
                              ? json({{"n_experts", model_->config().n_experts}, {"k", model_->config().n_experts_used}})
                              : json(nullptr)},
              {"tokenizer",
               {{"kind", tok_->kind()},
                {"source", tok_->source()},
                {"vocab_size", tok_->vocab_size()},
                {"bos_id", tok_->bos_id()},
                {"eos_id", tok_->eos_id()}}},
              {"tuned", o_.tuned.empty() ? json(nullptr) : json(o_.tuned)},
              {"analyses", analyses},
              {"sae", sae_info()},
              {"corpus", corpus_path_.empty() ? json(nullptr)
                                              : json({{"path", corpus_path_},
                                                      {"windows", corpus_.size()},
                                                      {"window", corpus_.empty() ? size_t(0) : corpus_[0].size()}})},
              {"d_mlp", model_->config().d_mlp},
              {"compute", vocablens::compute_dtype_name(vocablens::compute_dtype())},
              {"vocablens_version", VOCABLENS_VERSION}};
  // What each served option's start-up check reported, null when serve was not given the option.
  for (const OptionDecl* od : served_options()) out[od->name] = served_info_.value(od->name, json(nullptr));
  return {200, dump(out) + "\n"};
}

Answer Explorer::runs_answer() {
  json runs = json::array();
  for (size_t i = 0; i < runs_.size(); ++i) {
    json results = json::array();
    for (const auto& r : runs_[i].results) results.push_back({{"kind", r.kind}, {"settings", r.settings}});
    runs.push_back({{"index", i}, {"dir", runs_[i].dir}, {"results", results}});
  }
  return {200, dump({{"mode", model_ ? "model" : "runs"}, {"runs", runs}}) + "\n"};
}

Answer Explorer::run_result_answer(const std::string& index, const std::string& kind) {
  size_t i = std::stoul(index);
  if (i >= runs_.size()) return error_answer(404, "no run directory " + index + " (" + std::to_string(runs_.size()) + " served)");
  for (const auto& r : runs_[i].results)
    if (r.kind == kind) return {200, result_to_json(r, /*inline_arrays=*/true)};
  return error_answer(404, runs_[i].dir + ": no '" + shorten(kind) + "' result");
}

// What `vocablens tokenize MODEL TEXT --json` prints; {"ids": [...]} decodes like `--ids`.
Answer Explorer::tokenize_answer(const httplib::Request& req) {
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
    return {200, dump({{"tokenizer", tok_->source()},
                       {"kind", tok_->kind()},
                       {"ids", ids},
                       {"tokens", tokens},
                       {"text", tok_->decode(ids)}}) +
                     "\n"};
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
  return {200, dump({{"tokenizer", tok_->source()},
                     {"kind", tok_->kind()},
                     {"ids", ids},
                     {"tokens", tokens},
                     {"pieces", pieces},
                     {"bytes", text.size()}}) +
                   "\n"};
}

std::optional<Answer> Explorer::alias_absent(const DeclaredAnalysis& a, const HttpAlias& alias) const {
  for (auto it = alias.fixed.begin(); it != alias.fixed.end(); ++it) {
    const OptionDecl* od = a.decl.find(it.key());
    if (od && od->type == OptionType::Sae && !sae_)
      return error_answer(404, alias.path + ": this server has no SAE (start it with --sae PATH)");
    auto served = od ? o_.served.find(od->name) : o_.served.end();
    if (od && od->server && (served == o_.served.end() || served->second.empty()))
      return error_answer(404, alias.path + ": this server has no " + od->name + " (start it with " +
                                   spelling(*od, Surface::Cli) + " " + od->server->value_name + ")");
  }
  return std::nullopt;
}

Answer Explorer::analysis_answer(const httplib::Request& req, const std::string& name, const HttpAlias* alias) {
  const std::string route = alias ? alias->path : name;  // what the answer's provenance and the cache name
  const DeclaredAnalysis* analysis = nullptr;
  json resolved;
  double reserved = 0;                    // the estimate admitted against the memory budget, given back when the work is done
  std::shared_ptr<JobProgress> progress;  // when the client asked to follow it (X-Vocablens-Progress)
  try {
    if (!model_) return no_model();
    analysis = &find_analysis(name);  // UsageError "no analysis named ..." -> 404 below
    if (alias)
      if (auto absent = alias_absent(*analysis, *alias)) return *absent;
    json given = alias ? alias_request(*alias, parse_body(req)) : parse_body(req);
    for (auto it = given.begin(); it != given.end(); ++it) {
      const OptionDecl* od = analysis->decl.find(it.key());
      if (od && od->type == OptionType::Sae) {
        // {"sae": true} = the server's --sae PATH; any path is a file on the server.
        if (!it.value().is_boolean() || !it.value().get<bool>())
          throw UsageError(name + ": " + it.key() +
                           ": give true to use the server's SAE (--sae PATH); a path names a "
                           "file on the server, which the HTTP API does not open");
        if (!sae_) throw UsageError(name + ": " + it.key() + ": this server has no SAE (start it with --sae PATH)");
        it.value() = sae_->source;
        continue;
      }
      if (od && od->server) {
        it.value() = served_value(name, *od, it.value());
        continue;
      }
      if (kServerFileOptions.count(it.key()) || (od && od->type == OptionType::Model))
        throw UsageError(name + ": " + it.key() +
                         ": names a file on the server, which the HTTP API does not open "
                         "(use the command line, or start the server with the file)");
    }
    if (given.contains("save_probs") && given["save_probs"] == true)
      throw UsageError(name +
                       ": save_probs: the full distributions (layers x positions x vocabulary) are too big for "
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
    if (alias) check_alias_bounds(analysis->decl, *alias, resolved);
    // An answer already given is given again before any estimate: an estimate that runs the model
    // (AnalysisDecl::estimate_runs_model) would otherwise be repeated by a reload of the page's view.
    if (auto hit = cache_.get(route + "\n" + resolved.dump())) return {200, *hit, "hit"};
    // Refused before any work when the answer would be too big to build and send (answer_size.hpp): an
    // allocation failure halfway through could leave no memory for anything else.
    const AnswerSize size = estimate_answer_size(*analysis, resolved, *model_, tok_.get());
    if (size.values > static_cast<double>(o_.max_answer_values))
      return error_answer(413, fmt::format("{}: the answer would hold {:.0f} values ({}), over this server's limit of {} "
                                           "(serve --max-answer-values); ask for fewer, or use the command line",
                                           name, size.values, size.how, o_.max_answer_values));
    // And when its working memory, by the analysis's declared estimate (the figure `--dry-run` prints), would not
    // fit in the server's budget: alone (413, with the estimate), or beside the analyses running now (503). An
    // estimate that runs the model itself (estimate_runs_model) is computed in the worker instead, below: here it
    // would run on the connection's thread, outside --workers and beyond the reach of cancellation.
    progress = progress_.track(req, name);
    if (!analysis->decl.estimate_runs_model) {
      // The server's SAE handed over, as to the run: the feature analyses' estimates read its shapes, and would
      // otherwise load it again from its path, on this thread, for every request.
      const AnalysisInputs inputs = server_inputs(*analysis);
      const AnalysisEstimate est = estimate_analysis(*analysis, *model_, tok_.get(), resolved, Surface::Http, &inputs);
      if (auto refused = admit(name, est, reserved)) return *refused;
      if (progress) {
        progress->need_bytes = reserved;
        if (!est.what.empty())
          progress->estimate = fmt::format("about {:.0f} MiB beyond the loaded model: {}",
                                           std::max(0.0, est.memory.total() - resident_) / 1048576.0, est.what);
      }
    }
  } catch (const UsageError& e) {
    const std::string m = e.what();
    return error_answer(m.rfind("no analysis named", 0) == 0 ? 404 : 400, m);
  } catch (...) { return answer_for_current_exception(); }
  // Given back when the work is done or dropped (the job, and the function holding this, are destroyed then).
  auto reservation = std::shared_ptr<void>(nullptr, [this, reserved](void*) { release(reserved); });
  return pooled(req, route + "\n" + resolved.dump(),
                [this, analysis, resolved, name, route, reservation, progress](const std::atomic<bool>* cancel) {
                  if (progress) progress->started = true;
                  double late = 0;  // the reservation of an estimate made here, in the worker
                  std::shared_ptr<void> late_reservation;
                  if (analysis->decl.estimate_runs_model) {
                    // (inside the worker's CancelScope: the estimate's forward stops when the client leaves, like the run's)
                    const AnalysisInputs inputs = server_inputs(*analysis);
                    const AnalysisEstimate est =
                        estimate_analysis(*analysis, *model_, tok_.get(), resolved, Surface::Http, &inputs);
                    if (auto refused = admit(name, est, late)) return *refused;
                    late_reservation = std::shared_ptr<void>(nullptr, [this, late](void*) { release(late); });
                    if (progress) {
                      progress->need_bytes = late;
                      if (!est.what.empty())
                        progress->estimate = fmt::format("about {:.0f} MiB beyond the loaded model: {}",
                                                         std::max(0.0, est.memory.total() - resident_) / 1048576.0, est.what);
                    }
                  }
                  // Analyses that report progress stop at their next report once the client has gone (the forward pass and
                  // the lens poll the worker's CancelScope, worker_pool.cpp).
                  // An analysis that only reads activations (AnalysisDecl::reads_forward_only: the lens, the attribution)
                  // has its forward pass of a prompt kept and the next one of the same prompt replayed (a click on a
                  // cell after the lens runs no block of the model). A request that edits the forward (an option
                  // declared edits_forward: an expert's ablation or scaling) is neither replayed nor kept.
                  const bool memo = forward_replayable(analysis->decl, resolved);
                  std::optional<ForwardMemoScope> scope;
                  if (memo) scope.emplace(*forward_);
                  const AnalysisInputs inputs = server_inputs(*analysis);
                  Result r = run_analysis(*analysis, *model_, tok_.get(), resolved, Surface::Http,
                                          cancel_on_progress(cancel, progress), cancel, &inputs);
                  fill_provenance(r, *model_, "POST /api/" + route);
                  Answer a{200, result_to_json(r, /*inline_arrays=*/true)};
                  if (memo) a.forward = scope->replayed() > 0 && scope->recorded() == 0 ? "replayed" : "computed";
                  return a;
                });
}

AnalysisInputs Explorer::server_inputs(const DeclaredAnalysis& a) const {
  AnalysisInputs inputs;  // the server's SAE, for an analysis that reads one (never copied)
  if (sae_)
    for (const auto& o : a.decl.options)
      if (o.type == OptionType::Sae) inputs.saes[o.name] = std::shared_ptr<const Sae>(sae_.get(), [](const Sae*) {});
  return inputs;
}

std::optional<Answer> Explorer::admit(const std::string& name, const AnalysisEstimate& est, double& reserved) {
  reserved = 0;
  const double need = std::max(0.0, est.memory.total() - resident_);
  if (memory_budget_ <= 0) return std::nullopt;
  if (need > memory_budget_)
    return error_answer(413, fmt::format("{}: {} needs about {:.0f} MiB beyond the loaded model, over this server's "
                                         "memory budget of {:.0f} MiB (serve --memory-budget){}",
                                         name, est.what, need / 1048576.0, memory_budget_ / 1048576.0,
                                         est.reduce_within    ? ": " + est.reduce_within(memory_budget_ + resident_)
                                         : est.reduce.empty() ? std::string()
                                                              : ": " + est.reduce));
  std::lock_guard<std::mutex> lk(memory_mu_);
  if (memory_in_use_ + need > memory_budget_)
    return error_answer(503, fmt::format("busy: {} needs about {:.0f} MiB and the analyses running hold {:.0f} of "
                                         "this server's {:.0f} MiB budget; try again shortly",
                                         est.what, need / 1048576.0, memory_in_use_ / 1048576.0, memory_budget_ / 1048576.0));
  memory_in_use_ += need;
  reserved = need;
  return std::nullopt;
}

void Explorer::release(double reserved) {
  if (reserved <= 0) return;
  std::lock_guard<std::mutex> lk(memory_mu_);
  memory_in_use_ = std::max(0.0, memory_in_use_ - reserved);
}

Answer Explorer::pooled(const httplib::Request& req, const std::string& key,
                        std::function<Answer(const std::atomic<bool>* cancel)> work) {
  if (auto hit = cache_.get(key)) return {200, *hit, "hit"};
  auto job = std::make_shared<Job>();
  job->work = std::move(work);
  if (!pool_.submit(job))
    return error_answer(503, "busy: " + std::to_string(o_.workers) + " analyses running and " + std::to_string(o_.queue) +
                                 " waiting; try again shortly");
  Answer a = await_answer(*job, req);
  if (a.status != 200) return a;
  auto shared = std::make_shared<const std::string>(std::move(a.body));
  cache_.put(key, shared);
  Answer out{200, *shared, "miss"};
  out.forward = a.forward;
  return out;
}

}  // namespace vocablens::serve

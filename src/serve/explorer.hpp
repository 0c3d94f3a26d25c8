// src/serve/explorer.hpp — the explorer's routes: what each path of `vocablens serve` answers (the list is
// in server.hpp). The Explorer owns what the server keeps loaded (the model and its tokenizer, the saved
// run directories), the worker pool that runs analyses, the cache of their answers and the memo of the
// prompts' forward passes (vocablens/forward_memo.hpp).
//
//   Explorer ex(options);   // loads the model / reads the run directories (errors: one line, before binding)
//   httplib::Server svr;
//   ex.routes(svr);
//
// Every route ends in a JSON answer (errors included); analyses go through the one registry
// (vocablens/analysis_registry.hpp) on the worker pool (worker_pool.hpp); the page is static_page.cpp's.
#pragma once
#include <mutex>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "serve/answer_cache.hpp"
#include "serve/http_util.hpp"
#include "serve/server.hpp"
#include "serve/worker_pool.hpp"
#include "vocablens/analysis_estimate.hpp"
#include "vocablens/analysis_inputs.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/result.hpp"

namespace vocablens {
class ForwardMemo;
class Model;
class Tokenizer;
struct Sae;
}  // namespace vocablens

namespace vocablens::serve {

/// Options an analysis may declare that name files on the server: the HTTP API never opens a path a client
/// sent. `tuned` is the exception by value: true means the directory given to `serve --tuned`.
extern const std::set<std::string> kServerFileOptions;

/// GET /, /index.html: the embedded page (src/serve/page.html); /favicon.ico: 204.
void add_page_routes(httplib::Server& svr);

/// The headers every answer carries: a Content-Security-Policy that admits the inline page and nothing from
/// another origin, no framing, no referrer (the URL may hold the access token), no caching.
httplib::Headers security_headers();

class Explorer {
 public:
  explicit Explorer(const ServeOptions& o);
  ~Explorer();
  void routes(httplib::Server& svr);

  const Model* model() const { return model_.get(); }
  size_t n_results() const;

 private:
  struct Run {
    std::string dir;
    std::vector<Result> results;
  };

  Answer no_model() const;
  Answer model_answer();
  Answer runs_answer();
  Answer run_result_answer(const std::string& index, const std::string& kind);
  Answer tokenize_answer(const httplib::Request& req);
  /// POST /api/<name>, or one of its declared aliases (AnalysisDecl::http_aliases): POST /api/<alias.path>.
  Answer analysis_answer(const httplib::Request& req, const std::string& name, const HttpAlias* alias = nullptr);
  /// 404 when the server lacks an input the alias fixes (its SAE, a served option): the route is absent here.
  std::optional<Answer> alias_absent(const DeclaredAnalysis& a, const HttpAlias& alias) const;
  /// Admits `est` against the memory budget: an error answer (413 alone, 503 beside the running analyses), or
  /// nothing with `reserved` set to what was taken (give it back with release()).
  std::optional<Answer> admit(const std::string& name, const AnalysisEstimate& est, double& reserved);
  void release(double reserved);
  /// The objects the server holds for an analysis's options (its --sae), as run_analysis and the estimate take them.
  AnalysisInputs server_inputs(const DeclaredAnalysis& a) const;
  /// Checks each served option's value against the model once (OptionDecl::server); UsageError naming its flag.
  void check_served_options();
  /// The value of a served option for a request that gave `given` for it: true = the server's; else UsageError.
  std::string served_value(const std::string& analysis, const OptionDecl& od, const json& given) const;
  // sae_api.cpp: the SAE and the corpus, and the corpus's top activations.
  void load_sae_and_corpus();
  json sae_info() const;
  Answer top_activations_answer(const httplib::Request& req);
  /// Runs `work` on the pool unless the cache holds `key`; caches a 200 answer.
  Answer pooled(const httplib::Request& req, const std::string& key, std::function<Answer(const std::atomic<bool>* cancel)> work);

  ServeOptions o_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tok_;
  json model_info_;
  std::vector<Run> runs_;
  std::unique_ptr<Sae> sae_;
  std::string corpus_path_;
  std::vector<std::vector<int64_t>> corpus_;  ///< the corpus's windows, tokenised once at start-up
  json served_info_ = json::object();         ///< by option: what each served option's start-up check reported
  WorkerPool pool_;
  ProgressBoard progress_;  ///< GET /api/progress/<id>: the analyses whose clients asked to follow them
  AnswerCache cache_;
  std::unique_ptr<ForwardMemo> forward_;  ///< the prompts' forward passes, replayed (AnalysisDecl::reads_forward_only)
  double memory_budget_ = -1;             ///< bytes beyond the model that running analyses may need; -1 unknown
  double resident_ = 0;                   ///< the model's share of every estimate: runtime + weights as stored
  std::mutex memory_mu_;
  double memory_in_use_ = 0;  ///< the estimates (beyond the model) of the analyses admitted and running
};

}  // namespace vocablens::serve

// src/serve/server.hpp — `vocablens serve`: one model kept loaded, a page and a JSON API over HTTP.
//
// The explorer is a single page (src/serve/page.html, embedded in the binary: no CDN, works offline) and a
// JSON API generated from the analyses' one declaration of options (vocablens/analysis_registry.hpp):
//
//   GET  /                      the page
//   GET  /api/analyses          analyses_schema(): every analysis, its options, types, defaults, bounds
//   GET  /api/model             the model's config, hook names, tokenizer kind and vocabulary size
//   POST /api/<analysis>        the options as a JSON object -> result_to_json(Result, inline arrays), the
//                               same document `vocablens <command> ... --format json` prints
//   POST /api/tokenize          {"text": ...} -> what `vocablens tokenize --json` prints ({"ids": [...]} decodes)
//   GET  /api/runs              browse mode (`vocablens serve RUN_DIR...`): the results of each directory
//   GET  /api/runs/<i>/<kind>   one saved result, arrays inline
//   POST /api/<alias>           an analysis's declared short route (AnalysisDecl::http_aliases): its own POST on
//                               fewer keys, with values it fixes and tighter bounds; with --sae, /api/sae/features
//                               {"features": [..], "top_k": k} and /api/sae/lens {"prompt": .., "top_features": n}
//                               (`vocablens features MODEL --sae PATH [--prompt ..] --format json`)
//   POST /api/top_activations   with --corpus / --corpus-run: {"unit": "neuron", "layer": l, "index": n} or
//                               {"unit": "feature", "index": f} -> its k largest activations over the corpus
//   GET  /api/status            workers, analyses running, waiting and cancelled; the forward cache
//   GET  /api/progress/<id>     a running analysis's (done, total) steps and estimate, while the POST that
//                               named <id> in its X-Vocablens-Progress header waits (the graph view's progress)
//
//   vocablens::serve::ServeOptions o;  o.model = "gpt2-tiny";  o.port = 0;   // 0: any free port
//   return vocablens::serve::run_server(o);   // blocks; prints "serving ... at http://127.0.0.1:PORT/"
//
// Guarantees: binds 127.0.0.1 unless another host is asked for, and then every request must carry the
// random access token (query `token=`, header `X-Vocablens-Token` or `Authorization: Bearer`); on the
// loopback, requests naming another Host are refused (DNS rebinding). Connections are capped in all and per
// address, each request must arrive within request_timeout, unread answers are dropped after write_timeout
// (connections.hpp); an answer over max_answer_values is 413 before the work (answer_size.hpp); a port in use
// is refused, not shared. Bodies above max_body bytes (chunked too) are 413;
// bad JSON, unknown analyses and options are 4xx with the library's one-line message ({"error": ...});
// analyses run on `workers` threads with at most `queue` waiting (then 503), so the page and small requests
// never wait behind a long one; a client that disconnects cancels its analysis (a queued one never starts, a
// running one stops at its next block: vocablens/interrupt.hpp's CancelScope); the analyses that only read a
// prompt's activations (AnalysisDecl::reads_forward_only) share its forward pass, kept in a bounded memo
// (vocablens/forward_memo.hpp: forward_cache passes, forward_cache_mb MB), so a click on a cell of the current
// prompt runs no block of the model; only the paths above exist (nothing is read from disk after start-up); no
// request can stop the server.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace vocablens::serve {

struct ServeOptions {
  std::string model;      ///< model path ("" = browse mode over run_dirs)
  std::string tokenizer;  ///< explicit tokenizer ("" = found beside the model)
  std::string tuned;      ///< tuned-lens directory offered to the lens as {"tuned": true}
  std::string sae;        ///< SAE / transcoder (vocablens/sae.hpp layouts): /api/sae/features, /api/sae/lens
  std::string sae_hook;   ///< overrides the SAE's hook point
  /// By option name, the values of the options analyses let the server fix (OptionDecl::server: `serve --<option>
  /// VALUE`, the flag made from the declaration), offered to requests as {"<option>": true}; empty: not given.
  std::map<std::string, std::string> served;
  std::string corpus;                 ///< text file: /api/top_activations of a neuron or feature over it
  std::string corpus_run;             ///< a run directory of `lens --corpus`: its corpus file (settings.corpus)
  int64_t corpus_tokens = 16384;      ///< tokens of the corpus read (from its start), in windows of `window`
  int64_t window = 64;                ///< tokens per forward over the corpus (at most the model's context)
  std::vector<std::string> run_dirs;  ///< browse mode: saved run directories
  std::string host = "127.0.0.1";
  int port = 8765;                  ///< 0 = any free port (printed)
  int workers = 2;                  ///< analyses running at once
  int queue = 8;                    ///< analyses waiting; more are answered 503
  int64_t max_body = 1 << 20;       ///< request body limit in bytes, chunked bodies included (413 above)
  int max_connections = 128;        ///< open connections in all (503 above; connections.hpp)
  int max_client_connections = 64;  ///< open connections from one address (503 above)
  int request_timeout = 10;         ///< seconds a request (line, headers, body) may take to arrive
  int write_timeout = 10;           ///< seconds an answer may wait for its client to read (then dropped)
  /// Values an analysis's answer may hold in its largest array (413 above). The default is the count up to which
  /// an answer carries an array inline (result_to_json's inline_limit, as `--format json`): a larger array
  /// would be named by a file the client cannot fetch.
  int64_t max_answer_values = 100000;
  /// Memory, in MiB, the analyses running at once may need beyond the loaded model, by their declared estimates
  /// (vocablens/analysis_estimate.hpp): a request that alone needs more is 413 with the estimate, one that does
  /// not fit beside those running is 503. 0 = what the machine has available once the model is loaded.
  int64_t memory_budget_mb = 0;
  size_t cache_entries = 32;       ///< answers kept per (analysis, resolved options)
  int forward_cache = 4;           ///< forward passes kept (one per prompt) for lens / attribute to replay
  int64_t forward_cache_mb = 512;  ///< their memory, in MB (a pass above it is not kept)
  bool require_token = false;      ///< a token on the loopback too (machines shared with other users)
  std::string token;               ///< access token ("" = a random one when required)
};

/// True for 127.0.0.1 / 127.x / ::1 / localhost.
bool is_loopback_host(const std::string& host);

/// Loads the model (or the run directories), binds, prints the URL on stdout, serves until killed.
/// Returns the exit code; throws UsageError / FormatError for bad arguments before binding.
int run_server(const ServeOptions& o);

/// The page (src/serve/page.html), embedded at build time.
extern const char* const kPageHtml;
/// The graph view (src/serve/graph_view.html), spliced into the page at its "<!-- graph view -->" marker.
extern const char* const kGraphViewHtml;
/// The routing view of a mixture of experts (src/serve/experts_view.html), at its "<!-- experts view -->" marker.
extern const char* const kExpertsViewHtml;

}  // namespace vocablens::serve

// `vocablens serve MODEL`: the explorer in the browser (a page and a JSON API, src/serve/server.hpp);
// `vocablens serve RUN_DIR...` browses saved run directories without a model.
//
//   vocablens serve gpt2-tiny                          # http://127.0.0.1:8765/
//   vocablens serve gpt2-tiny --port 0                 # any free port (printed)
//   vocablens serve gpt2 --host 0.0.0.0                # other machines: a warning, and an access token
//   vocablens serve runs/eiffel runs/rome              # browse saved results
//   vocablens serve gpt2 --sae saes/res-6 --corpus wiki.txt   # feature pages, top activations
//   vocablens serve gpt2 runs/wiki                     # + saved runs; a `lens --corpus` run gives the corpus
#include <filesystem>
#include <memory>

#include "cli/command.hpp"
#include "serve/server.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/error.hpp"

namespace {

namespace fs = std::filesystem;

// A run directory holds <kind>.json results and no model: no config.json, no weights, not a file.
bool looks_like_run_directory(const std::string& p) {
  std::error_code ec;
  if (!fs::is_directory(p, ec)) return false;
  for (const char* f :
       {"config.json", "model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json"})
    if (fs::exists(fs::path(p) / f, ec)) return false;
  return true;
}

struct ServeCli {
  std::vector<std::string> paths;
  bool require_token = false;
  vocablens::serve::ServeOptions o;
};

int run_serve(ServeCli& c) {
  using vocablens::UsageError;
  bool all_runs = true;
  for (const auto& p : c.paths) all_runs = all_runs && looks_like_run_directory(p);
  if (all_runs) {
    if (!c.o.tuned.empty()) throw UsageError("--tuned needs a MODEL (run directories are browsed without one)");
    for (const vocablens::OptionDecl* od : vocablens::served_options())
      if (!c.o.served[od->name].empty())
        throw UsageError(vocablens::spelling(*od, vocablens::Surface::Cli) +
                         " needs a MODEL (run directories are browsed without one)");
    if (!c.o.sae.empty() || !c.o.corpus.empty() || !c.o.corpus_run.empty())
      throw UsageError("--sae, --corpus and --corpus-run need a MODEL: features and activations are computed on it");
    c.o.run_dirs = c.paths;
  } else {
    // MODEL RUN_DIR...: the model, and run directories browsed beside it; a run of `lens --corpus` among them
    // gives the corpus of the top activations (as --corpus-run) unless one was named.
    c.o.model = c.paths[0];
    std::vector<std::string> corpus_runs;
    for (size_t i = 1; i < c.paths.size(); ++i) {
      if (!looks_like_run_directory(c.paths[i]))
        throw UsageError("serve: give one MODEL, then only run directories ('" + c.paths[i] + "' is not a run directory)");
      c.o.run_dirs.push_back(c.paths[i]);
      std::error_code ec;
      if (fs::exists(fs::path(c.paths[i]) / "logit_lens_corpus.json", ec)) corpus_runs.push_back(c.paths[i]);
    }
    if (c.o.corpus.empty() && c.o.corpus_run.empty() && corpus_runs.size() == 1) c.o.corpus_run = corpus_runs[0];
  }
  c.o.require_token = c.require_token;
  return vocablens::serve::run_server(c.o);
}

vocablens::cli::Register registered_cmd_serve{
    "serve", "The explorer in the browser: a page and a JSON API on a loaded model (or saved run directories)",
    [](CLI::App& sub) {
      auto c = std::make_shared<ServeCli>();
      sub.add_option("MODEL", c->paths,
                     std::string(vocablens::cli::kModelHelp) +
                         "; or one or more run directories (--out DIR of any "
                         "command) to browse without a model; or MODEL then run directories (browsed beside it; a run "
                         "of `lens --corpus` among them gives the corpus of top activations)")
          ->required();
      sub.add_option("--tokenizer", c->o.tokenizer, "Tokenizer file or directory (default: found beside the model)");
      // The options analyses let the server fix, declared with them (OptionDecl::server): their flags and help.
      for (const vocablens::OptionDecl* od : vocablens::served_options())
        sub.add_option(vocablens::spelling(*od, vocablens::Surface::Cli), c->o.served[od->name], od->server->help)
            ->type_name(od->server->value_name);
      sub.add_option("--tuned", c->o.tuned,
                     "Tuned-lens directory (vocablens tuned-lens train --out): the page's "
                     "lens toggle and the API's {\"tuned\": true}");
      sub.add_option("--sae", c->o.sae,
                     "SAE or transcoder (the layouts `vocablens features --sae` reads): a feature's "
                     "vocabulary projection and the feature lens of the prompt on the page");
      // --hook as `features --hook` spells it; --sae-hook, the older name, is the same option.
      sub.add_option("--hook,--sae-hook", c->o.sae_hook,
                     "Hook point the SAE reads (overrides the file's or the guessed one), as `features --hook`");
      sub.add_option("--corpus", c->o.corpus,
                     "Text file: a neuron's or a feature's top activations over it (its first "
                     "--corpus-tokens tokens, tokenised at start-up)");
      sub.add_option("--corpus-run", c->o.corpus_run,
                     "A run directory of `vocablens lens --corpus FILE --out DIR`: "
                     "use the corpus it read (as --corpus)");
      sub.add_option("--corpus-tokens", c->o.corpus_tokens, "Tokens of the corpus read for top activations (default 16384)");
      sub.add_option("--window", c->o.window, "Tokens per forward pass over the corpus (default 64)");
      sub.add_option("--port", c->o.port, "TCP port (default 8765; 0 = any free port, printed)");
      sub.add_option("--host", c->o.host,
                     "Address to bind (default 127.0.0.1). Any other address is reachable from other machines: "
                     "vocablens warns and requires a random access token, printed in the URL");
      sub.add_flag("--token", c->require_token,
                   "Require a random access token (printed in the URL) on the loopback too: other users of a shared "
                   "machine can reach 127.0.0.1");
      sub.add_option("--workers", c->o.workers, "Analyses running at once (default 2)");
      sub.add_option("--queue", c->o.queue, "Analyses waiting for a worker; more are answered 503 (default 8)");
      sub.add_option("--forward-cache", c->o.forward_cache,
                     "Forward passes kept, one per prompt, that the lens and the attribution of the same prompt replay "
                     "instead of running the model (default 4; 0 = none)");
      sub.add_option("--forward-cache-mb", c->o.forward_cache_mb,
                     "Memory of those passes in MB (default 512; a longer prompt's pass above it is not kept)");
      sub.add_option("--max-body", c->o.max_body,
                     "Largest request body in bytes, chunked or not (default 1048576, at most 1 GiB; 413 above)")
          ->check(CLI::Range(int64_t(1), int64_t(1) << 30));  // on the text typed: 2^64 is not clamped first
      sub.add_option("--max-connections", c->o.max_connections,
                     "Open connections in all (default 128); more are answered 503 and closed");
      sub.add_option("--max-client-connections", c->o.max_client_connections,
                     "Open connections from one address (default 64); more are answered 503 and closed");
      sub.add_option("--request-timeout", c->o.request_timeout,
                     "Seconds a request (its line, headers and body) may take to arrive from its first byte (default "
                     "10); a slower one is dropped");
      sub.add_option("--write-timeout", c->o.write_timeout,
                     "Seconds an answer may wait for its client to read any of it (default 10); then the connection "
                     "is dropped");
      sub.add_option("--max-answer-values", c->o.max_answer_values,
                     "Largest array of an analysis's answer, in values (top-k tokens, pair ids; default 100000, what an "
                     "answer carries inline): a request "
                     "whose answer would hold more is refused (413) before it runs");
      sub.add_option("--memory-budget", c->o.memory_budget_mb,
                     "MiB that the analyses running at once may need beyond the loaded model, by the estimate "
                     "`--dry-run` prints (default 0: what the machine has available once the model is loaded); a "
                     "request that alone needs more is refused (413), one that would not fit beside those running "
                     "waits its turn as 503");
      return [c]() -> int { return run_serve(*c); };
    }};

}  // namespace

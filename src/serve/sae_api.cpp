// The explorer's SAE and corpus, and a corpus's top activations (routes in explorer.cpp, list in server.hpp).
//
// With `serve MODEL --sae PATH`, the SAE is loaded once and checked against the model; the analyses that read one
// take it ({"sae": true}), the page's short routes among them (their declarations' http_aliases). With `--corpus FILE`
// (or `--corpus-run DIR`, the corpus a `lens --corpus` run read), a neuron's or a feature's top
// activations: the corpus is tokenised once at start-up and cut into windows; each request runs the model
// over the windows with one read-only hook at the unit's hook point (blocks.L.mlp.hook_post for a neuron,
// the SAE's hook for a feature) and keeps the k largest activations with their context. Requests run on the
// worker pool, are cached like analyses, and stop between windows when their client leaves.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <tuple>

#include "serve/explorer.hpp"
#include "util/regular_file.hpp"
#include "vocablens/error.hpp"
#include "vocablens/export.hpp"
#include "vocablens/hooks.hpp"
#include "vocablens/interrupt.hpp"
#include "vocablens/model.hpp"
#include "vocablens/sae.hpp"
#include "vocablens/tokenizer.hpp"

namespace vocablens::serve {
namespace {

namespace fs = std::filesystem;

// The body's keys must all be known: a misspelt option is a 400 naming it, as for analyses.
void check_keys(const json& b, const std::string& what, std::initializer_list<const char*> known) {
  for (auto it = b.begin(); it != b.end(); ++it) {
    if (std::none_of(known.begin(), known.end(), [&](const char* k) { return it.key() == k; })) {
      std::string list;
      for (const char* k : known) list += (list.empty() ? "" : ", ") + std::string(k);
      throw UsageError(what + ": unknown option '" + shorten(it.key()) + "' (known: " + list + ")");
    }
  }
}

// An integer option in [lo, hi]; a bound is checked before anything is allocated (a top_k of 1e9 is a 400).
int64_t int_option(const json& b, const char* name, int64_t def, int64_t lo, int64_t hi, const std::string& what) {
  if (!b.contains(name) || b[name].is_null()) return def;
  const json& v = b[name];
  double d = 0;
  if (v.is_number_integer()) {
    d = static_cast<double>(v.get<int64_t>());
  } else if (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>()) {
    d = v.get<double>();
  } else {
    throw UsageError(what + ": " + name + ": expected an integer, got " + shorten(v.dump()));
  }
  if (d < static_cast<double>(lo) || d > static_cast<double>(hi))
    throw UsageError(what + ": " + name + ": must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "] (got " +
                     shorten(v.dump()) + ")");
  return static_cast<int64_t>(d);
}

// The corpus file a `lens --corpus ... --out DIR` run read: settings.corpus of DIR's logit_lens_corpus
// result, as written (relative to where it ran) or relative to the run directory.
std::string corpus_of_run(const std::string& dir) {
  for (const Result& r : read_run_directory(dir)) {
    if (r.kind != "logit_lens_corpus") continue;
    const std::string c = r.settings.value("corpus", "");
    if (c.empty()) break;
    std::error_code ec;
    if (fs::is_regular_file(c, ec)) return c;
    const fs::path beside = fs::path(dir) / fs::path(c).filename();
    if (fs::is_regular_file(beside, ec)) return beside.string();
    throw UsageError("--corpus-run " + dir + ": its corpus '" + c + "' is not a readable file here (give it with --corpus)");
  }
  throw UsageError("--corpus-run " + dir +
                   ": no logit_lens_corpus result naming its corpus (a run of `vocablens lens "
                   "--corpus FILE --out DIR`; or give the text file with --corpus)");
}

}  // namespace

void Explorer::load_sae_and_corpus() {
  if (!o_.sae.empty()) {
    SaeLoadOptions lo;
    lo.hook_name = o_.sae_hook;
    sae_ = std::make_unique<Sae>(load_sae(o_.sae, lo));
    check_sae_fits(*sae_, *model_);
    if (sae_->hook_name.empty()) throw UsageError("--sae " + o_.sae + ": the SAE names no hook point; give one with --hook");
  }
  if (!o_.corpus.empty() && !o_.corpus_run.empty()) throw UsageError("give --corpus or --corpus-run, not both");
  corpus_path_ = !o_.corpus_run.empty() ? corpus_of_run(o_.corpus_run) : o_.corpus;
  if (corpus_path_.empty()) return;
  if (o_.corpus_tokens < 1 || o_.corpus_tokens > (int64_t(1) << 24))
    throw UsageError("--corpus-tokens must be in [1, 16777216] (got " + std::to_string(o_.corpus_tokens) + ")");
  const int64_t n_ctx = model_->config().n_ctx > 0 ? model_->config().n_ctx : o_.window;
  if (o_.window < 2 || o_.window > n_ctx)
    throw UsageError("--window must be in [2, " + std::to_string(n_ctx) + "] (got " + std::to_string(o_.window) + ")");
  // A regular file, as `lens --corpus` requires: a FIFO blocked start-up for ever, /dev/zero never ended.
  detail::check_regular_file(corpus_path_, detail::kMaxCorpusBytes, "corpora");
  std::ifstream f(corpus_path_, std::ios::binary);
  if (!f) throw FormatError(corpus_path_, "cannot read the corpus");
  // Enough bytes for the tokens asked for (a token is rarely over 32 bytes), cut after the last whole line.
  std::string text(static_cast<size_t>(std::min<int64_t>(o_.corpus_tokens * 32, int64_t(64) << 20)), '\0');
  f.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(f.gcount()));
  if (!f.eof()) {
    if (auto nl = text.rfind('\n'); nl != std::string::npos) text.resize(nl + 1);
  }
  std::vector<int64_t> ids = tok_->encode(text);
  if (static_cast<int64_t>(ids.size()) > o_.corpus_tokens) ids.resize(static_cast<size_t>(o_.corpus_tokens));
  if (ids.size() < 2) throw UsageError(corpus_path_ + ": the corpus has fewer than 2 tokens");
  for (size_t s = 0; s < ids.size(); s += static_cast<size_t>(o_.window))
    corpus_.emplace_back(ids.begin() + s, ids.begin() + std::min(ids.size(), s + static_cast<size_t>(o_.window)));
}

json Explorer::sae_info() const {
  if (!sae_) return nullptr;
  return {{"source", sae_->source},
          {"layout", sae_->layout},
          {"d_in", sae_->d_in},
          {"d_sae", sae_->d_sae},
          {"hook_name", sae_->hook_name},
          {"hook_name_out", sae_->hook_name_out},
          {"stored_dtype", sae_->stored_dtype}};
}

Answer Explorer::top_activations_answer(const httplib::Request& req) {
  std::string unit, hook;
  int64_t layer = -1, index = 0, k = 20, context = 8;
  try {
    if (!model_) return no_model();
    const std::string what = "top_activations";
    if (corpus_.empty())
      return error_answer(404, what + ": this server has no corpus (start it with --corpus FILE or --corpus-run DIR)");
    const json b = parse_body(req);
    check_keys(b, what, {"unit", "layer", "index", "k", "context"});
    if (b.contains("unit") && !b["unit"].is_string())
      throw UsageError(what + ": unit: expected \"neuron\" or \"feature\" (got " + shorten(b["unit"].dump()) + ")");
    unit = b.value("unit", std::string("neuron"));
    if (unit == "neuron") {
      if (!b.contains("layer")) throw UsageError(what + ": layer: give the neuron's layer");
      layer = int_option(b, "layer", 0, 0, model_->config().n_layers - 1, what);
      index = int_option(b, "index", 0, 0, model_->config().d_mlp - 1, what);
      hook = "blocks." + std::to_string(layer) + ".mlp.hook_post";
    } else if (unit == "feature") {
      if (!sae_) return error_answer(404, what + ": unit feature: this server has no SAE (start it with --sae PATH)");
      if (b.contains("layer")) throw UsageError(what + ": layer: a feature's layer is its SAE's hook; give index only");
      index = int_option(b, "index", 0, 0, sae_->d_sae - 1, what);
      hook = sae_->hook_name;
    } else {
      throw UsageError(what + ": unit: expected \"neuron\" or \"feature\" (got " + shorten(b["unit"].dump()) + ")");
    }
    if (!b.contains("index")) throw UsageError(what + ": index: give the " + unit + "'s index");
    k = int_option(b, "k", 20, 1, 200, what);
    context = int_option(b, "context", 8, 0, 64, what);
  } catch (...) { return answer_for_current_exception(); }
  const json key = {{"unit", unit}, {"layer", layer}, {"index", index}, {"k", k}, {"context", context}};
  return pooled(req, "top_activations\n" + key.dump(), [=](const std::atomic<bool>* cancel) {
    at::NoGradGuard no_grad;
    struct Hit {
      double value;
      int64_t window, position;
    };
    std::vector<Hit> hits;
    int64_t tokens = 0;
    for (size_t w = 0; w < corpus_.size(); ++w) {
      if (cancel && cancel->load()) throw Interrupted(0, "cancelled: the client went away");
      const auto& ids = corpus_[w];
      at::Tensor seen;
      HookList hooks;
      hooks.add(hook, [&](at::Tensor& x) { seen = x.detach().clone(); });
      run_with_hooks(*model_, at::tensor(ids, at::kLong), hooks);
      if (!seen.defined()) throw UsageError("hook " + hook + " was not reached in the forward pass");
      const int64_t T = static_cast<int64_t>(ids.size());
      at::Tensor x = seen.reshape({T, -1}).to(at::kFloat);
      at::Tensor col = unit == "feature" ? sae_->encode(x).select(1, index) : x.select(1, index);
      col = col.to(at::kDouble).contiguous();
      const double* v = col.data_ptr<double>();
      for (int64_t t = 0; t < T; ++t) hits.push_back({v[t], static_cast<int64_t>(w), t});
      tokens += T;
      // Keep the candidates bounded: the k best so far (largest first, then corpus order).
      auto better = [](const Hit& a, const Hit& b) {
        return a.value != b.value ? a.value > b.value : std::tie(a.window, a.position) < std::tie(b.window, b.position);
      };
      if (hits.size() > static_cast<size_t>(4 * k)) {
        std::partial_sort(hits.begin(), hits.begin() + k, hits.end(), better);
        hits.resize(static_cast<size_t>(k));
      }
      if (w + 1 == corpus_.size()) {
        std::sort(hits.begin(), hits.end(), better);
        if (hits.size() > static_cast<size_t>(k)) hits.resize(static_cast<size_t>(k));
      }
    }
    json top = json::array();
    for (const Hit& h : hits) {
      const auto& ids = corpus_[static_cast<size_t>(h.window)];
      const int64_t from = std::max<int64_t>(0, h.position - context);
      const int64_t to = std::min<int64_t>(static_cast<int64_t>(ids.size()), h.position + 1 + std::min<int64_t>(context, 4));
      json ctx = json::array();
      for (int64_t t = from; t < to; ++t) ctx.push_back(tok_->display(ids[static_cast<size_t>(t)]));
      top.push_back({{"activation", h.value},
                     {"window", h.window},
                     {"position", h.position},
                     {"token_id", ids[static_cast<size_t>(h.position)]},
                     {"token", tok_->display(ids[static_cast<size_t>(h.position)])},
                     {"context", ctx},
                     {"focus", h.position - from}});
    }
    json out = {{"kind", "top_activations"},
                {"unit", unit},
                {"layer", layer < 0 ? json(nullptr) : json(layer)},
                {"index", index},
                {"hook", hook},
                {"corpus", corpus_path_},
                {"windows", corpus_.size()},
                {"window", corpus_[0].size()},
                {"tokens", tokens},
                {"k", k},
                {"top", top}};
    if (unit == "feature") out["sae"] = sae_->source;
    return Answer{200, dump(out) + "\n"};
  });
}

}  // namespace vocablens::serve

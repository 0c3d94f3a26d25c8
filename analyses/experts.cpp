// Experts in vocabulary space (vocablens/experts.hpp): load, routed tokens and what each expert writes through W_U,
// from the router's cached points; and the hooks that ablate an expert.
#include "vocablens/experts.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <stdexcept>

#include "corpus_windows.hpp"
#include "vocablens/dist.hpp"
#include "token_label.hpp"
#include "util/regular_file.hpp"
#include "vocablens/cache.hpp"
#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/text_inputs.hpp"
#include "vocablens/tokenizer.hpp"
#include "vocablens/unembed.hpp"

namespace vocablens {

ExpertAblationMode parse_expert_ablation_mode(const std::string& s) {
  if (s == "zero") return ExpertAblationMode::Zero;
  if (s == "reroute") return ExpertAblationMode::Reroute;
  throw UsageError("expert ablation mode '" + s + "': expected zero or reroute");
}

const char* to_string(ExpertAblationMode m) { return m == ExpertAblationMode::Zero ? "zero" : "reroute"; }

void require_experts(const ModelConfig& cfg, const std::string& model_name, const std::string& what) {
  if (cfg.n_experts <= 0)
    throw UsageError(model_name + ": " + what + " needs a mixture of experts, and this model has none (its MLP is dense)");
}

namespace {

// "L.E" of `spec` (shown as `shown`, `what` naming the option in the message) checked against the model.
ExpertAblation parse_layer_expert(const std::string& le, const std::string& shown, const char* what, const char* example,
                                  const ModelConfig& cfg) {
  const size_t dot = le.find('.');
  ExpertAblation a;
  try {
    if (dot == std::string::npos || dot == 0 || dot + 1 == le.size()) throw std::invalid_argument(le);
    size_t n1 = 0, n2 = 0;
    a.layer = std::stoll(le.substr(0, dot), &n1);
    a.expert = std::stoll(le.substr(dot + 1), &n2);
    if (n1 != dot || n2 != le.size() - dot - 1) throw std::invalid_argument(le);
  } catch (const std::logic_error&) { throw UsageError(fmt::format("{} '{}': expected {}", what, shown, example)); }
  if (a.layer < 0) a.layer += cfg.n_layers;
  if (a.layer < 0 || a.layer >= cfg.n_layers)
    throw UsageError(fmt::format("{} '{}': layer out of range (the model has {} layers)", what, shown, cfg.n_layers));
  if (a.expert < 0 || a.expert >= cfg.n_experts)
    throw UsageError(fmt::format("{} '{}': expert out of range (its layers have {} experts, 0..{})", what, shown, cfg.n_experts,
                                 cfg.n_experts - 1));
  return a;
}

std::string shown_spec(const std::string& s) { return s.size() > 40 ? s.substr(0, 37) + "..." : s; }

}  // namespace

std::vector<ExpertAblation> parse_expert_ablations(const std::vector<std::string>& specs, const ModelConfig& cfg,
                                                   const std::string& model_name) {
  std::vector<ExpertAblation> out;
  if (specs.empty()) return out;
  require_experts(cfg, model_name, "--ablate-expert");
  for (const auto& s : specs) out.push_back(parse_layer_expert(s, shown_spec(s), "ablate expert", "LAYER.EXPERT, e.g. 0.5", cfg));
  return out;
}

std::vector<ExpertScale> parse_expert_scales(const std::vector<std::string>& specs, const ModelConfig& cfg,
                                             const std::string& model_name) {
  std::vector<ExpertScale> out;
  if (specs.empty()) return out;
  require_experts(cfg, model_name, "--scale-expert");
  const char* example = "LAYER.EXPERT=FACTOR, e.g. 0.5=2";
  for (const auto& s : specs) {
    const std::string shown = shown_spec(s);
    const size_t eq = s.find('=');
    if (eq == std::string::npos) throw UsageError(fmt::format("scale expert '{}': expected {}", shown, example));
    const ExpertAblation a = parse_layer_expert(s.substr(0, eq), shown, "scale expert", example, cfg);
    ExpertScale x{a.layer, a.expert, 0.0};
    const std::string f = s.substr(eq + 1);
    try {
      size_t n = 0;
      x.factor = std::stod(f, &n);
      if (n != f.size() || f.empty()) throw std::invalid_argument(f);
    } catch (const std::out_of_range&) {
      throw UsageError(fmt::format("scale expert '{}': the factor is out of a double's range", shown));
    } catch (const std::logic_error&) {
      throw UsageError(fmt::format("scale expert '{}': the factor is not a number ({})", shown, example));
    }
    if (!std::isfinite(x.factor)) throw UsageError(fmt::format("scale expert '{}': the factor must be finite", shown));
    // Two factors for one expert would be ambiguous (multiplied? the last?): refused rather than guessed.
    for (const auto& y : out)
      if (y.layer == x.layer && y.expert == x.expert)
        throw UsageError(fmt::format("scale expert '{}': expert {} of layer {} is scaled twice", shown, x.expert, x.layer));
    out.push_back(x);
  }
  return out;
}

void add_expert_scales(HookList& hooks, const std::vector<ExpertScale>& scales) {
  std::map<int64_t, std::vector<std::pair<int64_t, double>>> by_layer;
  for (const auto& s : scales) by_layer[s.layer].push_back({s.expert, s.factor});
  for (const auto& [layer, ef] : by_layer) {
    const std::string b = "blocks." + std::to_string(layer) + ".mlp.";
    // As the Zero ablation: the indices this layer runs with, read before its weights (moe_mlp's order). The
    // weight is scaled, not expert_out: w·(f·o) and (f·w)·o are one product, and the cached expert_out stays the
    // expert's own unweighted output, as the analyses and docs/experts.md define it.
    auto idx = std::make_shared<at::Tensor>();
    hooks.add(b + "hook_expert_indices", [idx](at::Tensor& t) { *idx = t.clone(); });
    hooks.add(b + "hook_expert_weights", [idx, ef](at::Tensor& w) {
      for (const auto& [e, f] : ef) {
        const at::Tensor m = idx->eq(e);
        w.copy_(at::where(m, w * f, w));
      }
    });
  }
}

void add_expert_ablations(HookList& hooks, const ModelConfig& cfg, const std::vector<ExpertAblation>& abl,
                          ExpertAblationMode mode) {
  std::map<int64_t, std::vector<int64_t>> by_layer;
  for (const auto& a : abl) {
    auto& v = by_layer[a.layer];
    if (std::find(v.begin(), v.end(), a.expert) == v.end()) v.push_back(a.expert);
  }
  for (const auto& [layer, experts] : by_layer) {
    const std::string b = "blocks." + std::to_string(layer) + ".mlp.";
    if (mode == ExpertAblationMode::Reroute) {
      if (cfg.n_experts - static_cast<int64_t>(experts.size()) < cfg.n_experts_used)
        throw UsageError(
            fmt::format("ablate expert: rerouting {} of layer {}'s {} experts leaves fewer than the {} each "
                        "token chooses",
                        experts.size(), layer, cfg.n_experts, cfg.n_experts_used));
      hooks.add(b + "hook_router_logits", [experts](at::Tensor& t) {
        for (int64_t e : experts) t.select(-1, e).fill_(-std::numeric_limits<float>::infinity());
      });
    } else {
      // The weights' hook runs after the indices' (moe_mlp's order): the indices it sees are the ones that run.
      auto idx = std::make_shared<at::Tensor>();
      hooks.add(b + "hook_expert_indices", [idx](at::Tensor& t) { *idx = t.clone(); });
      hooks.add(b + "hook_expert_weights", [idx, experts](at::Tensor& w) {
        for (int64_t e : experts) w.masked_fill_(idx->eq(e), 0.0);
      });
    }
  }
}

namespace {

struct ExpertAccumulator {
  int64_t E = 0, d = 0;
  std::vector<int64_t> routed;
  std::vector<double> weight_sum;
  at::Tensor out_sum;  // [E, d] float64
  std::vector<std::map<int64_t, int64_t>> tokens;
};

std::vector<int64_t> expert_layers_of(const Model& m, const ExpertsOptions& o) {
  const auto& c = m.config();
  std::vector<int64_t> layers;
  for (int64_t l : o.layers) {
    const int64_t ll = l < 0 ? l + c.n_layers : l;
    if (ll < 0 || ll >= c.n_layers)
      throw UsageError(fmt::format("experts: layer {} is out of range (the model has {} layers)", l, c.n_layers));
    if (std::find(layers.begin(), layers.end(), ll) == layers.end()) layers.push_back(ll);
  }
  if (layers.empty())
    for (int64_t l = 0; l < c.n_layers; ++l) layers.push_back(l);
  std::sort(layers.begin(), layers.end());
  return layers;
}

std::vector<std::pair<int64_t, double>> expert_topk_pairs(const std::vector<TopkEntry>& v, double sign) {
  std::vector<std::pair<int64_t, double>> out;
  for (const auto& e : v) out.push_back({e.j, sign * e.value});
  return out;
}

// Top and bottom tokens of each row of X [N, d] through W_U.
void expert_writes(const at::Tensor& X, const at::Tensor& W_U, int64_t k,
                   std::vector<std::vector<std::pair<int64_t, double>>>& top,
                   std::vector<std::vector<std::pair<int64_t, double>>>& bottom) {
  const auto t = project_topk(X, W_U, k), b = project_topk(X.neg(), W_U, k);
  for (const auto& r : t) top.push_back(expert_topk_pairs(r, 1.0));
  for (const auto& r : b) bottom.push_back(expert_topk_pairs(r, -1.0));
}

class ExpertsRunner {
 public:
  ExpertsRunner(const Model& m, const ExpertsOptions& o, ExpertsReport& r) : m_(m), o_(o), r_(r) {
    const auto& c = m.config();
    require_experts(c, m.source(), "experts");
    if (o.top_k < 1 || o.top_routed < 1) throw UsageError("experts: top_k and top_routed must be at least 1");
    layers_ = expert_layers_of(m, o);
    add_expert_ablations(hooks_, c, o.ablate, o.mode);
    add_expert_scales(hooks_, o.scale);
    spec_.router = true;
    spec_.layers = layers_;
    acc_.resize(layers_.size());
    for (auto& a : acc_) {
      a.E = c.n_experts;
      a.d = c.d_model;
      a.routed.assign(static_cast<size_t>(a.E), 0);
      a.weight_sum.assign(static_cast<size_t>(a.E), 0.0);
      a.out_sum = at::zeros({a.E, a.d}, at::kDouble);
      a.tokens.resize(static_cast<size_t>(a.E));
    }
    r_.model = m.source();
    r_.n_experts = c.n_experts;
    r_.k = c.n_experts_used;
    r_.options = o;
  }

  // One window: positions [skip, T) are counted. Returns the logits when asked.
  at::Tensor add(const std::vector<int64_t>& ids, int64_t skip, bool per_token, bool logits) {
    const at::Tensor x = at::tensor(ids, at::kLong);
    ForwardOutput f = run_with_hooks(m_, x, hooks_, spec_, logits);
    const int64_t T = static_cast<int64_t>(ids.size()), k = m_.config().n_experts_used;
    at::Tensor W_U;
    for (size_t li = 0; li < layers_.size(); ++li) {
      const int64_t l = layers_[li];
      const at::Tensor idx = f.cache.get("expert_indices", l)[0].contiguous();                // [T, k]
      const at::Tensor w = f.cache.get("expert_weights", l)[0].to(at::kDouble).contiguous();  // [T, k]
      const at::Tensor out = f.cache.get("expert_out", l)[0];                                 // [T, k, d]
      auto& a = acc_[li];
      const int64_t* ip = idx.data_ptr<int64_t>();
      const double* wp = w.data_ptr<double>();
      std::vector<int64_t> rows;  // flat (t, slot) of the counted positions
      for (int64_t t = skip; t < T; ++t)
        for (int64_t s = 0; s < k; ++s) {
          const int64_t e = ip[t * k + s];
          a.routed[static_cast<size_t>(e)] += 1;
          a.weight_sum[static_cast<size_t>(e)] += wp[t * k + s];
          a.tokens[static_cast<size_t>(e)][ids[static_cast<size_t>(t)]] += 1;
          rows.push_back(t * k + s);
        }
      if (rows.empty()) continue;
      const at::Tensor flat_out = out.reshape({T * k, a.d}).index_select(0, at::tensor(rows, at::kLong)).to(at::kDouble);
      const at::Tensor flat_e = idx.reshape({T * k}).index_select(0, at::tensor(rows, at::kLong));
      a.out_sum.index_add_(0, flat_e, flat_out);
      if (per_token) {
        if (!W_U.defined()) W_U = m_.W_U();
        std::vector<std::vector<std::pair<int64_t, double>>> top, bottom;
        expert_writes(out.reshape({T * k, a.d}), W_U, o_.top_k, top, bottom);
        for (int64_t t = skip; t < T; ++t)
          for (int64_t s = 0; s < k; ++s) {
            const size_t q = static_cast<size_t>(t * k + s);
            r_.per_token.push_back({l, t, s, ip[q], wp[q], top[q], bottom[q]});
          }
      }
    }
    return f.logits;
  }

  // The positions [skip, T) of a window every rank reads (routed or not by this rank): the totals and progress.
  void count(const std::vector<int64_t>& ids, int64_t skip) {
    const int64_t T = static_cast<int64_t>(ids.size());
    for (int64_t t = skip; t < T; ++t) r_.token_totals[ids[static_cast<size_t>(t)]] += 1;
    r_.positions += T - skip;
    if (o_.progress && r_.corpus) o_.progress(r_.positions, o_.max_tokens);
  }

  // Under mpirun each rank routed its share of the windows: the sums over ranks. Counts (loads, routed tokens)
  // are integers and so exact; the weight and output sums are float64 sums whose order depends on the ranks
  // (equal to the one-process sums within float64 rounding).
  void reduce_over_ranks() {
    if (dist::size() <= 1) return;
    for (auto& a : acc_) {
      std::vector<double> counts(a.routed.begin(), a.routed.end());
      dist::allreduce_sum(counts.data(), static_cast<int64_t>(counts.size()));
      for (size_t e = 0; e < counts.size(); ++e) a.routed[e] = static_cast<int64_t>(counts[e]);
      dist::allreduce_sum(a.weight_sum.data(), static_cast<int64_t>(a.weight_sum.size()));
      a.out_sum = a.out_sum.contiguous();
      dist::allreduce_sum(a.out_sum.data_ptr<double>(), a.out_sum.numel());
      std::vector<int64_t> flat;  // (expert, token, count) triples
      for (int64_t e = 0; e < a.E; ++e)
        for (const auto& [tok, n] : a.tokens[static_cast<size_t>(e)]) flat.insert(flat.end(), {e, tok, n});
      const std::vector<int64_t> all = dist::allgather(flat);
      for (auto& m : a.tokens) m.clear();
      for (size_t i = 0; i + 2 < all.size(); i += 3) a.tokens[static_cast<size_t>(all[i])][all[i + 1]] += all[i + 2];
    }
  }

  void finish() {
    const at::Tensor W_U = m_.W_U();
    for (size_t li = 0; li < layers_.size(); ++li) {
      auto& a = acc_[li];
      ExpertsLayer L;
      L.layer = layers_[li];
      const at::Tensor counts = at::tensor(a.routed, at::kDouble).clamp_min(1).unsqueeze(1);
      const at::Tensor dir = a.out_sum / counts;  // [E, d] mean unweighted output (0 for an unrouted expert)
      std::vector<std::vector<std::pair<int64_t, double>>> top, bottom;
      expert_writes(dir.to(at::kFloat), W_U, o_.top_k, top, bottom);
      const at::Tensor norms = dir.norm(2, {1}).contiguous();
      for (int64_t e = 0; e < a.E; ++e) {
        ExpertStats s;
        s.expert = e;
        s.routed = a.routed[static_cast<size_t>(e)];
        s.load = r_.positions > 0 ? static_cast<double>(s.routed) / static_cast<double>(r_.positions) : 0.0;
        s.mean_weight = s.routed > 0 ? a.weight_sum[static_cast<size_t>(e)] / static_cast<double>(s.routed)
                                     : std::numeric_limits<double>::quiet_NaN();
        s.direction_norm = norms[e].item<double>();
        if (s.routed > 0) {  // an expert no token reached writes nothing that was observed
          s.writes_top = top[static_cast<size_t>(e)];
          s.writes_bottom = bottom[static_cast<size_t>(e)];
        }
        std::vector<std::pair<int64_t, int64_t>> tk(a.tokens[static_cast<size_t>(e)].begin(),
                                                    a.tokens[static_cast<size_t>(e)].end());
        std::stable_sort(tk.begin(), tk.end(), [](const auto& x, const auto& y) { return x.second > y.second; });
        if (static_cast<int64_t>(tk.size()) > o_.top_routed) tk.resize(static_cast<size_t>(o_.top_routed));
        s.tokens = std::move(tk);
        L.experts.push_back(std::move(s));
      }
      r_.layers.push_back(std::move(L));
    }
  }

 private:
  const Model& m_;
  const ExpertsOptions& o_;
  ExpertsReport& r_;
  std::vector<int64_t> layers_;
  HookList hooks_;
  CacheSpec spec_;
  std::vector<ExpertAccumulator> acc_;
};

std::vector<std::pair<int64_t, double>> expert_last_top(const at::Tensor& logits, int64_t k) {
  const at::Tensor last = logits.reshape({-1, logits.size(-1)})[logits.numel() / logits.size(-1) - 1];
  const auto tk = last.topk(std::min<int64_t>(k, last.size(0)));
  std::vector<std::pair<int64_t, double>> out;
  for (int64_t i = 0; i < std::get<0>(tk).size(0); ++i)
    out.push_back({std::get<1>(tk)[i].item<int64_t>(), std::get<0>(tk)[i].item<double>()});
  return out;
}

}  // namespace

ExpertsReport analyze_experts(const Model& m, const std::vector<int64_t>& ids, const ExpertsOptions& o) {
  if (ids.empty()) throw UsageError("experts: the prompt has no tokens");
  ExpertsReport r;
  r.ids = ids;
  ExpertsRunner run(m, o, r);
  const bool ablated = !o.ablate.empty() || !o.scale.empty();
  run.count(ids, 0);
  const at::Tensor logits = run.add(ids, 0, o.per_token, ablated);
  if (ablated) {
    const at::Tensor base = m.forward(at::tensor(ids, at::kLong), CacheSpec{}).logits;
    r.next_base = expert_last_top(base, o.top_k);
    r.next_ablated = expert_last_top(logits, o.top_k);
    r.max_logit_change = (logits - base).abs().max().item<double>();
  }
  run.finish();
  return r;
}

ExpertsReport analyze_experts_corpus(const Model& m, const Tokenizer& tok, const std::string& path, const ExpertsOptions& o) {
  const int64_t n_ctx = m.config().n_ctx;
  const int64_t W = o.window > 0 ? o.window : n_ctx;
  if (W < 2 || W > n_ctx)
    throw UsageError("experts: --window must be in [2, " + std::to_string(n_ctx) + "] (got " + std::to_string(W) + ")");
  ExpertsReport r;
  r.corpus = true;
  r.source = path;
  ExpertsRunner run(m, o, r);  // checks the model before the file is read
  const uint64_t total = detail::check_regular_file(path, detail::kMaxCorpusBytes, "corpora");
  // Under mpirun window w is routed by rank w mod N (every rank reads the whole file); the sums are then reduced.
  const int shard_rank = o.distributed ? dist::rank() : 0, shard_count = o.distributed ? dist::size() : 1;
  int64_t window = 0;
  const CorpusWindowCut cut{tok, path, static_cast<size_t>(1) << 20, W, o.max_tokens, m.config().vocab_size};
  for_each_corpus_window(cut, total, {}, [&](const std::vector<int64_t>& ids) {
    // Windows overlap by one token (the last of one is the first of the next): counted once.
    const int64_t skip = window == 0 ? 0 : 1;
    if (window % shard_count == shard_rank) run.add(ids, skip, false, false);
    run.count(ids, skip);
    ++window;
  });
  if (r.positions == 0) throw UsageError(path + ": the corpus has no tokens");
  if (shard_count > 1) run.reduce_over_ranks();
  r.ranks = shard_count;
  run.finish();
  return r;
}

Result ExpertsReport::to_result(const Tokenizer* tok) const {
  Result res;
  res.kind = "experts";
  res.settings = {{"top_k", options.top_k},
                  {"top_routed", options.top_routed},
                  {"layers", options.layers},
                  {"ablate_mode", to_string(options.mode)},
                  {"conventions",
                   "load = tokens routed to the expert / positions (a layer's loads sum to k); mean_weight = its mean "
                   "router weight where chosen; direction = its mean unweighted output where chosen; writes = "
                   "direction @ W_U (no final norm); see docs/experts.md"}};
  nlohmann::json abl = nlohmann::json::array();
  for (const auto& a : options.ablate) abl.push_back(std::to_string(a.layer) + "." + std::to_string(a.expert));
  res.settings["ablate"] = abl;
  nlohmann::json sc = nlohmann::json::array();
  for (const auto& x : options.scale) sc.push_back(fmt::format("{}.{}={}", x.layer, x.expert, x.factor));
  res.settings["scale_expert"] = sc;
  if (corpus) {
    res.settings["corpus"] = source;
    res.settings["window"] = options.window;
    if (ranks > 1) res.settings["ranks"] = ranks;
    res.settings["max_tokens"] = options.max_tokens;
  }
  auto& S = res.summary;
  S["model"] = model;
  S["positions"] = positions;
  S["n_experts"] = n_experts;
  S["k"] = k;
  if (!corpus) {
    nlohmann::json toks = nlohmann::json::array();
    for (int64_t id : ids) toks.push_back({{"id", id}, {"text", token_label(tok, id)}});
    S["tokens"] = toks;
  }
  auto labels = [&](const std::vector<std::pair<int64_t, double>>& v, size_t n) {
    nlohmann::json j = nlohmann::json::array();
    for (size_t i = 0; i < v.size() && i < n; ++i) j.push_back(token_label(tok, v[i].first));
    return j;
  };
  Table load{"load", {"layer", "expert", "routed", "load", "mean_weight", "direction_norm"}, {}};
  Table routed{"routed_tokens", {"layer", "expert", "rank", "token_id", "token", "count", "token_total"}, {}};
  Table wr{"writes", {"layer", "expert", "direction", "rank", "token_id", "token", "score"}, {}};
  const int64_t nL = static_cast<int64_t>(layers.size());
  std::vector<double> load_a, weight_a;
  std::vector<int64_t> layer_a;
  nlohmann::json jl = nlohmann::json::array();
  for (const auto& L : layers) {
    layer_a.push_back(L.layer);
    nlohmann::json je = nlohmann::json::array();
    for (const auto& e : L.experts) {
      load_a.push_back(e.load);
      weight_a.push_back(e.mean_weight);
      const nlohmann::json mw = std::isnan(e.mean_weight) ? nlohmann::json() : nlohmann::json(e.mean_weight);
      load.rows.push_back({L.layer, e.expert, e.routed, e.load, mw, e.direction_norm});
      for (size_t i = 0; i < e.tokens.size(); ++i) {
        const int64_t id = e.tokens[i].first;
        routed.rows.push_back({L.layer, e.expert, static_cast<int64_t>(i + 1), id, token_label(tok, id), e.tokens[i].second,
                               token_totals.count(id) ? token_totals.at(id) : 0});
      }
      for (int dir = 0; dir < 2; ++dir) {
        const auto& v = dir == 0 ? e.writes_top : e.writes_bottom;
        for (size_t i = 0; i < v.size(); ++i)
          wr.rows.push_back({L.layer, e.expert, dir == 0 ? "top" : "bottom", static_cast<int64_t>(i + 1), v[i].first,
                             token_label(tok, v[i].first), v[i].second});
      }
      nlohmann::json rt = nlohmann::json::array();
      for (size_t i = 0; i < e.tokens.size() && i < 5; ++i) rt.push_back(token_label(tok, e.tokens[i].first));
      je.push_back({{"expert", e.expert},
                    {"routed", e.routed},
                    {"load", e.load},
                    {"mean_weight", mw},
                    {"routed_tokens", rt},
                    {"writes_top", labels(e.writes_top, 5)},
                    {"writes_bottom", labels(e.writes_bottom, 5)}});
    }
    jl.push_back({{"layer", L.layer}, {"experts", je}});
  }
  S["layers"] = jl;
  res.arrays["layers"] = NdArray::i64({nL}, layer_a.data());
  res.arrays["load"] = NdArray::f64({nL, n_experts}, load_a.data());
  res.arrays["mean_weight"] = NdArray::f64({nL, n_experts}, weight_a.data());
  res.tables.push_back(std::move(load));
  res.tables.push_back(std::move(routed));
  res.tables.push_back(std::move(wr));
  if (!per_token.empty()) {
    Table pt{"per_token",
             {"layer", "position", "token", "slot", "expert", "weight", "direction", "rank", "token_id", "written", "score"},
             {}};
    for (const auto& p : per_token)
      for (int dir = 0; dir < 2; ++dir) {
        const auto& v = dir == 0 ? p.top : p.bottom;
        for (size_t i = 0; i < v.size(); ++i)
          pt.rows.push_back({p.layer, p.position, token_label(tok, ids[static_cast<size_t>(p.position)]), p.slot, p.expert,
                             p.weight, dir == 0 ? "top" : "bottom", static_cast<int64_t>(i + 1), v[i].first,
                             token_label(tok, v[i].first), v[i].second});
      }
    res.tables.push_back(std::move(pt));
  }
  if (!next_base.empty()) {
    S["next_token"] = {
        {"unablated", labels(next_base, 10)}, {"ablated", labels(next_ablated, 10)}, {"max_logit_change", max_logit_change}};
    Table nt{"next_token", {"run", "rank", "token_id", "token", "logit"}, {}};
    for (int run = 0; run < 2; ++run) {
      const auto& v = run == 0 ? next_base : next_ablated;
      for (size_t i = 0; i < v.size(); ++i)
        nt.rows.push_back({run == 0 ? "unablated" : "ablated", static_cast<int64_t>(i + 1), v[i].first,
                           token_label(tok, v[i].first), v[i].second});
    }
    res.tables.push_back(std::move(nt));
  }
  return res;
}

}  // namespace vocablens

// Model: the forward pass without grad, greedy decoding, and weights by role.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "model/forward_work.hpp"
#include "util/parallel.hpp"
#include "vocablens/error.hpp"
#include "vocablens/kv_cache.hpp"
#include "vocablens/model.hpp"
#include "vocablens/weight.hpp"

namespace vocablens {

Model::Model(ModelConfig cfg, ModelWeights weights, std::string source)
    : cfg_(std::move(cfg)), w_(std::move(weights)), source_(std::move(source)) {}

const LayerWeights& Model::layer_checked(int64_t layer) const {
  if (layer < 0 || layer >= cfg_.n_layers)
    throw UsageError("layer " + std::to_string(layer) + " is out of range (model has " + std::to_string(cfg_.n_layers) +
                     " layers: 0.." + std::to_string(cfg_.n_layers - 1) + ")");
  return w_.layers[static_cast<size_t>(layer)];
}

ForwardOutput Model::forward(const at::Tensor& ids, const CacheSpec& spec, bool compute_logits) const {
  at::NoGradGuard no_grad;
  return run_forward(cfg_, w_, ids, spec, compute_logits);
}

std::vector<int64_t> Model::generate_greedy(std::vector<int64_t> tokens, int64_t steps, int64_t stop_token) const {
  if (tokens.empty()) throw UsageError("generation needs at least one prompt token (e.g. BOS)");
  if (static_cast<int64_t>(tokens.size()) > cfg_.n_ctx)
    throw UsageError("the prompt has " + std::to_string(tokens.size()) + " tokens, longer than the model's context of " +
                     std::to_string(cfg_.n_ctx));
  at::NoGradGuard no_grad;
  // The prompt in one pass, then one position per step, its keys and values kept (vocablens/kv_cache.hpp).
  KVCache kv;
  kv.reserve(std::min<int64_t>(cfg_.n_ctx, static_cast<int64_t>(tokens.size()) + steps));
  CacheSpec fin;
  fin.final_norm = true;  // only the last position's logits are needed: the others are not unembedded
  // As llama2.c's run.c: positions 0 .. n_ctx-1 are fed and the token predicted at the last one is kept, so
  // a full context ends with n_ctx + 1 tokens (this stopped one token early).
  for (int64_t s = 0; s < steps && static_cast<int64_t>(tokens.size()) <= cfg_.n_ctx; ++s) {
    const auto fed = kv.length() == 0 ? tokens : std::vector<int64_t>{tokens.back()};
    auto out = forward_cached(*this, at::tensor(fed, at::kLong).unsqueeze(0), kv, fin, false);
    auto last = out.cache.get("final_norm").select(1, -1);
    // The step's unembedding and argmax: one row, on this thread alone when small (util/parallel.hpp).
    const detail::SerialBelow serial(forward_work(cfg_, 0, true));
    int64_t next = unembed(last).argmax(-1).item<int64_t>();
    tokens.push_back(next);
    if (next == stop_token) break;
  }
  return tokens;
}

at::Tensor Model::final_norm(const at::Tensor& x) const {
  return cfg_.final_norm ? apply_norm(x, cfg_.norm, cfg_.norm_eps, w_.lnf_w, w_.lnf_b) : x;
}

at::Tensor Model::unembed(const at::Tensor& x) const {
  auto x2 = x.reshape({-1, x.size(-1)});
  auto y = weight_matmul(x2.scalar_type() == at::kFloat ? x2 : x2.to(at::kFloat), w_.W_U, w_.b_U);
  auto sizes = x.sizes().vec();
  sizes.back() = w_.W_U.size(1);
  return soft_cap(y.view(sizes), cfg_.final_softcap);
}

// [d_model, n*d_head] -> [n, d_model, d_head]
static at::Tensor split_heads_in(const at::Tensor& w_stored, int64_t n, int64_t dh) {
  at::Tensor w = materialize_weight(w_stored);
  return w.view({w.size(0), n, dh}).permute({1, 0, 2});
}

at::Tensor Model::W_Q(int64_t l) const { return split_heads_in(layer_checked(l).w_q, cfg_.n_heads, cfg_.d_head); }
at::Tensor Model::W_K(int64_t l) const {
  auto k = split_heads_in(layer_checked(l).w_k, cfg_.n_kv_heads, cfg_.d_head);
  return cfg_.n_kv_heads == cfg_.n_heads ? k : k.repeat_interleave(cfg_.n_heads / cfg_.n_kv_heads, 0);
}
at::Tensor Model::W_V(int64_t l) const {
  auto v = split_heads_in(layer_checked(l).w_v, cfg_.n_kv_heads, cfg_.d_head);
  return cfg_.n_kv_heads == cfg_.n_heads ? v : v.repeat_interleave(cfg_.n_heads / cfg_.n_kv_heads, 0);
}
at::Tensor Model::W_O(int64_t l) const {
  const at::Tensor w = materialize_weight(layer_checked(l).w_o);
  return w.view({cfg_.n_heads, cfg_.d_head, w.size(1)});
}
at::Tensor Model::b_Q(int64_t l) const {
  const auto& b = layer_checked(l).b_q;
  return b.defined() ? b.view({cfg_.n_heads, cfg_.d_head}) : b;
}
at::Tensor Model::b_K(int64_t l) const {
  const auto& b = layer_checked(l).b_k;
  if (!b.defined()) return b;
  auto v = b.view({cfg_.n_kv_heads, cfg_.d_head});
  return cfg_.n_kv_heads == cfg_.n_heads ? v : v.repeat_interleave(cfg_.n_heads / cfg_.n_kv_heads, 0);
}
at::Tensor Model::b_V(int64_t l) const {
  const auto& b = layer_checked(l).b_v;
  if (!b.defined()) return b;
  auto v = b.view({cfg_.n_kv_heads, cfg_.d_head});
  return cfg_.n_kv_heads == cfg_.n_heads ? v : v.repeat_interleave(cfg_.n_heads / cfg_.n_kv_heads, 0);
}

int64_t Model::parameter_count() const {
  int64_t n = 0;
  auto add = [&](const at::Tensor& t) {
    if (t.defined()) n += t.numel();
  };
  add(w_.W_E);
  add(w_.W_pos);
  add(w_.emb_norm_w);
  add(w_.emb_norm_b);
  add(w_.lnf_w);
  add(w_.lnf_b);
  if (!cfg_.tied_embeddings) add(w_.W_U);
  add(w_.b_U);
  for (const auto& L : w_.layers)
    for (const at::Tensor* t : layer_tensors(L)) add(*t);
  return n;
}

std::vector<const at::Tensor*> layer_tensors(const LayerWeights& L) {
  std::vector<const at::Tensor*> v = {&L.ln1_w,
                                      &L.ln1_b,
                                      &L.w_q,
                                      &L.b_q,
                                      &L.w_k,
                                      &L.b_k,
                                      &L.w_v,
                                      &L.b_v,
                                      &L.w_o,
                                      &L.b_o,
                                      &L.ln2_w,
                                      &L.ln2_b,
                                      &L.w_in,
                                      &L.b_in,
                                      &L.w_gate,
                                      &L.b_gate,
                                      &L.w_out,
                                      &L.b_out,
                                      &L.q_norm_w,
                                      &L.k_norm_w,
                                      &L.post_attn_norm_w,
                                      &L.post_mlp_norm_w,
                                      &L.w_router,
                                      &L.w_shared_gate,
                                      &L.b_router,
                                      &L.sinks};
  for (const auto* experts : {&L.exp_gate, &L.exp_up, &L.exp_down, &L.exp_gate_b, &L.exp_up_b, &L.exp_down_b})
    for (const at::Tensor& t : *experts) v.push_back(&t);
  return v;
}

namespace {
int g_auto_threads = 0;  // the core count when init_runtime() chose the thread count itself, else 0
}  // namespace

void init_runtime() {
  static bool done = false;
  if (done) return;
  done = true;
  int n = static_cast<int>(std::thread::hardware_concurrency());
  if (n < 1) n = 1;
  g_auto_threads = n;
  if (const char* env = std::getenv("VOCABLENS_THREADS"); env && *env) {
    // A whole number in [1, 4096]; anything else (-4, "four", 8x) is said on stderr rather than ignored
    // quietly, since the run then uses a thread count nobody asked for.
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(env, &end, 10);
    if (errno == 0 && end != env && *end == '\0' && v >= 1 && v <= 4096) {
      n = static_cast<int>(v);
      g_auto_threads = 0;
    } else {
      std::fprintf(stderr,
                   "vocablens: warning: VOCABLENS_THREADS='%s' is not a whole number in [1, 4096]; ignored (%d threads)\n", env,
                   n);
    }
  }
  at::set_num_threads(n);
}

int threads_for_parameters(int64_t parameters, int max_threads) {
  return static_cast<int>(std::clamp<int64_t>(parameters / 1000000, 1, std::max(1, max_threads)));
}

int adapt_threads_to(const Model& m) {
  if (g_auto_threads > 0) at::set_num_threads(threads_for_parameters(m.parameter_count(), g_auto_threads));
  return at::get_num_threads();
}

}  // namespace vocablens

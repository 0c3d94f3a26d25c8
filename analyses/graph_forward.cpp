// Attribution graphs: what the local replacement model freezes (vocablens/graph.hpp) — one forward pass of
// the real model recorded (norm denominators, attention patterns, errors, the active features) — and the
// estimate's count of active features, whose recorded forward is kept for the run that follows.
#include <algorithm>
#include <memory>
#include <mutex>

#include <fmt/format.h>

#include "graph_internal.hpp"
#include "vocablens/error.hpp"
#include "vocablens/hooks.hpp"
#include "vocablens/model.hpp"
#include "vocablens/weight.hpp"

namespace vocablens {
namespace graph_engine {

at::Tensor denominator(const at::Tensor& x, const ModelConfig& c) {
  if (c.norm == NormKind::LayerNorm) return at::sqrt(x.var(-1, /*unbiased=*/false, /*keepdim=*/true) + c.norm_eps);
  return at::sqrt(x.pow(2).mean(-1, true) + c.norm_eps);
}

void check_block_supported(const Model& m) {
  const ModelConfig& c = m.config();
  const char* why = nullptr;
  if (c.parallel_residual) why = "attention and MLP in parallel on one residual";
  else if (!c.norm_before) why = "post-LN blocks";
  else if (!c.input_norms) why = "blocks without input norms";
  else if (c.embed_norm) why = "a norm of the token embeddings";
  if (why)
    throw UsageError(
        fmt::format("graph: {} ({}) has {}, which the replacement model does not cover yet", m.source(), c.family, why));
}

// The nonzero activations of layer l ([T, n_features]; row-major: by position, then feature) appended to
// the sorted (layer, position, feature) list, as circuit-tracer's coalesced matrix; position 0 left out when
// `from_pos` is 1.
void add_features(Frozen& fz, int64_t l, const at::Tensor& dense, int64_t from_pos, std::vector<at::Tensor>& idx,
                  std::vector<at::Tensor>& val) {
  at::Tensor nz = dense.slice(0, from_pos).nonzero();
  nz.select(1, 0).add_(from_pos);
  val.push_back(dense.index({nz.select(1, 0), nz.select(1, 1)}));
  idx.push_back(at::cat({at::full({nz.size(0), 1}, l, at::kLong), nz}, 1));
  fz.layer_start.push_back(fz.layer_start.back() + nz.size(0));
}

Frozen record_forward(const Model& m, const at::Tensor& ids, const GraphTranscoders& tcs, bool zero_first) {
  const ModelConfig& c = m.config();
  Frozen fz;
  fz.T = ids.size(0);
  fz.L = c.n_layers;
  fz.d = c.d_model;
  CacheSpec spec;
  spec.resid_pre = spec.resid_mid = spec.mlp_out = spec.pattern = true;
  spec.resid_post = true;
  // A norm after attention (Gemma-2's post_attention_layernorm) is frozen at the denominator of what it
  // normalises, the attention's output before it, which no cached point holds (hook_attn_out is after the
  // norm): it is read at hook_z, through W_O as the forward's own projection. The MLP's post-norm needs
  // nothing: the transcoders replace the MLP with it (they write hook_mlp_out, after that norm).
  HookList hooks;
  if (c.post_attn_norm) {
    fz.s_attn.resize(static_cast<size_t>(fz.L));
    for (int64_t l = 0; l < fz.L; ++l)
      hooks.add(fmt::format("blocks.{}.attn.hook_z", l), [&m, &fz, &c, l](at::Tensor& z) {
        const LayerWeights& w = m.weights().layers[l];
        at::Tensor a = at::matmul(z[0].reshape({z.size(1), -1}).to(at::kFloat), m.W_O(l).reshape({-1, c.d_model}));
        if (w.b_o.defined()) a = a + f32(w.b_o);
        fz.s_attn[static_cast<size_t>(l)] = denominator(a, c);
      });
  }
  // Only the last position's logits are read (the salient logits): the model's own last step on that row
  // alone, not [T, V] (0.4 GB and a tenth of the forward's work at 2 048 tokens on GPT-2 small)
  ForwardOutput out = hooks.empty() ? m.forward(ids, spec, /*compute_logits=*/false)
                                    : run_with_hooks(m, ids, hooks, spec, /*compute_logits=*/false);
  fz.last_logits =
      m.unembed(m.final_norm(out.cache.get("resid_post", fz.L - 1)[0].narrow(0, fz.T - 1, 1)))[0].to(at::kFloat).contiguous();
  // A per-layer set's output at block l reads only layer l's features, so each layer's dense activations
  // [T, n_features] go once its error is known; a CLT's output at block l reads every layer up to l.
  const bool across = tcs.n_layers() > 1 && tcs.writes(0, 1);
  std::vector<at::Tensor> mlp_in(static_cast<size_t>(fz.L)), feats(static_cast<size_t>(fz.L)), idx, val;
  auto error_at = [&](int64_t l) {
    at::Tensor err = out.cache.get("mlp_out", l)[0] - tcs.output(l, mlp_in, feats);
    if (zero_first) err[0].zero_();
    fz.errors.push_back(err.contiguous());
  };
  fz.layer_start.assign(1, 0);
  for (int64_t l = 0; l < fz.L; ++l) {
    at::Tensor pre = out.cache.get("resid_pre", l)[0], mid = out.cache.get("resid_mid", l)[0];
    fz.s1.push_back(denominator(pre, c));
    fz.s2.push_back(denominator(mid, c));
    fz.pattern.push_back(out.cache.get("pattern", l)[0].contiguous());
    mlp_in[l] = transcoder_input(m, l, mid, tcs.input());
    feats[l] = tcs.encode(l, mlp_in[l]);  // as encoded, for the reconstruction; the nodes leave position 0 out
    add_features(fz, l, feats[l], zero_first ? 1 : 0, idx, val);
    if (!across) {
      error_at(l);
      feats[l] = at::Tensor();
      tcs.release(l);  // the layer's 2·d·d_transcoder weights are not read whole again
    }
  }
  if (across) {
    for (int64_t l = 0; l < fz.L; ++l) error_at(l);
    for (int64_t l = 0; l < fz.L; ++l) tcs.release(l);
  }
  if (c.final_norm) fz.sf = denominator(out.cache.get("resid_post", fz.L - 1)[0], c);
  fz.tokens = (weight_rows(m.weights().W_E, ids) * c.embed_scale).contiguous();  // only the prompt's rows upcast
  fz.active = at::cat(idx, 0);
  fz.acts = at::cat(val, 0);
  return fz;
}

// ---- the estimate's forward, kept for its run ------------------------------------------------------------

// The estimate counts the active features with the forward pass and the encoders; the run that follows
// records the same forward. So the estimate records it whole and keeps it — when small (256 MiB: every
// prompt of a few hundred tokens; the patterns grow as T²) — for the next run of the same model, prompt and
// read of the transcoders (transcoders_serial), handed over once.
struct KeptForward {
  const Model* model = nullptr;
  const void* weights = nullptr;
  uint64_t tcs = 0;
  std::vector<int64_t> ids;
  bool zero_first = false;
  std::shared_ptr<const Frozen> fz;
};
constexpr double kKeepForwardBytes = 256.0 * 1024 * 1024;
std::mutex kept_mu;
KeptForward* kept_forward = new KeptForward;  // never destroyed (as the kept transcoders, graph_transcoders.cpp)

KeptForward key_of(const Model& m, const at::Tensor& ids, const GraphTranscoders& tcs, bool zero_first) {
  const at::Tensor c = ids.contiguous();
  return {&m,
          m.weights().W_E.data_ptr(),
          transcoders_serial(tcs),
          std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()),
          zero_first,
          nullptr};
}
bool same_key(const KeptForward& a, const KeptForward& b) {
  return a.model == b.model && a.weights == b.weights && a.tcs != 0 && a.tcs == b.tcs && a.ids == b.ids &&
         a.zero_first == b.zero_first;
}

std::shared_ptr<const Frozen> take_forward(const Model& m, const at::Tensor& ids, const GraphTranscoders& tcs, bool zero_first) {
  std::lock_guard<std::mutex> lock(kept_mu);
  KeptForward k = std::move(*kept_forward);
  *kept_forward = KeptForward{};
  return k.fz && same_key(k, key_of(m, ids, tcs, zero_first)) ? k.fz : nullptr;
}

double frozen_bytes(const Frozen& fz) {
  double n = 0;
  for (const auto* v : {&fz.s1, &fz.s2, &fz.s_attn, &fz.pattern, &fz.errors})
    for (const at::Tensor& t : *v) n += static_cast<double>(t.nbytes());
  for (const at::Tensor* t : {&fz.sf, &fz.tokens, &fz.last_logits, &fz.active, &fz.acts})
    if (t->defined()) n += static_cast<double>(t->nbytes());
  return n;
}

}  // namespace graph_engine

std::vector<int64_t> graph_active_counts(const Model& model, const at::Tensor& ids_in, const GraphTranscoders& tcs,
                                         bool zero_first_position) {
  using namespace graph_engine;
  const at::Tensor ids = ids_in.to(at::kLong).contiguous();
  const ModelConfig& c = model.config();
  bool covered = tcs.n_layers() == c.n_layers;
  try {
    check_block_supported(model);
  } catch (const UsageError&) {
    covered = false;  // the run will refuse the model; its estimate still counts
  }
  // Only a forward that will be kept is recorded whole: a long prompt's patterns (4·L·H·T², 2.4 GB at 2 048
  // tokens on GPT-2 small) would raise a dry run's own peak for nothing
  const double T = static_cast<double>(ids.size(0)), L = static_cast<double>(c.n_layers);
  const double least = 4 * L * c.n_heads * T * T + 4 * L * T * c.d_model;  // patterns and errors
  std::vector<int64_t> n;
  if (covered && transcoders_serial(tcs) != 0 && least <= kKeepForwardBytes) {
    auto fz = std::make_shared<const Frozen>(record_forward(model, ids, tcs, zero_first_position));
    for (int64_t l = 0; l < c.n_layers; ++l) n.push_back(fz->layer_start[l + 1] - fz->layer_start[l]);
    if (frozen_bytes(*fz) <= kKeepForwardBytes) {
      KeptForward k = key_of(model, ids, tcs, zero_first_position);
      k.fz = std::move(fz);
      std::lock_guard<std::mutex> lock(kept_mu);
      *kept_forward = std::move(k);
    }
    return n;
  }
  CacheSpec spec;
  spec.resid_mid = true;
  ForwardOutput out = model.forward(ids, spec, /*compute_logits=*/false);
  for (int64_t l = 0; l < c.n_layers; ++l) {
    at::Tensor x = transcoder_input(model, l, out.cache.get("resid_mid", l)[0], tcs.input());
    n.push_back(tcs.encode(l, x).slice(0, zero_first_position ? 1 : 0).ne(0).sum().item<int64_t>());
    tcs.release(l);
  }
  return n;
}

}  // namespace vocablens

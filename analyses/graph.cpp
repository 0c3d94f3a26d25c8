// Attribution graphs through transcoders (vocablens/graph.hpp): the frozen forward, the salient logits,
// the hand-written batched backward through the local replacement model, circuit-tracer's feature ranking,
// the assembly of the adjacency. Pruning and scores: graph_prune.cpp.
#include "vocablens/graph.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "vocablens/error.hpp"
#include "vocablens/interrupt.hpp"
#include "vocablens/model.hpp"
#include "vocablens/nonfinite.hpp"
#include "vocablens/sae.hpp"
#include "vocablens/transcoders.hpp"
#include "vocablens/weight.hpp"

namespace vocablens {

namespace graph_engine {

at::Tensor f32(const at::Tensor& t) { return t.defined() ? materialize_weight(t).to(at::kFloat) : t; }

// ---- the transcoders: a TranscoderSet, per-layer or cross-layer ----------------------------------------

// Both kinds through one class: a per-layer feature writes its own layer's MLP output, a CLT feature of layer
// src writes every layer from src on (its W_dec_src [d_tc, L - src, d] holds one row per layer written).
class SetTranscoders : public GraphTranscoders {
 public:
  explicit SetTranscoders(TranscoderSet s) : set_(std::move(s)) {}
  int64_t n_layers() const override { return set_.n_layers; }
  int64_t n_features(int64_t l) const override { return set_.layers[static_cast<size_t>(l)].d_sae; }
  at::Tensor encode(int64_t l, const at::Tensor& x) const override { return set_.encode(l, x).to(at::kFloat); }
  at::Tensor encoder_rows(int64_t l, const at::Tensor& f) const override {
    // the rows asked for, selected before the upcast: a CLT's encoder is a view of its mapped file
    const at::Tensor& W = set_.layer(l).W_enc;
    return (is_packed_weight(W) ? f32(W).index_select(1, f) : f32(W.index_select(1, f))).t().contiguous();
  }
  bool writes(int64_t src, int64_t out) const override { return clt() ? out >= src : src == out; }
  at::Tensor decoder_rows(int64_t src, int64_t out, const at::Tensor& f) const override {
    if (clt()) {
      at::Tensor rows = f32(set_.clt_decoders[static_cast<size_t>(src)].index_select(0, f).select(1, out - src));
      // a large CLT is checked for NaN/Inf as its parts are read (load_transcoders checked a small one whole)
      if (set_.encoder_checked && !all_finite(rows))
        throw FormatError(set_.decoder_files[static_cast<size_t>(src)],
                          fmt::format("decoder rows of layer {} features into block {} have NaN or infinite values", src, out));
      return rows.contiguous();
    }
    const Sae& s = set_.layers[static_cast<size_t>(src)];
    at::Tensor rows = f32(s.W_dec).index_select(0, f);
    if (s.scaling_factor.defined()) rows = rows * f32(s.scaling_factor).index_select(0, f).unsqueeze(1);
    return rows.contiguous();
  }
  at::Tensor output(int64_t out, const std::vector<at::Tensor>& mlp_in,
                    const std::vector<at::Tensor>& features) const override {
    return set_.decode(out, features, mlp_in[static_cast<size_t>(out)]).to(at::kFloat);
  }
  at::Tensor skip(int64_t l) const override { return f32(set_.layers[static_cast<size_t>(l)].W_skip); }
  std::string source() const override { return set_.source; }

 private:
  bool clt() const { return set_.kind == TranscoderKind::CrossLayer; }
  TranscoderSet set_;
};

// The hook names a transcoder of layer l may carry: the MLP's input with ln2's weight and bias applied (what
// the engine encodes and propagates to; ln2.hook_normalized, before them, is another vector) and its output.
bool reads_mlp_input(const std::string& hook, int64_t l) {
  const std::string b = "blocks." + std::to_string(l) + ".";
  return hook.empty() || hook == b + "mlp.hook_in";
}
bool writes_mlp_output(const std::string& hook, int64_t l) {
  const std::string b = "blocks." + std::to_string(l) + ".";
  return hook.empty() || hook == b + "hook_mlp_out" || hook == b + "mlp.hook_out";
}

void check_transcoder(const Sae& s, int64_t l, const Model& m) {
  const int64_t d = m.config().d_model;
  if (s.d_in != d || s.d_out != d)
    throw UsageError(fmt::format("{}: transcoder of layer {} reads {} and writes {} values; the model's MLP "
                                 "input and output have {} (d_model)", s.source, l, s.d_in, s.d_out, d));
  if (!reads_mlp_input(s.hook_name, l))
    throw UsageError(fmt::format("{}: transcoder of layer {} reads {}; an attribution graph needs the MLP input "
                                 "of its layer (blocks.{}.mlp.hook_in)", s.source, l, s.hook_name, l));
  if (!writes_mlp_output(s.hook_name_out, l))
    throw UsageError(fmt::format("{}: transcoder of layer {} writes {}; an attribution graph needs the MLP output "
                                 "of its layer (blocks.{}.hook_mlp_out)", s.source, l, s.hook_name_out, l));
  if (s.normalize != SaeNormalize::None && s.normalize != SaeNormalize::ExpectedAverageOnlyIn)
    throw UsageError(fmt::format("{}: transcoder normalises its input ({}), so its features are not linear in it; "
                                 "the replacement model needs a linear encoder", s.source, to_string(s.normalize)));
  if (s.apply_b_dec_to_input && s.d_in != s.d_out)
    throw UsageError(s.source + ": apply_b_dec_to_input with different input and output widths");
}

// ---- what the replacement model freezes ---------------------------------------------------------------

struct Frozen {
  int64_t T = 0, L = 0, d = 0;
  std::vector<at::Tensor> s1, s2;       ///< [T, 1] norm denominators of ln1 and ln2 per layer
  at::Tensor sf;                        ///< [T, 1] the final norm's (undefined: no final norm)
  std::vector<at::Tensor> pattern;      ///< [H, T, T] per layer
  std::vector<at::Tensor> errors;       ///< [T, d] per layer (position 0 zeroed when asked)
  at::Tensor tokens;                    ///< [T, d] embedding rows × scale
  at::Tensor last_logits;               ///< [V]
  // the active features, sorted by (layer, position, feature)
  at::Tensor active;                    ///< [A, 3] int64
  at::Tensor acts;                      ///< [A]
  std::vector<int64_t> layer_start;     ///< [L + 1] offsets of each layer's features in `active`
};

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
  else if (c.post_attn_norm || c.post_mlp_norm) why = "norms after attention and MLP";
  else if (c.embed_norm) why = "a norm of the token embeddings";
  if (why)
    throw UsageError(fmt::format("graph: {} ({}) has {}, which the replacement model does not cover yet",
                                 m.source(), c.family, why));
}

// Sparse activations of every layer, sorted (layer, position, feature) as circuit-tracer's coalesced matrix.
void collect_features(Frozen& fz, const std::vector<at::Tensor>& dense) {
  std::vector<at::Tensor> idx, val;
  fz.layer_start.assign(1, 0);
  for (int64_t l = 0; l < fz.L; ++l) {
    at::Tensor nz = dense[l].nonzero();  // row-major: by position, then feature
    at::Tensor v = dense[l].index({nz.select(1, 0), nz.select(1, 1)});
    idx.push_back(at::cat({at::full({nz.size(0), 1}, l, at::kLong), nz}, 1));
    val.push_back(v);
    fz.layer_start.push_back(fz.layer_start.back() + nz.size(0));
  }
  fz.active = at::cat(idx, 0);
  fz.acts = at::cat(val, 0);
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
  ForwardOutput out = m.forward(ids, spec);
  fz.last_logits = out.logits[0][fz.T - 1].to(at::kFloat);
  std::vector<at::Tensor> mlp_in, feats, dense;  // feats: as encoded, for the reconstruction; dense: position 0 zeroed
  for (int64_t l = 0; l < fz.L; ++l) {
    const LayerWeights& w = m.weights().layers[l];
    at::Tensor pre = out.cache.get("resid_pre", l)[0], mid = out.cache.get("resid_mid", l)[0];
    fz.s1.push_back(denominator(pre, c));
    fz.s2.push_back(denominator(mid, c));
    fz.pattern.push_back(out.cache.get("pattern", l)[0].contiguous());
    mlp_in.push_back(apply_norm(mid, c.norm, c.norm_eps, f32(w.ln2_w), f32(w.ln2_b)));
    feats.push_back(tcs.encode(l, mlp_in[l]));
    at::Tensor a = zero_first ? feats.back().clone() : feats.back();
    if (zero_first) a[0].zero_();
    dense.push_back(a);
  }
  for (int64_t l = 0; l < fz.L; ++l) {
    at::Tensor err = out.cache.get("mlp_out", l)[0] - tcs.output(l, mlp_in, feats);
    if (zero_first) err[0].zero_();
    fz.errors.push_back(err.contiguous());
  }
  if (c.final_norm) fz.sf = denominator(out.cache.get("resid_post", fz.L - 1)[0], c);
  fz.tokens = (m.W_E().index_select(0, ids) * c.embed_scale).contiguous();
  collect_features(fz, dense);
  return fz;
}

// ---- the salient logits ---------------------------------------------------------------------------

struct Logits {
  at::Tensor ids, probs, vecs;  ///< [K], [K] float64, [K, d] demeaned W_U columns
};

Logits salient_logits(const Model& m, const at::Tensor& logits, const GraphOptions& o) {
  at::Tensor p = at::softmax(logits.to(at::kDouble), -1);
  const int64_t k = std::min<int64_t>(o.max_n_logits, p.size(0));
  auto top = at::topk(p, k);
  at::Tensor tp = std::get<0>(top), ti = std::get<1>(top);
  at::Tensor cum = at::cumsum(tp, 0);
  // the first index whose cumulative probability reaches the target, then one past it
  int64_t cut = 0;
  while (cut < k && cum[cut].item<double>() < o.desired_logit_prob) ++cut;
  cut = std::min(cut + 1, k);
  Logits r;
  r.ids = ti.slice(0, 0, cut).contiguous();
  r.probs = tp.slice(0, 0, cut).contiguous();
  at::Tensor WU = m.W_U();
  r.vecs = (WU.index_select(1, r.ids) - WU.mean(1, true)).t().contiguous();
  return r;
}

// ---- the backward through the frozen replacement model ---------------------------------------------

/// One row to compute: the reading vector `vec` [d] at the MLP input of `layer` (layer == L: at the final
/// norm's output) and position `pos`.
struct Target {
  int64_t layer, pos;
  at::Tensor vec;
};

class Backward {
 public:
  Backward(const Model& m, const GraphTranscoders& tcs, const Frozen& fz) : m_(m), c_(m.config()), fz_(fz) {
    for (int64_t l = 0; l < fz.L; ++l) {
      const LayerWeights& w = m.weights().layers[l];
      Layer ly;
      ly.ln1_w = f32(w.ln1_w);
      ly.ln2_w = f32(w.ln2_w);
      const int64_t H = c_.n_heads, dh = c_.d_head;
      ly.WO = m.W_O(l).reshape({H * dh, fz.d}).contiguous();                        // [H·dh, d]
      ly.WV = m.W_V(l).permute({1, 0, 2}).reshape({fz.d, H * dh}).contiguous();      // [d, H·dh]
      ly.skip = tcs.skip(l);
      layers_.push_back(ly);
    }
    lnf_w_ = f32(m.weights().lnf_w);
    // the scaled decoder rows of every active feature, per (source layer, output layer)
    dec_.resize(fz.L);
    for (int64_t src = 0; src < fz.L; ++src) {
      const int64_t a = fz.layer_start[src], b = fz.layer_start[src + 1];
      at::Tensor feats = fz.active.slice(0, a, b).select(1, 2);
      at::Tensor act = fz.acts.slice(0, a, b).unsqueeze(1);
      for (int64_t out = src; out < fz.L; ++out)
        dec_[src].push_back(tcs.writes(src, out) && b > a ? tcs.decoder_rows(src, out, feats) * act : at::Tensor());
    }
    n_cols_ = fz.layer_start.back() + (fz.L + 1) * fz.T;
    auto act = fz.active.accessor<int64_t, 2>();
    spans_.resize(fz.L);
    for (int64_t src = 0; src < fz.L; ++src)
      for (int64_t k = fz.layer_start[src]; k < fz.layer_start[src + 1]; ++k) {
        const int64_t off = k - fz.layer_start[src];
        if (spans_[src].empty() || spans_[src].back().pos != act[k][1]) spans_[src].push_back({act[k][1], off, off});
        spans_[src].back().end = off + 1;
      }
  }

  int64_t n_cols() const { return n_cols_; }

  /// Rows [B, n_cols]: columns = active features, errors (layer-major), tokens.
  at::Tensor rows(const std::vector<Target>& ts) const {
    const int64_t B = static_cast<int64_t>(ts.size());
    at::Tensor out = at::zeros({B, n_cols_}, at::kFloat);
    at::Tensor G = at::zeros({B, fz_.T, fz_.d}, at::kFloat);
    int64_t top = 0;
    for (const Target& t : ts) top = std::max(top, t.layer);
    if (top == fz_.L) inject(G, ts, fz_.L, lnf_w_, fz_.sf);
    for (int64_t l = std::min(top, fz_.L - 1); l >= 0; --l) {
      throw_if_cancelled("the attribution graph, between blocks");
      read_mlp_out(G, l, out);
      const Layer& ly = layers_[l];
      at::Tensor Gmid = G;
      if (ly.skip.defined()) Gmid = G + norm_back(at::matmul(G, ly.skip.t()), ly.ln2_w, fz_.s2[l]);
      inject(Gmid, ts, l, ly.ln2_w, fz_.s2[l]);
      G = Gmid + attention_back(Gmid, l);
    }
    out.slice(1, fz_.layer_start.back() + fz_.L * fz_.T) .copy_((G * fz_.tokens.unsqueeze(0)).sum(-1));
    return out;
  }

 private:
  struct Layer {
    at::Tensor ln1_w, ln2_w, WO, WV, skip;
  };
  struct PosSpan {
    int64_t pos, begin, end;  ///< features [begin, end) of a layer (offsets in it) sit at position pos
  };

  // The transpose of a frozen norm: y = C(x) / s ⊙ w (+ b), C centring for LayerNorm, identity for RMSNorm.
  at::Tensor norm_back(const at::Tensor& g, const at::Tensor& w, const at::Tensor& s) const {
    if (!s.defined()) return g;  // no final norm
    at::Tensor u = w.defined() ? g * w : g;
    u = u / s;
    if (c_.norm == NormKind::LayerNorm) u = u - u.mean(-1, true);
    return u;
  }

  void inject(at::Tensor& G, const std::vector<Target>& ts, int64_t layer, const at::Tensor& w,
              const at::Tensor& s) const {
    for (size_t b = 0; b < ts.size(); ++b) {
      if (ts[b].layer != layer) continue;
      const int64_t p = ts[b].pos;
      G[static_cast<int64_t>(b)][p] += norm_back(ts[b].vec, w, s.defined() ? s[p] : s);
    }
  }

  // Frozen attention, OV only: out[q] = Σ_h Σ_k A_h[q, k] ln1(x)[k] W_V,h W_O,h (+ constants).
  at::Tensor attention_back(const at::Tensor& G, int64_t l) const {
    const Layer& ly = layers_[l];
    const int64_t B = G.size(0), T = fz_.T, H = c_.n_heads, dh = c_.d_head;
    at::Tensor z = at::matmul(G, ly.WO.t()).view({B, T, H, dh}).permute({0, 2, 1, 3});  // [B, H, Tq, dh]
    at::Tensor y = at::matmul(fz_.pattern[l].transpose(1, 2).unsqueeze(0), z);           // [B, H, Tk, dh]
    at::Tensor gx = at::matmul(y.permute({0, 2, 1, 3}).reshape({B, T, H * dh}), ly.WV.t());
    return norm_back(gx, ly.ln1_w, fz_.s1[l]);
  }

  // Edges from everything written at the MLP output of layer `out`: features (from any layer that writes
  // there) and the error of that layer.
  void read_mlp_out(const at::Tensor& G, int64_t out, at::Tensor& rows) const {
    for (int64_t src = 0; src <= out; ++src) {
      const at::Tensor& dec = dec_[src][out - src];
      if (!dec.defined()) continue;
      // the features of one position are contiguous (sorted by layer, position, feature): one small product
      // per position, no [B, n, d] gather
      const int64_t a = fz_.layer_start[src];
      for (const PosSpan& sp : spans_[src])
        rows.slice(1, a + sp.begin, a + sp.end) += at::matmul(G.select(1, sp.pos), dec.slice(0, sp.begin, sp.end).t());
    }
    const int64_t e0 = fz_.layer_start.back() + out * fz_.T;
    rows.slice(1, e0, e0 + fz_.T).copy_((G * fz_.errors[out].unsqueeze(0)).sum(-1));
  }

  const Model& m_;
  const ModelConfig& c_;
  const Frozen& fz_;
  std::vector<Layer> layers_;
  at::Tensor lnf_w_;
  std::vector<std::vector<at::Tensor>> dec_;
  std::vector<std::vector<PosSpan>> spans_;
  int64_t n_cols_ = 0;
};

// ---- which features get rows: circuit-tracer's influence ranking ---------------------------------------

/// Influence on the logits of every column through the rows computed so far (row r belongs to node
/// row_node[r]; the logits' nodes carry their probabilities).
at::Tensor partial_influence(const at::Tensor& rows, const std::vector<int64_t>& row_node, const at::Tensor& logit_p,
                             int64_t n_total) {
  at::Tensor a = rows.abs().to(at::kDouble);
  a = a / a.sum(1, true).clamp_min(1e-8);
  at::Tensor prod = at::zeros({n_total}, at::kDouble);
  prod.slice(0, n_total - logit_p.size(0)).copy_(logit_p);
  at::Tensor influence = at::zeros({a.size(1)}, at::kDouble);
  at::Tensor idx = at::tensor(row_node, at::kLong);
  for (int it = 0; it < 1000; ++it) {
    at::Tensor next = at::matmul(prod.index_select(0, idx), a);
    if (!next.ne(0).any().item<bool>()) return influence;
    influence += next;
    prod = at::zeros({n_total}, at::kDouble);
    prod.slice(0, 0, next.size(0)).copy_(next);
  }
  throw Error("graph: feature influence did not converge in 1000 steps");
}

void check_options(const Model& m, const at::Tensor& ids, const GraphTranscoders& tcs, const GraphOptions& o) {
  const ModelConfig& c = m.config();
  if (ids.dim() != 1 || ids.size(0) < 1) throw UsageError("graph: the prompt must be one non-empty sequence of ids");
  if (ids.size(0) > c.n_ctx)
    throw UsageError(fmt::format("graph: the prompt has {} tokens; {} takes at most {}", ids.size(0), m.source(), c.n_ctx));
  if (tcs.n_layers() != c.n_layers)
    throw UsageError(fmt::format("graph: {} holds transcoders for {} layers; {} has {}", tcs.source(), tcs.n_layers(),
                                 m.source(), c.n_layers));
  if (o.max_n_logits < 1) throw UsageError("graph: max_n_logits must be >= 1");
  if (!(o.desired_logit_prob > 0 && o.desired_logit_prob <= 1)) throw UsageError("graph: desired_logit_prob must be in (0, 1]");
  if (o.batch_size < 1) throw UsageError("graph: batch_size must be >= 1");
  if (o.max_feature_nodes < 0) throw UsageError("graph: max_feature_nodes must be >= 0 (0: every active feature)");
  if (o.update_interval < 1) throw UsageError("graph: update_interval must be >= 1");
  check_block_supported(m);
}

/// Computes the rows of `order` (indices into the active features) in batches, appending to rows / row_node.
/// Encoder rows are read once per layer and batch (a stored BF16 matrix is upcast only in those rows).
void feature_rows(const Backward& bw, const Frozen& fz, const GraphTranscoders& tcs, const std::vector<int64_t>& order,
                  int64_t batch, std::vector<at::Tensor>& rows, std::vector<int64_t>& row_node,
                  const std::function<void(int64_t)>& done) {
  auto act = fz.active.accessor<int64_t, 2>();
  for (size_t i = 0; i < order.size(); i += static_cast<size_t>(batch)) {
    const size_t e = std::min(order.size(), i + static_cast<size_t>(batch));
    std::vector<Target> ts(e - i);
    for (int64_t l = 0; l < fz.L; ++l) {
      std::vector<int64_t> slot, feat;
      for (size_t j = i; j < e; ++j)
        if (act[order[j]][0] == l) {
          slot.push_back(static_cast<int64_t>(j - i));
          feat.push_back(act[order[j]][2]);
        }
      if (slot.empty()) continue;
      at::Tensor enc = tcs.encoder_rows(l, at::tensor(feat, at::kLong));
      for (size_t q = 0; q < slot.size(); ++q)
        ts[static_cast<size_t>(slot[q])] = {l, act[order[i + static_cast<size_t>(slot[q])]][1], enc[static_cast<int64_t>(q)]};
    }
    for (size_t j = i; j < e; ++j) row_node.push_back(order[j]);
    rows.push_back(bw.rows(ts));
    done(static_cast<int64_t>(e - i));
  }
}

/// Which features get rows, in the order circuit-tracer visits them (all of them when max is 0 or >= A).
std::vector<int64_t> select_and_compute(const Backward& bw, const Frozen& fz, const GraphTranscoders& tcs,
                                        const Logits& lg, const GraphOptions& o, std::vector<at::Tensor>& rows,
                                        std::vector<int64_t>& row_node) {
  const int64_t A = fz.layer_start.back(), K = lg.ids.size(0);
  const int64_t n_total = bw.n_cols() + K;
  const int64_t want = o.max_feature_nodes == 0 ? A : std::min(o.max_feature_nodes, A);
  int64_t done = 0;
  auto tick = [&](int64_t n) {
    done += n;
    if (o.progress) o.progress(done, K + want);
  };
  // the logit rows first
  for (int64_t i = 0; i < K; i += o.batch_size) {
    std::vector<Target> ts;
    for (int64_t k = i; k < std::min(K, i + o.batch_size); ++k) {
      ts.push_back({fz.L, fz.T - 1, lg.vecs[k]});
      row_node.push_back(bw.n_cols() + k);
    }
    rows.push_back(bw.rows(ts));
    tick(static_cast<int64_t>(ts.size()));
  }
  std::vector<char> visited(static_cast<size_t>(A), 0);
  int64_t n_visited = 0;
  while (n_visited < want) {
    std::vector<int64_t> pending;
    if (want == A) {
      pending.resize(static_cast<size_t>(A));
      std::iota(pending.begin(), pending.end(), 0);
    } else {
      at::Tensor inf = partial_influence(at::cat(rows, 0), row_node, lg.probs, n_total).slice(0, 0, A);
      at::Tensor rank = at::argsort(inf, 0, /*descending=*/true);
      const int64_t queue = std::min(o.update_interval * o.batch_size, want - n_visited);
      auto r = rank.accessor<int64_t, 1>();
      for (int64_t i = 0; i < A && static_cast<int64_t>(pending.size()) < queue; ++i)
        if (!visited[static_cast<size_t>(r[i])]) pending.push_back(r[i]);
    }
    for (int64_t k : pending) visited[static_cast<size_t>(k)] = 1;
    n_visited += static_cast<int64_t>(pending.size());
    feature_rows(bw, fz, tcs, pending, o.batch_size, rows, row_node, tick);
  }
  std::vector<int64_t> selected;
  for (int64_t k = 0; k < A; ++k)
    if (visited[static_cast<size_t>(k)]) selected.push_back(k);
  return selected;
}

/// The [N, N] adjacency from the computed rows: feature rows in ascending feature order, then the logit
/// rows at the bottom; feature columns restricted to the selected ones.
at::Tensor assemble(const at::Tensor& rows, const std::vector<int64_t>& row_node, const std::vector<int64_t>& selected,
                    int64_t A, int64_t n_other, int64_t K) {
  const int64_t F = static_cast<int64_t>(selected.size());
  const int64_t N = F + n_other + K;
  std::vector<int64_t> col(selected);
  for (int64_t j = 0; j < n_other; ++j) col.push_back(A + j);
  at::Tensor cols = at::tensor(col, at::kLong);
  std::vector<int64_t> pos_of(static_cast<size_t>(A), -1);
  for (int64_t i = 0; i < F; ++i) pos_of[static_cast<size_t>(selected[static_cast<size_t>(i)])] = i;
  at::Tensor adj = at::zeros({N, N}, at::kFloat);
  for (int64_t r = 0; r < rows.size(0); ++r) {
    const int64_t node = row_node[static_cast<size_t>(r)];
    const int64_t dst = node < A ? pos_of[static_cast<size_t>(node)] : F + n_other + (node - (A + n_other));
    adj[dst].slice(0, 0, F + n_other).copy_(rows[r].index_select(0, cols));
  }
  return adj;
}

}  // namespace graph_engine

std::unique_ptr<GraphTranscoders> per_layer_transcoders(std::vector<Sae> saes, const Model& model) {
  for (size_t l = 0; l < saes.size(); ++l) graph_engine::check_transcoder(saes[l], static_cast<int64_t>(l), model);
  TranscoderSet set;
  set.kind = TranscoderKind::PerLayer;
  set.n_layers = static_cast<int64_t>(saes.size());
  set.source = saes.empty() ? std::string() : saes.front().source + (saes.size() > 1 ? " ..." : "");
  set.layers = std::move(saes);
  return std::make_unique<graph_engine::SetTranscoders>(std::move(set));
}

std::unique_ptr<GraphTranscoders> load_graph_transcoders(const std::string& dir, const Model& model) {
  // a folder without config.yaml is circuit-tracer's plain per-layer layout, read at the MLP's input and output
  TranscoderLoadOptions lo;
  lo.default_input_hook = "mlp.hook_in";
  lo.default_output_hook = "hook_mlp_out";
  TranscoderSet set = load_transcoders(dir, lo);
  const int64_t L = model.config().n_layers;
  if (set.config_path.empty() && set.n_layers < L)
    throw FormatError(set.source, fmt::format("no layer_{}.safetensors ({} has {} layers; one transcoder per layer)",
                                              set.n_layers, model.source(), L));
  // The engine encodes the MLP's input (ln2's weight and bias applied) and reads features at the MLP's
  // output; a set read anywhere else would need another frozen path, so it is refused by its config's names.
  const std::string where = set.config_path.empty() ? set.source : set.config_path;
  if (set.input_point != "mlp.hook_in")
    throw UsageError(fmt::format("{}: feature_input_hook '{}' — an attribution graph reads transcoders at the MLP's "
                                 "input (mlp.hook_in: ln2's output, its weight and bias applied)", where,
                                 set.feature_input_hook));
  if (set.output_point != "hook_mlp_out")
    throw UsageError(fmt::format("{}: feature_output_hook '{}' — an attribution graph needs transcoders writing the "
                                 "MLP's output (hook_mlp_out or mlp.hook_out)", where, set.feature_output_hook));
  check_transcoders_fit(set, model);
  for (int64_t l = 0; l < set.n_layers; ++l) graph_engine::check_transcoder(set.layers[static_cast<size_t>(l)], l, model);
  return std::make_unique<graph_engine::SetTranscoders>(std::move(set));
}

AttributionGraph attribution_graph(const Model& model, const at::Tensor& ids_in, const GraphTranscoders& tcs,
                                   const GraphOptions& o) {
  using namespace graph_engine;
  at::Tensor ids = ids_in.dim() == 2 && ids_in.size(0) == 1 ? ids_in[0] : ids_in;
  ids = ids.to(at::kLong).contiguous();
  check_options(model, ids, tcs, o);
  const Frozen fz = record_forward(model, ids, tcs, o.zero_first_position);
  const Logits lg = salient_logits(model, fz.last_logits, o);
  const Backward bw(model, tcs, fz);
  std::vector<at::Tensor> rows;
  std::vector<int64_t> row_node;
  std::vector<int64_t> selected = select_and_compute(bw, fz, tcs, lg, o, rows, row_node);
  AttributionGraph g;
  g.ids = ids;
  g.logit_ids = lg.ids;
  g.logit_probs = lg.probs;
  g.active_features = fz.active;
  g.activations = fz.acts;
  g.selected = at::tensor(selected, at::kLong);
  g.n_layers = fz.L;
  g.n_pos = fz.T;
  g.adjacency = assemble(at::cat(rows, 0), row_node, selected, fz.layer_start.back(), (fz.L + 1) * fz.T,
                         lg.ids.size(0));
  return g;
}

}  // namespace vocablens

// Attribution graphs through transcoders (vocablens/graph.hpp): the salient logits,
// the hand-written batched backward through the local replacement model, circuit-tracer's feature ranking,
// the assembly of the adjacency. The frozen forward: graph_forward.cpp; the transcoders as read:
// graph_transcoders.cpp; pruning and scores: graph_prune.cpp.
#include "vocablens/graph.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>

#include <fmt/format.h>

#include "graph_internal.hpp"
#include "vocablens/error.hpp"
#include "vocablens/interrupt.hpp"
#include "vocablens/model.hpp"
#include "vocablens/nonfinite.hpp"
#include "vocablens/sae.hpp"
#include "vocablens/transcoders.hpp"
#include "vocablens/weight.hpp"

namespace vocablens {

double graph_decoder_cache_bytes() { return 512.0 * 1024 * 1024; }

namespace graph_engine {

at::Tensor f32(const at::Tensor& t) { return t.defined() ? materialize_weight(t).to(at::kFloat) : t; }

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
  Backward(const Model& m, const GraphTranscoders& tcs, const Frozen& fz) : m_(m), c_(m.config()), fz_(fz), tcs_(tcs) {
    for (int64_t l = 0; l < fz.L; ++l) {
      const LayerWeights& w = m.weights().layers[l];
      Layer ly;
      ly.ln1_w = f32(w.ln1_w);
      ly.attn_w = f32(w.post_attn_norm_w);
      // what a gradient at the transcoders' input goes back through to resid_mid: ln2 frozen (with its
      // weight for mlp.hook_in, without for ln2.hook_normalized), or nothing (hook_resid_mid)
      ly.in_norm = tcs.input() != GraphInput::ResidMid;
      if (tcs.input() == GraphInput::MlpIn) ly.in_w = f32(w.ln2_w);
      const int64_t H = c_.n_heads, dh = c_.d_head;
      ly.WO = m.W_O(l).reshape({H * dh, fz.d}).contiguous();                     // [H·dh, d]
      ly.WV = m.W_V(l).permute({1, 0, 2}).reshape({fz.d, H * dh}).contiguous();  // [d, H·dh]
      ly.skip = tcs.skip(l);
      layers_.push_back(ly);
    }
    lnf_w_ = f32(m.weights().lnf_w);
    // the scaled decoder rows of every active feature, per (source layer, output layer), kept when they
    // fit in graph_decoder_cache_bytes(); otherwise gathered from the transcoders at each use
    double written = 0;
    for (int64_t src = 0; src < fz.L; ++src)
      for (int64_t out = src; out < fz.L; ++out)
        written += tcs.writes(src, out) ? static_cast<double>(fz.layer_start[src + 1] - fz.layer_start[src]) : 0.0;
    cache_dec_ = written * static_cast<double>(fz.d) * 4 <= graph_decoder_cache_bytes();
    dec_.resize(fz.L);
    for (int64_t src = 0; src < fz.L; ++src) {
      for (int64_t out = src; out < fz.L; ++out) dec_[src].push_back(cache_dec_ ? scaled_decoder(src, out) : at::Tensor());
      tcs.release(src);  // the active rows are copied out: the decoder's pages they sit on go back
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

  /// Rows into out [B, n_cols] (overwritten): columns = active features, errors (layer-major), tokens.
  /// Everything is causal, so only the positions up to the batch's last target are propagated (P of them);
  /// the columns of later positions stay zero. Nothing flows into a target from above its own layer, so the
  /// batch is held deepest target first and each block propagates only the targets at or above it (a
  /// prefix): a batch spread evenly over the layers costs about half of L full blocks.
  void rows(const std::vector<Target>& ts_in, at::Tensor out) const {
    const int64_t B = static_cast<int64_t>(ts_in.size());
    // slot i of the propagation holds target perm[i]; targets of higher layers first
    std::vector<int64_t> perm(static_cast<size_t>(B));
    std::iota(perm.begin(), perm.end(), 0);
    std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) {
      return ts_in[static_cast<size_t>(a)].layer > ts_in[static_cast<size_t>(b)].layer;
    });
    const bool identity = std::is_sorted(perm.begin(), perm.end());
    std::vector<Target> ts;
    for (int64_t i : perm) ts.push_back(ts_in[static_cast<size_t>(i)]);
    at::Tensor o = identity ? out : at::empty_like(out);
    o.zero_();
    int64_t top = 0, P = 0;
    for (const Target& t : ts) {
      top = std::max(top, t.layer);
      P = std::max(P, t.pos + 1);
    }
    // how many slots (a prefix) hold targets above layer l
    auto above = [&](int64_t l) {
      return static_cast<int64_t>(std::partition_point(ts.begin(), ts.end(), [&](const Target& t) { return t.layer > l; }) -
                                  ts.begin());
    };
    at::Tensor G = at::zeros({B, P, fz_.d}, at::kFloat);
    if (top == fz_.L) inject(G, ts, fz_.L, lnf_w_, fz_.sf);
    for (int64_t l = std::min(top, fz_.L - 1); l >= 0; --l) {
      throw_if_cancelled("the attribution graph, between blocks");
      const Layer& ly = layers_[l];
      // the MLP output of l and its skip: only targets above l have a gradient there
      at::Tensor Ga = G.narrow(0, 0, above(l));
      if (Ga.size(0) > 0) {
        at::Tensor oa = o.narrow(0, 0, Ga.size(0));
        read_mlp_out(Ga, l, oa);
        if (ly.skip.defined()) Ga.add_(input_back_(at::matmul(Ga, ly.skip.t()), ly, fz_.s2[l].slice(0, 0, P)));
      }
      for (size_t b = 0; b < ts.size(); ++b)
        if (ts[b].layer == l) G[static_cast<int64_t>(b)][ts[b].pos] += input_back_(ts[b].vec.clone(), ly, fz_.s2[l][ts[b].pos]);
      // the attention below l, the targets at l included. Slots [s0, s1) meet their first block here (the
      // targets read at l; at the top block, the logits too): their gradient sits at their own position
      // only, so their OV path needs one row of W_O per slot instead of P.
      const int64_t s1 = above(l - 1), s0 = l == fz_.L - 1 ? 0 : above(l);
      if (s0 > 0) {
        at::Tensor Gd = G.narrow(0, 0, s0);
        Gd.add_(attention_back(Gd, l));
      }
      if (s1 > s0) {
        std::vector<int64_t> pos;
        for (int64_t b = s0; b < s1; ++b) pos.push_back(ts[static_cast<size_t>(b)].pos);
        const at::Tensor p = at::tensor(pos, at::kLong);
        at::Tensor Gf = G.narrow(0, s0, s1 - s0);
        Gf.add_(attention_back_at(Gf.index({at::arange(s1 - s0), p}), p, l, P));
      }
    }
    o.slice(1, fz_.layer_start.back() + fz_.L * fz_.T).slice(1, 0, P).copy_(dot_rows(G, fz_.tokens));
    if (!identity) out.index_copy_(0, at::tensor(perm, at::kLong), o);
  }

 private:
  struct Layer {
    at::Tensor ln1_w, attn_w, in_w, WO, WV, skip;  // attn_w: the post-attention norm's weight (Gemma-2)
    bool in_norm = true;
  };

  // The transpose of resid_mid → the transcoders' input, in place on a temporary g.
  at::Tensor input_back_(at::Tensor g, const Layer& ly, const at::Tensor& s) const {
    return ly.in_norm ? norm_back_(std::move(g), ly.in_w, s) : g;
  }
  struct PosSpan {
    int64_t pos, begin, end;  ///< features [begin, end) of a layer (offsets in it) sit at position pos
  };

  // What each active feature of layer src writes into the MLP output of `out`: decoder row × activation.
  at::Tensor scaled_decoder(int64_t src, int64_t out) const {
    const int64_t a = fz_.layer_start[src], b = fz_.layer_start[src + 1];
    if (!tcs_.writes(src, out) || b == a) return at::Tensor();
    return tcs_.decoder_rows(src, out, fz_.active.slice(0, a, b).select(1, 2)) * fz_.acts.slice(0, a, b).unsqueeze(1);
  }

  // G [B, P, d] · V[p] for every (b, p): [B, P], without a [B, P, d] product.
  static at::Tensor dot_rows(const at::Tensor& G, const at::Tensor& V) {
    const int64_t P = G.size(1);
    return at::bmm(G.transpose(0, 1), V.slice(0, 0, P).unsqueeze(2)).squeeze(2).t();
  }

  // The transpose of a frozen norm: y = C(x) / s ⊙ w (+ b), C centring for LayerNorm, identity for RMSNorm;
  // in place on a temporary g.
  at::Tensor norm_back_(at::Tensor g, const at::Tensor& w, const at::Tensor& s) const {
    if (!s.defined()) return g;  // no final norm
    if (w.defined()) g.mul_(w);
    g.div_(s);
    if (c_.norm == NormKind::LayerNorm) g.sub_(g.mean(-1, true));
    return g;
  }

  void inject(at::Tensor& G, const std::vector<Target>& ts, int64_t layer, const at::Tensor& w, const at::Tensor& s) const {
    for (size_t b = 0; b < ts.size(); ++b) {
      if (ts[b].layer != layer) continue;
      const int64_t p = ts[b].pos;
      G[static_cast<int64_t>(b)][p] += norm_back_(ts[b].vec.clone(), w, s.defined() ? s[p] : s);
    }
  }

  // Frozen attention, OV only: out[q] = Σ_h Σ_k A_h[q, k] ln1(x)[k] W_V,h W_O,h (+ constants). The pattern's
  // transpose is applied per head to all B rows at once ([H, P, P] × [H, P, B·dh]), never broadcast to B.
  at::Tensor attention_back(const at::Tensor& G, int64_t l) const {
    const Layer& ly = layers_[l];
    const int64_t B = G.size(0), P = G.size(1), H = c_.n_heads, dh = c_.d_head;
    const at::Tensor g = fz_.s_attn.empty() ? G : norm_back_(G.clone(), ly.attn_w, fz_.s_attn[l].slice(0, 0, P));
    at::Tensor z = at::matmul(g, ly.WO.t()).view({B, P, H, dh}).permute({2, 1, 0, 3}).reshape({H, P, B * dh});
    const at::Tensor pat = fz_.pattern[l].slice(1, 0, P).slice(2, 0, P);
    at::Tensor y = at::bmm(pat.transpose(1, 2), z);  // [H, P, B·dh]
    z = at::Tensor();
    y = y.view({H, P, B, dh}).permute({2, 1, 0, 3}).reshape({B, P, H * dh});
    return norm_back_(at::matmul(y, ly.WV.t()), ly.ln1_w, fz_.s1[l].slice(0, 0, P));
  }

  // The same for gradients that are nonzero at one position each: g [n, d] at positions pos [n] -> [n, P, d].
  // out[k] = Σ_h A_h[pos, k] (g W_O,hᵀ) W_V,hᵀ: the pattern's row at pos scales one vector per head.
  at::Tensor attention_back_at(at::Tensor g, const at::Tensor& pos, int64_t l, int64_t P) const {
    const Layer& ly = layers_[l];
    const int64_t n = g.size(0), H = c_.n_heads, dh = c_.d_head;
    if (!fz_.s_attn.empty()) g = norm_back_(std::move(g), ly.attn_w, fz_.s_attn[l].index_select(0, pos));
    const at::Tensor z = at::matmul(g, ly.WO.t()).view({n, 1, H, dh});
    const at::Tensor a = fz_.pattern[l].index_select(1, pos).slice(2, 0, P).permute({1, 2, 0}).unsqueeze(3);  // [n, P, H, 1]
    const at::Tensor y = (a * z).reshape({n, P, H * dh});
    return norm_back_(at::matmul(y, ly.WV.t()), ly.ln1_w, fz_.s1[l].slice(0, 0, P));
  }

  // Edges from everything written at the MLP output of layer `out`: features (from any layer that writes
  // there) and the error of that layer, at the positions G covers.
  void read_mlp_out(const at::Tensor& G, int64_t out, at::Tensor& rows) const {
    const int64_t P = G.size(1);
    for (int64_t src = 0; src <= out; ++src) {
      const at::Tensor dec = cache_dec_ ? dec_[src][out - src] : scaled_decoder(src, out);
      if (!dec.defined()) continue;
      // the features of one position are contiguous (sorted by layer, position, feature): one small product
      // per position, no [B, n, d] gather
      const int64_t a = fz_.layer_start[src];
      for (const PosSpan& sp : spans_[src]) {
        if (sp.pos >= P) break;
        rows.slice(1, a + sp.begin, a + sp.end) += at::matmul(G.select(1, sp.pos), dec.slice(0, sp.begin, sp.end).t());
      }
      // gathered from the mapped files: their pages go back once read (at 505 tokens on the GPT-2-small shape
      // every layer's decoder would otherwise stay resident, 0.9 GB; reading them again is a minor fault each)
      if (!cache_dec_) tcs_.release(src);
    }
    const int64_t e0 = fz_.layer_start.back() + out * fz_.T;
    rows.slice(1, e0, e0 + P).copy_(dot_rows(G, fz_.errors[out]));
  }

  const Model& m_;
  const ModelConfig& c_;
  const Frozen& fz_;
  const GraphTranscoders& tcs_;
  bool cache_dec_ = true;
  std::vector<Layer> layers_;
  at::Tensor lnf_w_;
  std::vector<std::vector<at::Tensor>> dec_;
  std::vector<std::vector<PosSpan>> spans_;
  int64_t n_cols_ = 0;
};

// ---- which features get rows: circuit-tracer's influence ranking ---------------------------------------

/// Influence on the logits of every column through the rows computed so far (row r of the blocks, in order,
/// belongs to node row_node[r]; the logits' nodes carry their probabilities): |rows| normalised per row,
/// block by block, so no second copy of the rows is held.
at::Tensor partial_influence(const std::vector<at::Tensor>& blocks, const std::vector<int64_t>& row_node,
                             const at::Tensor& logit_p, int64_t n_total) {
  std::vector<at::Tensor> sums, idx;
  size_t r0 = 0;
  for (const at::Tensor& b : blocks) {
    sums.push_back(b.abs().to(at::kDouble).sum(1, true).clamp_min(1e-8));
    const auto first = row_node.begin() + static_cast<std::ptrdiff_t>(r0);
    idx.push_back(at::tensor(std::vector<int64_t>(first, first + b.size(0)), at::kLong));
    r0 += static_cast<size_t>(b.size(0));
  }
  const int64_t n_cols = blocks.front().size(1);
  at::Tensor prod = at::zeros({n_total}, at::kDouble);
  prod.slice(0, n_total - logit_p.size(0)).copy_(logit_p);
  at::Tensor influence = at::zeros({n_cols}, at::kDouble);
  for (int it = 0; it < 1000; ++it) {
    throw_if_cancelled("the attribution graph, ranking features");
    at::Tensor next = at::zeros({n_cols}, at::kDouble);
    for (size_t k = 0; k < blocks.size(); ++k)
      next += at::matmul(prod.index_select(0, idx[k]), blocks[k].abs().to(at::kDouble).div_(sums[k]));
    if (!next.ne(0).any().item<bool>()) return influence;
    influence += next;
    prod = at::zeros({n_total}, at::kDouble);
    prod.slice(0, 0, n_cols).copy_(next);
  }
  throw Error("graph: feature influence did not converge in 1000 steps");
}

void check_options(const Model& m, const at::Tensor& ids, const GraphTranscoders& tcs, const GraphOptions& o) {
  const ModelConfig& c = m.config();
  if (ids.dim() != 1 || ids.size(0) < 1) throw UsageError("graph: the prompt must be one non-empty sequence of ids");
  if (ids.size(0) > c.n_ctx)
    throw UsageError(fmt::format("graph: the prompt has {} tokens; {} takes at most {}", ids.size(0), m.source(), c.n_ctx));
  if (tcs.n_layers() != c.n_layers)
    throw UsageError(fmt::format("graph: {} holds transcoders for {} layers; {} has {}", tcs.source(), tcs.n_layers(), m.source(),
                                 c.n_layers));
  if (o.max_n_logits < 1) throw UsageError("graph: max_n_logits must be >= 1");
  if (!(o.desired_logit_prob > 0 && o.desired_logit_prob <= 1)) throw UsageError("graph: desired_logit_prob must be in (0, 1]");
  if (o.batch_size < 1) throw UsageError("graph: batch_size must be >= 1");
  if (o.max_feature_nodes < 0) throw UsageError("graph: max_feature_nodes must be >= 0 (0: every active feature)");
  if (o.update_interval < 1) throw UsageError("graph: update_interval must be >= 1");
  check_block_supported(m);
}

/// Where rows go: out(i, n) gives the [n, n_cols] slice for the rows of order[i .. i + n).
using RowSink = std::function<at::Tensor(int64_t, int64_t)>;

/// Computes the rows of `order` (indices into the active features) in batches into `out`. Encoder rows are
/// read once per layer and batch (a stored BF16 matrix is upcast only in those rows).
void feature_rows(const Backward& bw, const Frozen& fz, const GraphTranscoders& tcs, const std::vector<int64_t>& order,
                  int64_t batch, const RowSink& out, const std::function<void(int64_t)>& done) {
  auto act = fz.active.accessor<int64_t, 2>();
  auto pos = [&](size_t j) { return act[order[j]][1]; };
  // Rows [i, e) computed together, or as two halves where that saves a fifth of the work: a batch costs about
  // its rows × (its last position + 1), everything being causal, so a batch sorted by position whose positions
  // spread costs less as two (each half still a large product; 127 tokens, 128 features: a sixth less work)
  std::function<void(size_t, size_t)> run = [&](size_t i, size_t e) {
    const size_t n = e - i, h = i + n / 2;
    const bool sorted =
        std::is_sorted(order.begin() + static_cast<std::ptrdiff_t>(i), order.begin() + static_cast<std::ptrdiff_t>(e),
                       [&](int64_t x, int64_t y) { return act[x][1] < act[y][1]; });
    if (n >= 32 && sorted &&
        static_cast<double>(h - i) * static_cast<double>(pos(h - 1) + 1) +
                static_cast<double>(e - h) * static_cast<double>(pos(e - 1) + 1) <=
            0.8 * static_cast<double>(n) * static_cast<double>(pos(e - 1) + 1)) {
      run(i, h);
      run(h, e);
      return;
    }
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
    bw.rows(ts, out(static_cast<int64_t>(i), static_cast<int64_t>(e - i)));
    done(static_cast<int64_t>(e - i));
  };
  for (size_t i = 0; i < order.size(); i += static_cast<size_t>(batch))
    run(i, std::min(order.size(), i + static_cast<size_t>(batch)));
}

/// The logit rows (K of them) into out(k, n) slices.
void logit_rows(const Backward& bw, const Frozen& fz, const Logits& lg, int64_t batch, const RowSink& out,
                const std::function<void(int64_t)>& done) {
  const int64_t K = lg.ids.size(0);
  for (int64_t i = 0; i < K; i += batch) {
    std::vector<Target> ts;
    for (int64_t k = i; k < std::min(K, i + batch); ++k) ts.push_back({fz.L, fz.T - 1, lg.vecs[k]});
    bw.rows(ts, out(i, static_cast<int64_t>(ts.size())));
    done(static_cast<int64_t>(ts.size()));
  }
}

/// The graph's rows [F + K, S] (selected features ascending, then the logits; columns the selected features,
/// errors, tokens) and which features were selected, in the order circuit-tracer visits them. When every
/// active feature gets its row, the rows are written straight into the result. Otherwise each batch is kept
/// over every active feature's column (the ranking reads them all), then compacted to the selected ones.
at::Tensor select_and_compute(const Backward& bw, const Frozen& fz, const GraphTranscoders& tcs, const Logits& lg,
                              const GraphOptions& o, std::vector<int64_t>& selected) {
  const int64_t A = fz.layer_start.back(), K = lg.ids.size(0), n_cols = bw.n_cols();
  const int64_t want = o.max_feature_nodes == 0 ? A : std::min(o.max_feature_nodes, A);
  int64_t done = 0;
  auto tick = [&](int64_t n) {
    done += n;
    if (o.progress) o.progress(done, K + want);
  };
  if (want == A) {
    at::Tensor rows = at::empty({A + K, n_cols}, at::kFloat);
    logit_rows(
        bw, fz, lg, o.batch_size, [&](int64_t i, int64_t n) { return rows.narrow(0, A + i, n); }, tick);
    selected.resize(static_cast<size_t>(A));
    std::iota(selected.begin(), selected.end(), 0);
    feature_rows(
        bw, fz, tcs, selected, o.batch_size, [&](int64_t i, int64_t n) { return rows.narrow(0, i, n); }, tick);
    return rows;
  }
  std::vector<at::Tensor> blocks;
  std::vector<int64_t> row_node;  // a feature's active index, or n_cols + k for logit k
  auto block = [&](int64_t, int64_t n) {
    blocks.push_back(at::empty({n, n_cols}, at::kFloat));
    return blocks.back();
  };
  logit_rows(bw, fz, lg, o.batch_size, block, tick);
  for (int64_t k = 0; k < K; ++k) row_node.push_back(n_cols + k);
  std::vector<char> visited(static_cast<size_t>(A), 0);
  auto act = fz.active.accessor<int64_t, 2>();
  int64_t n_visited = 0;
  while (n_visited < want) {
    at::Tensor inf = partial_influence(blocks, row_node, lg.probs, n_cols + K).slice(0, 0, A);
    at::Tensor rank = at::argsort(inf, 0, /*descending=*/true);
    const int64_t queue = std::min(o.update_interval * o.batch_size, want - n_visited);
    std::vector<int64_t> pending;
    auto r = rank.accessor<int64_t, 1>();
    for (int64_t i = 0; i < A && static_cast<int64_t>(pending.size()) < queue; ++i)
      if (!visited[static_cast<size_t>(r[i])]) pending.push_back(r[i]);
    for (int64_t k : pending) visited[static_cast<size_t>(k)] = 1;
    n_visited += static_cast<int64_t>(pending.size());
    // batches of nearby positions: a batch propagates only the positions up to its last target's
    std::stable_sort(pending.begin(), pending.end(), [&](int64_t x, int64_t y) { return act[x][1] < act[y][1]; });
    row_node.insert(row_node.end(), pending.begin(), pending.end());
    feature_rows(bw, fz, tcs, pending, o.batch_size, block, tick);
  }
  for (int64_t k = 0; k < A; ++k)
    if (visited[static_cast<size_t>(k)]) selected.push_back(k);
  // compaction, a block at a time, each freed once copied
  const int64_t F = static_cast<int64_t>(selected.size());
  std::vector<int64_t> col(selected), dst_of(static_cast<size_t>(A), -1);
  for (int64_t j = A; j < n_cols; ++j) col.push_back(j);
  for (int64_t i = 0; i < F; ++i) dst_of[static_cast<size_t>(selected[static_cast<size_t>(i)])] = i;
  const at::Tensor cols = at::tensor(col, at::kLong);
  at::Tensor rows = at::empty({F + K, F + n_cols - A}, at::kFloat);
  size_t r0 = 0;
  for (at::Tensor& b : blocks) {
    std::vector<int64_t> dst;
    for (int64_t j = 0; j < b.size(0); ++j) {
      const int64_t node = row_node[r0 + static_cast<size_t>(j)];
      dst.push_back(node < A ? dst_of[static_cast<size_t>(node)] : F + (node - n_cols));
    }
    r0 += static_cast<size_t>(b.size(0));
    rows.index_copy_(0, at::tensor(dst, at::kLong), b.index_select(1, cols));
    b = at::Tensor();
  }
  return rows;
}

}  // namespace graph_engine

AttributionGraph attribution_graph(const Model& model, const at::Tensor& ids_in, const GraphTranscoders& tcs,
                                   const GraphOptions& o) {
  using namespace graph_engine;
  at::Tensor ids = ids_in.dim() == 2 && ids_in.size(0) == 1 ? ids_in[0] : ids_in;
  ids = ids.to(at::kLong).contiguous();
  check_options(model, ids, tcs, o);
  std::shared_ptr<const Frozen> kept = take_forward(model, ids, tcs, o.zero_first_position);
  if (!kept) kept = std::make_shared<const Frozen>(record_forward(model, ids, tcs, o.zero_first_position));
  const Frozen& fz = *kept;
  const Logits lg = salient_logits(model, fz.last_logits, o);
  const Backward bw(model, tcs, fz);
  std::vector<int64_t> selected;
  AttributionGraph g;
  g.rows = select_and_compute(bw, fz, tcs, lg, o, selected);
  g.ids = ids;
  g.logit_ids = lg.ids;
  g.logit_probs = lg.probs;
  g.active_features = fz.active;
  g.activations = fz.acts;
  g.selected = at::tensor(selected, at::kLong);
  g.n_layers = fz.L;
  g.n_pos = fz.T;
  if (o.dense_adjacency) g.adjacency = g.dense_adjacency();
  return g;
}

}  // namespace vocablens

// tests/support/frozen_replacement.hpp — circuit-tracer's frozen replacement model in float64, written here from
// the definitions (not from vocablens's engine): frozen attention patterns and norm denominators (a norm after
// attention, Gemma-2's, included: its denominator is the true attention output's, computed here from the
// cached stream and pattern), each MLP's output (after a post-MLP norm: what hook_mlp_out holds) frozen at its
// true value except the removed source's share and the live skip connection. graph_test
// checks every adjacency entry of vocablens's attribution graphs against one intervention in it.
//
//   FrozenRef f(model, ref_per_layer(dir, L), ids);  f.settle();
//   Tensor rows = intervened(f, graph);     // [F + K, N]: each source's column by removing it
//
// Private to the one test file that includes it (an unnamed namespace).
#pragma once
#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "vocablens/graph.hpp"
#include "vocablens/model.hpp"
#include "vocablens/sae.hpp"
#include "vocablens/weight.hpp"

namespace {

using at::Tensor;

Tensor g64(const Tensor& t) { return t.defined() ? vocablens::materialize_weight(t).to(at::kDouble) : t; }

/// The transcoders as the reference reads them, float64: per layer the encoder (W_enc [d, n], b_enc,
/// threshold), the decoder bias and skip of its output block, and dec[src][j] [n, d]: what a unit feature of
/// layer src writes into block src + j (per-layer: j = 0 only; a CLT: every later block).
struct RefTranscoders {
  std::vector<Tensor> W_enc, b_enc, thr, b_dec, W_skip;
  std::vector<std::vector<Tensor>> dec;
};

RefTranscoders ref_per_layer(const std::string& dir, int64_t L) {
  RefTranscoders r;
  for (int64_t l = 0; l < L; ++l) {
    vocablens::Sae s = vocablens::load_sae(dir + "/layer_" + std::to_string(l) + ".safetensors");
    r.W_enc.push_back(g64(s.W_enc));
    r.b_enc.push_back(g64(s.b_enc));
    r.thr.push_back(g64(s.threshold));
    r.b_dec.push_back(g64(s.b_dec));
    r.W_skip.push_back(g64(s.W_skip));
    r.dec.push_back({g64(s.W_dec)});
  }
  return r;
}

/// The frozen replacement model in float64, written from the definitions, and what it reads of the model's
/// one true forward pass (patterns, norm denominators, MLP outputs).
struct FrozenRef {
  const vocablens::Model& m;
  RefTranscoders tc;
  Tensor ids;
  int64_t T, L, d;
  std::vector<Tensor> pattern, s1, s2, s_attn, mlp_true, mlp_in0, acts, errs;
  std::vector<Tensor> WV, WO, bV;  // each layer's value and output weights in float64, converted once
  Tensor sf, embed, tok;
  double s2_factor = 1.0;      // != 1: a deliberately wrong ln2 denominator (the break-check)
  double s_attn_factor = 1.0;  // != 1: the same for the post-attention norm's
  // where the transcoders read: 0 the MLP's input (ln2 with its weight and bias), 1 ln2.hook_normalized
  // (before them), 2 hook_resid_mid (before ln2)
  int input = 0;
  int64_t drop_src = -1, drop_out = -1;  // >= 0: removing a feature of layer drop_src forgets its write into drop_out

  FrozenRef(const vocablens::Model& model, RefTranscoders tcs, Tensor ids_) : m(model), tc(std::move(tcs)), ids(std::move(ids_)) {
    const auto& c = m.config();
    T = ids.size(0), L = c.n_layers, d = c.d_model;
    vocablens::CacheSpec spec = vocablens::CacheSpec::all();
    auto out = m.forward(ids, spec);
    for (int64_t l = 0; l < L; ++l) {
      pattern.push_back(out.cache.get("pattern", l)[0].to(at::kDouble));
      s1.push_back(denom(out.cache.get("resid_pre", l)[0].to(at::kDouble)));
      s2.push_back(denom(out.cache.get("resid_mid", l)[0].to(at::kDouble)));
      mlp_true.push_back(out.cache.get("mlp_out", l)[0].to(at::kDouble));
    }
    for (int64_t l = 0; l < L; ++l) {
      WV.push_back(m.W_V(l).to(at::kDouble));
      WO.push_back(m.W_O(l).to(at::kDouble));
      bV.push_back(m.b_V(l).defined() ? m.b_V(l).to(at::kDouble).unsqueeze(1) : Tensor());
    }
    // the post-attention norm's denominator: of the true attention output before that norm, from the true
    // stream entering the block and the true pattern
    for (int64_t l = 0; l < L && m.weights().layers[l].post_attn_norm_w.defined(); ++l) {
      const auto& w = m.weights().layers[l];
      s_attn.push_back(denom(attention(l, norm(out.cache.get("resid_pre", l)[0].to(at::kDouble), s1[l], w.ln1_w, w.ln1_b))));
    }
    sf = denom(out.cache.get("resid_post", L - 1)[0].to(at::kDouble));
    tok = g64(m.weights().W_E).index_select(0, ids) * c.embed_scale;
    embed = tok.clone();
    if (m.weights().W_pos.defined()) embed = embed + g64(m.weights().W_pos).slice(0, 0, T);
  }

  Tensor denom(const Tensor& x) const {
    const auto& c = m.config();
    if (c.norm == vocablens::NormKind::LayerNorm) return at::sqrt(x.var(-1, false, true) + c.norm_eps);
    return at::sqrt(x.pow(2).mean(-1, true) + c.norm_eps);
  }
  Tensor norm(const Tensor& x, const Tensor& s, const at::Tensor& w, const at::Tensor& b) const {
    Tensor y = m.config().norm == vocablens::NormKind::LayerNorm ? x - x.mean(-1, true) : x;
    y = y / s;
    if (w.defined()) y = y * g64(w);
    if (b.defined()) y = y + g64(b);
    return y;
  }
  /// The frozen attention's output before any post-attention norm, from its input h = ln1(x) [T, d].
  Tensor attention(int64_t l, const Tensor& h) const {
    Tensor v = at::matmul(h.unsqueeze(0), WV[l]);  // [H, T, dh]
    if (bV[l].defined()) v = v + bV[l];
    Tensor attn = at::matmul(at::matmul(pattern[l], v), WO[l]).sum(0);
    const auto& w = m.weights().layers[l];
    return w.b_o.defined() ? attn + g64(w.b_o) : attn;
  }
  Tensor encode(int64_t l, const Tensor& x) const {  // float64 activations from the definitions
    Tensor pre = at::matmul(x, tc.W_enc[l]) + tc.b_enc[l];
    Tensor a = at::relu(pre);
    if (tc.thr[l].defined()) a = a * pre.gt(tc.thr[l]).to(at::kDouble);
    return a;
  }
  Tensor skip(int64_t l, const Tensor& x) const {
    return tc.W_skip[l].defined() ? at::matmul(x, tc.W_skip[l]) : at::zeros_like(x);
  }

  /// One source removed from the frozen model: kind 0 feature (layer, pos, feature), 1 error (layer, pos),
  /// 2 token (pos), -1 none. Returns the MLP inputs of every layer [L][T, d] and the final norm's output.
  struct Run {
    std::vector<Tensor> mlp_in;
    Tensor final_out;
  };
  Run run(int kind, int64_t sl, int64_t sp, int64_t sf_idx) const {
    const auto& c = m.config();
    Run r;
    Tensor x = embed.clone();
    if (kind == 2) x[sp] -= tok[sp];
    for (int64_t l = 0; l < L; ++l) {
      const auto& w = m.weights().layers[l];
      Tensor attn = attention(l, norm(x, s1[l], w.ln1_w, w.ln1_b));
      if (w.post_attn_norm_w.defined()) attn = norm(attn, s_attn[l] * s_attn_factor, w.post_attn_norm_w, at::Tensor());
      x = x + attn;
      Tensor mi = input == 2
                      ? x.clone()
                      : norm(x, s2[l] * s2_factor, input == 0 ? w.ln2_w : at::Tensor(), input == 0 ? w.ln2_b : at::Tensor());
      r.mlp_in.push_back(mi);
      // the MLP's output frozen at its true value, the skip connection live
      Tensor mlp = mlp_true[l] + skip(l, mi) - skip(l, mlp_in0.empty() ? mi : mlp_in0[l]);
      // a feature of layer sl writes into every block its decoder reaches (a CLT: sl and every later one)
      const int64_t j = l - sl;
      if (kind == 0 && j >= 0 && j < static_cast<int64_t>(tc.dec[sl].size()) && !(sl == drop_src && l == drop_out))
        mlp[sp] -= acts[sl][sp][sf_idx] * tc.dec[sl][j][sf_idx];
      if (kind == 1 && sl == l) mlp[sp] -= errs[l][sp];
      x = x + mlp;
    }
    r.final_out = c.final_norm ? norm(x, sf, m.weights().lnf_w, m.weights().lnf_b) : x;
    return r;
  }

  /// The baseline: MLP inputs, activations (position 0 zeroed) and errors of the frozen model as it is; the
  /// reconstruction of block l sums what every layer's features write there.
  void settle() {
    Run base = run(-1, 0, 0, 0);
    mlp_in0 = base.mlp_in;
    acts.clear();
    errs.clear();
    for (int64_t l = 0; l < L; ++l) acts.push_back(encode(l, mlp_in0[l]));
    for (int64_t l = 0; l < L; ++l) {
      Tensor recon = tc.b_dec[l] + skip(l, mlp_in0[l]);
      for (int64_t src = 0; src <= l; ++src)
        if (l - src < static_cast<int64_t>(tc.dec[src].size())) recon = recon + at::matmul(acts[src], tc.dec[src][l - src]);
      Tensor e = mlp_true[l] - recon;
      e[0].zero_();
      errs.push_back(e);
    }
    for (Tensor& a : acts) a[0].zero_();
  }
};

/// The logits' demeaned unembedding columns [d, K] (float64), once per graph: converting W_U for every one
/// of the thousands of interventions was most of graph_test's run time.
Tensor logit_directions(const FrozenRef& f, const vocablens::AttributionGraph& g) {
  Tensor WU = g64(f.m.weights().W_U);
  return WU.index_select(1, g.logit_ids) - WU.mean(1, true);
}

/// Where the graph's selected features sit, gathered once per graph: per layer the positions and feature
/// indices of its selected features and their rows in the graph's order. Indexing them one `.item()` at a
/// time in every one of the thousands of interventions was most of graph_test's run time.
struct TargetIndex {
  std::vector<Tensor> pos, col;  // per layer: positions [n_l], the W_enc columns of their features [d, n_l]
  Tensor order;                  // the graph's row of each gathered value, layer by layer
};

TargetIndex target_index(const FrozenRef& f, const vocablens::AttributionGraph& g) {
  TargetIndex t;
  const Tensor af = g.active_features.index_select(0, g.selected);  // [F, 3]: layer, position, feature
  std::vector<Tensor> rows;
  for (int64_t l = 0; l < f.L; ++l) {
    const Tensor at_l = af.select(1, 0).eq(l).nonzero().reshape({-1});
    t.pos.push_back(af.select(1, 1).index_select(0, at_l));
    t.col.push_back(f.tc.W_enc[l].index_select(1, af.select(1, 2).index_select(0, at_l)));
    rows.push_back(at_l);
  }
  t.order = at::cat(rows);
  return t;
}

/// The targets' values in one run, in the graph's row order: the selected features' pre-activations (linear
/// part), then the logits' demeaned reading.
Tensor target_values(const FrozenRef& f, const FrozenRef::Run& r, const TargetIndex& t, const Tensor& u) {
  std::vector<Tensor> gathered;
  for (int64_t l = 0; l < f.L; ++l) gathered.push_back((r.mlp_in[l].index_select(0, t.pos[l]) * t.col[l].t()).sum(1));
  Tensor feats = at::empty({t.order.size(0)}, at::kDouble);
  feats.index_copy_(0, t.order, at::cat(gathered));
  return at::cat({feats, at::matmul(r.final_out[f.T - 1], u)});
}

/// The reference adjacency's rows of the selected features and logits, every source's column by one
/// intervention.
Tensor intervened(const FrozenRef& f, const vocablens::AttributionGraph& g) {
  const Tensor u = logit_directions(f, g);
  const TargetIndex t = target_index(f, g);
  const Tensor base = target_values(f, f.run(-1, 0, 0, 0), t, u);
  const int64_t N = g.n_nodes();
  Tensor ref = at::zeros({base.size(0), N}, at::kDouble);
  auto col = [&](int64_t j, const FrozenRef::Run& r) { ref.select(1, j).copy_(base - target_values(f, r, t, u)); };
  const Tensor af = g.active_features.index_select(0, g.selected).contiguous();
  const int64_t* a = af.data_ptr<int64_t>();
  for (int64_t i = 0; i < g.n_selected(); ++i) col(i, f.run(0, a[3 * i], a[3 * i + 1], a[3 * i + 2]));
  for (int64_t l = 0; l < f.L; ++l)
    for (int64_t p = 0; p < f.T; ++p) col(g.error_node(l, p), f.run(1, l, p, 0));
  for (int64_t p = 0; p < f.T; ++p) col(g.token_node(p), f.run(2, 0, p, 0));
  return ref;
}

}  // namespace

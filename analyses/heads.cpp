// Attention heads in vocabulary space: exact streamed top-k (token, token) pairs and factored spectra.
#include "token_label.hpp"
#include "vocablens/heads.hpp"

#include <algorithm>
#include <iostream>
#include <cctype>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "vocablens/error.hpp"
#include "vocablens/interrupt.hpp"
#include "vocablens/nonfinite.hpp"
#include "vocablens/model.hpp"
#include "vocablens/tokenizer.hpp"

namespace vocablens {

CircuitKind parse_circuit_kind(const std::string& s) {
  std::string l = s;
  for (auto& c : l) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (l == "ov") return CircuitKind::OV;
  if (l == "qk") return CircuitKind::QK;
  throw UsageError("unknown circuit kind '" + s + "' (expected ov or qk)");
}

const char* to_string(CircuitKind k) { return k == CircuitKind::OV ? "ov" : "qk"; }

namespace {

void check_head(const Model& m, int64_t layer, int64_t head) {
  const auto& c = m.config();
  if (layer < 0 || layer >= c.n_layers)
    throw UsageError(fmt::format("layer {} is out of range (model has {} layers: 0..{})", layer, c.n_layers, c.n_layers - 1));
  if (head < 0 || head >= c.n_heads)
    throw UsageError(
        fmt::format("head {} is out of range (model has {} heads per layer: 0..{})", head, c.n_heads, c.n_heads - 1));
}

}  // namespace

FactoredMatrix head_weight_circuit(const Model& m, int64_t layer, int64_t head, CircuitKind kind) {
  check_head(m, layer, head);
  if (kind == CircuitKind::OV) return {m.W_V(layer)[head], m.W_O(layer)[head]};
  return {m.W_Q(layer)[head], m.W_K(layer)[head].t()};
}

namespace {
// W_U passed in: for stored-dtype weights m.W_U() is a fresh float32 upcast ([d, V], 0.5 GB for a 7B model),
// so analyze_heads makes it once rather than once per head.
FactoredMatrix vocab_circuit(const Model& m, const at::Tensor& R, const at::Tensor& W_U, int64_t layer, int64_t head,
                             CircuitKind kind) {
  check_head(m, layer, head);
  if (!R.defined() || R.dim() != 2 || R.size(0) != m.config().d_model)
    throw UsageError("head_vocab_circuit: the read projection must be [d_model, V]");
  at::NoGradGuard no_grad;
  at::Tensor Rt = R.t();  // [V, d]
  if (kind == CircuitKind::OV) {
    at::Tensor A = at::mm(Rt, m.W_V(layer)[head]).contiguous();   // [V, d_head]
    at::Tensor B = at::mm(m.W_O(layer)[head], W_U).contiguous();  // [d_head, V]
    return {A, B};
  }
  at::Tensor A = at::mm(Rt, m.W_Q(layer)[head]).contiguous();     // [V, d_head]
  at::Tensor B = at::mm(m.W_K(layer)[head].t(), R).contiguous();  // [d_head, V]
  return {A, B};
}
}  // namespace

FactoredMatrix head_vocab_circuit(const Model& m, const at::Tensor& R, int64_t layer, int64_t head, CircuitKind kind) {
  return vocab_circuit(m, R, kind == CircuitKind::OV ? m.W_U() : at::Tensor(), layer, head, kind);
}

HeadsAnalysis analyze_heads(const Model& m, const HeadsOptions& o, const Tokenizer* tok) {
  at::NoGradGuard no_grad;
  const auto& cfg = m.config();
  if (o.top_k < 0) throw UsageError("--top-k must be >= 0");
  if (o.kinds.empty()) throw UsageError("no circuit kind chosen");
  std::vector<int64_t> layers = o.layers, heads = o.heads;
  if (layers.empty())
    for (int64_t l = 0; l < cfg.n_layers; ++l) layers.push_back(l);
  if (heads.empty())
    for (int64_t h = 0; h < cfg.n_heads; ++h) heads.push_back(h);
  for (int64_t l : layers)
    for (int64_t h : heads) check_head(m, l, h);

  HeadsAnalysis a;
  a.options = o;
  a.options.layers = layers;
  a.options.heads = heads;
  const bool any_ov = std::find(o.kinds.begin(), o.kinds.end(), CircuitKind::OV) != o.kinds.end();
  const at::Tensor W_U = any_ov ? m.W_U() : at::Tensor();  // once (see vocab_circuit)
  a.vocab_size = m.weights().W_U.size(1);
  a.d_model = cfg.d_model;
  a.d_head = cfg.d_head;
  // --top-k 10^9 ran until out of memory. A circuit has V^2 pairs; the streamed top-k keeps
  // k entries per circuit, so k is bounded by both.
  const int64_t V = a.vocab_size;
  if (o.top_k > V * V)
    throw UsageError(fmt::format("--top-k {} is larger than the number of (token, token) pairs ({}^2 = {})", o.top_k, V, V * V));
  if (o.top_k > kMaxHeadsTopK)
    throw UsageError(
        fmt::format("--top-k {} is above the {} pairs per circuit vocablens keeps in memory", o.top_k, kMaxHeadsTopK));
  if (o.per_token_k > V)
    throw UsageError(fmt::format("--per-token-k {} is larger than the vocabulary ({} tokens)", o.per_token_k, V));
  for (int64_t t : o.source_tokens)
    if (t < 0 || t >= a.vocab_size) throw UsageError(fmt::format("token id {} is out of range [0, {})", t, a.vocab_size));

  // Every circuit reads through E (or E+) and W_U: a NaN there leaves no head defined.
  require_finite(m.W_E(), "W_E", "every head's vocabulary-space circuit passes through it");
  require_finite(m.W_U(), "W_U", "every head's vocabulary-space circuit passes through it");
  at::Tensor R;
  if (o.inverse == InverseKind::Pinv) {
    Pinv p = embedding_pinv(m, o.pinv);
    R = p.pinv;
    a.pinv_rank = p.rank;
    a.embedding_hash = p.hash;
  } else {
    R = read_projection(m, o.inverse, o.pinv);
  }

  TopkStreamOptions so;
  so.k = o.top_k;
  so.prune = o.prune;
  auto allowed = allowed_tokens(a.vocab_size, o.filter, tok);
  a.allowed_tokens = allowed ? static_cast<int64_t>(allowed->size()) : a.vocab_size;
  so.rows = allowed;
  so.cols = allowed;
  so.exclude_diagonal = o.drop_same_token;
  if (o.drop_same_normalized) {
    if (!tok) throw UsageError("dropping pairs of the same word needs the model's tokenizer (pass --tokenizer)");
    so.row_class = normalized_token_classes(*tok, a.vocab_size);
    so.col_class = so.row_class;
  }
  TopkStreamOptions per = so;
  per.k = o.per_token_k > 0 ? o.per_token_k : o.top_k;
  per.rows = o.source_tokens;

  const int64_t n_circuits = static_cast<int64_t>(layers.size() * heads.size() * o.kinds.size());
  for (int64_t l : layers)
    for (int64_t h : heads)
      for (CircuitKind kind : o.kinds) {
        throw_if_cancelled("heads, between circuits");  // a caller's CancelScope (vocablens/interrupt.hpp)
        if (o.progress) o.progress(static_cast<int64_t>(a.circuits.size()), n_circuits);
        HeadCircuit c;
        c.layer = l;
        c.head = h;
        c.kind = kind;
        FactoredMatrix f = vocab_circuit(m, R, W_U, l, h, kind);
        if (!all_finite(f.A) || !all_finite(f.B)) {
          // A NaN in this head's weights (loaded under --allow-nonfinite). Its circuit has no top
          // pairs and no spectrum: empty lists and NaN scores (JSON null); the other heads are exact.
          const std::string name = "layer " + std::to_string(l) + " head " + std::to_string(h) + " " +
                                   (kind == CircuitKind::OV ? "OV" : "QK") + " circuit";
          if (nonfinite_policy() == NonFinitePolicy::Refuse)
            require_finite(all_finite(f.A) ? f.B : f.A, name, "its top pairs and spectrum are undefined");
          std::cerr << "vocablens: warning: the " << name << " holds non-finite values: no top pairs, NaN scores\n";
          c.copying_score = c.weight_copying_score = std::numeric_limits<double>::quiet_NaN();
          a.circuits.push_back(std::move(c));
          continue;
        }
        c.top = topk_stream(f.A, f.B, so, &c.stats);
        if (!o.source_tokens.empty()) c.per_token = topk_rows(f.A, f.B, per);
        if (o.spectra) {
          c.singular_values = singular_values(f);
          c.eigenvalues = eigenvalues(f);
          c.copying_score = copying_score(c.eigenvalues);
          FactoredMatrix w = head_weight_circuit(m, l, h, kind);
          c.weight_singular_values = singular_values(w);
          c.weight_eigenvalues = eigenvalues(w);
          c.weight_copying_score = copying_score(c.weight_eigenvalues);
        }
        a.circuits.push_back(std::move(c));
      }
  if (o.progress) o.progress(n_circuits, n_circuits);
  return a;
}

Result HeadsAnalysis::to_result(const Tokenizer* tok) const {
  Result r;
  r.kind = "heads";
  std::vector<std::string> kinds;
  for (auto k : options.kinds) kinds.push_back(to_string(k));
  r.settings = {{"layers", options.layers},
                {"heads", options.heads},
                {"kinds", kinds},
                {"top_k", options.top_k},
                {"inverse", to_string(options.inverse)},
                {"alpha_only", options.filter.alpha_only},
                {"allow_list_size", options.filter.allow ? static_cast<int64_t>(options.filter.allow->size()) : -1},
                {"allowed_tokens", allowed_tokens},
                {"drop_same_token", options.drop_same_token},
                {"drop_same_normalized", options.drop_same_normalized},
                {"source_tokens", options.source_tokens},
                {"per_token_k", options.per_token_k > 0 ? options.per_token_k : options.top_k},
                {"prune", options.prune},
                {"conventions",
                 "ov: M[s,t] = (R^T W_V W_O W_U)[s,t], s = attended source token, t = promoted target token; "
                 "qk: M[q,k] = (R^T W_Q W_K^T R)[q,k], q = query token, k = key token; R = E+ (pinv), W_U "
                 "(transpose) or W_E^T (embed); biases and norms left out; see docs/projections.md"}};
  if (options.inverse == InverseKind::Pinv) {
    r.settings["pinv_rtol"] = options.pinv.rtol;
    r.settings["pinv_rank"] = pinv_rank;
    r.settings["embedding_hash"] = fmt::format("{:016x}", embedding_hash);
  }
  r.summary["vocab_size"] = vocab_size;
  r.summary["d_head"] = d_head;

  const int64_t C = static_cast<int64_t>(circuits.size()), k = options.top_k;
  const int64_t pk = options.per_token_k > 0 ? options.per_token_k : options.top_k;
  const int64_t S = static_cast<int64_t>(options.source_tokens.size());
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<int64_t> index(static_cast<size_t>(C * 3)), pair_ids(static_cast<size_t>(C * k * 2), -1);
  std::vector<double> pair_values(static_cast<size_t>(C * k), nan);
  std::vector<double> copy(static_cast<size_t>(C)), wcopy(static_cast<size_t>(C));
  const int64_t nsv = d_head;
  std::vector<double> sv(static_cast<size_t>(C * nsv), nan), wsv(static_cast<size_t>(C * nsv), nan);
  std::vector<double> ev_re(static_cast<size_t>(C * nsv), nan), ev_im(static_cast<size_t>(C * nsv), nan);
  std::vector<double> wev_re(static_cast<size_t>(C * nsv), nan), wev_im(static_cast<size_t>(C * nsv), nan);
  std::vector<int64_t> per_ids(static_cast<size_t>(C * S * pk), -1);
  std::vector<double> per_vals(static_cast<size_t>(C * S * pk), nan);

  Table pairs{"pairs", {"layer", "head", "kind", "rank", "src_id", "src", "dst_id", "dst", "value"}, {}};
  Table per_token{"per_token", {"layer", "head", "kind", "token_id", "token", "rank", "dst_id", "dst", "value"}, {}};
  Table table{"circuits",
              {"layer", "head", "kind", "copying_score", "weight_copying_score", "sigma_1", "frobenius", "gemm_fraction",
               "seconds", "dense_flops", "gemm_flops"},
              {}};
  nlohmann::json jc = nlohmann::json::array();
  for (int64_t c = 0; c < C; ++c) {
    const HeadCircuit& hc = circuits[static_cast<size_t>(c)];
    const char* kind = to_string(hc.kind);
    index[c * 3] = hc.layer;
    index[c * 3 + 1] = hc.head;
    index[c * 3 + 2] = hc.kind == CircuitKind::OV ? 0 : 1;
    copy[c] = options.spectra ? hc.copying_score : nan;
    wcopy[c] = options.spectra ? hc.weight_copying_score : nan;
    nlohmann::json top = nlohmann::json::array();
    for (size_t q = 0; q < hc.top.size(); ++q) {
      const auto& e = hc.top[q];
      pair_ids[(c * k + static_cast<int64_t>(q)) * 2] = e.i;
      pair_ids[(c * k + static_cast<int64_t>(q)) * 2 + 1] = e.j;
      pair_values[c * k + static_cast<int64_t>(q)] = e.value;
      pairs.rows.push_back({hc.layer, hc.head, kind, static_cast<int64_t>(q + 1), e.i, token_label(tok, e.i), e.j,
                            token_label(tok, e.j), e.value});
      if (q < 10) top.push_back({token_label(tok, e.i), token_label(tok, e.j), e.value});
    }
    for (int64_t s = 0; s < S && s < static_cast<int64_t>(hc.per_token.size()); ++s) {
      const auto& lst = hc.per_token[static_cast<size_t>(s)];
      for (size_t q = 0; q < lst.size(); ++q) {
        per_ids[(c * S + s) * pk + static_cast<int64_t>(q)] = lst[q].j;
        per_vals[(c * S + s) * pk + static_cast<int64_t>(q)] = lst[q].value;
        per_token.rows.push_back({hc.layer, hc.head, kind, lst[q].i, token_label(tok, lst[q].i), static_cast<int64_t>(q + 1),
                                  lst[q].j, token_label(tok, lst[q].j), lst[q].value});
      }
    }
    double fro = 0;
    for (size_t q = 0; q < hc.singular_values.size() && static_cast<int64_t>(q) < nsv; ++q) {
      sv[c * nsv + static_cast<int64_t>(q)] = hc.singular_values[q];
      fro += hc.singular_values[q] * hc.singular_values[q];
    }
    for (size_t q = 0; q < hc.weight_singular_values.size() && static_cast<int64_t>(q) < nsv; ++q)
      wsv[c * nsv + static_cast<int64_t>(q)] = hc.weight_singular_values[q];
    for (size_t q = 0; q < hc.eigenvalues.size() && static_cast<int64_t>(q) < nsv; ++q) {
      ev_re[c * nsv + static_cast<int64_t>(q)] = hc.eigenvalues[q].real();
      ev_im[c * nsv + static_cast<int64_t>(q)] = hc.eigenvalues[q].imag();
    }
    for (size_t q = 0; q < hc.weight_eigenvalues.size() && static_cast<int64_t>(q) < nsv; ++q) {
      wev_re[c * nsv + static_cast<int64_t>(q)] = hc.weight_eigenvalues[q].real();
      wev_im[c * nsv + static_cast<int64_t>(q)] = hc.weight_eigenvalues[q].imag();
    }
    double sigma1 = hc.singular_values.empty() ? nan : hc.singular_values.front();
    double frac = hc.stats.dense_flops > 0 ? hc.stats.gemm_flops / hc.stats.dense_flops : 0.0;
    auto num_or_null = [&](double v) { return std::isnan(v) ? nlohmann::json() : nlohmann::json(v); };
    table.rows.push_back({hc.layer, hc.head, kind, num_or_null(copy[c]), num_or_null(wcopy[c]), num_or_null(sigma1),
                          options.spectra ? nlohmann::json(std::sqrt(fro)) : nlohmann::json(), frac, hc.stats.seconds,
                          hc.stats.dense_flops, hc.stats.gemm_flops});
    jc.push_back({{"layer", hc.layer},
                  {"head", hc.head},
                  {"kind", kind},
                  {"copying_score", num_or_null(copy[c])},
                  {"weight_copying_score", num_or_null(wcopy[c])},
                  {"sigma_1", num_or_null(sigma1)},
                  {"top_pairs", top}});
  }
  r.summary["circuits"] = jc;
  r.arrays["circuit_index"] = NdArray::i64({C, 3}, index.data());
  r.arrays["pair_ids"] = NdArray::i64({C, k, 2}, pair_ids.data());
  r.arrays["pair_values"] = NdArray::f64({C, k}, pair_values.data());
  if (options.spectra) {
    r.arrays["copying_score"] = NdArray::f64({C}, copy.data());
    r.arrays["weight_copying_score"] = NdArray::f64({C}, wcopy.data());
    r.arrays["singular_values"] = NdArray::f64({C, nsv}, sv.data());
    r.arrays["eigenvalues_real"] = NdArray::f64({C, nsv}, ev_re.data());
    r.arrays["eigenvalues_imag"] = NdArray::f64({C, nsv}, ev_im.data());
    r.arrays["weight_singular_values"] = NdArray::f64({C, nsv}, wsv.data());
    r.arrays["weight_eigenvalues_real"] = NdArray::f64({C, nsv}, wev_re.data());
    r.arrays["weight_eigenvalues_imag"] = NdArray::f64({C, nsv}, wev_im.data());
  }
  if (S > 0) {
    r.arrays["per_token_ids"] = NdArray::i64({C, S, pk}, per_ids.data());
    r.arrays["per_token_values"] = NdArray::f64({C, S, pk}, per_vals.data());
  }
  r.tables.push_back(std::move(pairs));
  if (S > 0) r.tables.push_back(std::move(per_token));
  r.tables.push_back(std::move(table));
  return r;
}

}  // namespace vocablens

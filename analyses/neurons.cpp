// MLP neurons in vocabulary space: keys (and gates) through the read projection, values through W_U.
#include "token_label.hpp"
#include "vocablens/neurons.hpp"

#include <limits>

#include <fmt/format.h>

#include "vocablens/error.hpp"
#include "vocablens/interrupt.hpp"
#include "vocablens/model.hpp"
#include "vocablens/tokenizer.hpp"

namespace vocablens {

namespace {

std::vector<double> row_norms(const at::Tensor& X) {
  at::Tensor n = X.to(at::kDouble).norm(2, {1}).contiguous();
  return std::vector<double>(n.data_ptr<double>(), n.data_ptr<double>() + n.numel());
}

// Lowest-k per row: the top-k of -X (negation is exact, so values are exactly -score), mapped back.
std::vector<std::vector<TopkEntry>> bottom_k(const at::Tensor& X, const at::Tensor& P, int64_t k, const TopkStreamOptions& so) {
  auto r = project_topk(X.neg(), P, k, so);
  for (auto& row : r)
    for (auto& e : row) e.value = -e.value;
  return r;
}

}  // namespace

NeuronsAnalysis analyze_neurons(const Model& m, const NeuronsOptions& o, const Tokenizer* tok) {
  at::NoGradGuard no_grad;
  const auto& cfg = m.config();
  if (o.layer < 0 || o.layer >= cfg.n_layers)
    throw UsageError(
        fmt::format("layer {} is out of range (model has {} layers: 0..{})", o.layer, cfg.n_layers, cfg.n_layers - 1));
  if (o.top_k < 1) throw UsageError("--top-k must be at least 1");
  NeuronsAnalysis a;
  a.options = o;
  const at::Tensor& W_in = m.W_in(o.layer);
  if (!W_in.defined())  // a mixture of experts without a dense MLP: each expert has its own neurons
    throw UsageError(
        fmt::format("layer {} is a mixture of {} experts without a dense MLP: neurons reads a dense MLP's "
                    "neurons (Qwen2-MoE's shared expert), not an expert's",
                    o.layer, cfg.n_experts));
  const at::Tensor& W_gate = m.W_gate(o.layer);
  const at::Tensor& W_out = m.W_out(o.layer);
  a.d_mlp = W_in.size(1);
  a.vocab_size = m.weights().W_U.size(1);  // the stored tensor's shape: no float32 upcast just for a size
  if (o.top_k > a.vocab_size)              // --top-k 10^9 ran until out of memory
    throw UsageError(fmt::format("--top-k {} is larger than the vocabulary ({} tokens)", o.top_k, a.vocab_size));
  a.gated = W_gate.defined();
  std::vector<int64_t> ids = o.neurons;
  if (ids.empty())
    for (int64_t n = 0; n < a.d_mlp; ++n) ids.push_back(n);
  for (int64_t n : ids)
    if (n < 0 || n >= a.d_mlp)
      throw UsageError(
          fmt::format("neuron {} is out of range (layer {} has {} neurons: 0..{})", n, o.layer, a.d_mlp, a.d_mlp - 1));
  a.options.neurons = ids;
  at::Tensor sel = at::tensor(ids, at::kLong);
  TopkStreamOptions so;
  so.cols = allowed_tokens(a.vocab_size, o.filter, tok);

  const size_t N = ids.size();
  a.neurons.resize(N);
  for (size_t q = 0; q < N; ++q) a.neurons[q].neuron = ids[q];
  const bool need_read = o.keys || (o.gates && a.gated);
  at::Tensor R = need_read ? read_projection(m, o.inverse, o.pinv) : at::Tensor();

  // Rows are independent: run them in chunks so that progress can be reported.
  const int64_t stages = (o.keys ? 1 : 0) + (o.gates && a.gated ? 1 : 0) + (o.values ? 1 : 0);
  const int64_t total = stages * static_cast<int64_t>(N);
  int64_t done = 0;
  constexpr int64_t kChunk = 256;
  auto run = [&](const at::Tensor& X, const at::Tensor& P, double NeuronProjection::*norm,
                 std::vector<TopkEntry> NeuronProjection::*top, std::vector<TopkEntry> NeuronProjection::*bottom) {
    auto nr = row_norms(X);
    for (int64_t c0 = 0; c0 < static_cast<int64_t>(N); c0 += kChunk) {
      throw_if_cancelled("neurons, between chunks");  // a caller's CancelScope (vocablens/interrupt.hpp)
      if (o.progress) o.progress(done, total);
      const int64_t cn = std::min<int64_t>(kChunk, static_cast<int64_t>(N) - c0);
      at::Tensor Xc = X.narrow(0, c0, cn);
      auto t = project_topk(Xc, P, o.top_k, so);
      for (int64_t q = 0; q < cn; ++q) {
        a.neurons[static_cast<size_t>(c0 + q)].*norm = nr[static_cast<size_t>(c0 + q)];
        a.neurons[static_cast<size_t>(c0 + q)].*top = std::move(t[static_cast<size_t>(q)]);
      }
      if (o.bottom) {
        auto b = bottom_k(Xc, P, o.top_k, so);
        for (int64_t q = 0; q < cn; ++q) a.neurons[static_cast<size_t>(c0 + q)].*bottom = std::move(b[static_cast<size_t>(q)]);
      }
      done += cn;
    }
  };
  if (o.keys)
    run(W_in.index_select(1, sel).t(), R, &NeuronProjection::key_norm, &NeuronProjection::key_top, &NeuronProjection::key_bottom);
  if (o.gates && a.gated)
    run(W_gate.index_select(1, sel).t(), R, &NeuronProjection::gate_norm, &NeuronProjection::gate_top,
        &NeuronProjection::gate_bottom);
  if (o.values)
    run(W_out.index_select(0, sel), m.W_U(), &NeuronProjection::value_norm, &NeuronProjection::value_top,
        &NeuronProjection::value_bottom);
  if (o.progress) o.progress(total, total);
  return a;
}

Result NeuronsAnalysis::to_result(const Tokenizer* tok) const {
  Result r;
  r.kind = "neurons";
  r.settings = {{"layer", options.layer},
                {"neurons", options.neurons},
                {"top_k", options.top_k},
                {"inverse", to_string(options.inverse)},
                {"keys", options.keys},
                {"gates", options.gates && gated},
                {"values", options.values},
                {"bottom", options.bottom},
                {"alpha_only", options.filter.alpha_only},
                {"allow_list_size", options.filter.allow ? static_cast<int64_t>(options.filter.allow->size()) : -1},
                {"conventions",
                 "key = column of W_in scored by x R, gate = column of W_gate scored by x R, value = row of W_out scored "
                 "by x W_U; R = E+ (pinv), W_U (transpose) or W_E^T (embed); see docs/projections.md"}};
  r.summary["gated"] = gated;
  r.summary["d_mlp"] = d_mlp;
  r.summary["vocab_size"] = vocab_size;
  const int64_t N = static_cast<int64_t>(neurons.size()), k = options.top_k;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Table top{"top_k", {"layer", "neuron", "vector", "direction", "rank", "token_id", "token", "score"}, {}};
  Table norms{"norms", {"layer", "neuron", "key_norm", "gate_norm", "value_norm"}, {}};
  std::vector<double> kn, gn, vn;
  nlohmann::json js = nlohmann::json::array();
  struct Part {
    const char* name;
    bool on;
    std::vector<TopkEntry> NeuronProjection::*top;
    std::vector<TopkEntry> NeuronProjection::*bottom;
  };
  const Part parts[] = {{"key", options.keys, &NeuronProjection::key_top, &NeuronProjection::key_bottom},
                        {"gate", options.gates && gated, &NeuronProjection::gate_top, &NeuronProjection::gate_bottom},
                        {"value", options.values, &NeuronProjection::value_top, &NeuronProjection::value_bottom}};
  for (const auto& n : neurons) {
    kn.push_back(n.key_norm);
    gn.push_back(gated ? n.gate_norm : nan);
    vn.push_back(n.value_norm);
    norms.rows.push_back({options.layer, n.neuron, options.keys ? nlohmann::json(n.key_norm) : nlohmann::json(),
                          options.gates && gated ? nlohmann::json(n.gate_norm) : nlohmann::json(),
                          options.values ? nlohmann::json(n.value_norm) : nlohmann::json()});
    nlohmann::json jn = {{"neuron", n.neuron}};
    for (const auto& p : parts) {
      if (!p.on) continue;
      for (int dir = 0; dir < (options.bottom ? 2 : 1); ++dir) {
        const auto& lst = dir == 0 ? n.*(p.top) : n.*(p.bottom);
        nlohmann::json toks = nlohmann::json::array();
        for (size_t q = 0; q < lst.size(); ++q) {
          top.rows.push_back({options.layer, n.neuron, p.name, dir == 0 ? "top" : "bottom", static_cast<int64_t>(q + 1), lst[q].j,
                              token_label(tok, lst[q].j), lst[q].value});
          if (q < 10) toks.push_back(token_label(tok, lst[q].j));
        }
        jn[std::string(p.name) + (dir == 0 ? "_top" : "_bottom")] = toks;
      }
    }
    js.push_back(jn);
  }
  r.summary["neurons"] = js;
  for (const auto& p : parts) {
    if (!p.on) continue;
    for (int dir = 0; dir < (options.bottom ? 2 : 1); ++dir) {
      std::vector<int64_t> ids(static_cast<size_t>(N * k), -1);
      std::vector<double> vals(static_cast<size_t>(N * k), nan);
      for (int64_t q = 0; q < N; ++q) {
        const auto& lst = dir == 0 ? neurons[q].*(p.top) : neurons[q].*(p.bottom);
        for (size_t e = 0; e < lst.size() && static_cast<int64_t>(e) < k; ++e) {
          ids[q * k + static_cast<int64_t>(e)] = lst[e].j;
          vals[q * k + static_cast<int64_t>(e)] = lst[e].value;
        }
      }
      std::string base = std::string(p.name) + (dir == 0 ? "_top" : "_bottom");
      r.arrays[base + "_ids"] = NdArray::i64({N, k}, ids.data());
      r.arrays[base + "_scores"] = NdArray::f64({N, k}, vals.data());
    }
  }
  std::vector<int64_t> nid;
  for (const auto& n : neurons) nid.push_back(n.neuron);
  r.arrays["neuron_ids"] = NdArray::i64({N}, nid.data());
  if (options.keys) r.arrays["key_norms"] = NdArray::f64({N}, kn.data());
  if (options.gates && gated) r.arrays["gate_norms"] = NdArray::f64({N}, gn.data());
  if (options.values) r.arrays["value_norms"] = NdArray::f64({N}, vn.data());
  r.tables.push_back(std::move(top));
  r.tables.push_back(std::move(norms));
  return r;
}

}  // namespace vocablens

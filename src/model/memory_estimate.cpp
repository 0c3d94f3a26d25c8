// Peak-memory estimate of a forward pass from shapes (vocablens/memory_estimate.hpp).
#include "vocablens/memory_estimate.hpp"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "model/forward_work.hpp"
#include "vocablens/attention.hpp"
#include "vocablens/model.hpp"

namespace vocablens {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;
// Resident size of the CLI with LibTorch and OpenBLAS loaded and a tiny model run (the 4-head model of
// tests/long_context_test.cpp at T = 1024: 188 MiB).
constexpr double kRuntime = 180.0 * kMiB;

// Bytes of the distinct storages the weights view (a mapped file's storage counted once, a tied W_U = W_E
// once).
double weight_bytes(const ModelWeights& w) {
  std::set<const void*> seen;
  double total = 0;
  auto add = [&](const at::Tensor& t) {
    if (!t.defined() || !t.has_storage()) return;
    const void* p = t.storage().data();
    if (!seen.insert(p).second) return;
    total += static_cast<double>(t.storage().nbytes());
  };
  for (const auto* t : {&w.W_E, &w.W_pos, &w.W_seg, &w.emb_norm_w, &w.emb_norm_b, &w.lnf_w, &w.lnf_b, &w.W_U, &w.b_U}) add(*t);
  for (const auto& L : w.layers)
    for (const at::Tensor* t : layer_tensors(L)) add(*t);
  return total;
}

}  // namespace

double MemoryEstimate::total() const {
  double s = 0, peak = 0;
  for (const auto& i : items) s += i.bytes;
  for (const auto& i : phases) peak = std::max(peak, i.bytes);
  return s + peak;
}

std::string MemoryEstimate::table() const {
  size_t w = 5;
  for (const auto& v : {&items, &phases})
    for (const auto& i : *v) w = std::max(w, i.what.size() + 2);
  std::string s;
  for (const auto& i : items) s += fmt::format("  {:<{}}  {:>10.1f} MiB\n", i.what, w, i.bytes / kMiB);
  if (!phases.empty()) {
    s += "  one phase at a time (the largest counts):\n";
    double peak = 0;
    for (const auto& i : phases) peak = std::max(peak, i.bytes);
    for (const auto& i : phases)
      s += fmt::format("  {} {:<{}}  {:>10.1f} MiB\n", i.bytes == peak ? "*" : " ", i.what, w - 2, i.bytes / kMiB);
  }
  s += fmt::format("  {:<{}}  {:>10.1f} MiB\n", "total", w, total() / kMiB);
  return s;
}

MemoryEstimate estimate_forward_memory(const Model& m, int64_t B, int64_t T, const CacheSpec& spec, bool compute_logits) {
  const ModelConfig& c = m.config();
  const double f = 4.0;  // float32 activations
  const double d = static_cast<double>(c.d_model), H = static_cast<double>(c.n_heads), Hkv = static_cast<double>(c.n_kv_heads),
               dh = static_cast<double>(c.d_head), V = static_cast<double>(c.vocab_size);
  // A mixture: each token's k experts' rows, and its k unweighted outputs of d_model (src/model/moe.cpp).
  const double ff = mlp_width(c) + static_cast<double>(c.n_experts_used) * d / 3.0;
  const double rows = static_cast<double>(B) * static_cast<double>(T);
  MemoryEstimate e;
  e.add("runtime (LibTorch, BLAS, program)", kRuntime);
  e.add("weights as stored", weight_bytes(m.weights()));

  const AttentionPolicy pol = attention_policy();
  const bool blocked = pol.blocked && T > pol.block && !spec.pattern;
  const double bs = static_cast<double>(std::min<int64_t>(pol.block, T));
  // Blocked: one score tile and its exp, the query block's copy and running sums. Materialised: the scores,
  // the masked copy and the softmax alive together.
  const double attn = blocked ? static_cast<double>(B) * H * bs * (2 * bs + 2 * dh + 2) * f
                              : 3.0 * static_cast<double>(B) * H * static_cast<double>(T) * static_cast<double>(T) * f;
  const double mlp_rows = std::min(rows, static_cast<double>(kRowBlock));
  const double mlp_tile = (c.gated_mlp ? 3.0 : 2.0) * mlp_rows * ff * f + mlp_rows * d * f;
  if (blocked && !spec.attn_out && !spec.resid_mid && !spec.mlp_out && !spec.wants_norm_points()) {
    // The block by rows (src/model/forward.cpp, docs/runner.md "Long inputs"): whole [B, T, .] tensors are
    // the block's input stream, k, v and one buffer for q, then the stream after the attention and the
    // block's output (a second one when the heads do not fill d_model); the rest is one block of rows at a
    // time: its normalised input, q, k, v and their rotated copies, or the attention tile, or the MLP's rows.
    // The products run over kRowBlock rows (whole query blocks); W_O's rows are gathered during the attention.
    const double whole = rows * (d + 2 * Hkv * dh + (H * dh == d ? d : H * dh + d)) * f;
    const double step_rows =
        static_cast<double>(B) * std::min(static_cast<double>(T), std::max(bs, std::floor(kRowBlock / bs) * bs));
    const double step = step_rows * (d + 2 * (H + Hkv) * dh) * f;
    e.add_phase("forward, one block streamed by rows: input, k, v, q / output; attention tile or MLP rows",
                whole + std::max({step, attn + step_rows * H * dh * f, mlp_tile}));
  } else {
    // One block step by step: its input and normalised input, q k v (and their rotated copies), z and the output.
    const double proj = rows * (2 * d + 2 * (H + Hkv) * dh + H * dh) * f;
    const double mlp = (c.gated_mlp ? 3.0 : 2.0) * mlp_rows * ff * f + (rows > 1024 ? rows * d * f : 0.0);
    e.add_phase(blocked ? "forward, one block: projections, attention tile, MLP rows"
                        : "forward, one block: projections, [B, H, T, T] scores, MLP rows",
                proj + std::max(attn, mlp));
  }

  // Recorded streams: the one between blocks (resid_pre / resid_post) once per boundary.
  const double L = static_cast<double>(spec.layers.empty() ? c.n_layers : static_cast<int64_t>(spec.layers.size()));
  double streams = 0;
  if (spec.resid_pre || spec.resid_post) streams += L + 1;
  for (bool b : {spec.attn_out, spec.resid_mid, spec.mlp_out, spec.ln1_normalized, spec.ln2_normalized, spec.mlp_in})
    streams += b ? L : 0;
  if (spec.final_norm) streams += 1;
  // The norms' denominators: one value per position.
  for (bool b : {spec.ln1_scale, spec.ln2_scale}) streams += b ? L / static_cast<double>(d) : 0;
  if (spec.final_scale) streams += 1 / static_cast<double>(d);
  double cache = streams * rows * d * f;
  if (spec.pattern) cache += L * static_cast<double>(B) * H * static_cast<double>(T) * static_cast<double>(T) * f;
  if (spec.router && c.n_experts > 0) {  // per layer and token: logits [E], indices (int64) and weights [k], outputs [k, d]
    const double k = static_cast<double>(c.n_experts_used);
    cache += L * rows * (static_cast<double>(c.n_experts) * f + k * 8 + k * f + k * d * f);
  }
  if (cache > 0) e.add("cache (recorded activations)", cache);
  if (compute_logits) e.add("logits [B, T, V]", rows * V * f);
  return e;
}

double available_memory() {
  std::ifstream f("/proc/meminfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("MemAvailable:", 0) == 0) {
      std::istringstream is(line.substr(13));
      double kb = -1;
      is >> kb;
      return kb < 0 ? -1 : kb * 1024.0;
    }
  }
  return -1;
}

}  // namespace vocablens

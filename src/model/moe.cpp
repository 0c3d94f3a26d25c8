// The mixture-of-experts MLP step (model/moe.hpp): route, gather each expert's rows, run it, scatter back.
#include "model/moe.hpp"

#include "model/expert_gemm.hpp"
#include "util/parallel.hpp"

#include <algorithm>
#include <string>
#include <tuple>

#include "vocablens/error.hpp"
#include "vocablens/gguf.hpp"
#include "vocablens/weight.hpp"

namespace vocablens::detail {

at::Tensor proj(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b);          // forward.cpp
at::Tensor gated(const ModelConfig& cfg, const at::Tensor& gate, const at::Tensor& up);  // forward.cpp

namespace {

// Runs the hooks of (p, l) on t viewed as [lead..., last]; returns t as [rows, last].
at::Tensor moe_hooked(const hook_detail::HookTable* hk, HookPoint p, int64_t l, at::Tensor t, std::vector<int64_t> lead) {
  if (!hk || !hk->has(p, l)) return t;
  const int64_t rows = t.size(0), last = t.size(1);
  lead.push_back(last);
  at::Tensor v = t.view(lead);
  hk->apply(p, l, v);
  return v.reshape({rows, last});
}

// A hook may write any index: the one line that names the point, the value and the range.
void check_expert_indices(const at::Tensor& idx, int64_t E, int64_t l) {
  const std::string site = HookSite{HookPoint::ExpertIndices, l}.tl_name();
  if (idx.scalar_type() != at::kLong) throw UsageError(site + ": expert indices must be int64");
  if (idx.numel() == 0) return;
  const int64_t lo = idx.min().item<int64_t>(), hi = idx.max().item<int64_t>();
  if (lo < 0 || hi >= E)
    throw UsageError(site + ": expert index " + std::to_string(lo < 0 ? lo : hi) + " is out of range [0, " + std::to_string(E) +
                     ")");
}

// Whether expert e's three products run in expert_gemm.hpp's kernel: no biases, nothing recording gradients (the
// kernel is not differentiable), and each weight float32 stored as rows (read in place, no per-call packing) or,
// under float32 compute, stored rows of another type (packed ggml blocks, F16 / BF16 [out, in]), which
// expert_product decodes first. bfloat16 and int8 compute keep weight_matmul's own arithmetic.
bool expert_kernel(const LayerWeights& L, size_t e, const at::Tensor& x) {
  if (!expert_gemm_available() || !L.exp_gate_b.empty() || !L.exp_up_b.empty() || !L.exp_down_b.empty()) return false;
  if (x.scalar_type() != at::kFloat || (at::GradMode::is_enabled() && x.requires_grad())) return false;
  const at::Tensor* w[] = {&L.exp_gate[e], &L.exp_up[e], &L.exp_down[e]};
  for (const at::Tensor* t : w) {
    if (at::GradMode::is_enabled() && t->requires_grad()) return false;
    if (expert_weight_rows(*t)) continue;
    if (compute_dtype() != ComputeDtype::Float32 || t->dim() != 2) return false;
    const bool packed_rows = is_packed_weight(*t) && t->stride(0) == 0;  // stored rows along the output dimension
    const bool half_rows = (t->scalar_type() == at::kHalf || t->scalar_type() == at::kBFloat16) && t->stride(0) == 1;
    if (!packed_rows && !half_rows) return false;
  }
  return true;
}

// yT = (x @ w)ᵀ through the kernel. A weight not float32 is decoded by dequantize_row (weight_matmul's tiles use
// the same decoders, so the same float32 values) into a reused buffer of stored rows, at most 4 M values (16 MB,
// weight_matmul's tile) at a time, and each chunk of output rows run on them.
void expert_product(const at::Tensor& w, const at::Tensor& xT, at::Tensor& yT) {
  if (w.scalar_type() == at::kFloat) return expert_gemm(w, xT, yT);
  const int64_t K = w.size(0), O = w.size(1), chunk = std::max<int64_t>(1, std::min<int64_t>(O, (int64_t(4) << 20) / K));
  const GgmlType type = weight_storage_type(w);
  const int64_t row_bytes = w.stride(1) * static_cast<int64_t>(w.element_size());
  const uint8_t* first = static_cast<const uint8_t*>(w.data_ptr());
  static thread_local at::Tensor buf;
  if (!buf.defined() || buf.numel() < chunk * K) buf = at::empty({chunk * K}, at::kFloat);
  float* dst = buf.data_ptr<float>();
  for (int64_t o0 = 0; o0 < O; o0 += chunk) {
    const int64_t n = std::min(chunk, O - o0);
    parallel_for(0, n, 16, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) dequantize_row(type, first + (o0 + i) * row_bytes, dst + i * K, K);
    });
    at::Tensor y = yT.narrow(0, o0, n);
    expert_gemm(buf.narrow(0, 0, n * K).view({n, K}).t(), xT, y);
  }
}

// Expert e on its c rows `tok` of x, transposed all the way (expert_gemm.hpp): xᵀ [d, ldx] (padding columns zero),
// gate and up [width, ldx], their gated product the down projection's operand as it stands; returns [c, d].
at::Tensor expert_transposed(const ModelConfig& cfg, const LayerWeights& L, size_t e, const at::Tensor& x,
                             const at::Tensor& tok) {
  const int64_t c = tok.numel(), ldx = (c + 15) / 16 * 16, width = L.exp_gate[e].size(1);
  at::Tensor xT = at::zeros({x.size(1), ldx}, x.options());
  xT.narrow(1, 0, c).copy_(x.index_select(0, tok).t());
  at::Tensor gT = at::empty({width, ldx}, x.options()), uT = at::empty({L.exp_up[e].size(1), ldx}, x.options());
  expert_product(L.exp_gate[e], xT, gT);
  expert_product(L.exp_up[e], xT, uT);
  const at::Tensor hT = gated(cfg, gT, uT).contiguous();
  at::Tensor yT = at::empty({L.exp_down[e].size(1), ldx}, x.options());
  expert_product(L.exp_down[e], hT, yT);
  return yT.narrow(1, 0, c).t();
}

}  // namespace

at::Tensor moe_mlp(const ModelConfig& cfg, const LayerWeights& L, const at::Tensor& h, int64_t l,
                   const hook_detail::HookTable* hk, const MoeRecord& record) {
  const int64_t d = h.size(-1), N = h.numel() / d, E = cfg.n_experts, k = cfg.n_experts_used;
  std::vector<int64_t> lead = h.sizes().vec();
  lead.pop_back();
  const at::Tensor x = h.reshape({N, d});
  at::Tensor logits = moe_hooked(hk, HookPoint::RouterLogits, l, proj(x, L.w_router, L.b_router), lead);  // [N, E]
  at::Tensor weights, idx;
  if (cfg.expert_weights_topk_softmax) {  // GPT-OSS: the top k logits, then the softmax over those k alone
    std::tie(weights, idx) = logits.topk(k, -1, /*largest=*/true, /*sorted=*/true);
    weights = at::softmax(weights, -1);
  } else {
    std::tie(weights, idx) = at::softmax(logits, -1).topk(k, -1, /*largest=*/true, /*sorted=*/true);  // [N, k]
    if (cfg.expert_weights_norm) weights = weights / weights.sum(-1, true);
  }
  idx = moe_hooked(hk, HookPoint::ExpertIndices, l, idx, lead);
  check_expert_indices(idx, E, l);
  weights = moe_hooked(hk, HookPoint::ExpertWeights, l, weights, lead);
  if (record) {
    auto shaped = [&](const at::Tensor& t) {
      std::vector<int64_t> s = lead;
      s.push_back(t.size(1));
      return t.reshape(s);
    };
    record("router_logits", shaped(logits));
    record("expert_indices", shaped(idx));
    record("expert_weights", shaped(weights));
  }
  // Dispatch: the N * k (token, slot) pairs sorted by expert (stably: each expert sees its tokens in order), so
  // that expert e's rows are one contiguous run of `order`.
  const at::Tensor flat = idx.reshape({-1});
  const at::Tensor order = std::get<1>(at::sort(flat, /*stable=*/true, /*dim=*/0, /*descending=*/false));
  const at::Tensor counts = at::bincount(flat, {}, E).to(at::kLong).contiguous();
  const at::Tensor tokens = at::div(order, k, "floor");
  // Each (token, slot)'s unweighted output goes to its slot's row of [N * k, d] (the expert_out hook point), and
  // the weighted slots are summed after it: one order of additions whether or not anything is hooked, so that a
  // hook that only reads changes no bit.
  at::Tensor slots = at::zeros({N * k, d}, x.options());
  const int64_t* cnt = counts.data_ptr<int64_t>();
  int64_t start = 0;
  for (int64_t e = 0; e < E; ++e) {
    const int64_t c = cnt[e];
    if (c == 0) continue;
    const at::Tensor tok = tokens.narrow(0, start, c);
    const size_t ei = static_cast<size_t>(e);
    if (expert_kernel(L, ei, x)) {
      slots.index_copy_(0, order.narrow(0, start, c), expert_transposed(cfg, L, ei, x, tok));
      start += c;
      continue;
    }
    const at::Tensor xe = x.index_select(0, tok);
    auto bias = [ei](const std::vector<at::Tensor>& b) { return b.empty() ? at::Tensor() : b[ei]; };  // GPT-OSS's
    const at::Tensor g = proj(xe, L.exp_gate[ei], bias(L.exp_gate_b));
    const at::Tensor u = proj(xe, L.exp_up[ei], bias(L.exp_up_b));
    const at::Tensor y = proj(gated(cfg, g, u), L.exp_down[ei], bias(L.exp_down_b));
    slots.index_copy_(0, order.narrow(0, start, c), y);
    start += c;
  }
  std::vector<int64_t> s = lead;
  s.push_back(k);
  s.push_back(d);
  at::Tensor v = slots.view(s);
  if (hk) hk->apply(HookPoint::ExpertOut, l, v);
  if (record) record("expert_out", v);
  at::Tensor out = (v.reshape({N, k, d}) * weights.unsqueeze(-1)).sum(1);
  s.erase(s.end() - 2);
  return out.view(s);
}

}  // namespace vocablens::detail

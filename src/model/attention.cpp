// Blocked causal attention with an online softmax (vocablens/attention.hpp).
#include "vocablens/attention.hpp"

#include "model/attention_blocks.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "util/parallel.hpp"
#include "vocablens/error.hpp"

namespace vocablens {

namespace {

std::string shape(const at::Tensor& t) {
  std::string s = "[";
  for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
  return s + "]";
}

void check_shapes(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionSpec& s) {
  auto bad = [&](const std::string& why) {
    throw UsageError("blocked_causal_attention: q " + shape(q) + ", k " + shape(k) + ", v " + shape(v) + ": " + why);
  };
  if (!q.defined() || !k.defined() || !v.defined()) bad("a tensor is undefined");
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4) bad("expected q [B, H, T, d_head] and k, v [B, H_kv, T, d_head]");
  if (!k.sizes().equals(v.sizes())) bad("k and v differ in shape");
  if (k.size(0) != q.size(0) || k.size(2) != q.size(2) || k.size(3) != q.size(3))
    bad("k and v must have q's batch, length and head size");
  if (k.size(1) < 1 || q.size(1) % k.size(1) != 0) bad("the query heads must be a multiple of the key/value heads");
  if (q.scalar_type() != k.scalar_type() || q.scalar_type() != v.scalar_type()) bad("q, k and v differ in dtype");
  if (s.alibi_slopes.defined() && s.alibi_slopes.numel() != q.size(1))
    bad("alibi_slopes has " + std::to_string(s.alibi_slopes.numel()) + " values, one per query head expected");
  if (s.window < 0 || s.block < 0) bad("window and block must not be negative");
  if (s.sinks.defined() && s.sinks.numel() != q.size(1))
    bad("sinks has " + std::to_string(s.sinks.numel()) + " values, one per query head expected");
}

}  // namespace

namespace detail {

void blocked_causal_attention_each(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionSpec& s,
                                   const AttentionBlockSink& sink) {
  check_shapes(q, k, v, s);
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), dh = q.size(3), Hkv = k.size(1), G = H / Hkv;
  const int64_t bs = std::min<int64_t>(s.block > 0 ? s.block : 1024, std::max<int64_t>(T, 1));
  const auto dev = q.device();
  const auto idx = at::TensorOptions().dtype(at::kLong).device(dev);
  // Query heads grouped under their key/value head: one batched GEMM per tile serves the whole group,
  // and the keys are never repeated. A view for any strided q (only the head dimension is split); each
  // query block below is copied into the GEMM's layout as it is read.
  const at::Tensor q5 = q.reshape({B, Hkv, G, T, dh});
  const at::Tensor kc = k.contiguous(), vc = v.contiguous();
  const at::Tensor slopes = s.alibi_slopes.defined() ? s.alibi_slopes.to(q.options()).view({1, H, 1, 1}) : at::Tensor();
  // Sinks in the loop's row layout [B*Hkv, G*bq, 1]: head h = (kv head, group member) as q5 splits it.
  const at::Tensor sinks = s.sinks.defined() ? s.sinks.to(q.options()).view({1, Hkv, G, 1, 1}) : at::Tensor();
  if (T == 0) return;

  // Sinks in the loop's row layout [B*Hkv, G*bq, 1] and ALiBi slopes as [B*Hkv, G, 1, 1]: row i of the loop's
  // batch is (batch i / Hkv, kv head i % Hkv), its G query heads as q5 splits them.
  const at::Tensor slopes_rows =
      slopes.defined() ? slopes.view({1, Hkv, G, 1, 1}).expand({B, Hkv, G, 1, 1}).reshape({B * Hkv, G, 1, 1}) : at::Tensor();

  // Query blocks run one after another. Within one, the rows of the batched GEMMs' batch (batch x kv head)
  // are split once between the threads, each running the whole key loop for its heads with single-threaded
  // operations (inside the parallel region ATen and OpenBLAS use one thread): one parallel region per query
  // block instead of two threaded GEMMs per head and tile (whose threads spin in sched_yield waiting for
  // each other's packed panels) and a region per elementwise pass. The same operations on the same values
  // per head as on one thread.
  for (int64_t q0 = 0; q0 < T; q0 += bs) {
    const int64_t bq = std::min(bs, T - q0), q1 = q0 + bq;
    const at::Tensor qb_all = q5.narrow(3, q0, bq).reshape({B * Hkv, G * bq, dh});
    const int64_t first_key = s.window > 0 ? std::max<int64_t>(0, q0 - s.window + 1) : 0;
    at::Tensor o_all = at::empty({B * Hkv, G * bq, dh}, q.options());
    detail::parallel_for(0, B * Hkv, 1, [&](int64_t i0, int64_t i1) {
      const int64_t n = i1 - i0;
      const at::Tensor qb = qb_all.narrow(0, i0, n);
      at::Tensor m, l, o = o_all.narrow(0, i0, n);  // running max [n, G*bq, 1], sum of exp, unnormalised output
      // The diagonal block first: every row sees its own position there, so the running maximum is finite
      // from the first tile on and a row that a later tile hides entirely (window edge) rescales by exp(0).
      for (int64_t k0 = q0; k0 >= 0 && k0 + bs > first_key; k0 -= bs) {
        const int64_t bk = k0 == q0 ? bq : bs, k1 = k0 + bk;
        const at::Tensor kb = kc.narrow(2, k0, bk).reshape({B * Hkv, bk, dh}).narrow(0, i0, n);
        const at::Tensor vb = vc.narrow(2, k0, bk).reshape({B * Hkv, bk, dh}).narrow(0, i0, n);
        at::Tensor sc = at::bmm(qb, kb.transpose(1, 2));  // [n, G*bq, bk]
        sc.mul_(s.scale);
        if (s.softcap > 0) sc.div_(s.softcap).tanh_().mul_(s.softcap);
        at::Tensor s4 = sc.view({n, G, bq, bk});
        if (slopes_rows.defined()) {
          const at::Tensor dist =
              (at::arange(k0, k1, idx).unsqueeze(0) - at::arange(q0, q1, idx).unsqueeze(1)).to(q.scalar_type());
          s4.add_(slopes_rows.narrow(0, i0, n) * dist);
        }
        const bool future = k1 - 1 > q0;                               // some key lies after some query
        const bool too_old = s.window > 0 && k0 <= q1 - 1 - s.window;  // some key lies outside some query's window
        if (future || too_old) {
          const at::Tensor qi = at::arange(q0, q1, idx).unsqueeze(1), ki = at::arange(k0, k1, idx).unsqueeze(0);
          at::Tensor hide = ki > qi;
          if (too_old) hide = hide.logical_or(ki <= qi - s.window);
          s4.masked_fill_(hide, -std::numeric_limits<float>::infinity());
        }
        if (!m.defined()) {
          m = sc.amax(-1, true);
          sc.sub_(m).exp_();
          l = sc.sum(-1, true);
          at::bmm_out(o, sc, vb);
        } else {
          at::Tensor m_new = at::maximum(m, sc.amax(-1, true));
          at::Tensor alpha = (m - m_new).exp_();
          sc.sub_(m_new).exp_();
          l.mul_(alpha).add_(sc.sum(-1, true));
          o.mul_(alpha).baddbmm_(sc, vb);
          m = std::move(m_new);
        }
      }
      if (sinks.defined()) {  // the sink's exp joins the sum (rescaled to the joint maximum); it adds no value
        const at::Tensor sk = sinks.expand({B, Hkv, G, bq, 1}).reshape({B * Hkv, G * bq, 1}).narrow(0, i0, n);
        const at::Tensor m_new = at::maximum(m, sk);
        const at::Tensor alpha = (m - m_new).exp_();
        l.mul_(alpha).add_((sk - m_new).exp_());
        o.mul_(alpha);
      }
      o.div_(l);
    });
    sink(q0, o_all.view({B, H, bq, dh}).transpose(1, 2));
  }
}

}  // namespace detail

at::Tensor blocked_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionSpec& s) {
  check_shapes(q, k, v, s);
  at::Tensor z = at::empty({q.size(0), q.size(2), q.size(1), q.size(3)}, q.options());
  detail::blocked_causal_attention_each(q, k, v, s,
                                        [&z](int64_t q0, const at::Tensor& zb) { z.narrow(1, q0, zb.size(1)).copy_(zb); });
  return z;
}

namespace {
AttentionPolicy& policy() {
  static AttentionPolicy p = [] {
    AttentionPolicy d;
    const char* e = std::getenv("VOCABLENS_ATTENTION");
    d.blocked = !(e && std::strcmp(e, "materialize") == 0);
    return d;
  }();
  return p;
}
}  // namespace

AttentionPolicy attention_policy() { return policy(); }

void set_attention_policy(const AttentionPolicy& p) {
  if (p.block < 1) throw UsageError("attention policy: block must be at least 1 (got " + std::to_string(p.block) + ")");
  policy() = p;
}

}  // namespace vocablens

// Non-finite weights and activations: fast scans, messages naming where, and the policy.
#include "model/nonfinite.hpp"
#include "util/parallel.hpp"

#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <iostream>

namespace vocablens {

namespace {
std::atomic<int> g_policy{static_cast<int>(NonFinitePolicy::Refuse)};
std::atomic<int> g_weight_warnings{0};
std::atomic<bool> g_activation_warned{false};
}  // namespace

void set_nonfinite_policy(NonFinitePolicy p) { g_policy.store(static_cast<int>(p)); }
NonFinitePolicy nonfinite_policy() { return static_cast<NonFinitePolicy>(g_policy.load()); }

namespace detail {

namespace {

// Exponent all ones: NaN or ±Inf. An integer test on the stored bits so that the loop vectorises (no float
// compares) and 16-bit weights are scanned where they lie: ATen's isfinite on a bfloat16 slice makes an abs
// copy and two masks, transients that glibc keeps resident after the load (~150 MiB on a 1B BF16 model).
template <typename Word, Word kExp>
int64_t scan_bits(const Word* p, int64_t n) {
  std::atomic<int64_t> first{INT64_MAX};
  constexpr int64_t kBlock = 8192;
  detail::parallel_for(0, (n + kBlock - 1) / kBlock, 16, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t lo = b * kBlock, hi = std::min(n, lo + kBlock);
      if (lo >= first.load(std::memory_order_relaxed)) return;
      Word any = 0;
      for (int64_t i = lo; i < hi; ++i) any |= static_cast<Word>((p[i] & kExp) == kExp);
      if (!any) continue;
      for (int64_t i = lo; i < hi; ++i)
        if ((p[i] & kExp) == kExp) {
          int64_t cur = first.load();
          while (i < cur && !first.compare_exchange_weak(cur, i)) {}
          return;
        }
    }
  });
  const int64_t f = first.load();
  return f == INT64_MAX ? -1 : f;
}

std::string value_str(const at::Tensor& flat, int64_t i) {
  const double v = flat[i].item<double>();
  return std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf";
}

}  // namespace

int64_t first_nonfinite(const at::Tensor& t) {
  if (!t.defined() || t.numel() == 0 || !c10::isFloatingType(t.scalar_type())) return -1;
  // In place where the values lie densely: a contiguous tensor, or a transposed view of one (W_U [d, V] is
  // the stored [V, d] transposed).
  const bool transposed = t.dim() == 2 && !t.is_contiguous() && t.t().is_contiguous();
  if ((t.is_contiguous() || transposed) && t.device().is_cpu()) {
    const void* p = t.data_ptr();
    int64_t i = -2;
    switch (t.scalar_type()) {
      case at::kFloat: i = scan_bits<uint32_t, 0x7f800000u>(static_cast<const uint32_t*>(p), t.numel()); break;
      case at::kBFloat16: i = scan_bits<uint16_t, 0x7f80u>(static_cast<const uint16_t*>(p), t.numel()); break;
      case at::kHalf: i = scan_bits<uint16_t, 0x7c00u>(static_cast<const uint16_t*>(p), t.numel()); break;
      default: break;
    }
    if (i == -1 || (i >= 0 && !transposed)) return i;
    // a hit in a transposed view: the first in the view's order is found below (an error path, rare)
  }
  // Other dtypes and layouts through ATen, in slices of <= 16 M values along the first dimension: a whole-tensor
  // mask of a BF16 256k × 2304 embedding would be 590 MB (twice, with its negation) on top of the mapped weights.
  if (t.dim() >= 1 && t.size(0) > 1 && t.numel() > (int64_t{16} << 20)) {
    const int64_t per = t.numel() / t.size(0), step = std::max<int64_t>(1, (int64_t{16} << 20) / per);
    for (int64_t r0 = 0; r0 < t.size(0); r0 += step) {
      at::Tensor sl = t.detach().narrow(0, r0, std::min(step, t.size(0) - r0));
      if (at::isfinite(sl).all().item<bool>()) continue;
      return r0 * per + at::logical_not(at::isfinite(sl)).reshape(-1).nonzero().select(1, 0)[0].item<int64_t>();
    }
    return -1;
  }
  at::Tensor bad = at::logical_not(at::isfinite(t.detach())).reshape(-1);
  if (!bad.any().item<bool>()) return -1;
  return bad.nonzero().select(1, 0)[0].item<int64_t>();
}

std::string index_str(const at::Tensor& t, int64_t flat) {
  std::vector<int64_t> idx(static_cast<size_t>(t.dim()));
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    idx[static_cast<size_t>(d)] = flat % std::max<int64_t>(1, t.size(d));
    flat /= std::max<int64_t>(1, t.size(d));
  }
  std::string s = "[";
  for (size_t i = 0; i < idx.size(); ++i) s += (i ? ", " : "") + std::to_string(idx[i]);
  return s + "]";
}

void check_weight_finite(const at::Tensor& t, const std::string& name, const std::string& source, int layer_axis) {
  const int64_t first = first_nonfinite(t);
  if (first < 0) return;
  at::Tensor flat = t.detach().reshape(-1);
  const int64_t count = at::logical_not(at::isfinite(flat)).sum().item<int64_t>();
  std::string where = index_str(t, first);
  if (layer_axis >= 0 && layer_axis < t.dim()) {
    int64_t rest = 1;
    for (int64_t d = layer_axis + 1; d < t.dim(); ++d) rest *= t.size(d);
    where += " (layer " + std::to_string((first / rest) % t.size(layer_axis)) + ")";
  }
  const std::string msg = source + ": weight '" + name + "' holds " + std::to_string(count) + " non-finite value" +
                          (count == 1 ? "" : "s") + " of " + std::to_string(t.numel()) + " (first: " + value_str(flat, first) +
                          " at " + where + ")";
  if (nonfinite_policy() == NonFinitePolicy::Refuse) throw NonFiniteError(msg);
  const int n = g_weight_warnings.fetch_add(1);
  if (n < 8) std::cerr << "vocablens: warning: " << one_line(msg) << " (continuing: --allow-nonfinite)\n";
  else if (n == 8) std::cerr << "vocablens: warning: more weights hold non-finite values (not listed)\n";
}

bool check_activation_finite(const at::Tensor& x, const std::string& hook, const std::string& context) {
  if (at::GradMode::is_enabled() || !x.defined()) return true;
  const int64_t first = first_nonfinite(x);
  if (first < 0) return true;
  std::string where;
  if (x.dim() >= 2) {
    int64_t rest = 1;
    for (int64_t d = 2; d < x.dim(); ++d) rest *= x.size(d);
    const int64_t pos = (first / rest) % x.size(1), b = first / (rest * x.size(1));
    where = "position " + std::to_string(pos) + (x.size(0) > 1 ? " of batch row " + std::to_string(b) : "");
  } else {
    where = "element " + std::to_string(first);
  }
  const std::string msg =
      "non-finite activation: " + hook + " holds " + value_str(x.detach().reshape(-1), first) + " at " + where + context;
  if (nonfinite_policy() == NonFinitePolicy::Refuse) throw NonFiniteError(msg);
  if (!g_activation_warned.exchange(true))
    std::cerr << "vocablens: warning: " << one_line(msg) << " (continuing: --allow-nonfinite; NaN propagates)\n";
  return false;
}

}  // namespace detail
}  // namespace vocablens

namespace vocablens {

bool all_finite(const at::Tensor& x) { return detail::first_nonfinite(x) < 0; }

void require_finite(const at::Tensor& x, const std::string& what, const std::string& consequence) {
  const int64_t first = detail::first_nonfinite(x);
  if (first < 0) return;
  at::Tensor flat = x.detach().reshape(-1);
  const int64_t count = at::logical_not(at::isfinite(flat)).sum().item<int64_t>();
  throw Error(what + " holds " + std::to_string(count) + " non-finite value" + (count == 1 ? "" : "s") + " of " +
              std::to_string(x.numel()) + " (first: " + detail::value_str(flat, first) + " at " + detail::index_str(x, first) +
              "); " + consequence);
}

}  // namespace vocablens

// The pseudo-inverse of a tall matrix (see include/vocablens/linalg/pinv.hpp); its disk cache is pinv_cache.cpp.
#include "vocablens/linalg/pinv.hpp"
#include "pinv_cache.hpp"

#include <algorithm>

#include "vocablens/error.hpp"

namespace vocablens {

Pinv pseudo_inverse(const at::Tensor& E_in, const PinvOptions& opts) {
  if (!E_in.defined() || E_in.dim() != 2) throw UsageError("pseudo_inverse: E must be a matrix");
  if (!(opts.rtol >= 0 && opts.rtol < 1)) throw UsageError("pseudo_inverse: rtol must be in [0, 1)");
  at::NoGradGuard no_grad;
  at::Tensor E = E_in.to(at::kFloat);
  const int64_t V = E.size(0), d = E.size(1);
  Pinv out;
  out.rtol = opts.rtol;

  std::string dir, base;
  if (opts.use_cache) {
    out.hash = hash_tensor(E);
    dir = opts.cache_dir.empty() ? default_cache_dir() : opts.cache_dir;
    base = detail::pinv_cache_base(dir, out.hash, V, d, opts.rtol);
    if (detail::read_pinv_cache(base, V, d, opts.rtol, out)) return out;
  }

  // E = U S Wᵀ via the float64 eigen-decomposition EᵀE = W S² Wᵀ (d×d: cheap for V >> d, and float64
  // resolves singular values down to ~1e-8·s_max, far below float32 data's own precision).
  // E⁺ = W S⁻¹ Uᵀ = W S⁻² Wᵀ Eᵀ, restricted to the kept singular values.
  at::Tensor G = at::zeros({d, d}, at::kDouble);
  const int64_t chunk = 8192;
  for (int64_t c0 = 0; c0 < V; c0 += chunk) {
    at::Tensor Ec = E.narrow(0, c0, std::min(chunk, V - c0)).to(at::kDouble);
    G.addmm_(Ec.t(), Ec);
  }
  auto eig = at::linalg_eigh(G);
  at::Tensor lam = std::get<0>(eig).flip(0).clamp_min(0.0).contiguous();  // descending
  at::Tensor W = std::get<1>(eig).flip(1);
  at::Tensor s = lam.sqrt().contiguous();
  const double* sp = s.data_ptr<double>();
  out.singular_values.assign(sp, sp + d);
  double smax = d > 0 ? sp[0] : 0.0;
  int64_t rank = 0;
  while (rank < d && sp[rank] > opts.rtol * smax && sp[rank] > 0) ++rank;
  out.rank = rank;
  at::Tensor Wk = W.narrow(1, 0, rank);
  at::Tensor P = at::mm(Wk * lam.narrow(0, 0, rank).reciprocal().unsqueeze(0), Wk.t());  // W S⁻² Wᵀ [d, d]
  at::Tensor pinv = at::empty({d, V}, at::kFloat);
  for (int64_t c0 = 0; c0 < V; c0 += chunk) {
    int64_t cn = std::min(chunk, V - c0);
    pinv.narrow(1, c0, cn).copy_(at::mm(P, E.narrow(0, c0, cn).to(at::kDouble).t()));
  }
  out.pinv = pinv;

  if (opts.use_cache) detail::write_pinv_cache(dir, base, out);
  else out.cache_note = "cache disabled";
  return out;
}

}  // namespace vocablens

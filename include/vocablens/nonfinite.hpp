// vocablens/nonfinite.hpp — what happens when a weight or an activation is NaN or ±Inf.
//
// A non-finite value never turns into a plausible number silently: one NaN in a weight makes
// every logit NaN, and downstream arg-maxes, means and KL divergences would print `<unk>` or 0.000. So
//  - load_model() scans every weight it uses once (a bit test on the float's exponent, parallel, a few GB/s)
//    and names the tensor, the element and how many values are non-finite;
//  - the forward pass without grad checks the residual stream after the embedding and after every block,
//    and the final norm; on a hit it names the hook (TransformerLens names: attn_out.2, resid_mid.2, ...),
//    the layer, the batch row and the position where the first non-finite value appears.
// Under the default policy (Refuse) both throw NonFiniteError; the CLI exits 1 with that one line.
// Policy Warn (the CLI's --allow-nonfinite) prints one warning line per kind of finding to stderr and goes on:
// NaN then propagates as NaN (JSON null), never as a number.
//
//   vocablens::set_nonfinite_policy(vocablens::NonFinitePolicy::Warn);   // continue with NaN
//   auto m = vocablens::load_model(path);                                // warns, does not throw
//
// Forward passes with grad enabled (the trainer) are not checked: training has its own divergence check.
#pragma once
#include <string>

#include "vocablens/error.hpp"
#include "vocablens/tensor_fwd.hpp"

namespace vocablens {

enum class NonFinitePolicy { Refuse, Warn };

/// Process-wide; default Refuse. Thread-safe (atomic).
void set_nonfinite_policy(NonFinitePolicy p);
NonFinitePolicy nonfinite_policy();

/// A weight or an activation holds NaN or ±Inf where the policy is Refuse. what() is one line naming
/// the tensor or hook and the first bad element.
class NonFiniteError : public Error {
 public:
  using Error::Error;
};

/// An analysis whose result is undefined on NaN/Inf input (a top-k over NaN scores, the singular values of a
/// matrix with NaN) calls this on its operand: a non-finite entry throws Error (exit 1, whatever the policy:
/// --allow-nonfinite lets NaN through the forward, it cannot make such a result defined) with one line
/// "<what> holds N non-finite values of M (first: nan at [i, j]); <consequence>".
///
///   vocablens::require_finite(W_E, "W_E", "its singular values are undefined");
void require_finite(const at::Tensor& x, const std::string& what, const std::string& consequence);

/// True when every entry of a floating tensor is finite (non-floating tensors: true).
bool all_finite(const at::Tensor& x);

}  // namespace vocablens

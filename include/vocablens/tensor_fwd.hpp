// vocablens/tensor_fwd.hpp — at::Tensor declared, not defined: what a public header needs when its declarations
// only pass tensors by reference or name them in a function's signature (parameters and return types).
//
//   #include "vocablens/tensor_fwd.hpp"
//   at::Tensor unembedding_matrix(const Model& m);                 // a declaration: fine with Tensor incomplete
//
//   // the caller, which builds or reads the tensor, includes LibTorch's ATen/ATen.h itself:
//   at::Tensor W = vocablens::unembedding_matrix(model);            // [d_model, V]
//
// Why: <ATen/ATen.h> is most of the cost of compiling a file that includes it; a header that only declares
// functions on tensors need not make every includer pay for it. What a forward declaration cannot do: a
// default argument of type at::Tensor (`const at::Tensor& b = {}` builds a Tensor where it is declared; such a
// header declares two overloads instead), and a class holding an at::Tensor by value (its size is ATen's), so
// the headers of those classes still include ATen (docs/architecture.md lists them).
// Shapes: none. Guarantees: the same class as ATen's (`at::Tensor` is a class in namespace at), so a
// translation unit may include this header and <ATen/ATen.h> in any order.
#pragma once

namespace at {
class Tensor;
}  // namespace at

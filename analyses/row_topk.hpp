// The exact top (and bottom) k entries of each row of X·P for a few thousand rows at most, private to the
// library: a float32 product [rows, V] screens, the candidates are recomputed canonically, and the rows the
// screen cannot settle go through the streamed engine — same values and order as topk_rows
// (vocablens/linalg/topk_stream.hpp). The feature-logit engine (decoder rows through W_U) and the graph's
// labels (encoder rows through E⁺) read it.
//
//   detail::RowTopk rt(W_U, {}, /*k=*/5, /*bottom=*/true, W_U, {});
//   std::vector<std::vector<TopkEntry>> top(n), bottom(n);
//   rt.run(X, 0, top, &bottom, nullptr);      // X [n, d] float32 contiguous, finite
//
// Shapes: P [r, Vc] float32 (any strides; a transposed view is read in place), X [n, r]. Entry j is col_id[c]
// for column c (the column itself when col_id is empty), entry i is row0 + the row of X.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "vocablens/linalg/topk_stream.hpp"

namespace vocablens {
namespace detail {

class RowTopk {
 public:
  /// `full` [r, V] and `so` are what a row left open is streamed through (so.cols: the allowed columns, whose
  /// ascending ids are col_id; P = full's columns col_id).
  RowTopk(at::Tensor P, std::vector<int64_t> col_id, int64_t k, bool bottom, at::Tensor full, TopkStreamOptions so);
  /// Rows per call to run() whose product [rows, Vc] stays within 256 MB.
  int64_t chunk_rows() const;
  /// Fills top[row0 + q] (and bottom[row0 + q], norms[row0 + q] = ‖X[q]‖ when given) for every row q of X.
  /// Returns how many lists the screen left open (computed by the streamed engine).
  int64_t run(const at::Tensor& X, int64_t row0, std::vector<std::vector<TopkEntry>>& top,
              std::vector<std::vector<TopkEntry>>* bottom, std::vector<double>* norms) const;

 private:
  at::Tensor P_, full_;
  std::vector<int64_t> col_id_;
  int64_t k_ = 0, mc_ = 0;
  bool bottom_ = false;
  double max_col_norm_ = 0, gam_ = 0;
  TopkStreamOptions so_;
};

}  // namespace detail
}  // namespace vocablens

// tests/support/tensor_checks.hpp — comparisons the LibTorch tests share: the largest absolute difference of two
// tensors (in float64, so that the comparison adds no rounding of its own), a model's logits for a list of ids,
// and bit-for-bit equality of two top-k lists.
//
//   CHECK(vl_test::max_abs_diff(vl_test::logits_of(m, ids), reference) < 1e-4);
//   vl_test::require_identical_topk(streamed, brute_force);
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include <catch2/catch.hpp>

#include "vocablens/linalg/topk_stream.hpp"
#include "vocablens/model.hpp"

namespace vl_test {

/// max |a - b| over all entries, computed in float64 (shapes broadcast as in a - b: a scalar compares with all).
inline double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

/// The logits [T, V] of one sequence of token ids.
inline at::Tensor logits_of(const vocablens::Model& m, const std::vector<int64_t>& ids) {
  return m.forward(at::tensor(ids, at::kLong)).logits[0];
}

/// The two lists hold the same entries in the same order: ids equal, values bit-identical.
inline void require_identical_topk(const std::vector<vocablens::TopkEntry>& got, const std::vector<vocablens::TopkEntry>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t q = 0; q < got.size(); ++q) {
    INFO("rank " << q << ": got (" << got[q].i << ", " << got[q].j << ", " << got[q].value << ") want (" << want[q].i << ", "
                 << want[q].j << ", " << want[q].value << ")");
    REQUIRE(got[q].i == want[q].i);
    REQUIRE(got[q].j == want[q].j);
    REQUIRE(got[q].value == want[q].value);
  }
}

}  // namespace vl_test

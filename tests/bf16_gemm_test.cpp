// tests/bf16_gemm_test.cpp — the bfloat16 GEMM of `--dtype bfloat16` (src/model/bf16_gemm.hpp) on any CPU.
//
// On CPUs without AVX-512, LibTorch 1.13's own bfloat16 GEMM is a scalar loop that, for a row-major right
// operand, accumulates in bfloat16. mm_bf16 computes the product as oneDNN defines it: float32 products and sums
// of the (exactly widened) bfloat16 operands, rounded once to bfloat16. Checked here against a float64 product
// with a rigorous bound, for both operand layouts, across the column blocks the float32 path widens b in; the
// two paths against each other; non-finite inputs; and the speed of a 128-token product against float32 (the
// 45× slowdown the float32 path removes on AVX2 CPUs).
#include <ATen/ATen.h>
#include <c10/util/BFloat16.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include <cmath>
#include <limits>
#include <string>

#include "../src/model/bf16_gemm.hpp"  // internal: mm_bf16 and the path switch
#include "../bench/bench_clock.hpp"
#include "vocablens/weight.hpp"

namespace {

using vocablens::detail::Bf16Gemm;

struct PathGuard {
  explicit PathGuard(Bf16Gemm g) { vocablens::detail::set_bf16_gemm(g); }
  ~PathGuard() { vocablens::detail::set_bf16_gemm(Bf16Gemm::Auto); }
};

// b [K, M] in the layout asked for: row-major, or a transposed view of a row-major [M, K] (what the runner's
// weights and W_U are).
at::Tensor operand_b(int64_t K, int64_t M, bool transposed, uint64_t seed) {
  at::manual_seed(seed);
  if (transposed) return at::randn({M, K}).to(at::kBFloat16).t();
  return at::randn({K, M}).to(at::kBFloat16);
}

// |y - ref| ≤ half a bf16 ulp of the float32 sum (≤ 2^-8 of its size) + float32 recursive summation's bound
// γ_K Σ|a b| with γ_K = K u / (1 - K u), u = 2^-24, both on the float64 product of the same bf16 operands.
void check_against_float64(const at::Tensor& y, const at::Tensor& a, const at::Tensor& b, const std::string& what) {
  INFO(what);
  REQUIRE(y.scalar_type() == at::kBFloat16);
  REQUIRE(y.size(0) == a.size(0));
  REQUIRE(y.size(1) == b.size(1));
  const at::Tensor ad = a.to(at::kDouble), bd = b.to(at::kDouble);
  const at::Tensor ref = at::mm(ad, bd), mag = at::mm(ad.abs(), bd.abs());
  const double u = std::ldexp(1.0, -24), K = static_cast<double>(a.size(1));
  const double gamma = K * u / (1.0 - K * u);
  const at::Tensor bound = (ref.abs() + gamma * mag) * std::ldexp(1.0, -8) + gamma * mag;
  const at::Tensor err = (y.to(at::kDouble) - ref).abs();
  const at::Tensor excess = (err - bound).max();
  CHECK(excess.item<double>() <= 0.0);
  // and it is a bfloat16 GEMM, not a float32 one passed through: outputs are bf16-rounded (not all exact)
  CHECK((y.to(at::kDouble) - ref).abs().max().item<double>() > 0.0);
}

}  // namespace

TEST_CASE("mm_bf16 equals a float64 product within float32 accumulation and one bf16 rounding") {
  // (N, K, M): a single product; a 2048-long dot product; b wider than one 4 M-value block (2 048 columns of K =
  // 2048), so the float32 path widens it in three blocks, the last partial.
  const int64_t shapes[][3] = {{1, 7, 5}, {37, 2048, 300}, {128, 2048, 4100}};
  for (const auto& sh : shapes) {
    for (bool transposed : {false, true}) {
      at::manual_seed(7);
      const at::Tensor a = at::randn({sh[0], sh[1]}).to(at::kBFloat16);
      const at::Tensor b = operand_b(sh[1], sh[2], transposed, 11);
      const std::string what = std::to_string(sh[0]) + "x" + std::to_string(sh[1]) + "x" + std::to_string(sh[2]) +
                               (transposed ? " b transposed" : " b row-major");
      check_against_float64(vocablens::detail::mm_bf16(a, b), a, b, "auto: " + what);
      {
        PathGuard g(Bf16Gemm::Float32);
        check_against_float64(vocablens::detail::mm_bf16(a, b), a, b, "float32 path: " + what);
      }
      // LibTorch's own GEMM is oneDNN's only above 16^3 multiply-adds (below: its scalar loop, which Auto avoids).
      if (vocablens::detail::bf16_gemm_native() && vocablens::detail::bf16_gemm_onednn_size(sh[0], sh[1], sh[2])) {
        PathGuard g(Bf16Gemm::LibTorch);
        check_against_float64(vocablens::detail::mm_bf16(a, b), a, b, "LibTorch (oneDNN): " + what);
      }
    }
  }
}

TEST_CASE("mm_bf16: the float32 path and LibTorch's agree to one bf16 ulp where LibTorch accumulates in float32") {
  // LibTorch accumulates in float32 for a transposed b on every CPU (and for both layouts under oneDNN).
  at::manual_seed(3);
  const at::Tensor a = at::randn({64, 1024}).to(at::kBFloat16);
  for (bool transposed : {true, false}) {
    if (!transposed && !vocablens::detail::bf16_gemm_native()) continue;  // the row-major scalar loop: case above
    INFO((transposed ? "b transposed" : "b row-major"));
    const at::Tensor b = operand_b(1024, 333, transposed, 5);
    at::Tensor yf, yl;
    {
      PathGuard g(Bf16Gemm::Float32);
      yf = vocablens::detail::mm_bf16(a, b).to(at::kFloat);
    }
    {
      PathGuard g(Bf16Gemm::LibTorch);
      yl = vocablens::detail::mm_bf16(a, b).to(at::kFloat);
    }
    // one ulp of bf16 at |y|: 2^(floor(log2|y|) - 7)
    const at::Tensor ulp = at::exp2(at::floor(at::log2(at::maximum(yf.abs(), yl.abs()))) - 7);
    CHECK(((yf - yl).abs() <= ulp).all().item<bool>());
  }
}

TEST_CASE("round_to_bf16 equals c10::BFloat16's rounding on every upper half and the tie patterns") {
  // Every bf16 pattern's float32 with lower halves 0, 1, 0x7FFF, 0x8000 (the tie), 0x8001, 0xFFFF: 393 216 values,
  // ±0, subnormals, ±inf, NaNs and the values that round up to inf among them. An odd count leaves a scalar tail.
  const uint32_t lows[] = {0u, 1u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu};
  std::vector<float> v;
  for (uint32_t hi = 0; hi < 0x10000u; ++hi)
    for (uint32_t lo : lows) {
      const uint32_t bits = (hi << 16) | lo;
      float f;
      std::memcpy(&f, &bits, 4);
      v.push_back(f);
    }
  v.push_back(1.0f + std::ldexp(1.0f, -8));  // a tie below an even: rounds down to 1
  std::vector<float> got = v;
  vocablens::detail::round_to_bf16(got.data(), static_cast<int64_t>(got.size()));
  int64_t bad = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    const float want = static_cast<float>(c10::BFloat16(v[i]));
    if (std::isnan(want) ? !std::isnan(got[i]) : std::memcmp(&want, &got[i], 4) != 0) ++bad;
  }
  CHECK(bad == 0);
  CHECK(got.back() == 1.0f);
}

TEST_CASE("mm_bf16: a non-finite input stays non-finite in its row, whichever path") {
  for (Bf16Gemm path : {Bf16Gemm::Auto, Bf16Gemm::Float32}) {
    PathGuard g(path);
    at::manual_seed(9);
    at::Tensor a = at::randn({4, 300}).to(at::kBFloat16);
    const at::Tensor b = operand_b(300, 2100, false, 2);
    a.index_put_({1, 17}, std::numeric_limits<float>::quiet_NaN());
    a.index_put_({2, 5}, std::numeric_limits<float>::infinity());
    const at::Tensor y = vocablens::detail::mm_bf16(a, b).to(at::kFloat);
    CHECK(at::isnan(y[1]).all().item<bool>());
    CHECK(at::logical_not(at::isfinite(y[2])).all().item<bool>());  // ±inf, or NaN where inf·0 or +inf−inf occurs
    CHECK(at::isfinite(y[0]).all().item<bool>());
    CHECK(at::isfinite(y[3]).all().item<bool>());
  }
}

TEST_CASE("bfloat16 weight_matmul costs at most a few times the float32 one (the scalar loop was ~45x)") {
  at::manual_seed(1);
  const at::Tensor x = at::randn({128, 2048});
  const at::Tensor w = at::randn({2048, 2048}).to(at::kBFloat16);  // a dense bf16 weight, [in, out]
  const double f32 = vl_bench::best_of(3, [&] {
    vocablens::set_compute_dtype(vocablens::ComputeDtype::Float32);
    (void)vocablens::weight_matmul(x, w);
  });
  const double b16 = vl_bench::best_of(3, [&] {
    vocablens::set_compute_dtype(vocablens::ComputeDtype::BFloat16);
    (void)vocablens::weight_matmul(x, w);
  });
  vocablens::set_compute_dtype(vocablens::ComputeDtype::Float32);
  INFO("float32 " << f32 << " s, bfloat16 " << b16 << " s of CPU");
  CHECK(b16 <= 4.0 * f32 + 0.02);
}

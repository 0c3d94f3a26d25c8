// tests/f32_gemm_test.cpp — the exact path's float32 GEMM (src/model/f32_gemm.hpp): oneDNN's matmul, with
// LibTorch's SGEMM where oneDNN has no JIT kernel or gradients are being recorded.
//
// Checked against a float64 product with float32 recursive summation's rigorous bound, for the operand layouts
// the runner passes (a transposed view of a row-major weight, a row-major one, a block of columns of a wider
// output), with and without a bias, from one row to more than one weight tile; gradients through mm_f32;
// non-finite inputs; empty products.
#include <ATen/ATen.h>
#include <catch2/catch.hpp>
#include <ATen/core/grad_mode.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "../src/model/f32_gemm.hpp"  // internal: f32_gemm, mm_f32
#include "fixtures.hpp"

namespace {

// |y - x·w (+ b)| ≤ γ_{K+1} (Σ_k |x w| + |b|) with γ_n = n u / (1 - n u), u = 2^-24: float32 summation in any order.
void check_against_float64(const at::Tensor& y, const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                           const std::string& what) {
  INFO(what);
  REQUIRE(y.scalar_type() == at::kFloat);
  REQUIRE(y.size(0) == x.size(0));
  REQUIRE(y.size(1) == w.size(1));
  const at::Tensor xd = x.to(at::kDouble), wd = w.to(at::kDouble);
  at::Tensor ref = at::mm(xd, wd), mag = at::mm(xd.abs(), wd.abs());
  if (b.defined()) {
    ref = ref + b.to(at::kDouble);
    mag = mag + b.to(at::kDouble).abs();
  }
  const double u = std::ldexp(1.0, -24), n = static_cast<double>(x.size(1) + 1);
  const double gamma = n * u / (1.0 - n * u);
  const at::Tensor excess = ((y.to(at::kDouble) - ref).abs() - gamma * mag).max();
  CHECK(excess.item<double>() <= 0.0);
}

}  // namespace

TEST_CASE("f32_gemm runs here (the build and setup.sh bring oneDNN)") {
  std::string kernel;
  const bool on = vocablens::detail::f32_gemm_available(&kernel);
  INFO("oneDNN's kernel: " << kernel);
  // A build without libdnnl-dev, or VOCABLENS_F32_GEMM=blas, would run LibTorch's SGEMM everywhere: say so loudly.
  CHECK(on);
  CHECK(kernel.find("ref") == std::string::npos);
}

TEST_CASE("mm_f32 equals a float64 product within float32 summation's bound, every layout the runner passes") {
  // (N, K, M): one row; a few rows of a short product; a prompt's rows through a 2048-wide weight; more columns
  // than one weight tile holds at K = 512.
  const int64_t shapes[][3] = {{1, 7, 5}, {3, 64, 37}, {128, 2048, 300}, {37, 512, 8229}};
  for (const auto& sh : shapes) {
    for (bool transposed : {true, false}) {
      for (bool with_bias : {false, true}) {
        at::manual_seed(11);
        const at::Tensor x = at::randn({sh[0], sh[1]});
        // A transposed view of a row-major [M, K] weight (the runner's layout) or a row-major [K, M] one.
        const at::Tensor w = transposed ? at::randn({sh[2], sh[1]}).t() : at::randn({sh[1], sh[2]});
        const at::Tensor b = with_bias ? at::randn({sh[2]}) : at::Tensor();
        const std::string what = std::to_string(sh[0]) + "x" + std::to_string(sh[1]) + "x" + std::to_string(sh[2]) +
                                 (transposed ? " w transposed" : " w row-major") + (with_bias ? " + bias" : "");
        check_against_float64(vocablens::detail::mm_f32(x, w, b), x, w, b, what);
      }
    }
  }
  // A non-contiguous x (every other column of a wider tensor) and a block of columns of a wider output.
  at::manual_seed(12);
  const at::Tensor wide = at::randn({19, 600});
  const at::Tensor x = wide.slice(1, 0, 600, 2);  // [19, 300], column stride 2
  const at::Tensor w = at::randn({70, 300}).t();
  check_against_float64(vocablens::detail::mm_f32(x, w, at::Tensor()), x, w, at::Tensor(), "x with column stride 2");
  at::Tensor out = at::full({19, 100}, 7.0f);
  const at::Tensor xc = x.contiguous();
  REQUIRE(vocablens::detail::f32_gemm(xc.data_ptr<float>(), 300, w.data_ptr<float>(), w.stride(0), w.stride(1), nullptr,
                                      out.data_ptr<float>() + 10, 100, 19, 300, 70));
  check_against_float64(out.narrow(1, 10, 70), x, w, at::Tensor(), "columns 10..79 of a [19, 100] output");
  CHECK((out.narrow(1, 0, 10) == 7.0f).all().item<bool>());  // the columns around it untouched
  CHECK((out.narrow(1, 80, 20) == 7.0f).all().item<bool>());
}

TEST_CASE("mm_f32: gradients flow where autograd records (LibTorch's GEMM), none is asked for otherwise") {
  at::manual_seed(13);
  const at::Tensor x = at::randn({5, 40}).requires_grad_(true);
  const at::Tensor w = at::randn({30, 40}).t();
  const at::Tensor b = at::randn({30});
  const at::Tensor y = vocablens::detail::mm_f32(x, w, b);
  REQUIRE(y.requires_grad());
  y.sum().backward();
  // d Σ y / dx = 1 · wᵀ summed over outputs: every row of the gradient is w's row sums.
  const at::Tensor want = w.sum(1).unsqueeze(0).expand({5, 40});
  CHECK(at::allclose(x.grad(), want, 1e-5, 1e-5));
  {
    at::NoGradGuard ng;
    CHECK_FALSE(vocablens::detail::mm_f32(x, w, b).requires_grad());
  }
}

TEST_CASE("mm_f32: a non-finite input stays non-finite in its row; empty products are empty") {
  at::manual_seed(14);
  at::Tensor x = at::randn({4, 300});
  const at::Tensor w = at::randn({2100, 300}).t();
  x.index_put_({1, 17}, std::numeric_limits<float>::quiet_NaN());
  x.index_put_({2, 5}, std::numeric_limits<float>::infinity());
  const at::Tensor y = vocablens::detail::mm_f32(x, w, at::Tensor());
  CHECK(at::isnan(y[1]).all().item<bool>());
  CHECK(at::logical_not(at::isfinite(y[2])).all().item<bool>());  // ±inf, or NaN where +inf−inf occurs
  CHECK(at::isfinite(y[0]).all().item<bool>());
  CHECK(at::isfinite(y[3]).all().item<bool>());
  const at::Tensor e = vocablens::detail::mm_f32(at::randn({0, 300}), w, at::Tensor());
  CHECK(e.sizes() == at::IntArrayRef({0, 2100}));
  float c = 5.0f;
  CHECK_FALSE(vocablens::detail::f32_gemm(nullptr, 1, nullptr, 1, 1, nullptr, &c, 1, 0, 1, 1));  // M = 0: nothing
  CHECK(c == 5.0f);
}

TEST_CASE("inspect names the float32 GEMM: oneDNN's here, LibTorch's under VOCABLENS_F32_GEMM=blas") {
  const std::string cli = vl_test::require_cli();
  const std::string model = std::string(VOCABLENS_SOURCE_DIR) + "/tests/data/gguf/stories260K-f32.gguf";
  std::string out;
  REQUIRE(vl_test::run_command(vl_test::shq(cli) + " inspect " + vl_test::shq(model), out) == 0);
  CHECK_THAT(out, Catch::Contains("float32 GEMM oneDNN's matmul ("));
  REQUIRE(vl_test::run_command("VOCABLENS_F32_GEMM=blas " + vl_test::shq(cli) + " inspect " + vl_test::shq(model), out) == 0);
  CHECK_THAT(out, Catch::Contains("float32 GEMM LibTorch's SGEMM (VOCABLENS_F32_GEMM=blas)"));
}

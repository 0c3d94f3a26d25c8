// The exact path's float32 GEMM (src/model/f32_gemm.hpp, oneDNN's matmul) against LibTorch's at::mm (the system
// SGEMM, OpenBLAS here) on the runner's operand layout — activations [M, K] times a weight stored [N, K] and read
// transposed — one thread, CPU seconds best of REPEAT, GFLOP/s and the ratio (same products, alternately in one run).
// Also checks that the two agree (max |Δ| relative to max |y|). Not CI.
//
//   ninja -C build bench_f32_gemm && build/bench_f32_gemm [REPEAT=10] [ROWS=1,16,128,512]
// Shapes: a Llama-7B-like MLP's [2048 → 5632] and [5632 → 2048], a 2048-wide unembedding [2048 → 32000], GPT-2
// small's [768 → 50257].
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "../src/model/f32_gemm.hpp"
#include "bench_clock.hpp"

int main(int argc, char** argv) {
  at::set_num_threads(1);
  const int repeat = argc > 1 ? std::atoi(argv[1]) : 10;
  std::vector<int64_t> rows;
  std::stringstream ss(argc > 2 ? argv[2] : "1,16,128,512");
  for (std::string r; std::getline(ss, r, ',');) rows.push_back(std::stoll(r));
  std::string kernel;
  const bool on = vocablens::detail::f32_gemm_available(&kernel);
  std::printf("oneDNN: %s (%s); 1 thread, CPU ms best of %d\n", on ? "runs" : "does not run", kernel.c_str(), repeat);
  const int64_t shapes[][2] = {{2048, 5632}, {5632, 2048}, {2048, 32000}, {768, 50257}};  // K, N
  for (const auto& sh : shapes) {
    const int64_t K = sh[0], N = sh[1];
    at::manual_seed(1);
    const at::Tensor w = at::randn({N, K}).t();  // [K, N], stored transposed
    for (int64_t M : rows) {
      const at::Tensor x = at::randn({M, K});
      at::Tensor ya, yd;
      const double ta = vl_bench::best_of(repeat, [&] { ya = at::mm(x, w); });
      const double td = vl_bench::best_of(repeat, [&] { yd = vocablens::detail::mm_f32(x, w, at::Tensor()); });
      const double gflop = 2.0 * static_cast<double>(M * K * N) / 1e9;
      const double rel = (ya - yd).abs().max().item<double>() / ya.abs().max().item<double>();
      std::printf(
          "[%5lld, %5lld] x [%5lld, %5lld]  at::mm %8.2f ms %6.1f GFLOP/s   mm_f32 %8.2f ms %6.1f GFLOP/s   "
          "ratio %.2fx   max|dy|/max|y| %.1e\n",
          static_cast<long long>(M), static_cast<long long>(K), static_cast<long long>(K), static_cast<long long>(N), ta * 1e3,
          gflop / ta, td * 1e3, gflop / td, ta / td, rel);
    }
  }
  return 0;
}

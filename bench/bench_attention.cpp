// Times blocked causal attention (vocablens/attention.hpp) against the materialising computation (scores,
// mask, softmax, pattern @ V) on random q/k/v, and prints both and their largest difference.
//   bench_attention [T=2048] [H=16] [d_head=128] [threads=1] [block=1024]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <limits>

#include "vocablens/attention.hpp"
#include "bench_clock.hpp"

int main(int argc, char** argv) {
  const int64_t T = argc > 1 ? std::atoll(argv[1]) : 2048, H = argc > 2 ? std::atoll(argv[2]) : 16,
                dh = argc > 3 ? std::atoll(argv[3]) : 128;
  at::set_num_threads(argc > 4 ? std::atoi(argv[4]) : 1);
  const int64_t block = argc > 5 ? std::atoll(argv[5]) : 1024;
  at::NoGradGuard ng;
  at::manual_seed(1);
  auto q = at::randn({1, H, T, dh}), k = at::randn({1, H, T, dh}), v = at::randn({1, H, T, dh});
  vocablens::AttentionSpec s;
  s.scale = 1.0 / std::sqrt(static_cast<double>(dh));
  s.block = block;
  auto time = [](auto&& f, const char* name) {
    f();
    const auto w0 = std::chrono::steady_clock::now();
    const double c0 = vl_bench::cpu_now();
    at::Tensor r = f();
    const double w = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
    std::printf("%-12s wall %8.3f s  CPU %8.3f s\n", name, w, vl_bench::cpu_now() - c0);
    return r;
  };
  at::Tensor zb = time([&] { return vocablens::blocked_causal_attention(q, k, v, s); }, "blocked");
  at::Tensor zm = time(
      [&] {
        at::Tensor sc = at::matmul(q, k.transpose(-2, -1)) * s.scale;
        sc = sc.masked_fill(at::ones({T, T}, at::kBool).triu(1), -std::numeric_limits<float>::infinity());
        return at::matmul(at::softmax(sc, -1), v).transpose(1, 2);
      },
      "materialise");
  std::printf("max |difference| %.3g; %.1f GFLOP causal\n", (zb - zm).abs().max().item<double>(), 4.0 * H * T * T * dh / 2 / 1e9);
  return 0;
}

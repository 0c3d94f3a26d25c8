// The int8 kernels alone (src/model/quant_dot.hpp): `qdot::dot_rows` on the two shapes of a Llama-7B-like MLP —
// [5632, 2048] (gate / up) and [2048, 5632] (down) — against N quantized activation rows, one thread, per weight
// type, the AVX-512 VNNI and AVX2 kernels where the CPU has them. Weights are random blocks (fixed seed), so every build computes the same products:
// the checksum (sum of all outputs, printed with every digit) must be the same for every kernel and for every
// version of the kernels. Prints CPU milliseconds (best of REPEAT) and int8 multiply-adds per nanosecond.
// Old against new: build this against each version and run the two binaries alternately (the checksums match).
//
//   ninja -C build bench_qdot && build/bench_qdot [N_TOKENS=128] [REPEAT=20] [TYPES=q8_0,q4_k,q6_k] [ROWSxCOLS]
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../src/model/quant_dot.hpp"
#include "bench_clock.hpp"

using vocablens::GgmlType;
namespace qdot = vocablens::qdot;

namespace {

// Random stored blocks of `type`, `rows` x `cols`, with small fp16 scales (exponent 0x20xx: ~0.008) so no sum
// overflows and the checksum is a plain finite number.
std::vector<uint8_t> random_weight(GgmlType type, int64_t rows, int64_t cols, int64_t& row_bytes) {
  std::mt19937 rng(1234);
  const int64_t block = type == GgmlType::Q8_0 ? 32 : 256;
  const int64_t bytes = type == GgmlType::Q8_0 ? 34 : type == GgmlType::Q4_K ? 144 : 210;
  row_bytes = cols / block * bytes;
  std::vector<uint8_t> w(static_cast<size_t>(rows * row_bytes));
  for (auto& b : w) b = static_cast<uint8_t>(rng());
  const uint16_t d = 0x2000;
  for (int64_t i = 0; i < rows * (cols / block); ++i) {
    uint8_t* p = w.data() + i * bytes;
    uint16_t dd = static_cast<uint16_t>(d | (rng() & 0x3FF));
    if (type == GgmlType::Q8_0) std::memcpy(p, &dd, 2);
    if (type == GgmlType::Q4_K)
      std::memcpy(p, &dd, 2), dd = static_cast<uint16_t>(d | (rng() & 0x3FF)), std::memcpy(p + 2, &dd, 2);
    if (type == GgmlType::Q6_K) std::memcpy(p + 208, &dd, 2);
  }
  return w;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t N = argc > 1 ? std::atoll(argv[1]) : 128;
  const int repeat = argc > 2 ? std::atoi(argv[2]) : 20;
  const std::string types = argc > 3 ? argv[3] : "q8_0,q4_k,q6_k";
  const std::string only = argc > 4 ? argv[4] : "";  // "5632x2048" or "2048x5632": one shape
  struct Shape {
    int64_t rows, cols;
  };
  const Shape shapes[] = {{5632, 2048}, {2048, 5632}};
  std::printf("%lld activation rows, 1 thread, CPU ms best of %d; MAC/ns = int8 multiply-adds per nanosecond\n",
              static_cast<long long>(N), repeat);
  for (const char* name : {"q8_0", "q4_k", "q6_k"}) {
    if (types.find(name) == std::string::npos) continue;
    const GgmlType type = std::string(name) == "q8_0"   ? GgmlType::Q8_0
                          : std::string(name) == "q4_k" ? GgmlType::Q4_K
                                                        : GgmlType::Q6_K;
    for (const Shape& s : shapes) {
      if (!only.empty() && only != std::to_string(s.rows) + "x" + std::to_string(s.cols)) continue;
      int64_t row_bytes = 0;
      const std::vector<uint8_t> w = random_weight(type, s.rows, s.cols, row_bytes);
      std::mt19937 rng(99);
      std::normal_distribution<float> nd(0.f, 1.f);
      std::vector<float> x(static_cast<size_t>(N * s.cols));
      for (auto& v : x) v = nd(rng);
      const int64_t stride = qdot::act_row_bytes(type, s.cols);
      std::vector<uint8_t> act(static_cast<size_t>(N * stride));
      for (int64_t t = 0; t < N; ++t) qdot::quantize_row(type, x.data() + t * s.cols, s.cols, act.data() + t * stride);
      std::vector<float> y(static_cast<size_t>(N * s.rows));
      for (int k = static_cast<int>(qdot::detected_kernel()); k >= 1; --k) {  // scalar: tests/quant_dot_test.cpp
        const auto kernel = static_cast<qdot::Kernel>(k);
        const qdot::DotArgs a{type, w.data(), row_bytes, s.rows, act.data(), stride, N, s.cols, y.data(), s.rows};
        const double sec = vl_bench::best_of(repeat, [&] { qdot::dot_rows_with(kernel, a); });
        double sum = 0;
        for (float v : y) sum += v;
        std::printf("%-5s [%lld, %lld] %-12s %8.2f ms  %6.1f MAC/ns  checksum %.17g\n", name, static_cast<long long>(s.rows),
                    static_cast<long long>(s.cols), qdot::kernel_name(kernel), 1e3 * sec,
                    static_cast<double>(N * s.rows * s.cols) / sec * 1e-9, sum);
      }
    }
  }
  return 0;
}

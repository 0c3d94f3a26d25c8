// Where the time of a quantized weight's product goes: decoding alone (float32 and bfloat16, vector and
// scalar decoders), weight_matmul (vocablens/weight.hpp) with the tiles decoded straight into the compute
// dtype, the same with the reference tiles it replaced (scalar decode to float32, LibTorch's conversion), and
// the dense product on an already-decoded copy (what the decode costs on top of the GEMM). One matrix of a
// GGUF model (layer 0's w_gate, or w_in), process CPU seconds, best of 5. Then the whole forward both ways.
//
//   ninja -C build bench_weight_tiles && VOCABLENS_THREADS=1 build/bench_weight_tiles MODEL.gguf [N_TOKENS=128]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <vector>

#include "../src/checkpoint/ggml_quants_simd.hpp"
#include "../src/model/bf16_gemm.hpp"
#include "../src/model/weight_tiles.hpp"
#include "vocablens/model.hpp"
#include "vocablens/weight.hpp"
#include "bench_clock.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_weight_tiles MODEL.gguf [N_TOKENS]\n");
    return 2;
  }
  vocablens::init_runtime();
  const int64_t N = argc > 2 ? std::atoll(argv[2]) : 128;
  vocablens::Model m = vocablens::load_model(argv[1]);
  const auto& L = m.weights().layers.at(0);
  const at::Tensor w = L.w_gate.defined() ? L.w_gate : L.w_in;  // [in, out]
  const int64_t in = w.size(0), out = w.size(1), values = in * out;
  const auto type = vocablens::weight_storage_type(w);
  std::printf("%s [%lld, %lld] %s, %lld tokens, %d thread(s)\n", argv[1], static_cast<long long>(in), static_cast<long long>(out),
              vocablens::weight_storage_name(w).c_str(), static_cast<long long>(N), at::get_num_threads());
  const at::Tensor x = at::randn({N, in}, at::kFloat);
  const at::Tensor wf = vocablens::materialize_weight(w);  // [in, out] float32
  const bool packed = vocablens::is_packed_weight(w);
  if (packed) {
    // Rows of the stored matrix: the columns of w, `in` values each.
    const at::Tensor wt_rows = w.t();
    const auto* base = static_cast<const uint8_t*>(wt_rows.data_ptr());
    int64_t bv = 0;
    size_t bb = 0;
    vocablens::ggml_block_layout(type, bv, bb);
    const int64_t row_bytes = in / bv * static_cast<int64_t>(bb);
    std::vector<float> f32(static_cast<size_t>(values));
    std::vector<uint16_t> b16(static_cast<size_t>(values));
    auto ns = [&](double s) { return 1e9 * s / static_cast<double>(values); };
    const double t_vec = vl_bench::best_of(5, [&] {
      for (int64_t r = 0; r < out; ++r) vocablens::dequantize_row(type, base + r * row_bytes, f32.data() + r * in, in);
    });
    const double t_sca = vl_bench::best_of(5, [&] {
      for (int64_t r = 0; r < out; ++r) vocablens::dequantize_row_scalar(type, base + r * row_bytes, f32.data() + r * in, in);
    });
    const double t_b16 = vl_bench::best_of(5, [&] {
      for (int64_t r = 0; r < out; ++r) vocablens::dequantize_row_bf16(type, base + r * row_bytes, b16.data() + r * in, in);
    });
    // The same into 32 rows reused (cache-resident: the decoders' own speed, not the memory's).
    const int64_t ring = 32;
    const double t_hot = vl_bench::best_of(5, [&] {
      for (int64_t r = 0; r < out; ++r) vocablens::dequantize_row(type, base + r * row_bytes, f32.data() + r % ring * in, in);
    });
    const double t_hot16 = vl_bench::best_of(5, [&] {
      for (int64_t r = 0; r < out; ++r)
        vocablens::dequantize_row_bf16(type, base + r * row_bytes, b16.data() + r % ring * in, in);
    });
    vocablens::ggml_simd::set_level(vocablens::ggml_simd::Level::Avx512);
    const double t_hot16i = vl_bench::best_of(5, [&] {
      for (int64_t r = 0; r < out; ++r)
        vocablens::dequantize_row_bf16(type, base + r * row_bytes, b16.data() + r % ring * in, in);
    });
    vocablens::ggml_simd::set_level(vocablens::ggml_simd::Level::Scalar);
    const double t_hot16s = vl_bench::best_of(5, [&] {
      for (int64_t r = 0; r < out; ++r)
        vocablens::dequantize_row_bf16(type, base + r * row_bytes, b16.data() + r % ring * in, in);
    });
    const double t_hots = vl_bench::best_of(5, [&] {
      for (int64_t r = 0; r < out; ++r) vocablens::dequantize_row(type, base + r * row_bytes, f32.data() + r % ring * in, in);
    });
    vocablens::ggml_simd::set_level(vocablens::ggml_simd::detected_level());
    // The unembedding (largest matrix; its blocks exceed the L3 cache): a cold stream from memory.
    const at::Tensor wu = m.weights().W_U;
    if (vocablens::is_packed_weight(wu) && vocablens::weight_storage_type(wu) == type) {
      const at::Tensor rows_u = wu.t();  // [V, d]
      const auto* ub = static_cast<const uint8_t*>(rows_u.data_ptr());
      const int64_t V = rows_u.size(0), d = rows_u.size(1), ubytes = d / bv * static_cast<int64_t>(bb);
      const double t_cold = vl_bench::best_of(5, [&] {
        for (int64_t r = 0; r < V; ++r) vocablens::dequantize_row_bf16(type, ub + r * ubytes, b16.data() + r % ring * d, d);
      });
      std::printf("decode ns/value, W_U [%lld, %lld] (%.0f MB of blocks) into %lld cached rows: bfloat16 %.3f\n",
                  static_cast<long long>(d), static_cast<long long>(V), 1e-6 * static_cast<double>(V * ubytes),
                  static_cast<long long>(ring), 1e9 * t_cold / static_cast<double>(V * d));
    }
    std::printf("decode ns/value, whole matrix: float32 %.3f (scalar %.3f), bfloat16 %.3f; vector decoders %s\n", ns(t_vec),
                ns(t_sca), ns(t_b16), vocablens::ggml_simd::vectorized(type) ? "on" : "off");
    std::printf(
        "decode ns/value, into %lld cached rows: float32 %.3f (scalar %.3f), bfloat16 %.3f (integer rounding %.3f, scalar "
        "%.3f)\n",
        static_cast<long long>(ring), ns(t_hot), ns(t_hots), ns(t_hot16), ns(t_hot16i), ns(t_hot16s));
  }
  for (auto dt : {vocablens::ComputeDtype::Float32, vocablens::ComputeDtype::BFloat16}) {
    vocablens::set_compute_dtype(dt);
    const bool b16 = dt == vocablens::ComputeDtype::BFloat16;
    const double t_new = vl_bench::best_of(5, [&] { vocablens::weight_matmul(x, w); });
    vocablens::set_reference_weight_tiles(true);
    const double t_ref = vl_bench::best_of(5, [&] { vocablens::weight_matmul(x, w); });
    vocablens::set_reference_weight_tiles(false);
    const at::Tensor wd = b16 ? wf.t().contiguous().to(at::kBFloat16).t() : wf.t().contiguous().t();
    const at::Tensor xd = b16 ? x.to(at::kBFloat16) : x;
    // bf16 through mm_bf16, as the runner multiplies (LibTorch's own bf16 GEMM is a scalar loop without AVX-512)
    auto mm = [&](const at::Tensor& a, const at::Tensor& b) { return b16 ? vocablens::detail::mm_bf16(a, b) : at::mm(a, b); };
    const double t_dense = vl_bench::best_of(5, [&] { mm(xd, wd); });
    // The same operand laid out [in, out] row-major (no transpose): if the GEMM copied a transposed operand,
    // this would be the faster one.
    const at::Tensor wc = wd.contiguous();
    const double t_dense_c = vl_bench::best_of(5, [&] { mm(xd, wc); });
    const double gflop = 2.0 * static_cast<double>(N) * static_cast<double>(values) * 1e-9;
    std::printf(
        "%s: weight_matmul %.2f ms (%.1f GFLOP/s), reference tiles %.2f ms, dense GEMM alone %.2f ms (%.1f GFLOP/s; "
        "operand not transposed %.2f ms)\n",
        b16 ? "bfloat16" : "float32", 1e3 * t_new, gflop / t_new, 1e3 * t_ref, 1e3 * t_dense, gflop / t_dense, 1e3 * t_dense_c);
  }
  // The whole forward over N tokens, both ways, in this process.
  const at::Tensor ids = at::randint(3, m.config().vocab_size, {N}, at::kLong);
  for (auto dt : {vocablens::ComputeDtype::Float32, vocablens::ComputeDtype::BFloat16}) {
    vocablens::set_compute_dtype(dt);
    const double t_new = vl_bench::best_of(5, [&] { m.forward(ids); });
    vocablens::set_reference_weight_tiles(true);
    const double t_ref = vl_bench::best_of(5, [&] { m.forward(ids); });
    vocablens::set_reference_weight_tiles(false);
    std::printf("%s forward: %.1f tokens per CPU second (reference tiles %.1f)\n",
                dt == vocablens::ComputeDtype::BFloat16 ? "bfloat16" : "float32", static_cast<double>(N) / t_new,
                static_cast<double>(N) / t_ref);
  }
  vocablens::set_compute_dtype(vocablens::ComputeDtype::Float32);
  return 0;
}

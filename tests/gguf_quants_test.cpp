// tests/gguf_quants_test.cpp — our dequantization against libggml's own, bit for bit.
//
// The reference is the prebuilt libggml-base.so of the npm package @node-llama-cpp/linux-x64@3.22.1
// (installed by scripts/setup_llama_ref.sh into ~/.cache/vocablens/llama-cpp-3.22.1/bins/linux-x64, or
// $VOCABLENS_LLAMA_REF/bins/linux-x64; VOCABLENS_LLAMA_BINS overrides the folder). It is loaded with dlopen: ggml_quantize_chunk quantizes float data of several distributions
// (normal, heavy-tailed, tiny values that make fp16 scales subnormal, zeros), then libggml's
// dequantize_row_<type> and our dequantize_row() decode the same bytes, and every float must have the
// same bit pattern. F16 and BF16 are checked on all 65536 bit patterns. A missing library FAILS the test.
// The AVX-512 decoders (which dequantize_row uses where the CPU has them) are also checked against the scalar
// decoders, at every level the CPU runs, on every block of random buffers with extreme fp16 scales, in
// float32 and in bfloat16.
#include <catch2/catch.hpp>
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "../src/checkpoint/ggml_quants_simd.hpp"  // the vector decoders and their scalar twins (internal)
#include "vocablens/error.hpp"
#include "vocablens/gguf.hpp"

namespace {

using vocablens::GgmlType;

std::string bins_dir() {
  if (const char* e = std::getenv("VOCABLENS_LLAMA_BINS")) return e;
  if (const char* e = std::getenv("VOCABLENS_LLAMA_REF")) return std::string(e) + "/bins/linux-x64";
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "/root") + "/.cache/vocablens/llama-cpp-3.22.1/bins/linux-x64";
}

struct Ggml {
  void* handle = nullptr;
  using quantize_chunk_t = size_t (*)(int, const float*, void*, int64_t, int64_t, int64_t, const float*);
  using row_t = void (*)(const void*, float*, int64_t);
  quantize_chunk_t quantize_chunk = nullptr;
  row_t fp16_row = nullptr, bf16_row = nullptr;
  Ggml() {
    const std::string lib = bins_dir() + "/libggml-base.so";
    handle = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) return;
    quantize_chunk = reinterpret_cast<quantize_chunk_t>(dlsym(handle, "ggml_quantize_chunk"));
    fp16_row = reinterpret_cast<row_t>(dlsym(handle, "ggml_fp16_to_fp32_row"));
    bf16_row = reinterpret_cast<row_t>(dlsym(handle, "ggml_bf16_to_fp32_row"));
  }
  row_t dequant(const char* name) const { return reinterpret_cast<row_t>(dlsym(handle, name)); }
};

const Ggml& ggml() {
  static Ggml g;
  if (!g.handle)
    FAIL("libggml-base.so not found in "
         << bins_dir() << " (run scripts/setup_llama_ref.sh, or set VOCABLENS_LLAMA_REF / VOCABLENS_LLAMA_BINS): " << dlerror());
  return g;
}

std::vector<float> test_data(int64_t n, int kind, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> N(0.f, 1.f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) {
    switch (kind) {
      case 0: v = N(rng) * 0.02f; break;                                         // weight-like
      case 1: v = N(rng) * (rng() % 50 == 0 ? 30.f : 1.f); break;                // outliers
      case 2: v = N(rng) * 1e-6f; break;                                         // subnormal fp16 scales
      case 3: v = (rng() % 4 == 0) ? 0.f : std::abs(N(rng)); break;              // many zeros, one sign
      default: v = static_cast<float>(static_cast<int>(rng() % 17) - 8); break;  // small integers
    }
  }
  return x;
}

}  // namespace

TEST_CASE("dequantize_row agrees with libggml bit for bit on ggml_quantize_chunk output") {
  const Ggml& g = ggml();
  REQUIRE(g.quantize_chunk != nullptr);
  struct T {
    GgmlType type;
    const char* fn;
  };
  const T types[] = {
      {GgmlType::Q4_0, "dequantize_row_q4_0"}, {GgmlType::Q4_1, "dequantize_row_q4_1"},  {GgmlType::Q5_0, "dequantize_row_q5_0"},
      {GgmlType::Q5_1, "dequantize_row_q5_1"}, {GgmlType::Q8_0, "dequantize_row_q8_0"},  {GgmlType::Q2_K, "dequantize_row_q2_K"},
      {GgmlType::Q3_K, "dequantize_row_q3_K"}, {GgmlType::Q4_K, "dequantize_row_q4_K"},  {GgmlType::Q5_K, "dequantize_row_q5_K"},
      {GgmlType::Q6_K, "dequantize_row_q6_K"}, {GgmlType::MXFP4, "dequantize_row_mxfp4"}};
  const int64_t rows = 8, cols = 512;
  for (const auto& t : types) {
    auto ref = g.dequant(t.fn);
    REQUIRE(ref != nullptr);
    int64_t bv = 0;
    size_t bb = 0;
    REQUIRE(vocablens::ggml_block_layout(t.type, bv, bb));
    for (int kind = 0; kind < 5; ++kind) {
      INFO(vocablens::ggml_type_name(static_cast<uint32_t>(t.type)) << " data kind " << kind);
      auto x = test_data(rows * cols, kind, 1234u + static_cast<uint32_t>(kind));
      std::vector<uint8_t> q(static_cast<size_t>(rows * cols / bv) * bb);
      size_t written = g.quantize_chunk(static_cast<int>(t.type), x.data(), q.data(), 0, rows, cols, nullptr);
      REQUIRE(written == q.size());
      std::vector<float> a(x.size()), b(x.size());
      ref(q.data(), a.data(), rows * cols);
      vocablens::dequantize_row(t.type, q.data(), b.data(), rows * cols);
      CHECK(std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
      // The data is meaningful: dequantized values track the input (a broken decoder gives noise).
      double err = 0, ref_norm = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        err += (b[i] - x[i]) * (b[i] - x[i]);
        ref_norm += x[i] * x[i];
      }
      if (kind != 2) CHECK(err < 0.5 * ref_norm);  // kind 2: scales below fp16's range, lossy by design
    }
    // Random bytes as blocks (any bit pattern, incl. inf/nan scales) decode identically too.
    std::mt19937 rng(99);
    std::vector<uint8_t> q(bb * 16);
    for (auto& c : q) c = static_cast<uint8_t>(rng());
    // MXFP4's scale byte 0xFF is E8M0's NaN, which libggml's row validation refuses and its decoder does not
    // handle (it scales by 2^127): here it decodes to NaN (the next test); every other byte value agrees.
    if (t.type == GgmlType::MXFP4)
      for (size_t i = 0; i < q.size(); i += bb) q[i] = q[i] == 0xFF ? 0xFE : q[i];
    std::vector<float> a(static_cast<size_t>(bv * 16)), b(a.size());
    ref(q.data(), a.data(), bv * 16);
    vocablens::dequantize_row(t.type, q.data(), b.data(), bv * 16);
    CHECK(std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
  }
}

TEST_CASE("MXFP4: every scale byte and code against libggml; the NaN scale 0xFF decodes to NaN") {
  const Ggml& g = ggml();
  auto ref = g.dequant("dequantize_row_mxfp4");
  REQUIRE(ref != nullptr);
  // 255 blocks, block e with scale byte e (0..254: the subnormal 2^-128, 2^-127, then 2^(e-128)) and codes
  // 0..15 in both nibbles of each byte.
  std::vector<uint8_t> q(17 * 255);
  for (int e = 0; e < 255; ++e) {
    q[static_cast<size_t>(17 * e)] = static_cast<uint8_t>(e);
    for (int j = 0; j < 16; ++j) q[static_cast<size_t>(17 * e + 1 + j)] = static_cast<uint8_t>(j | ((15 - j) << 4));
  }
  std::vector<float> a(32 * 255), b(a.size());
  ref(q.data(), a.data(), 32 * 255);
  vocablens::dequantize_row(GgmlType::MXFP4, q.data(), b.data(), 32 * 255);
  CHECK(std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
  CHECK(b[32 * 128 + 7] == 12.0f);  // scale byte 128: 2^0, code 7: E2M1 6.0 doubled
  std::vector<uint8_t> nan_block(17, 0x11);
  nan_block[0] = 0xFF;
  std::vector<float> c(32);
  vocablens::dequantize_row(GgmlType::MXFP4, nan_block.data(), c.data(), 32);
  for (float v : c) CHECK(std::isnan(v));
}

TEST_CASE("F16 and BF16 conversion agrees with libggml on all 65536 bit patterns") {
  const Ggml& g = ggml();
  REQUIRE(g.fp16_row != nullptr);
  REQUIRE(g.bf16_row != nullptr);
  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<float> a(all.size()), b(all.size());
  g.fp16_row(all.data(), a.data(), 65536);
  vocablens::dequantize_row(GgmlType::F16, all.data(), b.data(), 65536);
  CHECK(std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
  g.bf16_row(all.data(), a.data(), 65536);
  vocablens::dequantize_row(GgmlType::BF16, all.data(), b.data(), 65536);
  CHECK(std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
}

TEST_CASE("dequantize_row refuses types it cannot decode and partial blocks") {
  float out[256];
  uint8_t in[512] = {};
  CHECK_THROWS_AS(vocablens::dequantize_row(GgmlType::IQ2_XXS, in, out, 256), vocablens::UsageError);
  CHECK_THROWS_AS(vocablens::dequantize_row(GgmlType::Q4_K, in, out, 100), vocablens::UsageError);
  CHECK(vocablens::ggml_type_name(31) == "type 31");
  CHECK(vocablens::ggml_type_name(12) == "Q4_K");
}

// ---- The vector decoders (src/checkpoint/ggml_quants_simd.hpp) against the scalar ones.

namespace {

// Random blocks whose fp16 scales (and mins) are drawn from a list of extremes part of the time: infinities,
// quiet and signalling NaNs, the largest finite, the smallest subnormal, signed zeros; otherwise random bits.
std::vector<uint8_t> hostile_blocks(GgmlType type, int64_t blocks, uint32_t seed) {
  int64_t bv = 0;
  size_t bb = 0;
  REQUIRE(vocablens::ggml_block_layout(type, bv, bb));
  std::mt19937 rng(seed);
  std::vector<uint8_t> q(bb * static_cast<size_t>(blocks));
  for (auto& c : q) c = static_cast<uint8_t>(rng());
  std::vector<size_t> scale_at;  // byte offsets of the fp16 scales in one block
  switch (type) {
    case GgmlType::Q4_0:
    case GgmlType::Q5_0:
    case GgmlType::Q8_0: scale_at = {0}; break;
    case GgmlType::Q4_1:
    case GgmlType::Q5_1:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K: scale_at = {0, 2}; break;
    case GgmlType::Q6_K: scale_at = {208}; break;
    case GgmlType::Q2_K: scale_at = {80, 82}; break;
    case GgmlType::Q3_K: scale_at = {108}; break;
    default: break;
  }
  const uint16_t extremes[] = {0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFE55, 0x7BFF, 0xFBFF,
                               0x0001, 0x8001, 0x03FF, 0x0000, 0x8000, 0x3C00};
  for (int64_t b = 0; b < blocks; ++b)
    for (size_t off : scale_at)
      if (rng() % 3 == 0) {
        const uint16_t h = extremes[rng() % (sizeof(extremes) / sizeof(extremes[0]))];
        std::memcpy(&q[static_cast<size_t>(b) * bb + off], &h, 2);
      }
  return q;
}

const char* level_name(vocablens::ggml_simd::Level l) {
  using L = vocablens::ggml_simd::Level;
  return l == L::Scalar ? "scalar" : l == L::Avx512 ? "AVX-512, integer rounding" : "AVX-512 with AVX512-BF16";
}

// Every level this CPU runs (the scalar one included), each set in turn; the detected one restored after.
template <typename F>
void at_each_level(F&& f) {
  using L = vocablens::ggml_simd::Level;
  const L top = vocablens::ggml_simd::detected_level();
  if (top != L::Avx512Bf16) WARN("this CPU runs the decoders only up to: " << level_name(top));
  for (L l : {L::Scalar, L::Avx512, L::Avx512Bf16}) {
    if (l > top) continue;
    vocablens::ggml_simd::set_level(l);
    INFO("decoders: " << level_name(l));
    f(l);
  }
  vocablens::ggml_simd::set_level(top);
}

}  // namespace

TEST_CASE("vector decoders equal the scalar ones on every block, extreme fp16 scales included, float32 and bfloat16") {
  const GgmlType types[] = {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
                            GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};
  int checked_vector = 0;
  for (GgmlType t : types) {
    INFO(vocablens::ggml_type_name(static_cast<uint32_t>(t)));
    int64_t bv = 0;
    size_t bb = 0;
    REQUIRE(vocablens::ggml_block_layout(t, bv, bb));
    const int64_t blocks = 4096 * 32 / bv;  // 131 072 values
    const auto q = hostile_blocks(t, blocks, 7u + static_cast<uint32_t>(t));
    const int64_t n = blocks * bv;
    std::vector<float> ref(static_cast<size_t>(n)), got(ref.size());
    std::vector<uint16_t> ref16(ref.size()), got16(ref.size());
    vocablens::dequantize_row_scalar(t, q.data(), ref.data(), n);
    vocablens::dequantize_row_bf16_scalar(t, q.data(), ref16.data(), n);
    // The bf16 reference is the float32 one rounded (c10's rule is checked against c10 in weight_tiles_test).
    size_t unrounded = 0;
    for (size_t i = 0; i < ref.size(); ++i) unrounded += ref16[i] != vocablens::float_to_bf16_rne(ref[i]);
    CHECK(unrounded == 0);
    at_each_level([&](vocablens::ggml_simd::Level l) {
      if (l != vocablens::ggml_simd::Level::Scalar && vocablens::ggml_simd::vectorized(t)) ++checked_vector;
      std::fill(got.begin(), got.end(), -1.f);
      vocablens::dequantize_row(t, q.data(), got.data(), n);
      CHECK(std::memcmp(ref.data(), got.data(), ref.size() * 4) == 0);
      std::fill(got16.begin(), got16.end(), uint16_t{1});
      vocablens::dequantize_row_bf16(t, q.data(), got16.data(), n);
      CHECK(std::memcmp(ref16.data(), got16.data(), ref16.size() * 2) == 0);
      // Row by row from unaligned addresses (the runner decodes rows of a mapped file at any offset).
      std::vector<uint8_t> shifted(q.size() + 3);
      std::memcpy(shifted.data() + 3, q.data(), q.size());
      vocablens::dequantize_row_bf16(t, shifted.data() + 3, got16.data() + 1, n - bv);
      CHECK(std::memcmp(ref16.data(), got16.data() + 1, static_cast<size_t>(n - bv) * 2) == 0);
    });
  }
  // The 8 block types with vector decoders (Q4_0/1, Q5_0/1, Q8_0, Q4_K, Q5_K, Q6_K), at each vector level this CPU
  // runs: AVX-512, and AVX512-BF16 where present (a CPU with AVX-512 but no bf16 instructions runs one).
  using L = vocablens::ggml_simd::Level;
  const L top = vocablens::ggml_simd::detected_level();
  const int vector_levels = top == L::Avx512Bf16 ? 2 : top == L::Avx512 ? 1 : 0;
  CHECK(checked_vector == 8 * vector_levels);
}

TEST_CASE("vector F16, BF16 and F32 conversion equals the scalar one on all 65536 patterns, any length") {
  std::vector<uint16_t> all(65536 + 7);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i * 40503u);  // every pattern, shuffled
  std::vector<float> f32_in(all.size());
  std::mt19937 rng(3);
  for (auto& v : f32_in) {
    uint32_t bits = rng();
    if (rng() % 8 == 0) bits &= 0x807FFFFFu;  // float32 denormals (the F32 type can hold them)
    if (rng() % 8 == 0) bits = (bits & 0xFFFF0000u) | (rng() % 2 ? 0x8000u : 0x7FFFu);  // rounding ties and near-ties
    std::memcpy(&v, &bits, 4);
  }
  for (GgmlType t : {GgmlType::F16, GgmlType::BF16, GgmlType::F32}) {
    INFO(vocablens::ggml_type_name(static_cast<uint32_t>(t)));
    const void* src = t == GgmlType::F32 ? static_cast<const void*>(f32_in.data()) : static_cast<const void*>(all.data());
    for (int64_t n : {int64_t(65536 + 7), int64_t(15), int64_t(1)}) {
      std::vector<float> ref(static_cast<size_t>(n)), got(ref.size());
      std::vector<uint16_t> ref16(ref.size()), got16(ref.size());
      vocablens::dequantize_row_scalar(t, src, ref.data(), n);
      vocablens::dequantize_row_bf16_scalar(t, src, ref16.data(), n);
      at_each_level([&](vocablens::ggml_simd::Level) {
        vocablens::dequantize_row(t, src, got.data(), n);
        CHECK(std::memcmp(ref.data(), got.data(), ref.size() * 4) == 0);
        vocablens::dequantize_row_bf16(t, src, got16.data(), n);
        CHECK(std::memcmp(ref16.data(), got16.data(), ref16.size() * 2) == 0);
      });
    }
  }
}

TEST_CASE("float_to_bf16_rne: ties to even, NaN to 0x7FC0, infinities and denormals kept") {
  auto bits = [](uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return vocablens::float_to_bf16_rne(f);
  };
  CHECK(bits(0x3F808000u) == 0x3F80);  // tie, even below
  CHECK(bits(0x3F818000u) == 0x3F82);  // tie, odd below: up
  CHECK(bits(0x3F808001u) == 0x3F81);
  CHECK(bits(0x3F807FFFu) == 0x3F80);
  CHECK(bits(0x7F800000u) == 0x7F80);
  CHECK(bits(0xFF800000u) == 0xFF80);
  CHECK(bits(0x7F7FFFFFu) == 0x7F80);  // rounds up to infinity, as c10
  CHECK(bits(0xFFC00001u) == 0x7FC0);
  CHECK(bits(0x7F800001u) == 0x7FC0);
  CHECK(bits(0x00018000u) == 0x0002);  // denormal tie, odd below: up
  CHECK(bits(0x80000000u) == 0x8000);
}

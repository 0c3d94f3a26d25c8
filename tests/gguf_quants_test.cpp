// tests/gguf_quants_test.cpp — our dequantization against libggml's own, bit for bit.
//
// The reference is the prebuilt libggml-base.so of the npm package @node-llama-cpp/linux-x64@3.22.1
// (installed by scripts/setup_llama_ref.sh into ~/.cache/vocablens/llama-cpp-3.22.1/bins/linux-x64, or
// $VOCABLENS_LLAMA_REF/bins/linux-x64; VOCABLENS_LLAMA_BINS overrides the folder). It is loaded with dlopen: ggml_quantize_chunk quantizes float data of several distributions
// (normal, heavy-tailed, tiny values that make fp16 scales subnormal, zeros), then libggml's
// dequantize_row_<type> and our dequantize_row() decode the same bytes, and every float must have the
// same bit pattern. F16 and BF16 are checked on all 65536 bit patterns. A missing library FAILS the test.
#include <catch2/catch.hpp>
#include <dlfcn.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

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
    FAIL("libggml-base.so not found in " << bins_dir() << " (run scripts/setup_llama_ref.sh, or set VOCABLENS_LLAMA_REF / VOCABLENS_LLAMA_BINS): "
                                         << dlerror());
  return g;
}

std::vector<float> test_data(int64_t n, int kind, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> N(0.f, 1.f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) {
    switch (kind) {
      case 0: v = N(rng) * 0.02f; break;                                          // weight-like
      case 1: v = N(rng) * (rng() % 50 == 0 ? 30.f : 1.f); break;                 // outliers
      case 2: v = N(rng) * 1e-6f; break;                                          // subnormal fp16 scales
      case 3: v = (rng() % 4 == 0) ? 0.f : std::abs(N(rng)); break;               // many zeros, one sign
      default: v = static_cast<float>(static_cast<int>(rng() % 17) - 8); break;   // small integers
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
  const T types[] = {{GgmlType::Q4_0, "dequantize_row_q4_0"}, {GgmlType::Q4_1, "dequantize_row_q4_1"},
                     {GgmlType::Q5_0, "dequantize_row_q5_0"}, {GgmlType::Q5_1, "dequantize_row_q5_1"},
                     {GgmlType::Q8_0, "dequantize_row_q8_0"}, {GgmlType::Q2_K, "dequantize_row_q2_K"},
                     {GgmlType::Q3_K, "dequantize_row_q3_K"}, {GgmlType::Q4_K, "dequantize_row_q4_K"},
                     {GgmlType::Q5_K, "dequantize_row_q5_K"}, {GgmlType::Q6_K, "dequantize_row_q6_K"}};
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
    std::vector<float> a(static_cast<size_t>(bv * 16)), b(a.size());
    ref(q.data(), a.data(), bv * 16);
    vocablens::dequantize_row(t.type, q.data(), b.data(), bv * 16);
    CHECK(std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
  }
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

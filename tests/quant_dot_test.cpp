// tests/quant_dot_test.cpp — `--compute int8` (src/model/quant_dot.hpp): llama.cpp's numerics for quantized weights.
//
// Three levels, each against llama.cpp itself (the prebuilt release of scripts/setup_llama_ref.sh; missing = FAIL):
//  1. Blocks: our activation quantizer gives llama.cpp's integers and scales byte for byte (its AVX2 CPU backend's
//     from_float for Q8_0 / Q8_K, loaded with dlopen), and our dot products equal its vec_dot to float rounding
//     (|Δ| ≤ 2e-6 of the sum of |terms|: both sum exact integer block products, in different float orders).
//  2. Kernels: scalar, AVX2 and AVX-512 VNNI give the same bits (forced through qdot::set_kernel; a CPU without a
//     kernel runs the best one it has, so the comparison is never skipped and never faults).
//  3. Models: the logits and every layer's residual of each quantized GGUF fixture against llama.cpp's own forward
//     of the same file (tests/data/gguf/llamak-*.lcpp-logits.f32, and lcpp_logits run live for the layers). The
//     tolerance per fixture is below, with why; the exact float32 path's distance to llama.cpp is printed beside it.
#include <catch2/catch.hpp>
#include <dlfcn.h>

#include <c10/util/Half.h>

#include <cmath>
#include <cstring>
#include <cstdio>
#include <fstream>
#include <random>
#include <vector>

#include "../src/model/quant_dot.hpp"  // internal: the kernels and their dispatch
#include "fixtures.hpp"
#include "npy_tensor.hpp"
#include "tensor_checks.hpp"
#include "vocablens/gguf.hpp"
#include "vocablens/model.hpp"
#include "vocablens/weight.hpp"

namespace {

using vocablens::GgmlType;
namespace qdot = vocablens::qdot;

std::string qd_ref_dir() {
  if (const char* e = std::getenv("VOCABLENS_LLAMA_REF")) return e;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "/root") + "/.cache/vocablens/llama-cpp-3.22.1";
}

// llama.cpp's CPU backend built for AVX2 (its "haswell" variant): the x86 quantizers and dot products that its
// CPU backend runs on any AVX2 machine, this one included.
struct QdLlama {
  struct Traits {
    void (*from_float)(const float*, void*, int64_t);
    void (*vec_dot)(int, float*, size_t, const void*, size_t, const void*, size_t, int);
    int vec_dot_type;
    int64_t nrows;
  };
  void* cpu = nullptr;
  void* base = nullptr;
  const Traits* (*traits)(int) = nullptr;
  size_t (*quantize_chunk)(int, const float*, void*, int64_t, int64_t, int64_t, const float*) = nullptr;
  QdLlama() {
    const std::string bins = qd_ref_dir() + "/bins/linux-x64/";
    base = dlopen((bins + "libggml-base.so").c_str(), RTLD_NOW | RTLD_GLOBAL);
    cpu = dlopen((bins + "libggml-cpu-haswell.so").c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!base || !cpu) return;
    quantize_chunk = reinterpret_cast<decltype(quantize_chunk)>(dlsym(base, "ggml_quantize_chunk"));
    traits = reinterpret_cast<decltype(traits)>(dlsym(cpu, "ggml_get_type_traits_cpu"));
    if (auto init = reinterpret_cast<void (*)()>(dlsym(cpu, "ggml_cpu_init"))) init();
  }
};

const QdLlama& qd_llama() {
  static QdLlama g;
  INFO("llama.cpp's libraries expected in " << qd_ref_dir() << "/bins/linux-x64 (scripts/setup_llama_ref.sh)");
  REQUIRE(g.traits != nullptr);
  REQUIRE(g.quantize_chunk != nullptr);
  REQUIRE(__builtin_cpu_supports("avx2"));  // llama.cpp's x86 quantizers need it to run at all
  return g;
}

std::vector<float> qd_data(int64_t n, float scale, uint32_t seed, bool outliers) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> N(0.f, 1.f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = N(rng) * scale * (outliers && rng() % 64 == 0 ? 25.f : 1.f);
  if (n >= 512) {  // blocks of zeros, exact ties at .5 and a block of one sign
    for (int j = 0; j < 32; ++j) x[static_cast<size_t>(j)] = 0.f;
    for (int j = 32; j < 64; ++j) x[static_cast<size_t>(j)] = static_cast<float>(j - 48) * 0.5f;
    for (int j = 256; j < 512; ++j) x[static_cast<size_t>(j)] = std::fabs(x[static_cast<size_t>(j)]);
  }
  return x;
}

const GgmlType kQdTypes[] = {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

// A quantized matrix of `rows` x `cols` made by llama.cpp's own quantizer.
std::vector<uint8_t> qd_weights(const QdLlama& g, GgmlType t, int64_t rows, int64_t cols, uint32_t seed) {
  int64_t bv = 0;
  size_t bb = 0;
  REQUIRE(vocablens::ggml_block_layout(t, bv, bb));
  const std::vector<float> w = qd_data(rows * cols, 0.05f, seed, true);
  std::vector<uint8_t> q(static_cast<size_t>(rows * cols / bv) * bb);
  g.quantize_chunk(static_cast<int>(t), w.data(), q.data(), 0, rows, cols, nullptr);
  return q;
}

// Our quantized activation row (quant_dot.hpp's layout) back to floats: d · q.
void qd_dequantize_act(GgmlType t, const uint8_t* row, int64_t cols, float* out) {
  const bool k = t == GgmlType::Q4_K || t == GgmlType::Q5_K || t == GgmlType::Q6_K;
  const int64_t bs = k ? 256 : 32, nb = cols / bs, dbytes = (4 * nb + 63) / 64 * 64;
  const float* d = reinterpret_cast<const float*>(row);
  const int8_t* qs = reinterpret_cast<const int8_t*>(row + dbytes + (k ? (32 * nb + 63) / 64 * 64 : 0));
  for (int64_t c = 0; c < cols; ++c) out[c] = d[c / bs] * qs[c];
}

}  // namespace

TEST_CASE("int8 activations: llama.cpp's integers and scales, byte for byte") {
  const QdLlama& g = qd_llama();
  const int64_t cols = 1024;
  for (GgmlType t : kQdTypes) {
    const bool k = t == GgmlType::Q4_K || t == GgmlType::Q5_K || t == GgmlType::Q6_K;
    INFO(vocablens::ggml_type_name(static_cast<uint32_t>(t)));
    const QdLlama::Traits* tr = g.traits(static_cast<int>(t));
    REQUIRE(tr->vec_dot_type == (k ? 15 : 8));  // Q8_K : Q8_0, as quant_dot.hpp says
    const QdLlama::Traits* act = g.traits(tr->vec_dot_type);
    for (uint32_t seed = 1; seed <= 6; ++seed) {
      const std::vector<float> x = qd_data(cols, seed % 2 ? 1.f : 3e-3f, seed, seed % 3 == 0);
      std::vector<uint8_t> theirs(static_cast<size_t>(cols) * 2), ours(static_cast<size_t>(qdot::act_row_bytes(t, cols)));
      act->from_float(x.data(), theirs.data(), cols);
      // every quantizer this CPU runs (Q8_K has a vector one): the same bytes as the scalar one
      std::vector<uint8_t> scalar(ours.size());
      qdot::set_kernel(qdot::Kernel::Scalar);
      qdot::quantize_row(t, x.data(), cols, scalar.data());
      qdot::set_kernel(qdot::Kernel::Avx512Vnni);
      qdot::quantize_row(t, x.data(), cols, ours.data());
      CHECK(std::memcmp(scalar.data(), ours.data(), ours.size()) == 0);
      const int64_t nb = cols / (k ? 256 : 32), dbytes = (4 * nb + 63) / 64 * 64;
      const float* d = reinterpret_cast<const float*>(ours.data());
      const int8_t* qs = reinterpret_cast<const int8_t*>(ours.data() + dbytes + (k ? (32 * nb + 63) / 64 * 64 : 0));
      int64_t bad = 0;
      for (int64_t b = 0; b < nb; ++b) {
        if (k) {  // block_q8_K: float d, int8 qs[256], int16 bsums[16]
          const uint8_t* blk = theirs.data() + b * 292;
          float td;
          std::memcpy(&td, blk, 4);
          bad += td != d[b];
          bad += std::memcmp(blk + 4, qs + 256 * b, 256) != 0;
          const int16_t* bs = reinterpret_cast<const int16_t*>(ours.data() + dbytes) + 16 * b;
          bad += std::memcmp(blk + 260, bs, 32) != 0;
        } else {  // block_q8_0: fp16 d, int8 qs[32]
          const uint8_t* blk = theirs.data() + b * 34;
          uint16_t h;
          std::memcpy(&h, blk, 2);
          bad += static_cast<float>(c10::Half(h, c10::Half::from_bits())) != d[b];
          bad += std::memcmp(blk + 2, qs + 32 * b, 32) != 0;
        }
      }
      CHECK(bad == 0);
    }
    // NaN and infinity: that block's scale NaN and its integers 0, the other blocks as usual, in every quantizer
    std::vector<float> x = qd_data(cols, 1.f, 7, true);
    x[static_cast<size_t>(k ? 300 : 40)] = NAN;
    x[static_cast<size_t>(k ? 700 : 70)] = -INFINITY;
    std::vector<uint8_t> scalar(static_cast<size_t>(qdot::act_row_bytes(t, cols))), vec(scalar.size());
    qdot::set_kernel(qdot::Kernel::Scalar);
    qdot::quantize_row(t, x.data(), cols, scalar.data());
    qdot::set_kernel(qdot::Kernel::Avx512Vnni);
    qdot::quantize_row(t, x.data(), cols, vec.data());
    const float* d = reinterpret_cast<const float*>(vec.data());
    CHECK(std::isnan(d[1]));
    CHECK(std::isnan(d[2]));
    CHECK(std::isfinite(d[0]));
    CHECK(std::memcmp(scalar.data(), vec.data(), vec.size()) == 0);
  }
}

TEST_CASE("int8 dot products: llama.cpp's vec_dot to float rounding, and every kernel the same bits") {
  const QdLlama& g = qd_llama();
  // 13 activation rows: AVX-512 groups of 8 and 4 and a single one, AVX2 4, 4, 4, 1; 27: AVX-512's Q4_K / Q5_K
  // products in tiles of 16 weight rows (two tiles, then 5 rows row-major; activation rows in groups of 4, then 3
  // single ones), the other types 8, 8, 8, 1, 1, 1.
  const int64_t rows = 37, cols = 2048;
  for (const int64_t ntok : {13, 27})
    for (GgmlType t : kQdTypes) {
      INFO(vocablens::ggml_type_name(static_cast<uint32_t>(t)) << ", " << ntok << " activation rows");
      const int64_t row_bytes = static_cast<int64_t>(qd_weights(g, t, 1, cols, 9).size());
      const std::vector<uint8_t> w = qd_weights(g, t, rows, cols, 11 + static_cast<uint32_t>(t));
      const int64_t stride = qdot::act_row_bytes(t, cols);
      std::vector<uint8_t> act(static_cast<size_t>(ntok * stride));
      std::vector<std::vector<uint8_t>> theirs_act(ntok, std::vector<uint8_t>(static_cast<size_t>(cols) * 2));
      const QdLlama::Traits* tr = g.traits(static_cast<int>(t));
      for (int64_t i = 0; i < ntok; ++i) {
        const std::vector<float> x = qd_data(cols, 1.f + static_cast<float>(i), 100 + static_cast<uint32_t>(i), i % 2 == 1);
        qdot::quantize_row(t, x.data(), cols, act.data() + i * stride);
        g.traits(tr->vec_dot_type)->from_float(x.data(), theirs_act[static_cast<size_t>(i)].data(), cols);
      }
      std::vector<std::vector<float>> y;
      for (qdot::Kernel k : {qdot::Kernel::Scalar, qdot::Kernel::Avx2, qdot::Kernel::Avx512Vnni}) {
        y.emplace_back(static_cast<size_t>(ntok * rows), NAN);
        qdot::dot_rows_with(k, {t, w.data(), row_bytes, rows, act.data(), stride, ntok, cols, y.back().data(), rows});
      }
      // The bound: float rounding of a sum of cols/32 (or cols/16) scaled exact integers, in another order.
      std::vector<float> deq_w(static_cast<size_t>(cols)), deq_a(static_cast<size_t>(cols));
      double worst = 0;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t i = 0; i < ntok; ++i) {
          float ref = 0;
          tr->vec_dot(static_cast<int>(cols), &ref, 0, w.data() + r * row_bytes, 0, theirs_act[static_cast<size_t>(i)].data(), 0,
                      1);
          vocablens::dequantize_row(t, w.data() + r * row_bytes, deq_w.data(), cols);
          qd_dequantize_act(t, act.data() + i * stride, cols, deq_a.data());
          double mag = 0;
          for (int64_t c = 0; c < cols; ++c)
            mag += std::fabs(static_cast<double>(deq_w[static_cast<size_t>(c)]) * deq_a[static_cast<size_t>(c)]);
          const float ours = y[0][static_cast<size_t>(i * rows + r)];
          worst = std::max(worst, std::fabs(static_cast<double>(ours) - ref) / std::max(mag, 1e-30));
          CHECK(std::fabs(static_cast<double>(ours) - ref) <= 2e-6 * mag);
        }
      WARN(vocablens::ggml_type_name(static_cast<uint32_t>(t)) << ": max |ours - llama.cpp vec_dot| / sum|terms| = " << worst);
      CHECK(std::memcmp(y[0].data(), y[1].data(), y[0].size() * 4) == 0);  // scalar == AVX2
      CHECK(std::memcmp(y[0].data(), y[2].data(), y[0].size() * 4) == 0);  // scalar == AVX-512 VNNI
    }
}

namespace {

const std::string kQdDir = std::string(VOCABLENS_SOURCE_DIR) + "/tests/data/gguf/";

// Sets the compute mode for a scope (the tests share one process).
struct QdCompute {
  explicit QdCompute(vocablens::ComputeDtype d) { vocablens::set_compute_dtype(d); }
  ~QdCompute() { vocablens::set_compute_dtype(vocablens::ComputeDtype::Float32); }
};

struct QdForward {
  at::Tensor logits;              // [T, V]
  std::vector<at::Tensor> resid;  // [T, d] per layer
};
QdForward qd_forward(const vocablens::Model& m, const std::vector<int64_t>& ids, vocablens::ComputeDtype d) {
  QdCompute c(d);
  auto out = m.forward(at::tensor(ids, at::kLong), vocablens::CacheSpec::all());
  QdForward f;
  f.logits = out.logits[0];
  for (int64_t l = 0; l < m.config().n_layers; ++l) f.resid.push_back(out.cache.get("resid_post", l)[0]);
  return f;
}

// Mean over positions of KL(softmax(p) || softmax(q)).
double qd_kl(const at::Tensor& p, const at::Tensor& q) {
  const at::Tensor lp = at::log_softmax(p.to(at::kDouble), -1), lq = at::log_softmax(q.to(at::kDouble), -1);
  return (lp.exp() * (lp - lq)).sum(-1).mean().item<double>();
}

}  // namespace

// llama.cpp has two CPU paths for these products, and they differ in the order of the float sums: its vec_dot
// kernels (run live with LCPP_NO_REPACK=1) and its default run, which repacks Q4_0 and Q4_K rows into GEMM tiles
// where the CPU has them (AVX2 and up). int8 compute sums each block's (k-quants: super-block's) exact integers
// first, then one fma per block, as the repacked GEMMs do; for Q8_0 / Q4_0 / Q5_0 llama.cpp's AVX2 vec_dot keeps 8
// float lanes per block instead. Both paths run live; int8 must match one of them (the nearer is printed) to the
// tolerance, logits and every layer's residual, and be no farther from the other than llama.cpp's two paths are
// from each other (+1e-4). Tolerances (max |Δ|):
//  - Q8_0, Q4_0, Q6_K, Q5_K_M, Q4_K_M (every matrix has an int8 kernel): 1e-4; measured 7e-7 to 2.9e-6 (|logit| ≤
//    6.1). For Q4_0 llama.cpp's two paths are 0.063 apart (an activation crosses a Q8_0 rounding boundary): int8
//    matches its default run (2.4e-6 on a Zen 4).
//  - gpt2-tiny Q8_0: 0.1 and top-1 at 15 of 16. llama.cpp's GELU is an fp16 lookup table (~1e-3 off an exact GELU):
//    those errors move some MLP activations across a Q8_0 rounding boundary, which int8 mode then reproduces
//    faithfully one quantum away; measured 0.049 (the exact path: 0.058).
//  - Q2_K (Q2_K / Q3_K matrices have no int8 kernel and run exactly): 0.5, the exact path's tolerance.
// And against the committed logits of llama.cpp's default run (tests/data/gguf/make.sh): no farther than one of the
// live paths is (+1e-4). The exact float32 path's distances are printed beside (0.12 to 0.30).
TEST_CASE("int8 compute: each quantized GGUF fixture against llama.cpp's own forward of the same file") {
  struct Case {
    const char* name;
    const char* ids;
    double tol;
    int64_t top1_miss;
  };
  const Case cases[] = {{"llamak-q8_0", "ids-llama.txt", 1e-4, 0},   {"llamak-q4_0", "ids-llama.txt", 1e-4, 0},
                        {"llamak-q6_k", "ids-llama.txt", 1e-4, 0},   {"llamak-q5_k_m", "ids-llama.txt", 1e-4, 0},
                        {"llamak-q4_k_m", "ids-llama.txt", 1e-4, 0}, {"llamak-q2_k", "ids-llama.txt", 0.5, 0},
                        {"gpt2-tiny-q8_0", "ids-gpt2.txt", 0.1, 1}};
  const std::string ref = qd_ref_dir(), exe = ref + "/bin/lcpp_logits", bins = ref + "/bins/linux-x64";
  INFO("llama.cpp reference expected at " << ref << " (run scripts/setup_llama_ref.sh, or set VOCABLENS_LLAMA_REF)");
  REQUIRE(std::ifstream(exe).good());
  const std::string tmp = vl_test::temp_dir("quant_dot_llama");
  for (const Case& c : cases) {
    INFO(c.name);
    const std::string gguf = kQdDir + c.name + ".gguf";
    auto m = vocablens::load_model(gguf);
    const auto ids = vl_test::read_ids_txt(kQdDir + c.ids);
    const int64_t T = static_cast<int64_t>(ids.size()), L = m.config().n_layers, D = m.config().d_model;
    // llama.cpp's two CPU paths on this file, run live: its vec_dot kernels (LCPP_NO_REPACK=1) and its default run,
    // which repacks Q4_0 / Q4_K rows into GEMM tiles where this CPU has them.
    at::Tensor lcpp[2], layers[2];
    for (int path = 0; path < 2; ++path) {
      const std::string stem = tmp + "/" + c.name + (path == 0 ? ".vec_dot" : ".default");
      const std::string lo = stem + ".logits.f32", la = stem + ".layers.f32";
      std::string out;
      REQUIRE(vl_test::run_command(std::string(path == 0 ? "LCPP_NO_REPACK=1 " : "") + vl_test::shq(exe) + " " +
                                       vl_test::shq(bins) + " " + vl_test::shq(gguf) + " " + vl_test::shq(kQdDir + c.ids) + " " +
                                       vl_test::shq(lo) + " " + vl_test::shq(la),
                                   out) == 0);
      lcpp[path] = vl_test::read_f32_raw(lo, {T, -1});
      layers[path] = vl_test::read_f32_raw(la, {L, T, D});
    }
    // The committed logits of llama.cpp's default run (tests/data/gguf/make.sh): llama.cpp agrees with itself.
    const at::Tensor committed = vl_test::read_f32_raw(kQdDir + c.name + ".lcpp-logits.f32", {T, -1});
    const QdForward i8 = qd_forward(m, ids, vocablens::ComputeDtype::Int8);
    const QdForward ex = qd_forward(m, ids, vocablens::ComputeDtype::Float32);
    double d_i8[2], r_i8[2];  // int8 against each path: logits, every layer's residual
    for (int path = 0; path < 2; ++path) {
      d_i8[path] = vl_test::max_abs_diff(i8.logits, lcpp[path]);
      r_i8[path] = 0;
      for (int64_t l = 0; l < L; ++l)
        r_i8[path] = std::max(r_i8[path], vl_test::max_abs_diff(i8.resid[static_cast<size_t>(l)], layers[path][l]));
    }
    const int near = std::max(d_i8[0], r_i8[0]) <= std::max(d_i8[1], r_i8[1]) ? 0 : 1;
    const double between = vl_test::max_abs_diff(lcpp[0], lcpp[1]);  // llama.cpp's paths apart
    const double d_ex = vl_test::max_abs_diff(ex.logits, lcpp[near]);
    const int64_t top1_lcpp = i8.logits.argmax(-1).eq(lcpp[near].argmax(-1)).sum().item<int64_t>();
    const int64_t top1_exact = i8.logits.argmax(-1).eq(ex.logits.argmax(-1)).sum().item<int64_t>();
    std::printf(
        "%-15s int8 vs llama.cpp (%s): max|dlogit| %.2e, max|dresid| %.2e, top-1 %lld/%lld | the other path %.1e | "
        "llama.cpp's paths apart %.1e | exact vs llama.cpp %.2e | int8 vs exact: max|dlogit| %.3f, top-1 %lld/%lld, "
        "KL %.2e | max|logit| %.2f\n",
        c.name, near == 0 ? "vec_dot" : "default, repacking", d_i8[near], r_i8[near], static_cast<long long>(top1_lcpp),
        static_cast<long long>(T), d_i8[1 - near], between, d_ex, vl_test::max_abs_diff(i8.logits, ex.logits),
        static_cast<long long>(top1_exact), static_cast<long long>(T), qd_kl(ex.logits, i8.logits),
        lcpp[near].abs().max().item<double>());
    CHECK(std::isfinite(d_i8[near]));
    // One of llama.cpp's own paths to the tolerance, logits and every layer; from the other no farther than
    // llama.cpp's two paths are from each other.
    CHECK(d_i8[near] <= c.tol);
    CHECK(r_i8[near] <= c.tol);
    CHECK(d_i8[1 - near] <= between + std::max(c.tol, 1e-4));
    CHECK(top1_lcpp >= T - c.top1_miss);
    CHECK(vl_test::max_abs_diff(i8.logits, committed) <=
          std::max(vl_test::max_abs_diff(lcpp[0], committed), vl_test::max_abs_diff(lcpp[1], committed)) + std::max(c.tol, 1e-4));
  }
}

TEST_CASE("int8 compute on float32 weights runs the exact path, and results say which mode ran") {
  auto m = vocablens::load_model(kQdDir + "stories260K-f32.gguf");
  const std::vector<int64_t> ids = {1, 20, 30, 40, 50};
  const QdForward ex = qd_forward(m, ids, vocablens::ComputeDtype::Float32);
  const QdForward i8 = qd_forward(m, ids, vocablens::ComputeDtype::Int8);
  CHECK(at::equal(ex.logits, i8.logits));
  CHECK(vocablens::compute_dtype_from_string("int8") == vocablens::ComputeDtype::Int8);
  CHECK(std::string(vocablens::compute_dtype_name(vocablens::ComputeDtype::Int8)) == "int8");
  CHECK_THROWS(vocablens::compute_dtype_from_string("int4"));
  // the CLI: inspect names the mode and the types it covers; the fallback is said on stderr
  const std::string cli = vl_test::require_cli();
  std::string out;
  REQUIRE(vl_test::run_command(vl_test::shq(cli) + " --compute int8 inspect " + vl_test::shq(kQdDir + "llamak-q4_k_m.gguf"),
                               out) == 0);
  CHECK_THAT(out, Catch::Contains("computed in int8 (") && Catch::Contains("kernels) for Q4_K, Q6_K"));
  const std::string dir = vl_test::temp_dir("quant_dot_cli");
  REQUIRE(vl_test::run_command(vl_test::shq(cli) + " --compute int8 lens " + vl_test::shq(kQdDir + "stories260K-f32.gguf") +
                                   " --prompt 'Once upon a time' --out " + vl_test::shq(dir + "/f32") + " 2>&1",
                               out) == 0);
  CHECK_THAT(out,
             Catch::Contains("--compute int8: F32 weights have no int8 kernel; their products run on the exact float32 path"));
  REQUIRE(vl_test::run_command("cat " + vl_test::shq(dir) + "/f32/*.json", out) == 0);
  CHECK_THAT(out, Catch::Contains("\"compute\":\"int8\"") || Catch::Contains("\"compute\": \"int8\""));
}

TEST_CASE("VOCABLENS_KERNELS forces a lower kernel and never a higher one than the CPU has") {
  const qdot::Kernel best = qdot::detected_kernel();
  qdot::set_kernel(qdot::Kernel::Scalar);
  CHECK(qdot::active_kernel() == qdot::Kernel::Scalar);
  qdot::set_kernel(qdot::Kernel::Avx512Vnni);
  CHECK(qdot::active_kernel() == best);
  // a forward under each kernel gives the same bits
  auto m = vocablens::load_model(kQdDir + "llamak-q4_k_m.gguf");
  const std::vector<int64_t> ids = {1, 5, 9, 200, 300, 17, 42};
  std::vector<at::Tensor> got;
  for (qdot::Kernel k : {qdot::Kernel::Scalar, qdot::Kernel::Avx2, qdot::Kernel::Avx512Vnni}) {
    qdot::set_kernel(k);
    got.push_back(qd_forward(m, ids, vocablens::ComputeDtype::Int8).logits);
  }
  qdot::set_kernel(qdot::Kernel::Avx512Vnni);
  CHECK(at::equal(got[0], got[1]));
  CHECK(at::equal(got[0], got[2]));
  // the variable, in a fresh process: scalar on this CPU prints the same logits as the default
  const std::string cli = vl_test::require_cli();
  const std::string dir = vl_test::temp_dir("quant_dot_kernels");
  std::string a, b;
  for (const char* k : {"scalar", "avx2", "avx512"}) {
    const std::string o = dir + "/" + k;
    REQUIRE(vl_test::run_command(std::string("VOCABLENS_KERNELS=") + k + " " + vl_test::shq(cli) + " --compute int8 lens " +
                                     vl_test::shq(kQdDir + "gpt2-tiny-q8_0.gguf") + " --prompt 'The cat sat on the mat' --out " +
                                     vl_test::shq(o) + " 2>&1",
                                 a) == 0);
    REQUIRE(vl_test::run_command("ls " + vl_test::shq(o) + " | grep -v json | while read f; do cmp " +
                                     vl_test::shq(dir + "/scalar") + "/$f " + vl_test::shq(o) + "/$f || echo DIFFERENT $f; done",
                                 b) == 0);
    CHECK(b.find("DIFFERENT") == std::string::npos);
  }
}

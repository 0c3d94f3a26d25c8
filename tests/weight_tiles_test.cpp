// tests/weight_tiles_test.cpp — weight_matmul's tiles decoded straight into the compute dtype change no number.
//
// weight_matmul (vocablens/weight.hpp) decodes each tile of a quantized or F16/BF16 weight with the vector
// decoders into a reused buffer: float32 for the default compute, bfloat16 under --dtype bfloat16 with no
// float32 pass. The path it replaced, kept as "reference tiles" (src/model/weight_tiles.hpp), decoded with the
// scalar decoders (bit-identical to libggml, tests/gguf_quants_test.cpp) into a fresh float32 tile and let
// LibTorch round it (`.to(at::kBFloat16)`). Here:
//  - the bf16 decoders against LibTorch's own rounding of the scalar float32 values (not our rounding function):
//    the same bits, except that a NaN may be another NaN pattern (LibTorch itself writes two, see same_bf16);
//  - weight_matmul against the reference tiles, bit for bit, for every vector-decoded type, dense F16/BF16,
//    one and several tiles, with a bias, both compute dtypes; and against a float64 product (tolerance);
//  - whole models (the llamak GGUF fixtures of every quantized type): logits bit for bit the same both ways,
//    float32 and bfloat16 compute.
#include <ATen/ATen.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "../src/checkpoint/ggml_quants_simd.hpp"  // internal: dequantize_row_bf16 and friends
#include "../src/model/bf16_gemm.hpp"              // internal: the bfloat16 GEMM's two paths
#include "../src/model/weight_tiles.hpp"           // internal: the reference tiles
#include "npy_tensor.hpp"
#include "tensor_checks.hpp"
#include "vocablens/gguf.hpp"
#include "vocablens/model.hpp"
#include "vocablens/weight.hpp"

namespace {

using vocablens::GgmlType;

const std::string kGgufDir = std::string(VOCABLENS_SOURCE_DIR) + "/tests/data/gguf/";

// Byte offsets of a block's fp16 scales, per type (ggml-common.h's block structs).
std::vector<size_t> scale_offsets(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_0:
    case GgmlType::Q5_0:
    case GgmlType::Q8_0: return {0};
    case GgmlType::Q4_1:
    case GgmlType::Q5_1:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K: return {0, 2};
    case GgmlType::Q6_K: return {208};
    default: return {};
  }
}

// `rows` rows of `cols` values of type t: random bytes, fp16 scales set to random finite values of weight-like
// size (or, with `extreme`, a third of them to infinities, NaNs, the largest finite and subnormals).
std::shared_ptr<std::vector<uint8_t>> random_blocks(GgmlType t, int64_t rows, int64_t cols, uint32_t seed, bool extreme) {
  int64_t bv = 0;
  size_t bb = 0;
  REQUIRE(vocablens::ggml_block_layout(t, bv, bb));
  const int64_t blocks = rows * cols / bv;
  auto q = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(blocks) * bb);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> U(0.001f, 0.05f);
  for (auto& c : *q) c = static_cast<uint8_t>(rng());
  const uint16_t extremes[] = {0x7C00, 0xFC00, 0x7E00, 0x7C01, 0x7BFF, 0x0001, 0x8001, 0x0000};
  for (int64_t b = 0; b < blocks; ++b)
    for (size_t off : scale_offsets(t)) {
      uint16_t h = c10::Half(U(rng) * (rng() % 2 ? 1.f : -1.f)).x;
      if (extreme && rng() % 3 == 0) h = extremes[rng() % (sizeof(extremes) / sizeof(extremes[0]))];
      std::memcpy(q->data() + static_cast<size_t>(b) * bb + off, &h, 2);
    }
  return q;
}

struct ComputeScope {  // restores float32 compute and the new tiles whatever happens
  ~ComputeScope() {
    vocablens::set_compute_dtype(vocablens::ComputeDtype::Float32);
    vocablens::set_reference_weight_tiles(false);
  }
};

// bfloat16 patterns equal, or both NaN: LibTorch's vectorised float -> bfloat16 conversion writes NaN as 0xFFFF and
// its scalar one (c10::BFloat16, also used for a loop's last few elements) as 0x7FC0; ours always the latter.
bool same_bf16(uint16_t a, uint16_t b) {
  const bool na = (a & 0x7F80) == 0x7F80 && (a & 0x7F), nb = (b & 0x7F80) == 0x7F80 && (b & 0x7F);
  return a == b || (na && nb);
}
bool same_bf16_tensor(const at::Tensor& a, const at::Tensor& b) {
  if (a.sizes() != b.sizes() || a.scalar_type() != at::kBFloat16 || b.scalar_type() != at::kBFloat16) return false;
  const at::Tensor ac = a.contiguous(), bc = b.contiguous();
  const auto* pa = reinterpret_cast<const uint16_t*>(ac.data_ptr());
  const auto* pb = reinterpret_cast<const uint16_t*>(bc.data_ptr());
  for (int64_t i = 0; i < ac.numel(); ++i)
    if (!same_bf16(pa[i], pb[i])) return false;
  return true;
}

bool same_bits(const at::Tensor& a, const at::Tensor& b) {
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) return false;
  const at::Tensor ac = a.contiguous(), bc = b.contiguous();
  return std::memcmp(ac.data_ptr(), bc.data_ptr(), static_cast<size_t>(ac.numel()) * ac.element_size()) == 0;
}

const GgmlType kVectorTypes[] = {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                                 GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

}  // namespace

TEST_CASE("bf16 tiles equal LibTorch's rounding of the float32 tiles bit for bit (NaN: NaN)") {
  for (GgmlType t : kVectorTypes) {
    INFO(vocablens::ggml_type_name(static_cast<uint32_t>(t)));
    const int64_t rows = 64, cols = 1024;
    auto q = random_blocks(t, rows, cols, 11u + static_cast<uint32_t>(t), /*extreme=*/true);
    at::Tensor f = at::empty({rows, cols}, at::kFloat);
    vocablens::dequantize_row_scalar(t, q->data(), f.data_ptr<float>(), rows * cols);
    // As the old runner converted: the transposed tile, then LibTorch's conversion.
    const at::Tensor want = f.t().to(at::kBFloat16).t().contiguous();
    const at::Tensor want_plain = f.to(at::kBFloat16);
    CHECK(same_bf16_tensor(want, want_plain));
    REQUIRE(f.isnan().any().item<bool>());  // the extreme scales did produce NaNs and infinities
    REQUIRE(f.isinf().any().item<bool>());
    using L = vocablens::ggml_simd::Level;
    const L top = vocablens::ggml_simd::detected_level();
    for (L l : {L::Scalar, L::Avx512, L::Avx512Bf16}) {
      if (l > top) continue;
      INFO("level " << static_cast<int>(l));
      vocablens::ggml_simd::set_level(l);
      at::Tensor got = at::empty({rows, cols}, at::kBFloat16);
      vocablens::dequantize_row_bf16(t, q->data(), reinterpret_cast<uint16_t*>(got.data_ptr()), rows * cols);
      CHECK(same_bf16_tensor(got, want));
      CHECK(got.isnan().equal(want.isnan()));
    }
    vocablens::ggml_simd::set_level(top);
  }
  // The rounding rule alone, on every upper half with the low halves that decide ties and near-ties.
  std::vector<uint32_t> pats;
  for (uint32_t hi = 0; hi < 65536; ++hi)
    for (uint32_t lo : {0x0000u, 0x0001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu}) pats.push_back(hi << 16 | lo);
  at::Tensor fx = at::from_blob(pats.data(), {static_cast<int64_t>(pats.size())}, at::kInt).view(at::kFloat);
  at::Tensor c10r = fx.to(at::kBFloat16);
  const auto* c = reinterpret_cast<const uint16_t*>(c10r.data_ptr());
  size_t differ = 0;
  for (size_t i = 0; i < pats.size(); ++i) {
    float v;
    std::memcpy(&v, &pats[i], 4);
    differ += !same_bf16(vocablens::float_to_bf16_rne(v), c[i]);
  }
  CHECK(differ == 0);
}

TEST_CASE("weight_matmul: tiles decoded into the compute dtype equal the reference tiles bit for bit") {
  ComputeScope restore;
  // in = 512: a tile holds 8192 columns, so 8229 columns take two tiles (the second a partial one).
  const int64_t in = 512;
  struct Case {
    GgmlType type;
    int64_t out;
  };
  std::vector<Case> cases;
  for (GgmlType t : kVectorTypes) cases.push_back({t, 300});
  cases.push_back({GgmlType::Q8_0, 8229});
  cases.push_back({GgmlType::Q4_K, 8229});
  cases.push_back({GgmlType::Q6_K, 8229});
  at::manual_seed(5);
  for (const auto& c : cases) {
    auto q = random_blocks(c.type, c.out, in, 100u + static_cast<uint32_t>(c.type), /*extreme=*/false);
    const at::Tensor w = vocablens::make_packed_weight(q, q->data(), c.type, c.out, in).t();  // [in, out]
    const at::Tensor bias = at::randn({c.out});
    // Independent float64 product: the scalar decoders (libggml's values) and a double GEMM.
    at::Tensor wf = at::empty({c.out, in}, at::kFloat);
    vocablens::dequantize_row_scalar(c.type, q->data(), wf.data_ptr<float>(), c.out * in);
    for (int64_t N : {int64_t(1), int64_t(37), int64_t(128)}) {
      INFO(vocablens::ggml_type_name(static_cast<uint32_t>(c.type)) << " [" << in << ", " << c.out << "], N " << N);
      const at::Tensor x = at::randn({N, in});
      const at::Tensor exact = at::mm(x.to(at::kDouble), wf.t().to(at::kDouble)) + bias.to(at::kDouble);
      // bfloat16 both ways: LibTorch's bf16 GEMM (where this CPU has AVX-512) and the float32 one that emulates it.
      using vocablens::detail::Bf16Gemm;
      for (auto [dt, path] : {std::pair{vocablens::ComputeDtype::Float32, Bf16Gemm::Auto},
                              std::pair{vocablens::ComputeDtype::BFloat16, Bf16Gemm::Auto},
                              std::pair{vocablens::ComputeDtype::BFloat16, Bf16Gemm::Float32}}) {
        const bool b16 = dt == vocablens::ComputeDtype::BFloat16;
        INFO((b16 ? "bfloat16" : "float32") << (path == Bf16Gemm::Float32 ? ", float32 GEMM" : ""));
        vocablens::set_compute_dtype(dt);
        vocablens::detail::set_bf16_gemm(path);
        vocablens::set_reference_weight_tiles(true);
        const at::Tensor ref = vocablens::weight_matmul(x, w, bias);
        vocablens::set_reference_weight_tiles(false);
        const at::Tensor got = vocablens::weight_matmul(x, w, bias);
        vocablens::detail::set_bf16_gemm(Bf16Gemm::Auto);
        CHECK(same_bits(got, ref));
        // float32: summation order only (K = 512); bfloat16: inputs rounded to 8 significant bits.
        const double scale = exact.abs().max().item<double>();
        CHECK(vl_test::max_abs_diff(got, exact) < (b16 ? 2e-2 : 1e-5) * scale);
      }
    }
  }
  // No tokens at all: an empty product, as before.
  {
    auto q = random_blocks(GgmlType::Q4_K, 300, in, 9u, false);
    const at::Tensor w = vocablens::make_packed_weight(q, q->data(), GgmlType::Q4_K, 300, in).t();
    for (auto dt : {vocablens::ComputeDtype::Float32, vocablens::ComputeDtype::BFloat16}) {
      vocablens::set_compute_dtype(dt);
      const at::Tensor y = vocablens::weight_matmul(at::randn({0, in}), w);
      CHECK(y.sizes() == at::IntArrayRef({0, 300}));
      CHECK(y.scalar_type() == at::kFloat);
    }
  }
  // Dense F16 / BF16 weights stored [out, in] (GGUF, safetensors) and viewed transposed; and one stored [in, out],
  // which weight_matmul multiplies through the reference path.
  for (auto st : {at::kHalf, at::kBFloat16}) {
    for (bool stored_out_in : {true, false}) {
      const int64_t out = 8229;
      const at::Tensor w = stored_out_in ? (at::randn({out, in}) * 0.05).to(st).t() : (at::randn({in, out}) * 0.05).to(st);
      const at::Tensor x = at::randn({37, in});
      for (auto dt : {vocablens::ComputeDtype::Float32, vocablens::ComputeDtype::BFloat16}) {
        INFO((st == at::kHalf ? "F16" : "BF16") << (stored_out_in ? " stored [out, in]" : " stored [in, out]")
                                                << (dt == vocablens::ComputeDtype::BFloat16 ? ", bfloat16" : ", float32"));
        vocablens::set_compute_dtype(dt);
        vocablens::set_reference_weight_tiles(true);
        const at::Tensor ref = vocablens::weight_matmul(x, w);
        vocablens::set_reference_weight_tiles(false);
        CHECK(same_bits(vocablens::weight_matmul(x, w), ref));
      }
    }
  }
}

TEST_CASE("GGUF models of every quantized type: logits bit for bit the same with the reference tiles, float32 and bfloat16") {
  ComputeScope restore;
  auto ids = vl_test::read_ids_txt(kGgufDir + "ids-llama.txt");
  for (const char* name : {"q8_0", "q6_k", "q5_k_m", "q4_k_m", "q4_0", "q2_k", "bf16"}) {
    auto m = vocablens::load_model(kGgufDir + "llamak-" + name + ".gguf");
    for (auto dt : {vocablens::ComputeDtype::Float32, vocablens::ComputeDtype::BFloat16}) {
      INFO(name << (dt == vocablens::ComputeDtype::BFloat16 ? ", bfloat16" : ", float32"));
      vocablens::set_compute_dtype(dt);
      vocablens::set_reference_weight_tiles(true);
      const at::Tensor ref = vl_test::logits_of(m, ids);
      vocablens::set_reference_weight_tiles(false);
      const at::Tensor got = vl_test::logits_of(m, ids);
      CHECK(same_bits(got, ref));
      CHECK(ref.isfinite().all().item<bool>());
    }
  }
}

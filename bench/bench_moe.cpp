// Mixture-of-experts cost: CPU seconds per token of a forward pass through a Mixtral-shaped model (random weights
// made here: 8 SwiGLU experts of width 3.5 d, top 2, GQA) against a dense model of the same active parameter
// count (one SwiGLU MLP of width 2 x 3.5 d, same attention), same tokens, same run, the two alternating run for run.
// The goal: ratio <= 1.3 (the experts run on their routed rows only; a dense all-experts pass would be ~4x).
//
//   ninja -C build bench_moe && VOCABLENS_THREADS=1 build/bench_moe [d_model] [tokens] [layers] [type] [compute]
//
// Note the order: tokens before layers (`bench_moe 512 256 4`: 4 layers of 256 tokens). The weights are
// 24 d² x 3.5 floats per layer (88 MB at d 512), so `bench_moe 512 4 256` asks for 256 layers, 22 GB.
// type: f32 (default), q8_0 or q4_k — every matrix but the router and the norms stored as a GGUF would store it
// (packed ggml blocks of random bytes with fixed small scales, as bench/make_7b.py writes them; the router stays
// float32, as llama.cpp's converter keeps it). compute: float32 (default: tiles dequantized into the SGEMM) or int8
// (`--compute int8`: our integer kernels read the stored blocks, src/model/quant_dot.hpp).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <cstring>
#include <memory>
#include <vector>

#include "vocablens/model.hpp"
#include "vocablens/weight.hpp"
#include "../src/model/expert_gemm.hpp"
#include "bench_clock.hpp"

namespace {

using vocablens::GgmlType;

// A packed [out, in] matrix of `type` blocks: random quant bytes, the fp16 scales fixed so that |w| ~ 0.05
// (values matter only for timing; every one finite). Returned in the "x @ W" orientation [in, out].
at::Tensor packed_linear(GgmlType type, int64_t in, int64_t out, uint64_t& seed) {
  int64_t bv = 0;
  size_t bb = 0;
  vocablens::ggml_block_layout(type, bv, bb);
  const int64_t blocks = out * (in / bv);
  auto buf = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(blocks) * bb);
  uint8_t* p = buf->data();
  for (size_t i = 0; i < buf->size(); ++i) {  // splitmix64, one byte per step: fast enough, deterministic
    seed += 0x9e3779b97f4a7c15ull;
    uint64_t z = (seed ^ (seed >> 30)) * 0xbf58476d1ce4e5b9ull;
    p[i] = static_cast<uint8_t>((z ^ (z >> 27)) * 0x94d049bb133111ebull >> 56);
  }
  auto half = [](float f, uint8_t* dst) {
    const uint16_t h = c10::Half(f).x;
    std::memcpy(dst, &h, 2);
  };
  for (int64_t b = 0; b < blocks; ++b) {
    uint8_t* blk = p + static_cast<size_t>(b) * bb;
    if (type == GgmlType::Q8_0) {
      half(0.0008f, blk);  // d; int8 quants uniform in [-128, 127]
    } else {
      half(0.0002f, blk);      // d: scale x q up to 63 x 15
      half(0.0015f, blk + 2);  // dmin: ~ the mean of d x scale x q, so the values centre near 0
    }
  }
  return vocablens::make_packed_weight(buf, p, type, out, in).t();
}

vocablens::Model make(int64_t d, int64_t layers, bool moe, GgmlType type) {
  using namespace vocablens;
  ModelConfig c;
  c.architecture = moe ? "bench-moe" : "bench-dense";
  c.family = moe ? "mixtral" : "llama";
  c.n_layers = layers;
  c.d_model = d;
  c.n_heads = d / 64;
  c.n_kv_heads = c.n_heads / 4 > 0 ? c.n_heads / 4 : 1;
  c.d_head = 64;
  c.vocab_size = 1000;
  c.n_ctx = 4096;
  c.norm = NormKind::RMSNorm;
  c.positions = PositionKind::Rotary;
  c.activation = Activation::SiLU;
  c.gated_mlp = true;
  c.attn_bias = c.attn_out_bias = c.mlp_bias = false;
  c.tied_embeddings = false;
  const int64_t width = d * 7 / 2;  // Mixtral: 14336 / 4096
  if (moe) {
    c.n_experts = 8;
    c.n_experts_used = 2;
    c.d_expert = c.d_mlp = width;
    c.expert_weights_norm = true;
  } else {
    c.d_mlp = 2 * width;  // the two active experts' parameters in one MLP
  }
  auto rnd = [](std::initializer_list<int64_t> s, double std) { return at::randn(s) * std; };
  // As a checkpoint stores them: nn.Linear [out, in], used through its transpose (vocablens/model.hpp).
  uint64_t seed = moe ? 1 : 2;
  auto linear = [&](int64_t in, int64_t out) {
    return type == GgmlType::F32 ? rnd({out, in}, 0.05).t() : packed_linear(type, in, out, seed);
  };
  ModelWeights w;
  w.W_E = rnd({c.vocab_size, d}, 0.5);
  w.W_U = linear(d, c.vocab_size);
  w.lnf_w = at::ones({d});
  const int64_t qd = c.n_heads * c.d_head, kd = c.n_kv_heads * c.d_head;
  for (int64_t l = 0; l < layers; ++l) {
    LayerWeights L;
    L.ln1_w = L.ln2_w = at::ones({d});
    L.w_q = linear(d, qd), L.w_k = linear(d, kd), L.w_v = linear(d, kd), L.w_o = linear(qd, d);
    if (moe) {
      L.w_router = rnd({d, c.n_experts}, 0.1);
      for (int64_t e = 0; e < c.n_experts; ++e) {
        L.exp_gate.push_back(linear(d, width));
        L.exp_up.push_back(linear(d, width));
        L.exp_down.push_back(linear(width, d));
      }
    } else {
      L.w_gate = linear(d, c.d_mlp), L.w_in = linear(d, c.d_mlp), L.w_out = linear(c.d_mlp, d);
    }
    w.layers.push_back(std::move(L));
  }
  return Model(std::move(c), std::move(w), moe ? "bench-moe" : "bench-dense");
}

}  // namespace

int main(int argc, char** argv) {
  vocablens::init_runtime();
  const int64_t d = argc > 1 ? std::atoll(argv[1]) : 512, T = argc > 2 ? std::atoll(argv[2]) : 256,
                layers = argc > 3 ? std::atoll(argv[3]) : 4;
  const std::string type_name = argc > 4 ? argv[4] : "f32", compute = argc > 5 ? argv[5] : "float32";
  const GgmlType type = type_name == "q8_0" ? GgmlType::Q8_0 : type_name == "q4_k" ? GgmlType::Q4_K : GgmlType::F32;
  if (type == GgmlType::F32 && type_name != "f32") {
    std::fprintf(stderr, "bench_moe: type '%s' is not f32, q8_0 or q4_k\n", type_name.c_str());
    return 2;
  }
  if (d % 256 != 0 && type == GgmlType::Q4_K) {
    std::fprintf(stderr, "bench_moe: q4_k needs d_model a multiple of 256 (got %lld)\n", static_cast<long long>(d));
    return 2;
  }
  if (compute != "float32" && compute != "int8") {
    std::fprintf(stderr, "bench_moe: compute '%s' is not float32 or int8\n", compute.c_str());
    return 2;
  }
  vocablens::set_compute_dtype(vocablens::compute_dtype_from_string(compute));
  at::manual_seed(0);
  const vocablens::Model moe = make(d, layers, true, type), dense = make(d, layers, false, type);
  const at::Tensor ids = at::randint(0, 1000, {1, T}, at::kLong);
  at::NoGradGuard ng;
  // The models alternate, run for run (best of 7 each): on a shared machine a change of load between two blocks of
  // runs would otherwise land in the ratio (measured: 1.19 and 1.46 from two calls a few seconds apart). Under
  // float32 compute the mixture runs twice per round: through expert_gemm.hpp's kernel (the default) and through
  // weight_matmul (at::mm on float32 or decoded tiles).
  const bool kernel = vocablens::detail::expert_gemm_available() && compute == "float32";
  double t_moe = 1e30, t_mm = 1e30, t_dense = 1e30;
  for (int r = 0; r < 7; ++r) {
    t_moe = std::min(t_moe, vl_bench::best_of(1, [&] { moe.forward(ids); }));
    if (kernel) {
      vocablens::detail::set_expert_gemm(false);
      t_mm = std::min(t_mm, vl_bench::best_of(1, [&] { moe.forward(ids); }));
      vocablens::detail::set_expert_gemm(true);
    }
    t_dense = std::min(t_dense, vl_bench::best_of(1, [&] { dense.forward(ids); }));
  }
  const double per = 1e3 / static_cast<double>(T);
  std::printf("%s weights, compute %s: ", type_name.c_str(), compute.c_str());
  std::printf(
      "d_model %lld, %lld layers, %lld tokens: Mixtral-shaped (8 experts of %lld, top 2) %.3f ms/token, dense "
      "(one MLP of %lld) %.3f ms/token, ratio %.2f (goal <= 1.3)\n",
      static_cast<long long>(d), static_cast<long long>(layers), static_cast<long long>(T), static_cast<long long>(d * 7 / 2),
      per * t_moe, static_cast<long long>(d * 7), per * t_dense, t_moe / t_dense);
  if (kernel)
    std::printf("  the experts through weight_matmul instead (the kernel off): %.3f ms/token, ratio %.2f\n", per * t_mm,
                t_mm / t_dense);
  return 0;
}

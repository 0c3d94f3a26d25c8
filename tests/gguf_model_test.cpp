// tests/gguf_model_test.cpp — GGUF files written by llama.cpp's own tools (tests/data/gguf/make.sh) load
// and run, with logits checked against llama.cpp (prebuilt libllama) and against the Hugging Face twin.
//
// Tolerances (max |logit difference|), per fixture:
//  - stories260K F32 vs vocablens on stories260K-hf (same weights, converter's q/k permutation): 5e-5;
//    vs llama.cpp's F32 forward: 1e-4.
//  - llamak-<type> (random Llama, |logits| up to ~6, types BF16 Q8_0 Q6_K Q5_K_M Q4_K_M Q4_0 Q2_K):
//    exact reference = llama.cpp's F32 forward of the file dequantized by gguf-py (dequant.py): 2e-4;
//    llama.cpp's forward of the quantized file itself (it rounds activations to bf16 / Q8 blocks): 0.5
//    and top-1 agreement at >= 14 of 16 positions.
//  - gpt2-tiny Q8_0: exact reference 5e-3 (llama.cpp's GELU is an fp16 table); llama.cpp same file and
//    the HF twin (F32 weights, so Q8_0 rounding included): 0.15.
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "fixtures.hpp"
#include "npy_tensor.hpp"
#include "tensor_checks.hpp"
#include "vocablens/error.hpp"
#include "vocablens/gguf.hpp"
#include "vocablens/model.hpp"
#include "vocablens/vocab_spec.hpp"
#include "vocablens/weight.hpp"

namespace {

const std::string kDir = std::string(VOCABLENS_SOURCE_DIR) + "/tests/data/gguf/";

}  // namespace

TEST_CASE("read_gguf: metadata and tensor infos of a converter-written file") {
  auto g = vocablens::read_gguf(kDir + "stories260K-f32.gguf");
  CHECK(g.version == 3);
  CHECK(g.get_string("general.architecture", "") == "llama");
  CHECK(g.get_int("llama.block_count", 0) == 5);
  CHECK(g.get_int("llama.attention.head_count_kv", 0) == 4);
  CHECK(g.metadata_types.at("tokenizer.ggml.tokens") == "arr[str]");
  CHECK(g.metadata.at("tokenizer.ggml.tokens").size() == 512);
  const auto* emb = g.find("token_embd.weight");
  REQUIRE(emb != nullptr);
  CHECK(emb->ne == std::vector<int64_t>{64, 512});
  CHECK(emb->type == vocablens::GgmlType::F32);
  CHECK(emb->offset % g.alignment == 0);
}

TEST_CASE("stories260K GGUF (F32) matches its Hugging Face twin and llama.cpp") {
  const std::string hf = vl_test::fixture("stories260K-hf");
  if (hf.empty()) return;
  auto ids = vl_test::read_ids_txt(kDir + "ids-llama.txt");
  auto gm = vocablens::load_model(kDir + "stories260K-f32.gguf");
  auto hm = vocablens::load_model(hf);
  CHECK(gm.config().rope_interleaved);  // llama.cpp's converter permuted q/k to interleaved pairs
  CHECK_FALSE(hm.config().rope_interleaved);
  CHECK(gm.config().n_kv_heads == 4);
  at::Tensor a = vl_test::logits_of(gm, ids), b = vl_test::logits_of(hm, ids);
  CHECK(vl_test::max_abs_diff(a, b) < 5e-5);  // same weights; rotary convention differs in float rounding only
  at::Tensor ref = vl_test::read_f32_raw(kDir + "stories260K-f32.lcpp-logits.f32", {static_cast<int64_t>(ids.size()), -1});
  CHECK(vl_test::max_abs_diff(a, ref) < 1e-4);
  // Every analysis reads weights through the accessors: the same matrices as the HF twin's, per head up
  // to the q/k feature order (W_QK products agree), W_U exactly.
  CHECK(vl_test::max_abs_diff(gm.W_U(), hm.W_U()) == 0);
  at::Tensor qk_g = at::matmul(gm.W_Q(2)[3], gm.W_K(2)[3].t()), qk_h = at::matmul(hm.W_Q(2)[3], hm.W_K(2)[3].t());
  CHECK(vl_test::max_abs_diff(qk_g, qk_h) < 1e-5);
}

TEST_CASE("quantized and BF16 GGUF fixtures agree with llama.cpp within the stated tolerance per type") {
  auto ids = vl_test::read_ids_txt(kDir + "ids-llama.txt");
  const int64_t T = static_cast<int64_t>(ids.size());
  at::Tensor f32_ref = vl_test::read_f32_raw(kDir + "llamak-f32.lcpp-logits.f32", {T, -1});
  for (const char* name : {"bf16", "q8_0", "q6_k", "q5_k_m", "q4_k_m", "q4_0", "q2_k"}) {
    INFO(name);
    auto m = vocablens::load_model(kDir + "llamak-" + name + ".gguf");
    CHECK(m.config().vocab_size == 512);
    CHECK_FALSE(m.config().tied_embeddings);
    at::Tensor ours = vl_test::logits_of(m, ids);
    // Exact reference: llama.cpp's F32 forward of the same weights dequantized by gguf-py.
    at::Tensor exact = vl_test::read_f32_raw(kDir + "llamak-" + name + ".dequant-lcpp-logits.f32", {T, -1});
    at::Tensor same = vl_test::read_f32_raw(kDir + "llamak-" + name + ".lcpp-logits.f32", {T, -1});
    const double d_exact = vl_test::max_abs_diff(ours, exact), d_same = vl_test::max_abs_diff(ours, same),
                 d_f32 = vl_test::max_abs_diff(ours, f32_ref);
    const int64_t top1 = ours.argmax(-1).eq(same.argmax(-1)).sum().item<int64_t>();
    WARN(name << ": max|ours - exact| = " << d_exact << ", max|ours - llama.cpp same file| = " << d_same << " (top-1 " << top1
              << "/" << T << "), quantization error vs F32 weights " << d_f32 << ", max|logit| "
              << exact.abs().max().item<double>());
    CHECK(d_exact < 2e-4);
    CHECK(d_same < 0.5);  // llama.cpp also rounds activations (bf16 / Q8 blocks) in its dot products
    CHECK(top1 >= T - 2);
  }
}

TEST_CASE("weights stay in their stored type; accessors return float32") {
  auto m = vocablens::load_model(kDir + "llamak-q4_k_m.gguf");
  const auto& L = m.weights().layers[0];
  CHECK(vocablens::is_packed_weight(L.w_q));
  CHECK(vocablens::is_packed_weight(m.weights().W_E));
  CHECK(m.W_in(0).scalar_type() == at::kFloat);
  CHECK(m.W_in(0).sizes() == at::IntArrayRef({256, 512}));
  CHECK(m.W_U().sizes() == at::IntArrayRef({256, 512}));
  // weight_matmul on a packed weight == x @ materialize_weight(w)
  at::Tensor x = at::randn({5, 256});
  CHECK(vl_test::max_abs_diff(vocablens::weight_matmul(x, L.w_in), at::mm(x, m.W_in(0))) < 1e-4);
  auto b = vocablens::load_model(kDir + "llamak-bf16.gguf");
  CHECK(b.weights().layers[1].w_out.scalar_type() == at::kBFloat16);
  CHECK(b.W_out(1).scalar_type() == at::kFloat);
}

TEST_CASE("gpt2-tiny Q8_0 GGUF: fused qkv, learned positions, LayerNorm biases") {
  const std::string hf = vl_test::fixture("gpt2-tiny");
  if (hf.empty()) return;
  auto ids = vl_test::read_ids_txt(kDir + "ids-gpt2.txt");
  auto gm = vocablens::load_model(kDir + "gpt2-tiny-q8_0.gguf");
  CHECK(gm.config().family == "gpt2");
  at::Tensor ours = vl_test::logits_of(gm, ids);
  at::Tensor ref = vl_test::read_f32_raw(kDir + "gpt2-tiny-q8_0.lcpp-logits.f32", {static_cast<int64_t>(ids.size()), -1});
  at::Tensor twin = vl_test::logits_of(vocablens::load_model(hf), ids);
  at::Tensor exact =
      vl_test::read_f32_raw(kDir + "gpt2-tiny-q8_0.dequant-lcpp-logits.f32", {static_cast<int64_t>(ids.size()), -1});
  WARN("gpt2-tiny q8_0: vs exact " << vl_test::max_abs_diff(ours, exact) << ", vs llama.cpp same file "
                                   << vl_test::max_abs_diff(ours, ref) << ", vs HF twin (F32 weights) "
                                   << vl_test::max_abs_diff(ours, twin) << "; llama.cpp vs HF twin "
                                   << vl_test::max_abs_diff(ref, twin) << "; max |logit| " << twin.abs().max().item<double>());
  CHECK(vl_test::max_abs_diff(ours, exact) < 5e-3);  // llama.cpp's GELU is an fp16 lookup table (~1e-3)
  CHECK(vl_test::max_abs_diff(ours, ref) < 0.15);
  CHECK(vl_test::max_abs_diff(ours, twin) < 0.15);  // Q8_0 rounding of the weights
}

TEST_CASE("tokenizer.ggml.* metadata becomes a VocabSpec") {
  auto g = vocablens::read_gguf(kDir + "stories260K-f32.gguf");
  vocablens::VocabSpec v = vocablens::gguf_vocab_spec(g);
  CHECK(v.model == "llama");
  CHECK(v.tokens.size() == 512);
  CHECK(v.scores.size() == 512);
  CHECK(v.token_types.size() == 512);
  CHECK(v.token_types[3] == 6);  // <0x00>: a byte token
  CHECK(v.bos_id == 1);
  CHECK(v.eos_id == 2);
  CHECK(v.add_bos.value_or(false));
  auto gp = vocablens::read_gguf(kDir + "gpt2-tiny-q8_0.gguf");
  vocablens::VocabSpec b = vocablens::gguf_vocab_spec(gp);
  CHECK(b.model == "gpt2");
  CHECK(b.pre == "gpt-2");
  CHECK(b.tokens.size() == 50257);
  CHECK(b.merges.size() == 50000);
  CHECK(b.tokens[262] == "\xc4\xa0the");
}

TEST_CASE("--dtype bfloat16: measured error against the float32 compute of the same weights") {
  auto ids = vl_test::read_ids_txt(kDir + "ids-llama.txt");
  for (const char* name : {"bf16", "q4_k_m"}) {
    INFO(name);
    auto m = vocablens::load_model(kDir + "llamak-" + name + ".gguf");
    at::Tensor f = vl_test::logits_of(m, ids);
    vocablens::set_compute_dtype(vocablens::ComputeDtype::BFloat16);
    at::Tensor b = vl_test::logits_of(m, ids);
    vocablens::set_compute_dtype(vocablens::ComputeDtype::Float32);
    const double d = vl_test::max_abs_diff(f, b), scale = f.abs().max().item<double>();
    WARN(name << ": bfloat16 compute vs float32 compute: max |diff| " << d << " (max |logit| " << scale << "), top-1 "
              << f.argmax(-1).eq(b.argmax(-1)).sum().item<int64_t>() << "/" << ids.size());
    CHECK(d > 0);             // the mode does change the arithmetic
    CHECK(d < 0.05 * scale);  // bf16 has 8 significant bits: errors of a few 1e-3 relative per product
  }
}

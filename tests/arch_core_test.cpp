// The architecture table's ranking of families for a checkpoint vocablens does not run (src/core/arch.cpp):
// which family's tensor table fits the checkpoint's names best, and what differs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "vocablens/arch.hpp"

namespace {

// The names of a 2-layer checkpoint, `per_layer` patterns with "{L}" for the layer (and "{N}" for an expert).
std::vector<std::string> checkpoint(const std::vector<std::string>& global, const std::vector<std::string>& per_layer,
                                    int experts = 0) {
  std::vector<std::string> out = global;
  for (int l = 0; l < 2; ++l)
    for (const auto& p : per_layer) {
      std::string s = p;
      s.replace(s.find("{L}"), 3, std::to_string(l));
      const auto n = s.find("{N}");
      if (n == std::string::npos) {
        out.push_back(s);
        continue;
      }
      for (int e = 0; e < experts; ++e) out.push_back(std::string(s).replace(n, 3, std::to_string(e)));
    }
  return out;
}

bool contains(const std::vector<std::string>& v, const std::string& x) { return std::find(v.begin(), v.end(), x) != v.end(); }

}  // namespace

TEST_CASE("a supported mixture of experts maps whole; an unsupported one is nearest to the family sharing its attention") {
  // Mixtral's names (transformers' MixtralForCausalLM): every pattern in Mixtral's entry, experts' index as {E}.
  const auto mixtral = checkpoint(
      {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"},
      {"model.layers.{L}.input_layernorm.weight", "model.layers.{L}.post_attention_layernorm.weight",
       "model.layers.{L}.self_attn.q_proj.weight", "model.layers.{L}.self_attn.k_proj.weight",
       "model.layers.{L}.self_attn.v_proj.weight", "model.layers.{L}.self_attn.o_proj.weight",
       "model.layers.{L}.block_sparse_moe.gate.weight", "model.layers.{L}.block_sparse_moe.experts.{N}.w1.weight",
       "model.layers.{L}.block_sparse_moe.experts.{N}.w2.weight", "model.layers.{L}.block_sparse_moe.experts.{N}.w3.weight"},
      4);
  const auto m = vocablens::rank_architectures(mixtral, false);
  REQUIRE(!m.empty());
  CHECK(std::string(m.front().arch->hf_architecture) == "MixtralForCausalLM");
  CHECK(m.front().matched == 13);
  CHECK(m.front().unmatched.empty());
  CHECK(m.front().missing.empty());
  // GPT-OSS's names (GptOssForCausalLM): Llama's attention and norms, attention sinks, a router with a bias and
  // every expert fused into one 3-D tensor per matrix (biases "<name>_bias"): its own entry maps them all.
  const auto names =
      checkpoint({"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"},
                 {"model.layers.{L}.input_layernorm.weight", "model.layers.{L}.post_attention_layernorm.weight",
                  "model.layers.{L}.self_attn.q_proj.weight", "model.layers.{L}.self_attn.k_proj.weight",
                  "model.layers.{L}.self_attn.v_proj.weight", "model.layers.{L}.self_attn.o_proj.weight",
                  "model.layers.{L}.self_attn.sinks", "model.layers.{L}.mlp.router.weight", "model.layers.{L}.mlp.router.bias",
                  "model.layers.{L}.mlp.experts.gate_up_proj", "model.layers.{L}.mlp.experts.gate_up_proj_bias",
                  "model.layers.{L}.mlp.experts.down_proj", "model.layers.{L}.mlp.experts.down_proj_bias"});
  const auto ranked = vocablens::rank_architectures(names, false);
  REQUIRE(!ranked.empty());
  const auto& best = ranked.front();
  CHECK(std::string(best.arch->name) == "gpt_oss");
  CHECK(best.total == 15);
  CHECK(best.matched == 15);
  CHECK(best.unmatched.empty());
  CHECK(best.missing.empty());
  // Without its sinks and fused experts the names are Llama's attention: nine patterns (embedding, final norm,
  // lm_head, two norms, four projections) map in every Llama-named family, and Llama needs the fewest more.
  std::vector<std::string> attention_only;
  for (const auto& n : names)
    if (n.find("sinks") == std::string::npos && n.find("mlp.") == std::string::npos) attention_only.push_back(n);
  attention_only.push_back("model.layers.0.mlp.fused_experts.weight");
  const auto llama_like = vocablens::rank_architectures(attention_only, false);
  REQUIRE(!llama_like.empty());
  CHECK(std::string(llama_like.front().arch->name) == "llama");
  CHECK(llama_like.front().matched == 9);
  CHECK(contains(llama_like.front().unmatched, "model.layers.{L}.mlp.fused_experts.weight"));
  CHECK(contains(llama_like.front().missing, "model.layers.{L}.mlp.gate_proj"));
  const std::string hint = vocablens::nearest_architecture_hint(attention_only, false);
  CHECK_THAT(hint, Catch::Contains("nearest supported family: llama (LlamaForCausalLM): 9 of 10 tensor name patterns map") &&
                       Catch::Contains("not in its table: ") && Catch::Contains("it also needs: model.layers.{L}.mlp."));
}

TEST_CASE("a GPT-2 checkpoint saved from the base model (no 'transformer.' prefix) ranks GPT-2 first, all mapped") {
  const auto names =
      checkpoint({"wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias"},
                 {"h.{L}.ln_1.weight", "h.{L}.ln_1.bias", "h.{L}.attn.c_attn.weight", "h.{L}.attn.c_attn.bias",
                  "h.{L}.attn.c_proj.weight", "h.{L}.ln_2.weight", "h.{L}.mlp.c_fc.weight", "h.{L}.mlp.c_proj.weight"});
  const auto ranked = vocablens::rank_architectures(names, false);
  REQUIRE(!ranked.empty());
  CHECK(std::string(ranked.front().arch->hf_architecture) == "GPT2LMHeadModel");
  CHECK(ranked.front().unmatched.empty());
  CHECK(ranked.front().matched == ranked.front().total);
}

TEST_CASE("GGUF names rank by llama.cpp's table; names no family knows give no hint") {
  const auto names = checkpoint(
      {"token_embd.weight", "output_norm.weight", "output.weight"},
      {"blk.{L}.attn_norm.weight", "blk.{L}.attn_q.weight", "blk.{L}.attn_k.weight", "blk.{L}.attn_v.weight",
       "blk.{L}.attn_output.weight", "blk.{L}.ffn_norm.weight", "blk.{L}.ffn_gate_inp.weight", "blk.{L}.ffn_gate_exps.weight",
       "blk.{L}.ffn_up_exps.weight", "blk.{L}.ffn_down_exps.weight", "blk.{L}.attn_sinks.weight"});
  const auto ranked = vocablens::rank_architectures(names, true);
  REQUIRE(!ranked.empty());
  // llama.cpp's mixture names map (its "llama" architecture with experts); the attention sinks do not.
  CHECK(ranked.front().matched == 13);
  CHECK(ranked.front().total == 14);
  CHECK(ranked.front().unmatched == std::vector<std::string>{"blk.{L}.attn_sinks.weight"});
  CHECK(vocablens::nearest_architecture_hint({"foo.bar", "baz.0.qux"}, false).empty());
}

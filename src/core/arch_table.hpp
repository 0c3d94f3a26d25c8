// The architecture table's building blocks (src/core/arch.cpp), shared with the mixture-of-experts entries
// (src/core/arch_moe.cpp). Internal to the table; readers use vocablens/arch.hpp.
#pragma once
#include <string>
#include <vector>

#include "vocablens/arch.hpp"

namespace vocablens::arch_detail {

using R = TensorRole;
using Lay = TensorLayout;
constexpr BiasKind kNo = BiasKind::None, kOpt = BiasKind::Optional, kReq = BiasKind::Required;

TensorSpec model_t(R r, const char* hf, const char* gguf, Lay l, BiasKind b, bool required);
TensorSpec layer_t(R r, const char* hf, const char* gguf, Lay l, BiasKind b);
/// The Llama block's names (q/k/v and o biases as given; lm_head when `lm_head`).
std::vector<TensorSpec> llama_like(BiasKind qkv_bias, BiasKind o_bias, bool lm_head);
ArchSpec entry(const char* name, const char* hf, std::vector<std::string> aliases, const char* gguf, const char* prefix,
               std::vector<TensorSpec> tensors, FamilyRecipe recipe, bool gguf_qk_interleaved, bool gguf_norm_plus_one,
               const char* summary);
FamilyRecipe qwen_recipe(bool qk_norm);
/// Mixtral, Qwen3-MoE, Qwen2-MoE, OLMoE, GPT-OSS (src/core/arch_moe.cpp).
void add_moe_families(std::vector<ArchSpec>& a);

}  // namespace vocablens::arch_detail

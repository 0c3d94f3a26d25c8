// Looking things up in the architecture table (see vocablens/arch.hpp): a family by its Hugging Face class,
// GGUF name or vocablens name; a tensor's role and names. The table itself is src/core/arch.cpp.
#include "vocablens/arch.hpp"

#include "core/arch_table.hpp"

#include <stdexcept>
#include <string>
#include <vector>

namespace vocablens {

using arch_detail::R;

const ArchSpec* find_architecture(const std::string& name) {
  for (const auto& a : architectures()) {
    if (name == a.hf_architecture) return &a;
    for (const auto& al : a.aliases)
      if (name == al) return &a;
  }
  return nullptr;
}

const ArchSpec* find_gguf_architecture(const std::string& gguf_arch) {
  for (const auto& a : architectures())
    if (a.gguf_architecture && gguf_arch == a.gguf_architecture) return &a;  // first: "llama" -> Llama, not Mistral
  return nullptr;
}

const ArchSpec* find_gguf_architecture(const std::string& gguf_arch, bool experts) {
  for (const auto& a : architectures())
    if (a.gguf_architecture && gguf_arch == a.gguf_architecture && a.recipe.n_experts_keys.empty() != experts) return &a;
  return find_gguf_architecture(gguf_arch);
}

const ArchSpec* find_family(const std::string& family) {
  for (const auto& a : architectures())
    if (family == a.name) return &a;
  return nullptr;
}

const ArchSpec& architecture(const std::string& family) {
  if (const ArchSpec* a = find_family(family)) return *a;
  throw std::logic_error("no architecture table entry is named '" + family + "' (ModelConfig::family)");
}

std::string supported_architectures() {
  std::string s;
  for (const auto& a : architectures()) s += (s.empty() ? "" : ", ") + std::string(a.hf_architecture);
  return s;
}

const TensorSpec* find_tensor(const ArchSpec& a, TensorRole r) {
  for (const auto& t : a.tensors)
    if (t.role == r) return &t;
  return nullptr;
}

std::string tensor_name(const char* pattern, int64_t layer, int64_t expert) {
  std::string s = pattern ? pattern : "";
  auto at = s.find("{L}");
  if (at != std::string::npos) s.replace(at, 3, std::to_string(layer));
  at = s.find("{E}");
  if (at != std::string::npos) s.replace(at, 3, std::to_string(expert));
  return s;
}

std::string hf_tensor_name(const ArchSpec& a, TensorRole r, int64_t layer, const char* suffix, bool base_prefix) {
  const TensorSpec* t = find_tensor(a, r);
  if (!t) throw std::logic_error(std::string(a.hf_architecture) + " has no tensor of role " + to_string(r));
  std::string n = tensor_name(t->hf, layer) + suffix;
  const std::string pre = a.hf_base_prefix ? a.hf_base_prefix : "";
  if (!base_prefix && !pre.empty() && n.rfind(pre, 0) == 0) n = n.substr(pre.size());
  return n;
}

const char* to_string(TensorRole r) {
  switch (r) {
    case R::TokenEmbd: return "token_embd";
    case R::TokenEmbdNorm: return "token_embd_norm";
    case R::PosEmbd: return "position_embd";
    case R::OutputNorm: return "output_norm";
    case R::Output: return "output";
    case R::ProjectIn: return "project_in";
    case R::ProjectOut: return "project_out";
    case R::AttnNorm: return "attn_norm";
    case R::AttnQ: return "attn_q";
    case R::AttnK: return "attn_k";
    case R::AttnV: return "attn_v";
    case R::AttnQKV: return "attn_qkv";
    case R::AttnOut: return "attn_output";
    case R::AttnQNorm: return "attn_q_norm";
    case R::AttnKNorm: return "attn_k_norm";
    case R::AttnPostNorm: return "attn_post_norm";
    case R::FfnNorm: return "ffn_norm";
    case R::FfnGate: return "ffn_gate";
    case R::FfnUp: return "ffn_up";
    case R::FfnDown: return "ffn_down";
    case R::FfnGateUp: return "ffn_gate_up";
    case R::FfnPostNorm: return "ffn_post_norm";
    case R::FfnGateInp: return "ffn_gate_inp";
    case R::FfnGateExps: return "ffn_gate_exps";
    case R::FfnUpExps: return "ffn_up_exps";
    case R::FfnDownExps: return "ffn_down_exps";
    case R::FfnGateInpShexp: return "ffn_gate_inp_shexp";
    case R::AttnSinks: return "attn_sinks";
  }
  return "?";
}

}  // namespace vocablens

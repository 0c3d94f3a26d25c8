// `vocablens inspect MODEL`: family, sizes, parameter count, tied or not, dtype, and every way the block departs
// from a plain GPT-2 block (vocablens/arch.hpp departures_from_gpt2).
#include <fmt/format.h>

#include <cstdlib>
#include <map>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/command.hpp"
#include "model/bf16_gemm.hpp"
#include "model/f32_gemm.hpp"
#include "model/quant_dot.hpp"
#include "vocablens/arch.hpp"
#include "vocablens/gguf.hpp"
#include "vocablens/model.hpp"
#include "vocablens/provenance.hpp"
#include "vocablens/weight.hpp"

namespace {

struct InspectOptions {
  std::string model;
  bool json = false;
};

// How many tensors of each stored type (GGUF: from the file's tensor infos; other formats: the model's
// matrices and vectors as held in memory).
std::map<std::string, int64_t> tensor_type_counts(const vocablens::Model& m) {
  std::map<std::string, int64_t> n;
  if (vocablens::is_gguf_file(m.source())) {
    for (auto& t : vocablens::read_gguf(m.source()).tensors) ++n[vocablens::ggml_type_name(static_cast<uint32_t>(t.type))];
    return n;
  }
  auto add = [&](const at::Tensor& t) {
    if (t.defined()) ++n[vocablens::weight_storage_name(t)];
  };
  const auto& w = m.weights();
  for (const at::Tensor* t : {&w.W_E, &w.W_pos, &w.emb_norm_w, &w.emb_norm_b, &w.lnf_w, &w.lnf_b, &w.b_U}) add(*t);
  if (!m.config().tied_embeddings) add(w.W_U);
  for (const auto& L : w.layers)
    for (const at::Tensor* t : vocablens::layer_tensors(L)) add(*t);
  return n;
}

// What the compute mode does with these tensor types: "float32", or for int8 which types run the int8 kernels
// and which the exact path ("int8 (avx512-vnni) for Q4_K, Q6_K; exact float32 for F32").
std::string compute_summary(const std::map<std::string, int64_t>& counts) {
  const vocablens::ComputeDtype d = vocablens::compute_dtype();
  if (d != vocablens::ComputeDtype::Int8) return vocablens::compute_dtype_name(d);
  std::string fast, exact;
  for (const auto& [name, n] : counts) {
    bool has_kernel = false;
    for (uint32_t t = 0; t < 64; ++t)
      if (vocablens::ggml_type_name(t) == name) has_kernel = vocablens::qdot::supported(static_cast<vocablens::GgmlType>(t));
    (has_kernel ? fast : exact) += (has_kernel ? fast : exact).empty() ? name : ", " + name;
  }
  std::string s = fmt::format("int8 ({} kernels)", vocablens::qdot::kernel_name(vocablens::qdot::active_kernel()));
  s += fast.empty() ? " for no tensor type here" : " for " + fast;
  if (!exact.empty()) s += "; exact float32 for " + exact;
  return s;
}

// Which GEMM multiplies the float32 products (src/model/f32_gemm.hpp).
std::string f32_gemm_summary() {
  std::string kernel;
  if (vocablens::detail::f32_gemm_available(&kernel)) return fmt::format("oneDNN's matmul ({})", kernel);
  const char* env = std::getenv("VOCABLENS_F32_GEMM");
  if (env && std::string(env) == "blas") return "LibTorch's SGEMM (VOCABLENS_F32_GEMM=blas)";
  return kernel.empty() ? "LibTorch's SGEMM (this build has no oneDNN)"
                        : fmt::format("LibTorch's SGEMM (oneDNN has no JIT kernel here: {})", kernel);
}

int run_inspect(const InspectOptions& o) {
  vocablens::Model m = vocablens::load_model(o.model);
  const auto& c = m.config();
  const auto counts = tensor_type_counts(m);
  std::string counts_text;
  for (auto& [k, v] : counts) counts_text += (counts_text.empty() ? "" : ", ") + fmt::format("{} x {}", v, k);
  if (o.json) {
    nlohmann::json j = vocablens::model_config_json(c);
    j.update({{"source", m.source()},
              {"n_experts", c.n_experts},
              {"n_experts_used", c.n_experts_used},
              {"d_expert", c.d_expert},
              {"shared_expert", c.shared_expert},
              {"parameters", m.parameter_count()},
              {"compute", vocablens::compute_dtype_name(vocablens::compute_dtype())},
              {"compute_detail", compute_summary(counts)},
              {"f32_gemm", f32_gemm_summary()},
              {"tensor_types", counts},
              {"family_summary", vocablens::architecture(c.family).summary},
              {"departures_from_gpt2", vocablens::departures_from_gpt2(c)}});
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("model        {}\n", m.source());
  fmt::print("architecture {} (family {})\n", c.architecture, c.family);
  fmt::print("layers       {}\n", c.n_layers);
  fmt::print("d_model      {}\n", c.d_model);
  fmt::print("heads        {} x d_head {}{}\n", c.n_heads, c.d_head,
             c.n_kv_heads != c.n_heads ? fmt::format(" ({} key/value heads, grouped-query)", c.n_kv_heads) : "");
  if (c.n_experts > 0)  // a mixture: the experts, and the dense MLP only where one runs beside them
    fmt::print("mlp          {} experts of {} ({}, gated), top {}{}{}\n", c.n_experts, c.d_expert, to_string(c.activation),
               c.n_experts_used, c.expert_weights_norm ? " renormalised" : "",
               c.shared_expert ? fmt::format(", and a shared expert of {}", c.d_mlp) : "");
  else fmt::print("mlp          {} ({}{})\n", c.d_mlp, to_string(c.activation), c.gated_mlp ? ", gated" : "");
  fmt::print("vocabulary   {}\n", c.vocab_size);
  fmt::print("context      {}\n", c.n_ctx);
  fmt::print("norm         {} (eps {:g})\n", to_string(c.norm), c.norm_eps);
  fmt::print("positions    {}{}\n", to_string(c.positions),
             c.positions == vocablens::PositionKind::Rotary
                 ? fmt::format(" (theta {:g}, {})", c.rope_theta, c.rope_interleaved ? "interleaved pairs" : "rotate_half")
                 : "");
  fmt::print("unembedding  {}\n", c.tied_embeddings ? "tied to the embedding" : "separate (untied)");
  const bool bf16 = vocablens::compute_dtype() == vocablens::ComputeDtype::BFloat16;
  fmt::print("dtype        {} on disk; matrices kept as stored, computed in {}{}\n", c.weight_dtype, compute_summary(counts),
             bf16 && !vocablens::detail::bf16_gemm_native()
                 ? " (this CPU has no AVX-512: bf16 operands multiplied by the float32 SGEMM, float32's speed)"
                 : "");
  fmt::print("float32 GEMM {}\n", f32_gemm_summary());
  fmt::print("tensors      {}\n", counts_text);
  fmt::print("parameters   {} ({:.2f} M)\n", m.parameter_count(), m.parameter_count() / 1e6);
  fmt::print("family       {}\n", vocablens::architecture(c.family).summary);
  const auto dep = vocablens::departures_from_gpt2(c);
  if (dep.empty()) fmt::print("block        a plain GPT-2 block\n");
  else fmt::print("departs from a plain GPT-2 block ({}):\n", dep.size());
  for (const auto& d : dep) fmt::print("  - {}\n", d);
  return 0;
}

vocablens::cli::Register registered_cmd_inspect{
    "inspect",
    "Show a model's family, shapes, parameter count, tied or untied unembedding, dtype, and how its block departs from GPT-2's",
    [](CLI::App& sub) -> vocablens::cli::Runner {
      auto o = std::make_shared<InspectOptions>();
      sub.add_option("MODEL", o->model, vocablens::cli::kModelHelp)->required();
      sub.add_flag("--json", o->json, "Print the description as JSON");
      return [o] { return run_inspect(*o); };
    }};

}  // namespace

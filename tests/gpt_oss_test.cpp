// GPT-OSS beyond the family rows of families_test / gguf_families_test / moe_test: its MXFP4 GGUF twin (experts kept
// in MXFP4, against llama.cpp's float32 forward of the same weights and its own MXFP4 forward), the attention
// sinks' pattern, and configs that contradict the weights (one line naming the field).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "npy_tensor.hpp"
#include "vocablens/error.hpp"
#include "vocablens/gguf.hpp"
#include "vocablens/hooks.hpp"
#include "vocablens/model.hpp"
#include "vocablens/weight.hpp"

namespace {

const std::string kDir = std::string(VOCABLENS_SOURCE_DIR) + "/tests/fixtures/families/gpt_oss";

at::Tensor oss_logits(const vocablens::Model& m, const std::vector<int64_t>& ids) {
  return m.forward(at::tensor(ids, at::kLong), vocablens::CacheSpec()).logits[0];
}

std::string oss_load_error(const std::string& path) {
  try {
    vocablens::load_model(path);
  } catch (const vocablens::Error& e) { return e.what(); }
  return "";
}

}  // namespace

// gpt_oss-mxfp4.gguf is llama.cpp's converter on the packed (*_blocks/*_scales) layout of the fixture's own expert
// matrices, which make_families.py draws MXFP4-exact: its dequantized experts equal the float32 ones, so the exact
// reference is llama.cpp's float32 forward (llama_logits.f32). llama.cpp's MXFP4 forward (llama_logits_mxfp4.f32)
// also rounds the activations to 8 bits inside each dot product: a loose second check (measured 0.25 on
// |logit| <= 9.2, the same top-1 token everywhere).
TEST_CASE("GPT-OSS MXFP4 GGUF: experts stay MXFP4 and give the float32 forward; llama.cpp's MXFP4 forward within 0.3") {
  vocablens::Model q = vocablens::load_model(kDir + "/gpt_oss-mxfp4.gguf");
  const auto& L0 = q.weights().layers[0];
  REQUIRE(L0.exp_gate.size() == 4);
  for (const auto* experts : {&L0.exp_gate, &L0.exp_up, &L0.exp_down})
    for (const at::Tensor& w : *experts) CHECK(vocablens::weight_storage_type(w) == vocablens::GgmlType::MXFP4);
  CHECK(q.config().weight_dtype.find("MXFP4") != std::string::npos);
  auto ids = vl_test::read_ids_txt(kDir + "/ids.txt");
  const int64_t T = static_cast<int64_t>(ids.size()), V = q.config().vocab_size;
  const at::Tensor ours = oss_logits(q, ids);
  const at::Tensor f32_ref = vl_test::read_f32_raw(kDir + "/llama_logits.f32", {T, V});
  const at::Tensor mx_ref = vl_test::read_f32_raw(kDir + "/llama_logits_mxfp4.f32", {T, V});
  const at::Tensor hf = oss_logits(vocablens::load_model(kDir), ids);
  const double d_f32 = (ours - f32_ref).abs().max().item<double>(), d_hf = (ours - hf).abs().max().item<double>();
  const double d_mx = (ours - mx_ref).abs().max().item<double>();
  std::printf("gpt_oss MXFP4 GGUF: max|dlogit| vs llama.cpp F32 %.2e, vs the HF twin %.2e, vs llama.cpp's MXFP4 forward %.3f\n",
              d_f32, d_hf, d_mx);
  CHECK(d_f32 <= 1e-4);
  CHECK(d_hf <= 1e-4);
  CHECK(d_mx <= 0.3);
  CHECK(at::equal(ours.argmax(-1), mx_ref.argmax(-1)));
}

// The definition in float64 on the pass's own scores: p = exp(score) / (sum over the row's keys of exp(score) +
// exp(sink of the head)). Masked keys (-inf) weigh 0; every row sums to 1 - the sink's share.
TEST_CASE("GPT-OSS sinks: each head's sink logit joins the softmax denominator, rows sum to less than 1") {
  vocablens::Model m = vocablens::load_model(kDir);
  auto ids = vl_test::read_ids_txt(kDir + "/ids.txt");
  for (int64_t l = 0; l < m.config().n_layers; ++l) {
    at::Tensor scores, pattern;
    vocablens::HookList hooks;
    hooks.add("blocks." + std::to_string(l) + ".attn.hook_attn_scores", [&](at::Tensor& t) { scores = t.clone(); });
    hooks.add("blocks." + std::to_string(l) + ".attn.hook_pattern", [&](at::Tensor& t) { pattern = t.clone(); });
    vocablens::run_with_hooks(m, at::tensor(ids, at::kLong), hooks);
    REQUIRE(scores.defined());
    REQUIRE(pattern.defined());
    const at::Tensor sinks = m.weights().layers[static_cast<size_t>(l)].sinks.to(at::kDouble);
    CHECK(sinks.abs().max().item<double>() > 0.1);         // the fixture's sinks are far from zero
    const at::Tensor e = scores[0].to(at::kDouble).exp();  // [H, T, T], 0 where masked
    const at::Tensor denom = e.sum(-1, true) + sinks.exp().view({-1, 1, 1});
    const double worst = (pattern[0].to(at::kDouble) - e / denom).abs().max().item<double>();
    INFO("layer " << l << ": max |pattern - definition| = " << worst);
    CHECK(worst < 1e-6);
    CHECK(pattern[0].sum(-1).max().item<double>() < 1.0);
  }
}

TEST_CASE("GPT-OSS: a config that contradicts its weights, or an unknown layer type, is one line naming the field") {
  struct Edit {
    const char *from, *to, *message;
  };
  const Edit edits[] = {
      {"\"num_local_experts\": 4", "\"num_local_experts\": 8",
       "the config gives 8 experts but 'model.layers.0.mlp.router.weight' routes to 4"},
      {"\"num_experts_per_tok\": 2", "\"num_experts_per_tok\": 5",
       "config field 'num_experts_per_tok' = 5: must be between 1 and the number of experts (num_local_experts = 4)"},
      {"\"intermediate_size\": 32", "\"intermediate_size\": 16",
       "tensor 'model.layers.0.mlp.experts.gate_up_proj' has shape [4, 64, 64]"},
      {"\"sliding_attention\",", "\"chunked_attention\",",
       "config field 'layer_types[0]' = \"chunked_attention\": unknown layer type"},
      {"\"full_attention\"\n", "\"full_attention\", \"full_attention\"\n",
       "config field 'layer_types' = 3 entries: must list one type per layer"},
      {"\"swiglu_limit\": 7.0", "\"swiglu_limit\": -1", "config field 'swiglu_limit' = -1: must be a positive number"},
      {"\"rope_type\": \"yarn\"", "\"rope_type\": \"yarn\", \"mscale\": 0.7",
       "config field 'rope_scaling.mscale' = 0.7: YaRN's mscale variants"},
      {"\"swiglu_limit\": 7.0", "\"swiglu_limit\": 7.0, \"quantization_config\": {\"quant_method\": \"mxfp4\"}",
       "config field 'quantization_config' = {\"quant_method\":\"mxfp4\"}: quantized experts"},
  };
  for (const auto& x : edits) {
    INFO(x.to);
    std::string dst = vl_test::temp_dir("gpt_oss_cfg"), out;
    REQUIRE(vl_test::run_command("cp -r '" + kDir + "/.' '" + dst + "/'", out) == 0);
    std::string s = vl_test::read_file(dst + "/config.json");
    REQUIRE(s.find(x.from) != std::string::npos);
    s.replace(s.find(x.from), std::string(x.from).size(), x.to);
    vl_test::write_file(dst + "/config.json", s);
    const std::string msg = oss_load_error(dst);
    CHECK_THAT(msg, Catch::Contains(x.message));
    CHECK(msg.find('\n') == std::string::npos);
  }
}

TEST_CASE("GPT-OSS GGUF: an expert count that contradicts the tensors is one line naming the tensor") {
  const std::string bytes = vl_test::read_file(kDir + "/gpt_oss.gguf");
  const std::string key = "gpt-oss.expert_count";
  std::string b = bytes;
  const size_t at = b.find(key);
  REQUIRE(at != std::string::npos);
  uint32_t type = 0, eight = 8;
  std::memcpy(&type, b.data() + at + key.size(), 4);
  REQUIRE(type == 4);
  std::memcpy(&b[at + key.size() + 4], &eight, 4);
  const std::string path = vl_test::temp_dir("gpt_oss_gguf") + "/m.gguf";
  vl_test::write_file(path, b);
  const std::string msg = oss_load_error(path);
  CHECK_THAT(msg, Catch::Contains("tensor 'blk.0.ffn_gate_inp.weight' has ne {64, 4} but the metadata implies {64, 8}"));
  CHECK(msg.find('\n') == std::string::npos);
}

// Hugging Face's YaRN (_compute_yarn_parameters) in float64, written out here: pair i keeps inv_freq_i when its
// index lies below the correction range [lo, hi], is divided by the factor above it, linearly blended inside;
// lo/hi = d ln(orig / (beta 2 pi)) / (2 ln base), floored / ceiled unless truncate is false. The fixture (truncate
// absent) is what llama.cpp computes (families_test); truncate false, as the released GPT-OSS configs say, keeps
// the unrounded range.
TEST_CASE("GPT-OSS YaRN: the frequencies follow the definition, truncate false keeping the unrounded range") {
  auto expected = [](bool truncate) {
    const double base = 150000.0, factor = 32.0, orig = 4096.0, d = 16.0, pi = 3.14159265358979323846;
    auto corr = [&](double beta) { return d * std::log(orig / (beta * 2 * pi)) / (2 * std::log(base)); };
    double lo = corr(32.0), hi = corr(1.0);
    if (truncate) lo = std::floor(lo), hi = std::ceil(hi);
    lo = std::max(lo, 0.0);
    hi = std::min(hi, d - 1);
    std::vector<double> f;
    for (int i = 0; i < 8; ++i) {
      const double inv = std::pow(base, -2.0 * i / d);
      const double keep = 1 - std::min(1.0, std::max(0.0, (i - lo) / (hi - lo)));
      f.push_back(inv / factor * (1 - keep) + inv * keep);
    }
    return at::tensor(f, at::kDouble);
  };
  vocablens::Model m = vocablens::load_model(kDir);
  CHECK(m.config().rope_scaling == vocablens::ModelConfig::RopeScaling::Yarn);
  CHECK(m.config().rope_attention_factor == Approx(0.1 * std::log(32.0) + 1));
  const at::Tensor truncated = vocablens::rotary_inv_freq(m.config()).to(at::kDouble);
  CHECK((truncated - expected(true)).abs().max().item<double>() < 1e-12);
  std::string dst = vl_test::temp_dir("gpt_oss_yarn"), out;
  REQUIRE(vl_test::run_command("cp -r '" + kDir + "/.' '" + dst + "/'", out) == 0);
  std::string s = vl_test::read_file(dst + "/config.json");
  const std::string from = "\"rope_type\": \"yarn\"";
  REQUIRE(s.find(from) != std::string::npos);
  s.replace(s.find(from), from.size(), from + ", \"truncate\": false");
  vl_test::write_file(dst + "/config.json", s);
  vocablens::Model u = vocablens::load_model(dst);
  CHECK_FALSE(u.config().rope_yarn_truncate);
  const at::Tensor unrounded = vocablens::rotary_inv_freq(u.config()).to(at::kDouble);
  CHECK((unrounded - expected(false)).abs().max().item<double>() < 1e-12);
  CHECK((unrounded - truncated).abs().max().item<double>() > 5e-4);  // the rounding matters here (9.6e-4)
}

// The GGUF twin of every family fixture (tests/fixtures/families/<family>/<family>.gguf, written by llama.cpp's
// own convert_hf_to_gguf.py, F32) loads through the architecture table and runs: its logits agree with
// llama.cpp's on the same file (llama_logits.f32, committed by make_gguf.py + lcpp_logits) within the family's
// tolerance, and with vocablens on the Hugging Face twin (same float32 weights, the converter's q/k permutation,
// Gemma's folded (1 + w), NeoX's regrouped q|k|v undone or followed by the loader) to 1e-4.
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "npy_tensor.hpp"
#include "vocablens/error.hpp"
#include "vocablens/lens.hpp"
#include "vocablens/model.hpp"

namespace {

struct Case {
  const char* dir;
  double lcpp_tol;  ///< max |Δ logit| against llama.cpp: as tests/families_test.cpp states per family
};
// SiLU families agree with llama.cpp to float32 rounding; GELU families to llama.cpp's fp16 GELU table (and
// GPT-NeoX's erf GELU against llama.cpp's tanh form), see docs/runner.md.
const std::vector<Case> kCases = {{"qwen2", 1e-4}, {"qwen3", 1e-4},   {"mistral", 1e-4},  {"llama3", 1e-4}, {"llama_linear", 1e-4},
                                  {"phi3", 1e-4},  {"gpt_neox", 5e-3}, {"gemma", 5e-3}, {"gemma2", 5e-3}};

std::string dir_of(const std::string& f) { return std::string(VOCABLENS_SOURCE_DIR) + "/tests/fixtures/families/" + f; }


}  // namespace

TEST_CASE("GGUF twin of every family: llama.cpp's logits and the HF twin's, and the logit lens runs") {
  for (const auto& fc : kCases) {
    const std::string d = dir_of(fc.dir);
    INFO(fc.dir);
    vocablens::Model g = vocablens::load_model(d + "/" + fc.dir + ".gguf");
    vocablens::Model h = vocablens::load_model(d);
    const auto& gc = g.config();
    // llama.cpp writes Mistral as general.architecture "llama": the GGUF names the Llama family.
    CHECK(gc.family == (h.config().family == vocablens::Family::Mistral ? vocablens::Family::Llama : h.config().family));
    CHECK(gc.n_layers == h.config().n_layers);
    CHECK(gc.d_head == h.config().d_head);
    CHECK(gc.n_kv_heads == h.config().n_kv_heads);
    auto ids = vl_test::read_ids_txt(d + "/ids.txt");
    at::Tensor x = at::tensor(ids, at::kLong);
    at::Tensor lg = g.forward(x).logits[0];
    at::Tensor lh = h.forward(x).logits[0];
    at::Tensor ref = vl_test::read_f32_raw(d + "/llama_logits.f32", {static_cast<int64_t>(ids.size()), gc.vocab_size});
    const double d_hf = (lg - lh).abs().max().item<double>(), d_lcpp = (lg - ref).abs().max().item<double>();
    std::printf("%-13s GGUF vs HF twin max|dlogit| %.2e   GGUF vs llama.cpp %.2e (max|logit| %.2f)\n", fc.dir, d_hf, d_lcpp,
                ref.abs().max().item<double>());
    CHECK(d_hf <= 1e-4);
    CHECK(d_lcpp <= fc.lcpp_tol);
    CHECK(at::equal(lg.argmax(-1), ref.argmax(-1)));
    auto lens = vocablens::logit_lens(g, ids);
    CHECK(lens.n_layers() == gc.n_layers + 1);
  }
}

TEST_CASE("GGUF Llama-3.1 rope scaling: the parameters recovered from rope_freqs are the config.json ones") {
  vocablens::Model g = vocablens::load_model(dir_of("llama3") + "/llama3.gguf");
  vocablens::Model h = vocablens::load_model(dir_of("llama3"));
  const auto &gc = g.config(), &hc = h.config();
  CHECK(gc.rope_scaling == vocablens::ModelConfig::RopeScaling::Llama3);
  CHECK(gc.rope_factor == Approx(hc.rope_factor).epsilon(1e-6));
  CHECK(gc.rope_original_context / gc.rope_low_freq_factor == Approx(hc.rope_original_context / hc.rope_low_freq_factor).epsilon(1e-4));
  CHECK(gc.rope_original_context / gc.rope_high_freq_factor == Approx(hc.rope_original_context / hc.rope_high_freq_factor).epsilon(1e-4));
}

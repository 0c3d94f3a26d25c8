// The GGUF twin of every family fixture (tests/fixtures/families/<family>/<family>.gguf, written by llama.cpp's
// own convert_hf_to_gguf.py, F32) loads through the architecture table and runs: its logits agree with
// llama.cpp's on the same file (llama_logits.f32, committed by make_gguf.py + lcpp_logits) within the family's
// tolerance, and with vocablens on the Hugging Face twin (same float32 weights, the converter's q/k permutation,
// Gemma's folded (1 + w), NeoX's regrouped q|k|v undone or followed by the loader) to 1e-4.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "npy_tensor.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/error.hpp"
#include "vocablens/export.hpp"
#include "vocablens/lens.hpp"
#include "vocablens/model.hpp"
#include "vocablens/npy.hpp"
#include "vocablens/tokenizer.hpp"

namespace {

struct GgufFamily {
  const char* dir;
  double lcpp_tol;  ///< max |Δ logit| against llama.cpp: as tests/families_test.cpp states per family
};
// SiLU families agree with llama.cpp to float32 rounding; GELU families to llama.cpp's fp16 GELU table (and
// GPT-NeoX's erf GELU against llama.cpp's tanh form), see docs/runner.md.
const std::vector<GgufFamily> kGgufFamilies = {
    {"qwen2", 1e-4},    {"qwen3", 1e-4}, {"mistral", 1e-4}, {"llama3", 1e-4}, {"llama_linear", 1e-4}, {"phi3", 1e-4},
    {"gpt_neox", 5e-3}, {"gemma", 5e-3}, {"gemma2", 5e-3},  {"gemma3", 5e-3}, {"stablelm", 1e-4},     {"olmo2", 1e-4},
    {"smollm3", 1e-4},  {"phi2", 5e-3},  {"bloom", 5e-3},   {"falcon", 5e-3}, {"mixtral", 1e-4},      {"qwen3moe", 1e-4},
    {"qwen2moe", 1e-4}, {"olmoe", 1e-4}, {"gpt_oss", 1e-4}};

std::string dir_of(const std::string& f) { return std::string(VOCABLENS_SOURCE_DIR) + "/tests/fixtures/families/" + f; }

// Every .npy of run directory `a` against the same file in `b`: same dtype and shape; floats within
// 1e-3 · max(1, max|b|) (NaN where the other has NaN); integers (token ids, ranks) equal but for at most 1 %
// of the entries (float32 near-ties ordered differently). Returns a line per problem ("" when none).
std::string compare_run_dirs(const std::string& a, const std::string& b) {
  std::string problems;
  size_t arrays = 0;
  for (const auto& e : std::filesystem::directory_iterator(a)) {
    if (e.path().extension() != ".npy") continue;
    ++arrays;
    const std::string name = e.path().filename().string();
    if (!std::filesystem::exists(b + "/" + name)) {
      problems += name + ": missing in the other run\n";
      continue;
    }
    vocablens::NdArray x = vocablens::read_npy(e.path().string()), y = vocablens::read_npy(b + "/" + name);
    if (x.dtype != y.dtype || x.shape != y.shape) {
      problems += name + ": dtype or shape differs\n";
      continue;
    }
    at::Tensor tx = vl_test::load_npy_tensor(e.path().string()).to(at::kDouble).reshape({-1});
    at::Tensor ty = vl_test::load_npy_tensor(b + "/" + name).to(at::kDouble).reshape({-1});
    if (tx.numel() == 0) continue;
    if (x.dtype == "<f4" || x.dtype == "<f8") {
      at::Tensor nan_x = tx.isnan(), nan_y = ty.isnan();
      if (!at::equal(nan_x, nan_y)) problems += name + ": NaN in one run only\n";
      at::Tensor d = (tx - ty).abs().masked_fill(nan_x | nan_y, 0);
      const double scale = std::max(1.0, ty.masked_fill(nan_y, 0).abs().max().item<double>());
      const double worst = d.max().item<double>();
      if (worst > 1e-3 * scale)
        problems += name + ": max |difference| " + std::to_string(worst) + " (scale " + std::to_string(scale) + ")\n";
    } else {
      const int64_t differ = tx.ne(ty).sum().item<int64_t>();
      if (differ > std::max<int64_t>(1, tx.numel() / 100))
        problems += name + ": " + std::to_string(differ) + " of " + std::to_string(tx.numel()) + " entries differ\n";
    }
  }
  if (arrays == 0) problems += a + ": no arrays written\n";
  return problems;
}

}  // namespace

TEST_CASE("GGUF twin of every family: llama.cpp's logits and the HF twin's, and the logit lens runs") {
  for (const auto& fc : kGgufFamilies) {
    const std::string d = dir_of(fc.dir);
    INFO(fc.dir);
    vocablens::Model g = vocablens::load_model(d + "/" + fc.dir + ".gguf");
    vocablens::Model h = vocablens::load_model(d);
    const auto& gc = g.config();
    // llama.cpp writes Mistral as general.architecture "llama": the GGUF names the Llama family.
    CHECK(gc.family == (h.config().family == "mistral" ? std::string("llama") : h.config().family));
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

// "a GGUF of every supported family loads and runs every analysis": each analysis run on the GGUF twin
// (llama.cpp's converter wrote it; read by the GGUF reader, tokenizer from the file) writes the arrays it writes
// on the Hugging Face directory (safetensors reader, tokenizer.json / vocab.json): the family fixtures and
// stories260K (llama, F32). The quantized files (gpt2 Q8_0, a Llama Q4_K_M) have no float32 twin: there every
// analysis must run and write finite arrays. The analyses run in this process, through the registry every
// surface ends in (run_analysis; analysis_registry_test checks the CLI gives the registry's Result), each
// model loaded once; the CLI itself runs every command on one GGUF (stories260K), compared with its twin.
TEST_CASE("every analysis command on the GGUF of every family agrees with its Hugging Face twin", "[gguf][cli]") {
  using nlohmann::json;
  const std::string tmp = vl_test::temp_dir("gguf-analyses");
  const std::string data = std::string(VOCABLENS_SOURCE_DIR) + "/tests/data/gguf/";
  struct Run {
    std::string name, gguf, twin, ids_file;
    bool cli = false;  ///< also run every command through the CLI on the GGUF
  };
  std::vector<Run> runs;
  for (const auto& fc : kGgufFamilies)
    runs.push_back({fc.dir, dir_of(fc.dir) + "/" + fc.dir + ".gguf", dir_of(fc.dir), dir_of(fc.dir) + "/ids.txt"});
  const std::string stories_hf = vl_test::fixture("stories260K-hf");
  if (!stories_hf.empty())
    runs.push_back({"stories260K", data + "stories260K-f32.gguf", stories_hf, data + "ids-llama.txt", true});
  runs.push_back({"gpt2-q8_0", data + "gpt2-tiny-q8_0.gguf", "", data + "ids-gpt2.txt"});
  runs.push_back({"llama-q4_k_m", data + "llamak-q4_k_m.gguf", "", data + "ids-llama.txt"});
  const std::string cli = vl_test::cli_path();
  REQUIRE_FALSE(cli.empty());
  std::set<std::string> no_arrays;  // "<run>-<command>" an analysis refuses for the model (checked, no arrays)
  for (const auto& r : runs) {
    const std::vector<int64_t> id_list = vl_test::read_ids_txt(r.ids_file);
    std::string ids;
    for (int64_t id : id_list) ids += (ids.empty() ? "" : ",") + std::to_string(id);
    struct Command {
      std::string name, analysis;
      json given;       ///< the registry's options
      std::string cli;  ///< the same as CLI arguments
    };
    const std::vector<Command> commands = {
        {"lens", "lens", {{"prompt", id_list}, {"top_k", 5}}, "lens MODEL --prompt-ids " + ids + " --top-k 5"},
        {"heads", "heads", {{"layers", 0}, {"heads", 0}, {"top_k", 10}}, "heads MODEL --layer 0 --head 0 --top-k 10"},
        {"neurons",
         "neurons",
         {{"layer", 1}, {"neurons", "0-7"}, {"top_k", 5}},
         "neurons MODEL --layer 1 --neurons 0-7 --top-k 5"},
        {"project",
         "project",
         {{"prompt", id_list}, {"hook", "mlp_out"}, {"top_k", 5}},
         "project MODEL --prompt-ids " + ids + " --hook mlp_out --top-k 5"},
        {"spectrum", "spectrum", {{"k", 8}}, "spectrum MODEL --k 8"},
        {"neighbours", "neighbours", {{"query", "#5"}, {"k", 8}}, "neighbours MODEL '#5' --k 8"},
        {"knn", "knn", {{"k", 5}}, "knn MODEL --k 5"},
        {"positions", "positions", {{"max_positions", 64}}, "positions MODEL --max-positions 64"},
    };
    // Every command on one model, in this process: the run directories `<tmp>/<run>-<command>-<suffix>`.
    auto run_all = [&](const std::string& model, const std::string& suffix) {
      INFO(r.name << " (" << model << ")");
      vocablens::Model m = vocablens::load_model(model);
      auto tok = vocablens::load_tokenizer_for(model);
      for (const auto& c : commands) {
        INFO(c.cli);
        if (c.name == "positions" && m.config().positions == vocablens::PositionKind::ALiBi) {
          // ALiBi (BLOOM) has no position vectors: the analysis says so instead of writing arrays.
          CHECK_THROWS_WITH(
              vocablens::run_analysis(vocablens::find_analysis(c.analysis), m, tok.get(), c.given, vocablens::Surface::Cli),
              Catch::Contains("positions (alibi) have no vectors to analyse"));
          no_arrays.insert(r.name + "-" + c.name);
          continue;
        }
        if (c.name == "neurons" && m.config().n_experts > 0 && !m.config().shared_expert) {
          // A mixture of experts without a dense MLP has no layer-wide neurons: refused on both twins.
          CHECK_THROWS_WITH(
              vocablens::run_analysis(vocablens::find_analysis(c.analysis), m, tok.get(), c.given, vocablens::Surface::Cli),
              Catch::Contains("is a mixture of " + std::to_string(m.config().n_experts) + " experts without a dense MLP"));
          no_arrays.insert(r.name + "-" + c.name);
          continue;
        }
        vocablens::Result res =
            vocablens::run_analysis(vocablens::find_analysis(c.analysis), m, tok.get(), c.given, vocablens::Surface::Cli);
        vocablens::write_result(res, tmp + "/" + r.name + "-" + c.name + "-" + suffix);
      }
    };
    run_all(r.gguf, "gguf");
    if (r.cli) {
      for (const auto& c : commands) {
        INFO(r.name << ": " << c.cli);
        std::string cmd = c.cli, log;
        cmd.replace(cmd.find("MODEL"), 5, "'" + r.gguf + "'");
        const int rc = vl_test::run_command(
            "'" + cli + "' " + cmd + " --out '" + tmp + "/" + r.name + "-" + c.name + "-cli' > /dev/null", log);
        INFO(log);
        REQUIRE(rc == 0);
      }
    }
    if (!r.twin.empty()) run_all(r.twin, "hf");
    for (const auto& c : commands) {
      INFO(r.name << ": " << c.cli);
      if (no_arrays.count(r.name + "-" + c.name)) continue;  // refused above, on both twins
      const std::string out_g = tmp + "/" + r.name + "-" + c.name + "-gguf";
      if (!r.twin.empty()) {
        const std::string out_h = tmp + "/" + r.name + "-" + c.name + "-hf";
        CHECK(compare_run_dirs(out_g, out_h) == "");
        if (r.cli) CHECK(compare_run_dirs(tmp + "/" + r.name + "-" + c.name + "-cli", out_h) == "");
      } else {
        // Arrays written, finite but for the lens's by-design NaN at the last position (no next token to score).
        size_t arrays = 0;
        for (const auto& e : std::filesystem::directory_iterator(out_g)) {
          if (e.path().extension() != ".npy") continue;
          ++arrays;
          if (vocablens::read_npy(e.path().string()).dtype[1] != 'f') continue;
          INFO(e.path().filename().string());
          at::Tensor t = vl_test::load_npy_tensor(e.path().string());
          CHECK_FALSE(t.isinf().any().item<bool>());
          at::Tensor nan = t.isnan();
          if (c.name == "lens" && t.dim() >= 1) nan = nan.narrow(-1, 0, t.size(-1) - 1);
          CHECK_FALSE(nan.any().item<bool>());
        }
        CHECK(arrays > 0);
      }
    }
  }
}

TEST_CASE("GGUF Llama-3.1 rope scaling: the parameters recovered from rope_freqs are the config.json ones") {
  vocablens::Model g = vocablens::load_model(dir_of("llama3") + "/llama3.gguf");
  vocablens::Model h = vocablens::load_model(dir_of("llama3"));
  const auto &gc = g.config(), &hc = h.config();
  CHECK(gc.rope_scaling == vocablens::ModelConfig::RopeScaling::Llama3);
  CHECK(gc.rope_factor == Approx(hc.rope_factor).epsilon(1e-6));
  CHECK(gc.rope_original_context / gc.rope_low_freq_factor ==
        Approx(hc.rope_original_context / hc.rope_low_freq_factor).epsilon(1e-4));
  CHECK(gc.rope_original_context / gc.rope_high_freq_factor ==
        Approx(hc.rope_original_context / hc.rope_high_freq_factor).epsilon(1e-4));
}

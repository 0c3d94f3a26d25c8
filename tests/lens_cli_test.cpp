// The logit lens's CLI (`vocablens lens`): table, JSON, CSV and run directories as numpy reads them, clear errors,
// the llama2.c, decoder-block, pseudo-inverse and corpus variants. The values themselves are checked in
// lens_test.cpp against the independent NumPy lens.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

#include "corpus_text.hpp"
#include "fixtures.hpp"
#include "npy_tensor.hpp"
#include "vocablens/detail/sha256.hpp"
#include "vocablens/lens.hpp"
#include "vocablens/model.hpp"
#include "vocablens/npy.hpp"
#include "vocablens/tokenizer.hpp"

using vl_test::file_exists;
using vl_test::load_npy_tensor;
using vl_test::shq;

namespace {

int run_lens_cli(const std::string& args, std::string& out) {
  std::string cli = vl_test::cli_path();
  REQUIRE(!cli.empty());
  return vl_test::run_command(shq(cli) + " lens " + args, out);
}

}  // namespace

TEST_CASE("lens CLI: table, JSON, CSV and a run directory whose .npy files numpy reads unchanged", "[lens][cli]") {
  vocablens::init_runtime();
  std::string dir = vl_test::fixture("gpt2-tiny");
  if (dir.empty()) return;
  const std::string prompt = "The Eiffel Tower is in the city of";
  std::string out;
  REQUIRE(run_lens_cli(shq(dir) + " --prompt " + shq(prompt) + " --target ' Paris' --top-k 5 --no-color", out) == 0);
  CHECK_THAT(out, Catch::Contains("logit lens"));
  CHECK_THAT(out, Catch::Contains("embed"));
  CHECK_THAT(out, Catch::Contains("␣Paris"));
  CHECK_THAT(out, Catch::Contains("KL→final"));

  REQUIRE(run_lens_cli(shq(dir) + " --prompt " + shq(prompt) + " --format json 2>/dev/null", out) == 0);
  auto j = nlohmann::json::parse(out);
  CHECK(j["kind"] == "logit_lens");
  CHECK(j["summary"]["prompt"] == prompt);
  CHECK(j["summary"]["tokens"].size() == 10);
  CHECK(j["provenance"].contains("model_path"));

  REQUIRE(run_lens_cli(shq(dir) + " --prompt " + shq(prompt) + " --top-k 3 --format csv 2>/dev/null", out) == 0);
  std::string header = out.substr(0, out.find('\n'));
  header.erase(std::remove(header.begin(), header.end(), '"'), header.end());
  CHECK(header.rfind("layer,hook,position,input_id,input_token,rank,token_id,token,prob", 0) == 0);
  size_t lines = !out.empty() && out.back() != '\n';
  for (char c : out) lines += c == '\n';
  CHECK(lines == 1 + 4 * 10 * 3);

  std::string run = vl_test::temp_dir("lenscli") + "/run";
  REQUIRE(run_lens_cli(shq(dir) + " --prompt " + shq(prompt) + " --target ' Paris' --resid-mid --out " + shq(run) + " --no-color",
                       out) == 0);
  CHECK(file_exists(run + "/logit_lens.json"));
  CHECK(file_exists(run + "/logit_lens.top_k.csv"));
  // In-process reference for the values.
  auto m = vocablens::load_model(dir);
  auto tok = vocablens::load_tokenizer_for(dir);
  vocablens::LensOptions o;
  o.resid_mid = true;
  o.target = 6342;
  auto want = vocablens::logit_lens(m, tok->encode(prompt), o).to_result(tok.get(), prompt);
  for (const auto& [name, arr] : want.arrays) {
    INFO("array " << name);
    std::string file = run + "/logit_lens." + name + ".npy";
    REQUIRE(file_exists(file));
    auto got = vocablens::read_npy(file);
    CHECK(got.dtype == arr.dtype);
    CHECK(got.shape == arr.shape);
    REQUIRE(got.bytes.size() == arr.bytes.size());
    if (arr.dtype == "<i8") CHECK(got.bytes == arr.bytes);
    else {
      const float* a = reinterpret_cast<const float*>(arr.bytes.data());
      const float* b = reinterpret_cast<const float*>(got.bytes.data());
      for (int64_t i = 0; i < arr.numel(); ++i) {
        if (std::isnan(a[i])) CHECK(std::isnan(b[i]));
        else CHECK(std::abs(a[i] - b[i]) <= 1e-6);
      }
    }
  }
  if (!vl_test::require(vl_test::python_has("numpy"), "/usr/bin/python3 with numpy")) return;
  // numpy.load opens every file unchanged: same dtype, shape and bytes as our own reader sees.
  std::string script = vl_test::temp_dir("lensnpy") + "/check.py";
  vl_test::write_file(script,
                      "import glob, hashlib, json, os, sys\n"
                      "import numpy as np\n"
                      "out = {}\n"
                      "for f in sorted(glob.glob(os.path.join(sys.argv[1], '*.npy'))):\n"
                      "    a = np.load(f, allow_pickle=False)\n"
                      "    out[os.path.basename(f)] = {'dtype': a.dtype.str, 'shape': list(a.shape),\n"
                      "        'sha256': hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest(),\n"
                      "        'fortran': bool(np.isfortran(a)) and a.ndim > 1,\n"
                      "        'sum': float(np.nansum(a.astype(np.float64)))}\n"
                      "print(json.dumps(out))\n");
  REQUIRE(vl_test::run_command("/usr/bin/python3 " + shq(script) + " " + shq(run), out) == 0);
  auto np = nlohmann::json::parse(out);
  CHECK(np.size() == want.arrays.size());
  for (const auto& [name, arr] : want.arrays) {
    std::string fname = "logit_lens." + name + ".npy";
    INFO("numpy " << fname);
    REQUIRE(np.contains(fname));
    auto got = vocablens::read_npy(run + "/" + fname);
    CHECK(np[fname]["dtype"] == got.dtype);
    CHECK(np[fname]["shape"].get<std::vector<int64_t>>() == got.shape);
    CHECK_FALSE(np[fname]["fortran"].get<bool>());
    CHECK(np[fname]["sha256"] == vocablens::sha256_hex(std::string(got.bytes.begin(), got.bytes.end())));
  }
}

TEST_CASE("lens CLI: clear errors for long or empty prompts, multi-token targets and unwritable --out", "[lens][cli][errors]") {
  std::string dir = vl_test::fixture("gpt2-tiny");
  if (dir.empty()) return;
  std::string out;
  std::string long_prompt;
  for (int i = 0; i < 200; ++i) long_prompt += " word";
  CHECK(run_lens_cli(shq(dir) + " --prompt " + shq(long_prompt), out) == 2);
  CHECK_THAT(out, Catch::Contains("the prompt is 200 tokens, longer than the model's context of 128 tokens"));
  CHECK(run_lens_cli(shq(dir) + " --prompt ''", out) == 2);
  CHECK_THAT(out, Catch::Contains("--prompt: is empty"));
  CHECK(run_lens_cli(shq(dir), out) == 2);
  CHECK_THAT(out, Catch::Contains("--prompt"));
  CHECK(run_lens_cli(shq(dir) + " --prompt 'The city of' --target ' Parisxyzzy'", out) == 2);
  CHECK_THAT(out, Catch::Contains("--target ' Parisxyzzy' is 3 tokens: ␣Paris"));
  CHECK(run_lens_cli(shq(dir) + " --prompt 'The city of' --target-id 99999", out) == 2);
  CHECK_THAT(out, Catch::Contains("outside the vocabulary"));
  std::string tmp = vl_test::temp_dir("lensbad");
  vl_test::write_file(tmp + "/file", "x");
  CHECK(run_lens_cli(shq(dir) + " --prompt 'The city of' --out " + shq(tmp + "/file/run"), out) == 1);
  CHECK_THAT(out, Catch::Contains(tmp + "/file"));
  CHECK_THAT(out, Catch::StartsWith("vocablens: error: "));
  CHECK(run_lens_cli(shq(dir) + " --prompt 'x' --decoder-blocks 9", out) == 2);
  CHECK_THAT(out, Catch::Contains("--decoder-blocks must be in [0, 3]"));
}

TEST_CASE("lens CLI: llama2.c model, decoder and pinv variants, corpus mode", "[lens][cli]") {
  vl_test::use_temp_cache("lenscache");  // E⁺ is cached on disk: not in the user's cache
  std::string dir = vl_test::fixture("stories260K");
  if (dir.empty()) return;
  std::string out;
  std::string model = shq(dir + "/stories260K.bin");
  REQUIRE(run_lens_cli(model + " --prompt 'Once upon a time' --target ' the' --no-color", out) == 0);
  CHECK_THAT(out, Catch::Contains("<s>"));  // BOS added like run.c
  REQUIRE(run_lens_cli(model + " --prompt 'Once upon a time' --decoder-blocks 2 --resid-mid --no-color", out) == 0);
  CHECK_THAT(out, Catch::Contains("last 2 blocks as decoder"));
  REQUIRE(run_lens_cli(model + " --prompt 'Once upon a time' --unembed pinv --format json 2>/dev/null", out) == 0);
  CHECK(nlohmann::json::parse(out)["settings"]["unembed"] == "pinv");
  std::string tmp = vl_test::temp_dir("lenscorpuscli");
  vl_test::write_file(tmp + "/c.txt", vl_test::kShortCorpus);
  REQUIRE(run_lens_cli(model + " --corpus " + shq(tmp + "/c.txt") + " --window 32 --out " + shq(tmp + "/run") + " --no-color",
                       out) == 0);
  CHECK_THAT(out, Catch::Contains("bits/byte"));
  CHECK(file_exists(tmp + "/run/logit_lens_corpus.json"));
  CHECK(file_exists(tmp + "/run/logit_lens_corpus.bits_per_byte.npy"));
  CHECK(run_lens_cli(model + " --corpus " + shq(tmp + "/nope.txt"), out) == 1);
  CHECK_THAT(out, Catch::Contains("nope.txt"));
}

// The tuned lens (vocablens/tuned_lens.hpp, tuned_lens_train.hpp): translators against a brute-force
// double-precision lens, the tuned-lens package's file format read and written by Python's torch (Debian's
// /usr/bin/python3 with python3-torch), the training recipe's first step, NaN handling, resume, bad input.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

#include "fixtures.hpp"
#include "vocablens/error.hpp"
#include "vocablens/lens.hpp"
#include "vocablens/lens_corpus.hpp"
#include "vocablens/model.hpp"
#include "vocablens/tensor_store.hpp"
#include "vocablens/lens_batch.hpp"
#include "vocablens/tokenizer.hpp"
#include "vocablens/tuned_lens.hpp"
#include "vocablens/tuned_lens_train.hpp"

using namespace vocablens;
using namespace vl_test;
namespace fs = std::filesystem;

namespace {

std::string stories() { return fixture("stories260K/stories260K.bin"); }

// A random lens (fixed seed) of moderate size, so that translating changes the lens visibly.
TunedLens random_lens(const Model& m, double scale) {
  TunedLens t = TunedLens::identity(m);
  at::manual_seed(7);
  for (auto& W : t.weight) W.copy_(at::randn(W.sizes()) * scale);
  for (auto& b : t.bias) b.copy_(at::randn(b.sizes()) * scale);
  return t;
}

// Independent lens in double: translate, RMSNorm by hand, W_U, softmax; KL(final || layer) per position.
std::vector<std::vector<double>> brute_kl(const Model& m, const TunedLens& t, const std::vector<int64_t>& ids) {
  CacheSpec spec;
  spec.resid_pre = spec.resid_post = true;
  auto out = m.forward(at::tensor(ids, at::kLong), spec, true);
  const auto& c = m.config();
  at::Tensor WU = m.W_U().to(at::kDouble), g = m.weights().lnf_w.to(at::kDouble);
  at::Tensor logp_f = at::log_softmax(out.logits[0].to(at::kDouble), -1);
  std::vector<std::vector<double>> kl;
  for (int64_t l = 0; l <= c.n_layers; ++l) {
    at::Tensor h = (l == 0 ? out.cache.get("resid_pre", 0) : out.cache.get("resid_post", l - 1))[0].to(at::kDouble);
    if (l < c.n_layers) {
      at::Tensor W = t.weight[static_cast<size_t>(l)].to(at::kDouble), b = t.bias[static_cast<size_t>(l)].to(at::kDouble);
      h = h + at::matmul(h, W.t()) + b;
    }
    at::Tensor x = h / at::sqrt((h * h).mean(-1, true) + c.norm_eps) * g;
    at::Tensor logq = at::log_softmax(at::matmul(x, WU), -1);
    at::Tensor k = (logp_f.exp() * (logp_f - logq)).sum(-1);
    std::vector<double> row(k.data_ptr<double>(), k.data_ptr<double>() + k.numel());
    kl.push_back(row);
  }
  return kl;
}

std::string write_corpus(const std::string& dir, int copies) {
  std::string text = read_file(fixture("stories260K/reference/runc_greedy_t0_n200.txt"));
  std::string all;
  for (int i = 0; i < copies; ++i) all += text + "\n";
  const std::string p = dir + "/corpus.txt";
  write_file(p, all);
  return p;
}

double param_norm(const TunedLens& t) {
  double s = 0;
  for (auto& W : t.weight) s += W.to(at::kDouble).pow(2).sum().item<double>();
  for (auto& b : t.bias) s += b.to(at::kDouble).pow(2).sum().item<double>();
  return std::sqrt(s);
}

}  // namespace

TEST_CASE("tuned lens: identity translators give exactly the logit lens", "[tuned_lens]") {
  Model m = load_model(stories());
  std::vector<int64_t> ids{1, 403, 407, 261, 378, 400, 281, 270};
  LensOptions lo;
  lo.top_k = 5;
  auto a = logit_lens(m, ids, lo);
  lo.tuned = std::make_shared<TunedLens>(TunedLens::identity(m));
  auto b = logit_lens(m, ids, lo);
  REQUIRE(a.kl_final.size() == b.kl_final.size());
  for (size_t i = 0; i < a.kl_final.size(); ++i) {
    CHECK(b.kl_final[i] == Approx(a.kl_final[i]).margin(1e-6));
    CHECK(b.entropy[i] == Approx(a.entropy[i]).margin(1e-6));
  }
  CHECK(b.top_ids == a.top_ids);
  CHECK(b.to_result(nullptr).settings["lens"] == "tuned");
}

TEST_CASE("tuned lens: KL per layer and position equals a double-precision brute force", "[tuned_lens]") {
  Model m = load_model(stories());
  TunedLens t = random_lens(m, 0.05);
  std::vector<int64_t> ids{1, 403, 407, 261, 378, 400, 281, 270, 339, 260};
  LensOptions lo;
  lo.top_k = 1;
  lo.tuned = std::make_shared<TunedLens>(t);
  auto lens = logit_lens(m, ids, lo);
  auto ref = brute_kl(m, t, ids);
  REQUIRE(lens.n_layers() == static_cast<int64_t>(ref.size()));
  double worst = 0;
  for (int64_t l = 0; l < lens.n_layers(); ++l)
    for (int64_t p = 0; p < lens.n_positions(); ++p)
      worst = std::max(worst, std::abs(lens.kl_final[lens.at(l, p)] - ref[static_cast<size_t>(l)][static_cast<size_t>(p)]));
  INFO("max |KL - brute force| = " << worst);
  CHECK(worst < 1e-4);
  // The translators change the reading (the random lens is far from the identity).
  auto plain = logit_lens(m, ids, LensOptions{});
  CHECK(std::abs(plain.kl_final[plain.at(1, 3)] - lens.kl_final[lens.at(1, 3)]) > 1e-3);
}

TEST_CASE("tuned lens over a prompts file (lens --prompts --tuned): each prompt equals the double brute force",
          "[tuned_lens][lens_batch]") {
  Model m = load_model(stories());
  auto tok = load_tokenizer_for(stories());
  TunedLens t = random_lens(m, 0.05);
  LensOptions lo;
  lo.top_k = 1;
  lo.tuned = std::make_shared<TunedLens>(t);
  std::vector<LensPrompt> prompts = {
      {"Once upon a time", "", 1}, {"Lily went to the park and saw a big dog", "", 2}, {"The sun", "", 3}};
  auto b = logit_lens_batch(m, *tok, prompts, lo);
  REQUIRE(b.runs.size() == 3);
  double worst = 0;
  for (size_t p = 0; p < prompts.size(); ++p) {
    const LensResult& L = b.runs[p];
    auto ref = brute_kl(m, t, L.tokens);
    REQUIRE(L.n_layers() == static_cast<int64_t>(ref.size()));
    for (int64_t l = 0; l < L.n_layers(); ++l)
      for (int64_t q = 0; q < L.n_positions(); ++q)
        worst = std::max(worst, std::abs(L.kl_final[L.at(l, q)] - ref[static_cast<size_t>(l)][static_cast<size_t>(q)]));
  }
  INFO("max |KL - brute force| over 3 prompts = " << worst);
  CHECK(worst < 1e-4);
  Result r = b.to_result(tok.get());
  CHECK(r.settings["lens"] == "tuned");
  // Without the translators the batch reads differently (the test above would not pass by accident).
  auto plain = logit_lens_batch(m, *tok, prompts, LensOptions{});
  CHECK(std::abs(plain.runs[1].kl_final[plain.runs[1].at(1, 3)] - b.runs[1].kl_final[b.runs[1].at(1, 3)]) > 1e-3);
  CHECK(plain.to_result(tok.get()).settings["lens"] == "logit");
}

TEST_CASE("tuned lens: saved as safetensors and params.pt, both read back identically", "[tuned_lens][io]") {
  Model m = load_model(stories());
  TunedLens t = random_lens(m, 0.1);
  const std::string dir = temp_dir("tuned_io");
  save_tuned_lens(t, dir);
  for (const char* f : {"tuned_lens.safetensors", "params.pt", "config.json"}) CHECK(fs::exists(dir + "/" + f));
  auto cfg = nlohmann::json::parse(read_file(dir + "/config.json"));
  CHECK(cfg["d_model"] == 64);
  CHECK(cfg["num_hidden_layers"] == m.config().n_layers);
  CHECK(cfg["lens_type"] == "linear_tuned_lens");
  TunedLens a = load_tuned_lens(dir);
  fs::remove(dir + "/tuned_lens.safetensors");
  TunedLens b = load_tuned_lens(dir);  // params.pt through the safe pickle reader
  REQUIRE(a.n_translators() == t.n_translators());
  REQUIRE(b.n_translators() == t.n_translators());
  for (int64_t l = 0; l < t.n_translators(); ++l) {
    CHECK(at::equal(a.weight[l], t.weight[l]));
    CHECK(at::equal(b.weight[l], t.weight[l]));
    CHECK(at::equal(b.bias[l], t.bias[l]));
  }
}

TEST_CASE("tuned lens: Python torch reads our params.pt, and vocablens reads Python's torch.save", "[tuned_lens][python]") {
  // Debian's python3-torch (scripts/setup.sh); a missing interpreter or torch fails this test.
  Model m = load_model(stories());
  TunedLens t = random_lens(m, 0.1);
  const std::string dir = temp_dir("tuned_py"), pydir = dir + "/from_python";
  save_tuned_lens(t, dir);
  const std::string script = dir + "/check.py";
  write_file(script, R"PY(
import json, os, sys, torch
src, dst = sys.argv[1], sys.argv[2]
cfg = json.load(open(os.path.join(src, "config.json")))
sd = torch.load(os.path.join(src, "params.pt"))
# What the tuned-lens package does: a ModuleList of nn.Linear(d, d) loads the state dict strictly.
L, d = cfg["num_hidden_layers"], cfg["d_model"]
mods = torch.nn.ModuleList([torch.nn.Linear(d, d, bias=cfg["bias"]) for _ in range(L)])
mods.load_state_dict(sd, strict=True)
assert list(sd.keys()) == [f"{i}.{w}" for i in range(L) for w in ("weight", "bias")], list(sd.keys())
assert all(v.dtype == torch.float32 for v in sd.values())
# A lens saved by Python as the package saves it: torch.save(layer_translators.state_dict()) + config.json.
with torch.no_grad():
    for i, lin in enumerate(mods):
        lin.weight.mul_(0.5)
        lin.bias.add_(float(i))
os.makedirs(dst, exist_ok=True)
torch.save(mods.state_dict(), os.path.join(dst, "params.pt"))
json.dump({"base_model_name_or_path": "stories260K", "d_model": d, "num_hidden_layers": L, "bias": True,
           "base_model_revision": None, "unembed_hash": None, "lens_type": "linear_tuned_lens"},
          open(os.path.join(dst, "config.json"), "w"))
print("ok", L, d)
)PY");
  std::string out;
  const int rc = run_command("/usr/bin/python3 " + script + " " + dir + " " + pydir, out);
  INFO(out);
  REQUIRE(rc == 0);
  CHECK(out.find("ok 5 64") != std::string::npos);
  TunedLens p = load_tuned_lens(pydir);
  REQUIRE(p.n_translators() == t.n_translators());
  for (int64_t l = 0; l < t.n_translators(); ++l) {
    CHECK(at::allclose(p.weight[l], t.weight[l] * 0.5, 0, 0));
    CHECK(at::allclose(p.bias[l], t.bias[l] + static_cast<double>(l), 0, 1e-6));
  }
  p.check_model(m);
}

TEST_CASE("tuned lens: another model's translators are refused in one line naming both", "[tuned_lens][errors]") {
  Model stories_m = load_model(stories());
  Model gpt = load_model(fixture("gpt2-tiny"));  // d_model 64 too, but 3 layers
  const std::string dir = temp_dir("tuned_other");
  save_tuned_lens(TunedLens::identity(stories_m), dir);
  TunedLens t = load_tuned_lens(dir);
  try {
    t.check_model(gpt);
    FAIL("no error");
  } catch (const UsageError& e) {
    const std::string msg = e.what();
    CHECK(msg.find(dir) != std::string::npos);
    CHECK(msg.find("gpt2-tiny") != std::string::npos);
    CHECK(msg.find("5 layers") != std::string::npos);
    CHECK(msg.find("3 layers") != std::string::npos);
    CHECK(msg.find('\n') == std::string::npos);
  }
  std::string out;
  CHECK(run_command(cli_path() + " lens " + fixture("gpt2-tiny") + " --tuned " + dir + " --prompt hi", out) != 0);
  CHECK(out.find("3 layers") != std::string::npos);
  CHECK_THROWS_AS(load_tuned_lens(temp_dir("tuned_empty")), FormatError);
}

TEST_CASE("tuned lens training: the first step is the recipe's (loss = summed logit-lens KL, clipped Nesterov step)",
          "[tuned_lens][train]") {
  Model m = load_model(stories());
  auto tok = load_tokenizer_for(stories(), "");
  const std::string dir = temp_dir("tuned_step");
  TunedLensTrainOptions o;
  o.corpus = write_corpus(dir, 2);
  o.out_dir = dir + "/lens";
  o.window = 64;
  o.tokens_per_step = 64;  // one window per step
  o.steps = 1;
  auto r = train_tuned_lens(m, *tok, o);
  REQUIRE(r.losses.size() == 1);
  // Step 1 starts from the identity: its loss is the logit lens's KL, summed over layers, mean over the window
  // of 64 tokens that the seed-42 permutation put first. Recompute it with the logit lens on every window and
  // find that window among them.
  std::vector<int64_t> all;
  {
    std::string text = read_file(o.corpus);
    all = tok->encode(text);
  }
  bool found = false;
  for (int64_t w = 0; w + 1 <= static_cast<int64_t>(all.size()) / 64 && !found; ++w) {
    std::vector<int64_t> ids(all.begin() + w * 64, all.begin() + (w + 1) * 64);
    auto lens = logit_lens(m, ids, LensOptions{});
    double s = 0;
    for (int64_t l = 0; l + 1 < lens.n_layers(); ++l)
      for (int64_t p = 0; p < 64; ++p) s += lens.kl_final[lens.at(l, p)] / 64.0;
    if (std::abs(s - r.losses[0]) < 1e-3 * std::max(1.0, s)) found = true;
  }
  CHECK(found);
  // From A = b = 0 with a gradient norm above 1: clipped to norm 1, Nesterov's first step moves by
  // lr (1 + momentum) = 0.1 * 1.9 in norm (weight decay acts on zero parameters).
  TunedLens t = load_tuned_lens(o.out_dir);
  CHECK(param_norm(t) == Approx(0.19).epsilon(1e-4));
}

TEST_CASE("tuned lens training: resume equals an uninterrupted run; NaN stops and keeps the checkpoint", "[tuned_lens][train]") {
  Model m = load_model(stories());
  auto tok = load_tokenizer_for(stories(), "");
  const std::string dir = temp_dir("tuned_resume");
  TunedLensTrainOptions o;
  o.corpus = write_corpus(dir, 3);
  o.window = 64;
  o.tokens_per_step = 128;
  o.steps = 6;
  o.checkpoint_every = 2;
  o.out_dir = dir + "/straight";
  train_tuned_lens(m, *tok, o);
  o.out_dir = dir + "/resumed";
  o.stop_after = 3;
  train_tuned_lens(m, *tok, o);
  o.resume = true;
  o.stop_after = 0;
  auto r = train_tuned_lens(m, *tok, o);
  CHECK(r.start_step == 3);
  TunedLens a = load_tuned_lens(dir + "/straight"), b = load_tuned_lens(dir + "/resumed");
  for (int64_t l = 0; l < a.n_translators(); ++l) CHECK(at::allclose(a.weight[l], b.weight[l], 1e-5, 1e-7));

  o.out_dir = dir + "/nan";
  o.resume = false;
  o.inject_nan_at_step = 5;
  try {
    train_tuned_lens(m, *tok, o);
    FAIL("no error");
  } catch (const Error& e) {
    const std::string msg = e.what();
    CHECK(msg.find("step 5") != std::string::npos);
    CHECK(msg.find("NaN") != std::string::npos);
    CHECK(msg.find("step 4") != std::string::npos);
  }
  TensorStore ck = read_safetensors(dir + "/nan/checkpoint.safetensors");
  CHECK(ck.metadata["step"] == "4");
  CHECK_FALSE(fs::exists(dir + "/nan/tuned_lens.safetensors"));
}

TEST_CASE("tuned lens training: windows' activations kept between passes train the same translators", "[tuned_lens][train]") {
  Model m = load_model(stories());
  auto tok = load_tokenizer_for(stories(), "");
  const std::string dir = temp_dir("tuned_kept");
  TunedLensTrainOptions o;
  o.corpus = write_corpus(dir, 3);
  o.window = 32;
  o.tokens_per_step = 96;  // 3 windows a step, micro-batches of 2 and 1: kept windows are stacked anew
  o.micro_batch = 2;
  o.steps = 20;
  double passes = 0;
  o.plan = [&](const TunedLensTrainPlan& p) { passes = p.corpus_passes; };
  o.out_dir = dir + "/kept";
  auto kept = train_tuned_lens(m, *tok, o);
  REQUIRE(passes > 2);  // later passes read the kept windows
  o.keep_activations = false;
  o.out_dir = dir + "/recomputed";
  auto recomputed = train_tuned_lens(m, *tok, o);
  REQUIRE(kept.losses.size() == recomputed.losses.size());
  for (size_t i = 0; i < kept.losses.size(); ++i) CHECK(kept.losses[i] == Approx(recomputed.losses[i]).epsilon(1e-6));
  TunedLens a = load_tuned_lens(dir + "/kept"), b = load_tuned_lens(dir + "/recomputed");
  for (int64_t l = 0; l < a.n_translators(); ++l) {
    CHECK(at::allclose(a.weight[l], b.weight[l], 1e-5, 1e-7));
    CHECK(at::allclose(a.bias[l], b.bias[l], 1e-5, 1e-7));
  }
}

TEST_CASE("tuned lens training: a corpus shorter than one window says so", "[tuned_lens][errors]") {
  Model m = load_model(stories());
  auto tok = load_tokenizer_for(stories(), "");
  const std::string dir = temp_dir("tuned_short");
  write_file(dir + "/short.txt", "Once upon a time");
  TunedLensTrainOptions o;
  o.corpus = dir + "/short.txt";
  o.out_dir = dir + "/lens";
  try {
    train_tuned_lens(m, *tok, o);
    FAIL("no error");
  } catch (const UsageError& e) {
    const std::string msg = e.what();
    CHECK(msg.find("short.txt") != std::string::npos);
    CHECK(msg.find("shorter than one training window of 512 tokens") != std::string::npos);
  }
}

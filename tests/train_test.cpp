// vocablens train: determinism, resume, loss masking, the safetensors writer, tied/untied EmbedLM, word2vec,
// and what positions do (a NoPE model is permutation-equivariant, every positional option breaks it).
#include <cstring>
#include <filesystem>
#include <functional>

#include <nlohmann/json.hpp>

#include "../src/train/safetensors_writer.hpp"  // internal to the trainer (not a public header)
#include "fixtures.hpp"
#include "random_gpt.hpp"
#include "tensor_checks.hpp"
#include "vocablens/detail/interrupt_signal.hpp"
#include "vocablens/error.hpp"
#include "vocablens/interrupt.hpp"
#include "vocablens/model.hpp"
#include "vocablens/npy.hpp"
#include "vocablens/tensor_store.hpp"
#include "vocablens/tokenizer.hpp"
#include "vocablens/train.hpp"

namespace fs = std::filesystem;
using vocablens::PositionKind;
using vocablens::TrainModel;
using vocablens::TrainOptions;

namespace {

// A tiny, fast configuration: a few seconds per run on one core.
TrainOptions tiny(TrainModel m, const std::string& tag) {
  vocablens::init_runtime();
  TrainOptions o;
  o.model = m;
  o.synthetic = true;
  o.synthetic_options.lines = 3000;
  o.vocab_size = 1024;
  o.out_dir = vl_test::temp_dir(tag);
  o.steps = 12;
  o.batch_size = m == TrainModel::SkipGram || m == TrainModel::CBOW ? 64 : 4;
  o.d_model = 32;
  o.n_layers = 2;
  o.n_heads = 4;
  o.n_ctx = 32;
  o.warmup_steps = 3;
  return o;
}

// Continues the run in `dir` from its checkpoint with the saved options and step count.
vocablens::TrainReport resume(const std::string& dir) {
  TrainOptions again;
  again.out_dir = dir;
  again.resume = true;
  again.steps = 0;  // keep the checkpoint's
  return vocablens::train(again);
}

std::string cli() {
  std::string c = vl_test::cli_path();
  REQUIRE_FALSE(c.empty());
  return c;
}

std::vector<double> logged_losses(const std::string& dir) {
  auto j = nlohmann::json::parse(vl_test::read_file(dir + "/train_log.json"));
  return j["losses"].get<std::vector<double>>();
}

}  // namespace

// ---- the safetensors writer ------------------------------------------------------------------------------

TEST_CASE("safetensors writer: spec layout, and the reader gets the tensors back exactly", "[train]") {
  std::map<std::string, at::Tensor> t;
  t["b.weight"] = at::arange(6, at::kFloat).view({2, 3});
  t["a.bias"] = at::tensor({1.5f, -2.0f, 3.25f});
  t["c.ids"] = at::tensor({int64_t(7), int64_t(-1)});
  t["d.double"] = at::tensor({0.1, 0.2}, at::kDouble);  // written as F32
  std::string bytes = vocablens::train_detail::safetensors_bytes(t, {{"format", "pt"}});
  uint64_t hlen = 0;
  for (int i = 0; i < 8; ++i) hlen |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  CHECK((8 + hlen) % 8 == 0);
  std::string header = bytes.substr(8, hlen);
  CHECK(header.find_last_not_of(' ') == header.rfind('}'));  // padded with spaces only
  auto j = nlohmann::json::parse(header);
  CHECK(j["__metadata__"]["format"] == "pt");
  // Data in sorted name order, back to back.
  uint64_t expect = 0;
  for (const char* n : {"a.bias", "b.weight", "c.ids", "d.double"}) {
    INFO(n);
    auto off = j[n]["data_offsets"].get<std::vector<uint64_t>>();
    CHECK(off[0] == expect);
    expect = off[1];
  }
  CHECK(8 + hlen + expect == bytes.size());
  CHECK(j["c.ids"]["dtype"] == "I64");
  CHECK(j["d.double"]["dtype"] == "F32");
  std::string dir = vl_test::temp_dir("st");
  vocablens::train_detail::write_safetensors(dir + "/x.safetensors", t, {{"format", "pt"}});
  auto st = vocablens::read_safetensors(dir + "/x.safetensors");
  CHECK(at::equal(st.get("b.weight"), t["b.weight"]));
  CHECK(at::equal(st.get("a.bias"), t["a.bias"]));
  CHECK(at::equal(st.get("c.ids"), t["c.ids"]));
  CHECK(at::equal(st.get("d.double"), t["d.double"].to(at::kFloat)));
  CHECK(st.metadata["format"] == "pt");
}

// ---- determinism and resume -------------------------------------------------------------------------------

TEST_CASE("gpt: same seed gives an identical loss curve; another seed does not", "[train]") {
  TrainOptions a = tiny(TrainModel::GPT, "det-a"), b = tiny(TrainModel::GPT, "det-b"), c = tiny(TrainModel::GPT, "det-c");
  c.seed = 2;
  auto ra = vocablens::train(a), rb = vocablens::train(b), rc = vocablens::train(c);
  REQUIRE(ra.losses.size() == 12);
  CHECK(ra.losses == rb.losses);
  CHECK(ra.losses != rc.losses);
  CHECK(vl_test::read_file(a.out_dir + "/model.safetensors") == vl_test::read_file(b.out_dir + "/model.safetensors"));
  CHECK(logged_losses(a.out_dir) == ra.losses);
}

TEST_CASE("train: resume continues bit-identically (2N steps == N + resume N)", "[train]") {
  for (TrainModel kind : {TrainModel::GPT, TrainModel::SkipGram}) {
    INFO(vocablens::to_string(kind));
    TrainOptions whole = tiny(kind, "res-whole");
    whole.steps = 16;
    whole.checkpoint_every = 5;
    auto rw = vocablens::train(whole);

    TrainOptions first = tiny(kind, "res-part");
    first.steps = 16;
    first.checkpoint_every = 5;
    first.stop_after = 8;
    auto r1 = vocablens::train(first);
    CHECK(r1.step == 8);
    CHECK(fs::exists(first.out_dir + "/checkpoint/params-8.safetensors"));
    CHECK_FALSE(fs::exists(first.out_dir + "/checkpoint/params-5.safetensors"));  // older ones removed

    auto r2 = resume(first.out_dir);
    CHECK(r2.start_step == 8);
    CHECK(r2.step == 16);
    CHECK(r2.losses == rw.losses);
    CHECK(r2.final_loss == rw.final_loss);
    const char* weights = kind == TrainModel::GPT ? "/model.safetensors" : "/embeddings.safetensors";
    CHECK(vl_test::read_file(first.out_dir + weights) == vl_test::read_file(whole.out_dir + weights));
  }
}

TEST_CASE("train: --snapshot-every keeps loadable model directories equal to a run stopped there", "[train]") {
  TrainOptions whole = tiny(TrainModel::GPT, "snap-whole");
  whole.steps = 12;
  whole.snapshot_every = 4;
  vocablens::train(whole);
  TrainOptions part = tiny(TrainModel::GPT, "snap-part");
  part.steps = 12;
  part.stop_after = 4;
  vocablens::train(part);
  const std::string s4 = whole.out_dir + "/snapshots/step-4";
  CHECK(fs::exists(whole.out_dir + "/snapshots/step-8/model.safetensors"));
  CHECK(fs::exists(whole.out_dir + "/snapshots/step-12/model.safetensors"));
  // Same seed: the snapshot after step 4 is, byte for byte, the model of a run stopped after step 4.
  CHECK(vl_test::read_file(s4 + "/model.safetensors") == vl_test::read_file(part.out_dir + "/model.safetensors"));
  CHECK(vl_test::read_file(whole.out_dir + "/snapshots/step-12/model.safetensors") ==
        vl_test::read_file(whole.out_dir + "/model.safetensors"));
  // Loadable with its tokenizer, as compare-embeddings loads it.
  vocablens::Model m4 = vocablens::load_model(s4);
  auto t4 = vocablens::load_tokenizer_for(s4);
  CHECK(t4->vocab_size() == m4.config().vocab_size);
}

TEST_CASE("train CLI: same seed, same loss curve; resume; refuses to clobber a run", "[train][cli]") {
  const std::string dir1 = vl_test::temp_dir("cli-a"), dir2 = vl_test::temp_dir("cli-b"), dir3 = vl_test::temp_dir("cli-c");
  const std::string args =
      " train --model gpt --synthetic --synthetic-lines 2000 --d-model 32 --ctx 32 --batch 4 --steps 10 "
      "--seed 5 -q --out ";
  std::string out;
  REQUIRE(vl_test::run_command(cli() + args + dir1, out) == 0);
  INFO(out);
  CHECK(out.find("final loss") != std::string::npos);
  REQUIRE(vl_test::run_command(cli() + args + dir2, out) == 0);
  CHECK(logged_losses(dir1) == logged_losses(dir2));
  CHECK(logged_losses(dir1).size() == 10);
  // Same run in two calls.
  REQUIRE(vl_test::run_command(cli() + args + dir3 + " --stop-after 4", out) == 0);
  CHECK(logged_losses(dir3).size() == 4);
  REQUIRE(vl_test::run_command(cli() + " train --resume -q --out " + dir3, out) == 0);
  CHECK(logged_losses(dir3) == logged_losses(dir1));
  // An existing run is not overwritten by accident.
  CHECK(vl_test::run_command(cli() + args + dir1, out) == 2);
  CHECK(out.find("--resume") != std::string::npos);
  CHECK(vl_test::run_command(cli() + args + dir1 + " --overwrite", out) == 0);
  // Bad flags.
  CHECK(vl_test::run_command(cli() + " train --synthetic --corpus x.txt -q --out " + dir1 + "/x", out) == 2);
  CHECK(vl_test::run_command(cli() + " train --resume -q --out " + vl_test::temp_dir("cli-empty"), out) == 2);
  CHECK(vl_test::run_command(cli() + " train --corpus /nonexistent/c.txt -q --out " + dir1 + "/y", out) == 1);
}

// ---- loss masking ------------------------------------------------------------------------------------------

// One OpenBLAS kernel family per instruction set for training (src/cli/blas_kernels.hpp): kernel families
// round differently and a seeded run follows another trajectory on each (docs/train.md). OPENBLAS_VERBOSE=2
// makes OpenBLAS print the family it loads ("Core: ..."), in the process and again after a re-exec.
TEST_CASE("train pins the kernel family of the CPU's instruction set; analyses keep OpenBLAS's choice", "[train][cli]") {
  __builtin_cpu_init();
  const std::string want = __builtin_cpu_supports("avx512f") ? "SkylakeX" : __builtin_cpu_supports("avx2") ? "Haswell" : "";
  auto last_core = [](const std::string& out) {
    const size_t p = out.rfind("Core: ");
    return p == std::string::npos ? std::string() : out.substr(p + 6, out.find('\n', p) - p - 6);
  };
  std::string out;
  const std::string env = "env -u OPENBLAS_CORETYPE -u VOCABLENS_KEEP_BLAS OPENBLAS_VERBOSE=2 ";
  REQUIRE(vl_test::run_command(env + cli() +
                                   " train --synthetic --synthetic-lines 200 --vocab-size 300 --d-model 16 "
                                   "--steps 2 -q --out " +
                                   vl_test::temp_dir("blas-pin") + "/run 2>&1",
                               out) == 0);
  INFO(out);
  const std::string trained = last_core(out);
  REQUIRE_FALSE(trained.empty());  // Debian's OpenBLAS prints its family with OPENBLAS_VERBOSE=2
  if (!want.empty()) CHECK(trained == want);
  // An analysis command keeps the family OpenBLAS chose, unless that is the SSE3 fallback.
  std::string native;
  REQUIRE(vl_test::run_command("env -u OPENBLAS_CORETYPE OPENBLAS_VERBOSE=2 " + cli() + " --help 2>&1", native) == 0);
  const std::string chosen = last_core(native);
  const std::string model = vl_test::fixture("stories260K/stories260K.bin");
  if (model.empty()) return;
  REQUIRE(vl_test::run_command(env + cli() + " inspect " + model + " 2>&1", out) == 0);
  CHECK(last_core(out) == (chosen == "Prescott" && !want.empty() ? want : chosen));
}

TEST_CASE("loss masking: <prompt> spans are not trained on", "[train]") {
  // Each line is a random word followed by " end". Marked as a prompt, the random word is never a target,
  // and everything left to predict (" end", "\n") is certain: the loss goes to ~0. Unmarked, predicting
  // the random word costs ~ln(20)/3 nats per token.
  const char* words[] = {"apple",  "river",  "stone",  "cloud",  "tiger",  "piano",  "lemon",  "candle", "forest", "rocket",
                         "violet", "garden", "mirror", "silver", "pepper", "window", "planet", "butter", "spider", "castle"};
  std::mt19937_64 rng(3);
  std::string marked, plain;
  for (int i = 0; i < 3000; ++i) {
    std::string w = words[rng() % 20];
    marked += "<prompt>" + w + "</prompt> end\n";
    plain += w + " end\n";
  }
  auto run = [&](const std::string& text, const char* tag) {
    std::string dir = vl_test::temp_dir(tag);
    vl_test::write_file(dir + "/corpus.txt", text);
    TrainOptions o = tiny(TrainModel::EmbedLM, tag);
    o.synthetic = false;
    o.corpus = dir + "/corpus.txt";
    o.steps = 150;
    o.batch_size = 8;
    o.lr = 3e-2;
    return vocablens::train(o);
  };
  auto m = run(marked, "mask-on"), p = run(plain, "mask-off");
  CHECK(m.target_tokens * 3 == m.corpus_tokens * 2);  // " end" and "\n" of every line
  CHECK(p.target_tokens == p.corpus_tokens);
  INFO("masked " << m.final_loss << ", unmasked " << p.final_loss);
  CHECK(m.final_loss < 0.1);
  CHECK(p.final_loss > 0.8);
}

// ---- EmbedLM: tied and untied -------------------------------------------------------------------------------

TEST_CASE("embed-lm: tied and untied both train; tied logits are E·h + b", "[train]") {
  for (bool tied : {true, false}) {
    INFO((tied ? "tied" : "untied"));
    TrainOptions o = tiny(TrainModel::EmbedLM, tied ? "elm-tied" : "elm-untied");
    o.tied = tied;
    o.steps = 60;
    o.batch_size = 8;
    auto r = vocablens::train(o);
    CHECK(r.losses.back() < r.losses.front() - 0.5);  // it learns
    auto cfg = nlohmann::json::parse(vl_test::read_file(o.out_dir + "/config.json"));
    CHECK(cfg["tie_word_embeddings"] == tied);
    auto st = vocablens::read_safetensors(o.out_dir + "/model.safetensors");
    CHECK(st.has("lm_head.weight") == !tied);
    vocablens::EmbedLM lm = vocablens::load_embed_lm(o.out_dir);
    REQUIRE(lm.tied == tied);
    at::Tensor ids = at::tensor({int64_t(5), int64_t(300), int64_t(42), int64_t(7)});
    at::Tensor h = lm.hidden(ids);                       // [4, d] = E[x]
    at::Tensor z = lm.logits(ids);                       // [4, V]
    at::Tensor Eh = at::matmul(lm.E, h.t()).t() + lm.b;  // E·h + b, per position
    CHECK(at::equal(h, lm.E.index_select(0, ids)));
    CHECK(vocablens::is_embedding_directory(o.out_dir));
    CHECK(at::equal(vocablens::load_embedding_matrix(o.out_dir, "W_E"), lm.E));
    CHECK(at::equal(vocablens::load_embedding_matrix(o.out_dir, "W_U"), lm.W.t()));
    if (tied) {
      CHECK(lm.W.data_ptr() == lm.E.data_ptr());  // W is E^T itself, not a copy
      CHECK(at::allclose(z, Eh, 1e-5, 1e-5));
    } else {
      CHECK_FALSE(at::allclose(z, Eh, 1e-3, 1e-3));
    }
  }
  CHECK_THROWS_AS(vocablens::load_embed_lm(vl_test::temp_dir("elm-none")), vocablens::FormatError);
  CHECK_FALSE(vocablens::is_embedding_directory(vl_test::temp_dir("elm-none")));
}

// ---- word2vec -------------------------------------------------------------------------------------------------

TEST_CASE("skipgram and cbow train and write loadable vectors", "[train]") {
  for (TrainModel kind : {TrainModel::SkipGram, TrainModel::CBOW}) {
    INFO(vocablens::to_string(kind));
    TrainOptions o = tiny(kind, "w2v");
    o.steps = 80;
    auto r = vocablens::train(o);
    CHECK(r.losses.back() < r.losses.front());
    auto wv = vocablens::load_word_vectors(o.out_dir);
    CHECK(wv.kind == vocablens::to_string(kind));
    CHECK(wv.vectors.size(0) == r.vocab_size);
    CHECK(wv.vectors.size(1) == 32);
    auto npy = vocablens::read_npy(o.out_dir + "/embeddings.npy");
    CHECK(npy.shape == std::vector<int64_t>{r.vocab_size, 32});
    CHECK(std::memcmp(npy.bytes.data(), wv.vectors.contiguous().data_ptr<float>(), npy.bytes.size()) == 0);
    CHECK(vocablens::load_tokenizer_for(o.out_dir)->vocab_size() == r.vocab_size);
    // load_model refuses it with a clear message (no transformer inside); the geometry analyses take its
    // matrices from load_embedding_matrix.
    CHECK_THROWS_AS(vocablens::load_model(o.out_dir), vocablens::FormatError);
    CHECK(vocablens::is_embedding_directory(o.out_dir));
    CHECK(at::equal(vocablens::load_embedding_matrix(o.out_dir), wv.vectors));
    CHECK(at::equal(vocablens::load_embedding_matrix(o.out_dir, "W_U"), wv.context));
  }
}

// ---- GPT: one forward for training and analysis; positions --------------------------------------------------

TEST_CASE("gpt: the written directory loads and reproduces the trained weights' logits", "[train]") {
  TrainOptions o = tiny(TrainModel::GPT, "gpt-load");
  o.tied = false;
  auto r = vocablens::train(o);
  vocablens::Model m = vocablens::load_model(o.out_dir);
  const auto& c = m.config();
  CHECK(c.architecture == "GPT2LMHeadModel");
  CHECK(c.n_layers == 2);
  CHECK(c.d_model == 32);
  CHECK(c.n_ctx == 32);
  CHECK(c.vocab_size == r.vocab_size);
  CHECK_FALSE(c.tied_embeddings);
  CHECK(c.positions == PositionKind::Learned);
  CHECK(m.parameter_count() == r.parameters);
  // The checkpoint's parameters through gpt_weights_from_named + run_forward == the loaded Model.
  auto st = vocablens::read_safetensors(o.out_dir + "/checkpoint/params-12.safetensors");
  std::map<std::string, at::Tensor> named(st.tensors.begin(), st.tensors.end());
  auto w = vocablens::gpt_weights_from_named(c, named);
  auto tok = vocablens::load_tokenizer_for(o.out_dir);
  at::Tensor ids = at::tensor(tok->encode("the capital of france is paris"), at::kLong);
  at::Tensor a = vocablens::run_forward(c, w, ids, {}, true).logits;
  at::Tensor b = m.forward(ids).logits;
  CHECK(at::equal(a, b));
}

namespace {

// What positions do. Without positions a causal attention layer sees the tokens before position t only as
// a multiset (softmax-weighted sums over keys do not depend on their order). Hence, for --positions none:
//  - the first block is permutation-equivariant: permuting the prefix leaves what it computes at the last
//    position unchanged, and swapping the tokens at positions i < j leaves its output at every t > j
//    unchanged; so is a whole one-layer model's output;
//  - stacked causal layers are not: position s's first-layer output depends on how many tokens precede it,
//    so later layers can recover order from the causal mask alone (NoPE models learn positions implicitly,
//    Haviv et al. 2022). The tests check that too, so that nobody mistakes it for a bug.
// Every positional option (learned, sinusoidal, rope, alibi) breaks the symmetry already in the first block.

// Largest change, relative to the largest value, of `what(ids)` at positions `rows` when the prefix
// is reversed / rotated (last token kept), and at positions > 5 when tokens 2 and 5 are swapped.
struct SymmetryChange {
  double prefix = 0;  // last position, prefix permuted
  double swap = 0;    // positions 6.., tokens 2 and 5 swapped
};

SymmetryChange symmetry_change(const std::function<at::Tensor(const std::vector<int64_t>&)>& what,
                               const std::vector<int64_t>& ids) {
  const int64_t T = static_cast<int64_t>(ids.size());
  std::vector<int64_t> rev(ids.rbegin() + 1, ids.rend());
  rev.push_back(ids.back());
  std::vector<int64_t> rot(ids.begin() + 1, ids.end() - 1);
  rot.push_back(ids.front());
  rot.push_back(ids.back());
  std::vector<int64_t> sw = ids;
  std::swap(sw[2], sw[5]);
  at::Tensor base = what(ids);  // [T, n]
  const double scale = base.abs().max().item<double>();
  SymmetryChange c;
  for (auto* p : {&rev, &rot}) c.prefix = std::max(c.prefix, (what(*p)[T - 1] - base[T - 1]).abs().max().item<double>() / scale);
  c.swap = (what(sw).narrow(0, 6, T - 6) - base.narrow(0, 6, T - 6)).abs().max().item<double>() / scale;
  return c;
}

// The first block's attention output added to the residual: resid_mid.0 [T, d].
at::Tensor first_block_of(const vocablens::Model& m, const std::vector<int64_t>& ids) {
  vocablens::CacheSpec spec;
  spec.resid_mid = true;
  spec.layers = {0};
  return m.forward(at::tensor(ids, at::kLong), spec, false).cache.get("resid_mid", 0)[0];
}

// Larger weights than GPT-2's init so that every effect is far above float rounding (support/random_gpt.hpp).
vocablens::Model random_gpt(PositionKind kind, int64_t layers) {
  return vl_test::scaled_random_gpt(kind, layers, 16, 7, "random");
}

const std::vector<int64_t> kToyIds = {11, 42, 7, 99, 3, 64, 25, 80, 5, 17};
const PositionKind kKinds[] = {PositionKind::None, PositionKind::Learned, PositionKind::Sinusoidal, PositionKind::Rotary,
                               PositionKind::ALiBi};

}  // namespace

TEST_CASE("positions: without positions the model is permutation-equivariant; every positional option breaks it",
          "[train][positions]") {
  vocablens::init_runtime();
  for (PositionKind kind : kKinds) {
    INFO(vocablens::to_string(kind));
    vocablens::Model one = random_gpt(kind, 1), two = random_gpt(kind, 2);
    auto out1 = symmetry_change([&](const std::vector<int64_t>& ids) { return vl_test::logits_of(one, ids); }, kToyIds);
    auto blk2 = symmetry_change([&](const std::vector<int64_t>& ids) { return first_block_of(two, ids); }, kToyIds);
    INFO("1-layer logits: prefix " << out1.prefix << ", swap " << out1.swap << "; 2-layer first block: prefix " << blk2.prefix
                                   << ", swap " << blk2.swap);
    if (kind == PositionKind::None) {
      CHECK(out1.prefix < 1e-5);
      CHECK(out1.swap < 1e-5);
      CHECK(blk2.prefix < 1e-5);
      CHECK(blk2.swap < 1e-5);
      // Two causal layers see order through the mask: not a symmetry of the whole 2-layer model.
      auto out2 = symmetry_change([&](const std::vector<int64_t>& ids) { return vl_test::logits_of(two, ids); }, kToyIds);
      CHECK(out2.prefix > 1e-3);
    } else {
      CHECK(out1.prefix > 1e-3);
      CHECK(out1.swap > 1e-3);
      CHECK(blk2.prefix > 1e-3);
    }
  }
}

TEST_CASE("positions: trained models of every kind round-trip through config.json", "[train][positions]") {
  for (PositionKind kind : kKinds) {
    INFO(vocablens::to_string(kind));
    TrainOptions o = tiny(TrainModel::GPT, "pos");
    o.positions = kind;
    o.n_layers = 1;
    o.steps = 30;
    o.lr = 1e-2;
    vocablens::train(o);
    auto cfg = nlohmann::json::parse(vl_test::read_file(o.out_dir + "/config.json"));
    CHECK(cfg.contains("vocablens_positions") == (kind != PositionKind::Learned));
    if (kind != PositionKind::Learned) CHECK(cfg["vocablens_positions"] == vocablens::to_string(kind));
    auto st = vocablens::read_safetensors(o.out_dir + "/model.safetensors");
    CHECK(st.has("wpe.weight") == (kind == PositionKind::Learned));
    vocablens::Model m = vocablens::load_model(o.out_dir);
    REQUIRE(m.config().positions == kind);
    auto c = symmetry_change([&](const std::vector<int64_t>& ids) { return vl_test::logits_of(m, ids); }, kToyIds);
    INFO("prefix " << c.prefix << ", swap " << c.swap);
    if (kind == PositionKind::None) {
      CHECK(c.prefix < 1e-5);
      CHECK(c.swap < 1e-5);
    } else {
      CHECK(c.prefix > 1e-5);
    }
  }
}

// ---- errors ---------------------------------------------------------------------------------------------------

TEST_CASE("train: bad options and inputs", "[train]") {
  TrainOptions o = tiny(TrainModel::GPT, "err");
  o.corpus = "x.txt";  // and synthetic
  CHECK_THROWS_AS(vocablens::train(o), vocablens::UsageError);
  o = tiny(TrainModel::GPT, "err");
  o.out_dir.clear();
  CHECK_THROWS_AS(vocablens::train(o), vocablens::UsageError);
  o = tiny(TrainModel::GPT, "err");
  o.d_model = 30;  // not divisible by 4 heads
  CHECK_THROWS_AS(vocablens::train(o), vocablens::UsageError);
  o = tiny(TrainModel::GPT, "err");
  o.synthetic = false;
  o.corpus = o.out_dir + "/short.txt";
  vl_test::write_file(o.corpus, "a b c d e f g\nh i j\n");
  o.n_ctx = 64;
  o.tokenizer = "";
  CHECK_THROWS_AS(vocablens::train(o), vocablens::UsageError);  // too short for one window (or for a BPE)
  CHECK_THROWS_AS(vocablens::train_model_from_string("lstm"), vocablens::UsageError);
  CHECK(vocablens::train_model_from_string("skip-gram") == TrainModel::SkipGram);
}

// ---- Ctrl-C during train (an interrupted train left a skeleton directory) ------------------------
// The CLI's signal handler records the first SIGINT/SIGTERM inside an InterruptScope (vocablens/interrupt.hpp);
// here the signal is recorded directly, exactly as the handler does, at a chosen moment.

TEST_CASE("train interrupted before its first step removes the directory it created", "[train][interrupt]") {
  TrainOptions o = tiny(TrainModel::GPT, "intr-early");
  o.out_dir += "/run";              // does not exist yet: this run creates it
  vocablens::InterruptScope outer;  // a signal already recorded when train() starts
  REQUIRE(vocablens::detail::record_interrupt(2));
  try {
    vocablens::train(o);
    FAIL("train() ignored the interrupt");
  } catch (const vocablens::Interrupted& e) {
    CHECK(e.exit_code() == 130);
    CHECK(std::string(e.what()).find("before the first training step") != std::string::npos);
  }
  CHECK_FALSE(fs::exists(o.out_dir));
  vocablens::detail::clear_interrupt();
}

TEST_CASE("train interrupted at step 5 keeps a checkpoint; --resume ends byte-identical to an uninterrupted run",
          "[train][interrupt]") {
  TrainOptions whole = tiny(TrainModel::GPT, "intr-whole");
  whole.steps = 14;
  vocablens::train(whole);

  TrainOptions cut = tiny(TrainModel::GPT, "intr-cut");
  cut.steps = 14;
  cut.on_progress = [](const vocablens::TrainProgress& p) {
    if (p.step == 5) vocablens::detail::record_interrupt(15);  // SIGTERM after step 5
  };
  try {
    vocablens::train(cut);
    FAIL("train() ignored the interrupt");
  } catch (const vocablens::Interrupted& e) {
    CHECK(e.exit_code() == 143);
    CHECK(std::string(e.what()).find("interrupted at step 5 of 14") != std::string::npos);
    CHECK(std::string(e.what()).find("--resume") != std::string::npos);
  }
  CHECK(vocablens::interrupt_signal() == 0);  // train's scope closed: nothing left recorded
  CHECK(fs::exists(cut.out_dir + "/checkpoint/params-5.safetensors"));
  CHECK_FALSE(fs::exists(cut.out_dir + "/train_log.json"));  // the run is not finished

  auto r = resume(cut.out_dir);
  CHECK(r.start_step == 5);
  CHECK(r.step == 14);
  CHECK(vl_test::read_file(cut.out_dir + "/model.safetensors") == vl_test::read_file(whole.out_dir + "/model.safetensors"));
}

// Mixtures of experts (Mixtral, Qwen3-MoE, Qwen2-MoE, OLMoE): the router's logits and the experts chosen for every
// layer and token against llama.cpp's own (its graph's ffn_moe_logits-L and ffn_moe_argsort-L, captured by
// tests/llama_ref/lcpp_logits.cpp through the eval callback: committed as llama_router.* and live), on the
// Hugging Face fixtures and their GGUF twins; the router hooks (an edit of the logits re-routes, an expert index
// out of range is refused); the expert weights kept as stored; config files that contradict their experts.
// Logits and residuals against llama.cpp: tests/families_test.cpp and gguf_families_test.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../src/model/expert_gemm.hpp"  // internal: the float32 expert kernel and its switch
#include "../src/model/quant_dot.hpp"    // internal: VOCABLENS_KERNELS's choice, which the kernel honours
#include "fixtures.hpp"
#include "npy_tensor.hpp"
#include "vocablens/error.hpp"
#include "vocablens/hook_site.hpp"
#include "vocablens/hooks.hpp"
#include "vocablens/model.hpp"
#include "vocablens/weight.hpp"

namespace {

const char* const kMoeFamilies[] = {"mixtral", "qwen3moe", "qwen2moe", "olmoe", "gpt_oss"};

std::string moe_dir(const std::string& f) { return std::string(VOCABLENS_SOURCE_DIR) + "/tests/fixtures/families/" + f; }

at::Tensor moe_read_i32(const std::string& path, std::vector<int64_t> shape) {
  std::ifstream f(path, std::ios::binary);
  REQUIRE(f.good());
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<int32_t> v(static_cast<size_t>(n));
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(int32_t)));
  REQUIRE(f.gcount() == static_cast<std::streamsize>(v.size() * sizeof(int32_t)));
  return at::tensor(v, at::kInt).to(at::kLong).view(shape);
}

vocablens::CacheSpec moe_spec() {
  vocablens::CacheSpec s;
  s.router = s.mlp_out = s.resid_mid = true;
  return s;
}

// Ours against llama.cpp's router logits [L, T, E] and expert order [L, T, E] (best first) on every layer and token:
// the logits to 1e-4, the k chosen experts equal in order, and our weights those of the definition applied in
// float64 to llama.cpp's logits (softmax over all experts, its top k, renormalised where the family does; GPT-OSS:
// the softmax over the top k logits alone).
void compare_router(const vocablens::Model& m, const std::vector<int64_t>& ids, const at::Tensor& ref_logits,
                    const at::Tensor& ref_order, const std::string& what) {
  const auto& c = m.config();
  auto out = m.forward(at::tensor(ids, at::kLong), moe_spec());
  double worst = 0;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    INFO(what << " layer " << l);
    const at::Tensor logits = out.cache.get("router_logits", l)[0], idx = out.cache.get("expert_indices", l)[0],
                     w = out.cache.get("expert_weights", l)[0];
    REQUIRE(logits.sizes() == at::IntArrayRef({static_cast<int64_t>(ids.size()), c.n_experts}));
    REQUIRE(idx.sizes() == at::IntArrayRef({static_cast<int64_t>(ids.size()), c.n_experts_used}));
    worst = std::max(worst, (logits - ref_logits[l]).abs().max().item<double>());
    CHECK(at::equal(idx, ref_order[l].narrow(1, 0, c.n_experts_used)));
    const at::Tensor chosen = ref_order[l].narrow(1, 0, c.n_experts_used);
    at::Tensor p = c.expert_weights_topk_softmax ? at::softmax(ref_logits[l].to(at::kDouble).gather(1, chosen), -1)
                                                 : at::softmax(ref_logits[l].to(at::kDouble), -1).gather(1, chosen);
    if (c.expert_weights_norm) p = p / p.sum(-1, true);
    CHECK((w.to(at::kDouble) - p).abs().max().item<double>() <= 1e-5);
  }
  std::printf("%-24s router logits max|d| vs llama.cpp %.2e; expert choice equal on %lld layers x %zu tokens\n", what.c_str(),
              worst, static_cast<long long>(c.n_layers), ids.size());
  CHECK(worst <= 1e-4);
}

// The one line load_model throws for a file or directory; "" when it loads.
std::string moe_load_error(const std::string& path) {
  try {
    vocablens::load_model(path);
  } catch (const vocablens::FormatError& e) { return e.what(); }
  return "";
}

std::string moe_llama_ref() {
  if (const char* e = std::getenv("VOCABLENS_LLAMA_REF")) return e;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "/root") + "/.cache/vocablens/llama-cpp-3.22.1";
}

}  // namespace

TEST_CASE("MoE: router logits and the experts chosen per layer and token equal llama.cpp's, HF and GGUF twins") {
  for (const char* f : kMoeFamilies) {
    const std::string d = moe_dir(f);
    auto ids = vl_test::read_ids_txt(d + "/ids.txt");
    std::vector<std::string> paths = {d, d + "/" + f + ".gguf"};
    if (std::string(f) == "gpt_oss") paths.push_back(d + "/gpt_oss-mxfp4.gguf");  // MXFP4 experts, the same values
    for (const std::string& path : paths) {
      vocablens::Model m = vocablens::load_model(path);
      const auto& c = m.config();
      REQUIRE(c.n_experts == (std::string(f) == "gpt_oss" ? 4 : 8));  // the fixtures' config.json
      REQUIRE(c.n_experts_used == 2);
      const std::vector<int64_t> shape = {c.n_layers, static_cast<int64_t>(ids.size()), c.n_experts};
      compare_router(m, ids, vl_test::read_f32_raw(d + "/llama_router.logits.f32", shape),
                     moe_read_i32(d + "/llama_router.order.i32", shape),
                     std::string(f) + (path == d                                 ? " (HF)"
                                       : path.find("mxfp4") != std::string::npos ? " (GGUF MXFP4)"
                                                                                 : " (GGUF)"));
    }
  }
}

TEST_CASE("MoE live: lcpp_logits's router capture on each GGUF twin agrees with vocablens on the HF directory") {
  const std::string ref = moe_llama_ref();
  const std::string exe = ref + "/bin/lcpp_logits", bins = ref + "/bins/linux-x64";
  INFO("llama.cpp reference expected at " << ref << " (run scripts/setup_llama_ref.sh, or set VOCABLENS_LLAMA_REF)");
  REQUIRE(std::ifstream(exe).good());
  const std::string tmp = vl_test::temp_dir("moe_llama");
  for (const char* f : kMoeFamilies) {
    const std::string d = moe_dir(f);
    std::string out;
    const int rc = vl_test::run_command("'" + exe + "' '" + bins + "' '" + d + "/" + f + ".gguf' '" + d + "/ids.txt' '" + tmp +
                                            "/logits.f32' '" + tmp + "/layers.f32' '" + tmp + "/" + f + "'",
                                        out);
    INFO(out.substr(out.size() > 2000 ? out.size() - 2000 : 0));
    REQUIRE(rc == 0);  // an lcpp_logits older than its source lacks the router argument: rerun setup_llama_ref.sh
    vocablens::Model m = vocablens::load_model(d);
    auto ids = vl_test::read_ids_txt(d + "/ids.txt");
    const std::vector<int64_t> shape = {m.config().n_layers, static_cast<int64_t>(ids.size()), m.config().n_experts};
    compare_router(m, ids, vl_test::read_f32_raw(tmp + "/" + f + ".logits.f32", shape),
                   moe_read_i32(tmp + "/" + f + ".order.i32", shape), std::string(f) + " (live)");
  }
}

TEST_CASE("MoE hooks: an edit of the router logits re-routes; forced experts give exactly those experts' output") {
  vocablens::Model m = vocablens::load_model(moe_dir("mixtral"));
  const auto& c = m.config();
  const auto& L0 = m.weights().layers[0];
  auto ids = vl_test::read_ids_txt(moe_dir("mixtral") + "/ids.txt");
  const at::Tensor x = at::tensor(ids, at::kLong);
  auto base = m.forward(x, moe_spec());
  const at::Tensor base_idx = base.cache.get("expert_indices", 0)[0];
  // Expert 3 made everyone's first choice at layer 0: the routing, and so the logits, change.
  vocablens::HookList h;
  h.add("blocks.0.mlp.hook_router_logits", [](at::Tensor& t) { t.select(-1, 3).add_(100.0); });
  auto edited = vocablens::run_with_hooks(m, x, h, moe_spec());
  const at::Tensor idx = edited.cache.get("expert_indices", 0)[0];
  CHECK((idx.select(1, 0) == 3).all().item<bool>());
  CHECK_FALSE(at::equal(idx, base_idx));
  CHECK((edited.logits - base.logits).abs().max().item<double>() > 1e-3);
  // The router logits recorded are the edited ones (after the hook).
  CHECK((edited.cache.get("router_logits", 0) - base.cache.get("router_logits", 0)).select(-1, 3).min().item<double>() > 99.9);

  // Experts (5, 1) with weights (1, 0) for every token: mlp_out.0 is expert 5's SwiGLU of the normalised stream,
  // computed here in float64 from the stored matrices (RMSNorm, silu(x W1) * (x W3) W2).
  vocablens::HookList force;
  force.add("blocks.0.mlp.hook_expert_indices", [](at::Tensor& t) { t.select(-1, 0).fill_(5), t.select(-1, 1).fill_(1); });
  force.add("blocks.0.mlp.hook_expert_weights", [](at::Tensor& t) { t.select(-1, 0).fill_(1.0), t.select(-1, 1).fill_(0.0); });
  auto forced = vocablens::run_with_hooks(m, x, force, moe_spec());
  const at::Tensor mid = forced.cache.get("resid_mid", 0)[0].to(at::kDouble);
  const at::Tensor hn = mid * at::rsqrt(mid.pow(2).mean(-1, true) + c.norm_eps) * L0.ln2_w.to(at::kDouble);
  const at::Tensor g = at::mm(hn, vocablens::materialize_weight(L0.exp_gate[5]).to(at::kDouble));
  const at::Tensor u = at::mm(hn, vocablens::materialize_weight(L0.exp_up[5]).to(at::kDouble));
  const at::Tensor want = at::mm(g * at::sigmoid(g) * u, vocablens::materialize_weight(L0.exp_down[5]).to(at::kDouble));
  const double dm = (forced.cache.get("mlp_out", 0)[0].to(at::kDouble) - want).abs().max().item<double>();
  INFO("max |mlp_out - expert 5 (float64)| = " << dm);
  CHECK(dm <= 1e-5);
  CHECK(want.abs().max().item<double>() > 0.1);

  // expert_out: slot 0 is expert 5's output for every token (the float64 one above), and mlp_out the weighted
  // sum of the slots.
  const at::Tensor eo = forced.cache.get("expert_out", 0)[0];
  REQUIRE(eo.sizes() == at::IntArrayRef({static_cast<int64_t>(ids.size()), 2, c.d_model}));
  CHECK((eo.select(1, 0).to(at::kDouble) - want).abs().max().item<double>() <= 1e-5);
  const at::Tensor w_base = base.cache.get("expert_weights", 0)[0], o_base = base.cache.get("expert_out", 0)[0];
  const at::Tensor sum = (o_base * w_base.unsqueeze(-1)).sum(1);
  CHECK((sum - base.cache.get("mlp_out", 0)[0]).abs().max().item<double>() <= 1e-6);
  // An edit of expert_out: slot 1 zeroed removes exactly its weighted output from mlp_out.
  vocablens::HookList drop;
  drop.add("blocks.0.mlp.hook_expert_out", [](at::Tensor& t) { t.select(2, 1).zero_(); });
  const at::Tensor dropped = vocablens::run_with_hooks(m, x, drop, moe_spec()).cache.get("mlp_out", 0)[0];
  CHECK((dropped - o_base.select(1, 0) * w_base.select(1, 0).unsqueeze(-1)).abs().max().item<double>() <= 1e-6);

  // Zero weights: nothing is added (Mixtral has no shared expert).
  vocablens::HookList zero;
  zero.add("blocks.1.mlp.hook_expert_weights", [](at::Tensor& t) { t.zero_(); });
  CHECK(vocablens::run_with_hooks(m, x, zero, moe_spec()).cache.get("mlp_out", 1).abs().max().item<double>() == 0.0);
}

TEST_CASE("MoE hooks: an expert index out of range and points the model lacks are one clear line") {
  vocablens::Model m = vocablens::load_model(moe_dir("mixtral"));
  const at::Tensor x = at::tensor(vl_test::read_ids_txt(moe_dir("mixtral") + "/ids.txt"), at::kLong);
  vocablens::HookList bad;
  bad.add("blocks.1.mlp.hook_expert_indices", [](at::Tensor& t) { t.select(-1, 1).fill_(8); });
  CHECK_THROWS_WITH(vocablens::run_with_hooks(m, x, bad),
                    "blocks.1.mlp.hook_expert_indices: expert index 8 is out of range [0, 8)");
  vocablens::HookList neg;
  neg.add("expert_indices.0", [](at::Tensor& t) { t.select(-1, 0).fill_(-1); });
  CHECK_THROWS_WITH(vocablens::run_with_hooks(m, x, neg), Catch::Contains("expert index -1 is out of range [0, 8)"));
  CHECK_THROWS_WITH(
      vocablens::parse_hook_name("blocks.0.mlp.hook_post", m.config()),
      Catch::Contains("hook 'blocks.0.mlp.hook_post': this model's MLP is a mixture of experts without a dense MLP"));
  vocablens::Model dense = vocablens::load_model(moe_dir("qwen3"));
  CHECK_THROWS_WITH(vocablens::parse_hook_name("blocks.0.mlp.hook_router_logits", dense.config()),
                    Catch::Contains("this model's MLP is not a mixture of experts"));
  // Qwen2-MoE's shared expert is a dense MLP: its neurons are mlp.hook_post; the sites list says so.
  vocablens::Model q2 = vocablens::load_model(moe_dir("qwen2moe"));
  CHECK(vocablens::parse_hook_name("blocks.1.mlp.hook_post", q2.config()).short_name() == "mlp_post.1");
  int router = 0, post = 0, out = 0;
  for (const auto& s : vocablens::hook_sites(m.config())) {
    router += s.point == vocablens::HookPoint::RouterLogits;
    out += s.point == vocablens::HookPoint::ExpertOut;
    post += s.point == vocablens::HookPoint::MlpPost;
  }
  CHECK(router == 2);
  CHECK(out == 2);
  CHECK(post == 0);
}

TEST_CASE("MoE: expert matrices stay as stored, one view per expert (never stacked or copied)") {
  vocablens::Model g = vocablens::load_model(moe_dir("mixtral") + "/mixtral.gguf");
  const auto& c = g.config();
  for (const auto& L : g.weights().layers) {
    REQUIRE(L.exp_gate.size() == static_cast<size_t>(c.n_experts));
    for (int64_t e = 1; e < c.n_experts; ++e) {  // ffn_gate_exps: expert e's matrix right after expert e - 1's in the file
      const auto* a = static_cast<const char*>(L.exp_gate[static_cast<size_t>(e - 1)].data_ptr());
      const auto* b = static_cast<const char*>(L.exp_gate[static_cast<size_t>(e)].data_ptr());
      CHECK(b - a == static_cast<std::ptrdiff_t>(c.d_model * c.d_expert * sizeof(float)));
      CHECK(L.exp_down[static_cast<size_t>(e)].sizes() == at::IntArrayRef({c.d_expert, c.d_model}));
    }
  }
  vocablens::Model h = vocablens::load_model(moe_dir("mixtral"));
  const at::Tensor& w = h.weights().layers[1].exp_up[7];
  CHECK(w.sizes() == at::IntArrayRef({c.d_model, c.d_expert}));
  CHECK(w.stride(0) == 1);  // the transpose of the stored [d_expert, d_model] matrix, not a copy
}

TEST_CASE("MoE: a config that contradicts its experts is one line naming the field") {
  auto copy = [](const std::string& f, const std::string& tag) {
    std::string dst = vl_test::temp_dir(tag), out;
    REQUIRE(vl_test::run_command("cp -r '" + moe_dir(f) + "/.' '" + dst + "/'", out) == 0);
    return dst;
  };
  auto edit = [](const std::string& dir, const std::string& from, const std::string& to) {
    std::string s = vl_test::read_file(dir + "/config.json");
    REQUIRE(s.find(from) != std::string::npos);
    s.replace(s.find(from), from.size(), to);
    vl_test::write_file(dir + "/config.json", s);
  };
  struct Edit {
    const char *family, *from, *to, *message;
  };
  const Edit edits[] = {
      {"mixtral", "\"num_local_experts\": 8", "\"num_local_experts\": 4",
       "the config gives 4 experts but 'model.layers.0.block_sparse_moe.gate.weight' routes to 8"},
      {"qwen3moe", "\"num_experts_per_tok\": 2", "\"num_experts_per_tok\": 9",
       "config field 'num_experts_per_tok' = 9: must be between 1 and the number of experts (num_experts = 8)"},
      {"olmoe", "\"clip_qkv\": null", "\"clip_qkv\": 8.0", "config field 'clip_qkv' = 8.0: clipping q, k and v is not supported"},
      {"qwen2moe", "\"mlp_only_layers\": []", "\"mlp_only_layers\": [1]",
       "config field 'mlp_only_layers' = [1]: dense MLP layers among the mixtures"},
  };
  for (const auto& x : edits) {
    auto d = copy(x.family, std::string("moe_cfg_") + x.family);
    edit(d, x.from, x.to);
    CHECK_THAT(moe_load_error(d), Catch::Contains(x.message));
  }
}

TEST_CASE("MoE GGUF: expert counts that contradict each other or the tensors are one line naming the key") {
  const std::string src = moe_dir("mixtral") + "/mixtral.gguf";
  const std::string bytes = vl_test::read_file(src);
  // A uint32 metadata value, located by its key: the key's bytes, then its type (4 bytes), then the value.
  auto patched = [&](const std::string& key, uint32_t value, const std::string& tag) {
    std::string b = bytes;
    const size_t at = b.find(key);
    REQUIRE(at != std::string::npos);
    uint32_t type = 0;
    std::memcpy(&type, b.data() + at + key.size(), 4);
    REQUIRE(type == 4);  // GGUF_TYPE_UINT32, as llama.cpp's converter writes counts
    std::memcpy(&b[at + key.size() + 4], &value, 4);
    const std::string path = vl_test::temp_dir(tag) + "/m.gguf";
    vl_test::write_file(path, b);
    return path;
  };
  CHECK_THAT(moe_load_error(patched("llama.expert_used_count", 9, "moe_gguf_used")),
             Catch::Contains("metadata 'llama.expert_used_count' = 9 exceeds llama.expert_count = 8"));
  CHECK_THAT(moe_load_error(patched("llama.expert_count", 4, "moe_gguf_count")),
             Catch::Contains("tensor 'blk.0.ffn_gate_inp.weight' has ne {64, 8} but the metadata implies {64, 4}"));
}

// A dense all-experts pass (every expert on every token, weighted 0 where not chosen) would carry an expert's NaN
// into every token (NaN x 0 = NaN); experts that run on their routed rows only never touch an unchosen expert.
TEST_CASE("MoE: an expert no token is routed to is never run (its NaN weights change nothing)") {
  for (const std::string& path : {moe_dir("mixtral"), moe_dir("qwen2moe") + "/qwen2moe.gguf"}) {
    INFO(path);
    vocablens::Model m = vocablens::load_model(path);  // this test's own mapping (private pages): others see the file
    const at::Tensor x = at::tensor(vl_test::read_ids_txt(moe_dir("mixtral") + "/ids.txt"), at::kLong);
    vocablens::HookList never7;
    for (int64_t l = 0; l < m.config().n_layers; ++l)
      never7.add("router_logits." + std::to_string(l), [](at::Tensor& t) { t.select(-1, 7).sub_(1000.0); });
    const at::Tensor before = vocablens::run_with_hooks(m, x, never7).logits;
    for (const auto& L : m.weights().layers)
      for (const auto* w : {&L.exp_gate[7], &L.exp_up[7], &L.exp_down[7]}) {
        REQUIRE(w->scalar_type() == at::kFloat);
        const_cast<at::Tensor&>(*w).fill_(std::numeric_limits<float>::quiet_NaN());
      }
    const at::Tensor after = vocablens::run_with_hooks(m, x, never7).logits;
    CHECK(at::isfinite(after).all().item<bool>());
    CHECK(at::equal(before, after));
    // and the NaN is really there: routed to, expert 7 poisons the output (the check names the activation)
    vocablens::HookList always7;
    always7.add("expert_indices.0", [](at::Tensor& t) { t.select(-1, 0).fill_(7); });
    CHECK_THROWS_WITH(vocablens::run_with_hooks(m, x, always7), Catch::Contains("NaN") || Catch::Contains("nan"));
  }
}

// The float32 kernel for an expert's few rows (src/model/expert_gemm.hpp) against the float64 product, on shapes
// that leave partial tiles everywhere (K not a multiple of 16, O not of 6, rows not of 16 or 64), and each row's
// result the same bits whether it runs alone or among others; then a whole forward with the kernel and without it
// (every expert through at::mm, as before the kernel).
TEST_CASE("MoE kernel: expert products equal float64 on odd shapes; a row's bits do not depend on the others") {
  using vocablens::detail::expert_gemm;
  const bool cpu = __builtin_cpu_supports("avx512f") && vocablens::qdot::active_kernel() == vocablens::qdot::Kernel::Avx512Vnni;
  REQUIRE(vocablens::detail::expert_gemm_available() == cpu);
  if (cpu) {
    at::manual_seed(3);
    const int64_t shapes[][3] = {{16, 1, 1}, {37, 13, 17}, {64, 50, 70}, {100, 7, 130}, {512, 48, 64}};
    for (const auto& s : shapes) {
      const int64_t K = s[0], O = s[1], M = s[2], ldx = (M + 15) / 16 * 16;
      INFO("K " << K << " O " << O << " rows " << M);
      const at::Tensor w = at::randn({O, K}).t(), x = at::randn({M, K});  // w: stored rows [O, K], used as [K, O]
      REQUIRE(vocablens::detail::expert_weight_rows(w));
      if (O > 1) CHECK_FALSE(vocablens::detail::expert_weight_rows(w.contiguous()));  // [K, O] rows: not stored rows
      at::Tensor xT = at::zeros({K, ldx}), yT = at::full({O, ldx}, 7.0f);
      xT.narrow(1, 0, M).copy_(x.t());
      expert_gemm(w, xT, yT);
      const at::Tensor want = at::mm(x.to(at::kDouble), w.to(at::kDouble));
      const double err = (yT.narrow(1, 0, M).t().to(at::kDouble) - want).abs().max().item<double>();
      CHECK(err <= 1e-6 * static_cast<double>(K) * want.abs().max().item<double>());
      if (ldx > M) CHECK(yT.narrow(1, M, ldx - M).abs().max().item<double>() == 0.0);  // zero padding gives zeros
      // row M / 2 alone: the same bits as among the M
      at::Tensor x1 = at::zeros({K, 16}), y1 = at::empty({O, 16});
      x1.select(1, 0).copy_(x[M / 2]);
      expert_gemm(w, x1, y1);
      CHECK(at::equal(y1.select(1, 0), yT.select(1, M / 2)));
    }
  }
  vocablens::Model m = vocablens::load_model(moe_dir("mixtral"));
  const at::Tensor x = at::tensor(vl_test::read_ids_txt(moe_dir("mixtral") + "/ids.txt"), at::kLong);
  const at::Tensor with = m.forward(x).logits;
  vocablens::detail::set_expert_gemm(false);
  const at::Tensor without = m.forward(x).logits;
  vocablens::detail::set_expert_gemm(true);
  const double d = (with - without).abs().max().item<double>();
  INFO("max |logits with the kernel - through at::mm| = " << d);
  CHECK(d <= 1e-5);
  CHECK(at::equal(with.argmax(-1), without.argmax(-1)));
  // The expert matrices stored as F16 rows, then as Q8_0 blocks (d = max|w| / 127 per 32 values, written here):
  // under float32 compute the kernel decodes them and must give weight_matmul's tiles' result to float rounding.
  auto q8_0 = [](const at::Tensor& w) {                         // w [K, O] -> a packed Q8_0 [K, O] over rows [O, K]
    const at::Tensor rows = w.t().to(at::kFloat).contiguous();  // the F16 weights of the step before
    const int64_t O = rows.size(0), K = rows.size(1);
    auto q = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(O * K / 32 * 34));
    const float* v = rows.data_ptr<float>();
    for (int64_t b = 0; b < O * K / 32; ++b) {
      float amax = 0;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(v[32 * b + j]));
      const c10::Half dh(amax / 127);
      std::memcpy(q->data() + 34 * b, &dh.x, 2);
      for (int j = 0; j < 32; ++j)
        (*q)[static_cast<size_t>(34 * b + 2 + j)] =
            static_cast<uint8_t>(std::clamp<long>(std::lround(v[32 * b + j] / static_cast<float>(dh)), -127, 127));
    }
    return vocablens::make_packed_weight(q, q->data(), vocablens::GgmlType::Q8_0, O, K).t();
  };
  for (const char* storage : {"F16", "Q8_0"}) {
    INFO(storage);
    for (const auto& L : m.weights().layers)
      for (auto* v : {&L.exp_gate, &L.exp_up, &L.exp_down})
        for (const at::Tensor& w : *v) {
          const at::Tensor was = vocablens::materialize_weight(w);
          const_cast<at::Tensor&>(w) = std::string(storage) == "F16" ? w.t().contiguous().to(at::kHalf).t() : q8_0(w);
          // the stored values are the float32 ones to the storage's precision (Q8_0: half a step of max|w| / 127)
          CHECK((vocablens::materialize_weight(w) - was).abs().max().item<double>() <= was.abs().max().item<double>() / 200);
        }
    REQUIRE(vocablens::weight_storage_name(m.weights().layers[0].exp_down[0]) == storage);
    const at::Tensor kernel = m.forward(x).logits;
    vocablens::detail::set_expert_gemm(false);
    const at::Tensor tiles = m.forward(x).logits;
    vocablens::detail::set_expert_gemm(true);
    CHECK((kernel - tiles).abs().max().item<double>() <= 1e-5);
    CHECK((kernel - with).abs().max().item<double>() > 0.0);  // the stored precision did change the weights
  }
}

// `vocablens experts`: the corpus form counts every token once however the windows cut it (they overlap by one
// token), and with one window it is the prompt form of the same tokens (the prompt form's numbers are checked
// against a float64 forward in tests/python/test_moe.py); bad input is one line and exit != 0.
TEST_CASE("experts: corpus windows count each token once; bad input is one clear line") {
  const std::string cli = vl_test::require_cli();
  if (cli.empty()) return;
  const std::string dir = vl_test::temp_dir("moe_experts");
  const std::string corpus = dir + "/corpus.txt";
  vl_test::write_file(corpus, "the cat sat on the mat and the dog sat on the log, then the cat ran to the dog.");
  const std::string model = vl_test::shq(moe_dir("mixtral"));
  auto run_json = [&](const std::string& args) {
    std::string out;
    REQUIRE(vl_test::run_command(vl_test::shq(cli) + " experts " + model + " " + args + " --format json 2>/dev/null", out) == 0);
    return nlohmann::json::parse(out);
  };
  const auto whole = run_json("--corpus " + vl_test::shq(corpus));
  const auto windows = run_json("--corpus " + vl_test::shq(corpus) + " --window 5");
  const int64_t n = whole["summary"]["positions"].get<int64_t>();
  CHECK(n > 10);
  CHECK(windows["summary"]["positions"].get<int64_t>() == n);
  for (const auto* r : {&whole, &windows}) {
    const auto& load = (*r)["arrays"]["load"]["data"];
    REQUIRE(load.size() == 2);  // 2 layers x 8 experts
    REQUIRE(load[0].size() == 8);
    double l0 = 0, l1 = 0;
    for (size_t e = 0; e < 8; ++e) l0 += load[0][e].get<double>(), l1 += load[1][e].get<double>();
    CHECK(std::fabs(l0 - 2.0) < 1e-12);  // top-2: every token is counted twice per layer
    CHECK(std::fabs(l1 - 2.0) < 1e-12);
  }
  // One window holding every token: the prompt form's numbers for the same text.
  const auto prompt = run_json("--prompt 'the cat sat on the mat and the dog sat on the log, then the cat ran to the dog.'");
  CHECK(prompt["arrays"]["load"] == whole["arrays"]["load"]);

  struct Bad {
    std::string args, message;
  };
  const std::vector<Bad> bad = {
      {model + " --prompt hi --ablate-expert 0.8", "ablate expert '0.8': expert out of range (its layers have 8 experts, 0..7)"},
      {model + " --prompt hi --ablate-expert 5.1", "ablate expert '5.1': layer out of range (the model has 2 layers)"},
      {model + " --prompt hi --ablate-expert x", "ablate expert 'x': expected LAYER.EXPERT, e.g. 0.5"},
      {model + " --prompt hi --scale-expert 0.8=2",
       "scale expert '0.8=2': expert out of range (its layers have 8 experts, 0..7)"},
      {model + " --prompt hi --scale-expert 0.1", "scale expert '0.1': expected LAYER.EXPERT=FACTOR, e.g. 0.5=2"},
      {model + " --prompt hi --scale-expert 0.1=2x", "scale expert '0.1=2x': the factor is not a number"},
      {model + " --prompt hi --scale-expert 0.1=1e999", "scale expert '0.1=1e999': the factor"},
      {model + " --prompt hi --corpus " + vl_test::shq(corpus), "experts: give --prompt or --corpus, not both"},
      {model, "experts: give --prompt or --corpus"},
      {vl_test::shq(moe_dir("qwen3")) + " --prompt hi", "needs a mixture of experts, and this model has none"},
      {vl_test::shq(moe_dir("qwen3")) + " --prompt hi --dry-run", "needs a mixture of experts, and this model has none"},
  };
  for (const auto& b : bad) {
    INFO(b.args);
    std::string out;
    CHECK(vl_test::run_command(vl_test::shq(cli) + " experts " + b.args + " --out " + vl_test::shq(dir + "/bad") + " 2>&1",
                               out) != 0);
    CHECK(out.find(b.message) != std::string::npos);
    CHECK(std::count(out.begin(), out.end(), '\n') == 1);
  }
  CHECK_FALSE(std::filesystem::exists(dir + "/bad/experts.json"));  // nothing half-written
  std::string out;
  CHECK(vl_test::run_command(
            vl_test::shq(cli) + " lens " + vl_test::shq(moe_dir("qwen3")) + " --prompt hi --ablate-expert 0.1 2>&1", out) != 0);
  CHECK(out.find("has none") != std::string::npos);
  CHECK(vl_test::run_command(
            vl_test::shq(cli) + " lens " + model + " --corpus " + vl_test::shq(corpus) + " --ablate-expert 0.1 2>&1", out) != 0);
  CHECK(out.find("--ablate-expert applies to one prompt") != std::string::npos);
  CHECK(vl_test::run_command(
            vl_test::shq(cli) + " lens " + model + " --corpus " + vl_test::shq(corpus) + " --scale-expert 0.1=2 2>&1", out) != 0);
  CHECK(out.find("--scale-expert applies to one prompt") != std::string::npos);
  CHECK(vl_test::run_command(vl_test::shq(cli) + " experts " + model + " --prompt hi --dry-run 2>&1", out) == 0);
}

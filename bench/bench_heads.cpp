// Benchmark of the streamed top-k over heads' vocabulary-space circuits (docs/benchmarks.md, "Parameter
// projections"). GPT-2-small shapes with random weights: V = 50257, d = 768, 12 layers × 12 heads, d_head 64.
//
//   ninja -C build bench_heads && OPENBLAS_CORETYPE=SkylakeX ./build/bench_heads --all
//
// Reports, each as one "key: value" line and, with --json FILE, as JSON:
//  * the machine's float32 GEMM rate: a large square SGEMM (2048³) and the stream's own tile GEMM
//    ([256, 64] × [64, 1024] per worker, every worker busy, no selection pass);
//  * E⁺ of the 50257×768 E (computed, not cached);
//  * top-k pairs of one head's OV circuit, pruning off (the full V² stream) and on;
//  * with --all: every head × {OV, QK} (288 V×V circuits), pruning as chosen;
//  * effective GFLOP/s = 2·V²·d_head / time (the dense product's flops), its fraction of the GEMM rates,
//    and the process's peak RSS.
#include <sys/resource.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <atomic>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "vocablens/heads.hpp"
#include "vocablens/model.hpp"
#include "vocablens/linalg/topk_stream.hpp"
#include "vocablens/unembed.hpp"

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double peak_rss_mb() {
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;
}

vocablens::Model random_gpt2(int64_t V, int64_t d, int64_t L, int64_t H, int64_t dh) {
  vocablens::ModelConfig c;
  c.architecture = "random GPT-2 shapes";
  c.n_layers = L;
  c.d_model = d;
  c.n_heads = H;
  c.n_kv_heads = H;
  c.d_head = dh;
  c.d_mlp = 4 * d;
  c.vocab_size = V;
  c.n_ctx = 1024;
  vocablens::ModelWeights w;
  w.W_E = at::randn({V, d}).mul_(0.1);
  w.W_U = w.W_E.t();
  for (int64_t l = 0; l < L; ++l) {
    vocablens::LayerWeights lw;
    lw.w_q = at::randn({d, H * dh}).mul_(0.036);
    lw.w_k = at::randn({d, H * dh}).mul_(0.036);
    lw.w_v = at::randn({d, H * dh}).mul_(0.036);
    lw.w_o = at::randn({H * dh, d}).mul_(0.036);
    w.layers.push_back(lw);
  }
  return vocablens::Model(c, w, "random");
}

// Square SGEMM rate (GFLOP/s), best of `reps`.
double square_gemm_rate(int64_t n, int reps) {
  at::Tensor a = at::randn({n, n}), b = at::randn({n, n}), c = at::empty({n, n});
  at::mm_out(c, a, b);
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    double t = now_s();
    at::mm_out(c, a, b);
    best = std::max(best, 2.0 * n * n * n / (now_s() - t) / 1e9);
  }
  return best;
}

// The stream's GEMM alone: every worker multiplies [br, r] × [r, bc] tiles into its own buffer, as
// topk_stream does, covering `rows` × m outputs. GFLOP/s, best of `reps`.
double tile_gemm_rate(int64_t rows, int64_t m, int64_t r, int64_t br, int64_t bc, int reps) {
  at::Tensor A = at::randn({rows, r}), B = at::randn({r, m});
  const int64_t tiles = rows / br;
  const int workers = at::get_num_threads();
  double best = 0;
  for (int rep = 0; rep < reps; ++rep) {
    std::atomic<int64_t> next{0};
    double t = now_s();
    vocablens::parallel_workers(workers, [&](int) {
      std::vector<float> buf(static_cast<size_t>(br * bc));
      for (int64_t tile = next++; tile < tiles; tile = next++)
        for (int64_t j0 = 0; j0 < m; j0 += bc) {
          int64_t cj = std::min(bc, m - j0);
          at::Tensor out = at::from_blob(buf.data(), {br, cj}, at::kFloat);
          at::mm_out(out, A.narrow(0, tile * br, br), B.narrow(1, j0, cj));
        }
    });
    best = std::max(best, 2.0 * static_cast<double>(tiles * br) * m * r / (now_s() - t) / 1e9);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t V = 50257, d = 768, L = 12, H = 12, dh = 64, k = 100;
  bool all = false, prune_all = true;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--all") all = true;
    else if (a == "--no-prune") prune_all = false;
    else if (a == "--vocab") V = std::stoll(next());
    else if (a == "--d-model") d = std::stoll(next());
    else if (a == "--layers") L = std::stoll(next());
    else if (a == "--heads") H = std::stoll(next());
    else if (a == "--d-head") dh = std::stoll(next());
    else if (a == "--top-k") k = std::stoll(next());
    else if (a == "--json") json_path = next();
    else {
      std::fprintf(stderr,
                   "usage: bench_heads [--all] [--no-prune] [--vocab V] [--d-model D] [--layers L] [--heads H] "
                   "[--d-head R] [--top-k K] [--json FILE]\n");
      return 2;
    }
  }
  vocablens::init_runtime();
  at::manual_seed(0);
  nlohmann::json out;
  auto report = [&](const std::string& key, const nlohmann::json& v) {
    out[key] = v;
    fmt::print("{}: {}\n", key, v.dump());
    std::fflush(stdout);
  };
  report("threads", at::get_num_threads());
  report("openblas_coretype", std::getenv("OPENBLAS_CORETYPE") ? std::getenv("OPENBLAS_CORETYPE") : "(auto)");
  report("shape", fmt::format("V={} d={} layers={} heads={} d_head={} top_k={}", V, d, L, H, dh, k));

  double sq = square_gemm_rate(2048, 3);
  report("gemm_square_2048_gflops", sq);
  double tile = tile_gemm_rate(std::min<int64_t>(V, 8192), V, dh, 256, 1024, 2);
  report("gemm_stream_tile_gflops", tile);

  vocablens::Model m = random_gpt2(V, d, L, H, dh);
  vocablens::PinvOptions po;
  po.use_cache = false;
  double t0 = now_s();
  vocablens::Pinv p = vocablens::pseudo_inverse(vocablens::unembedding_matrix(m), po);
  report("pinv_seconds", now_s() - t0);
  report("pinv_rank", p.rank);
  const at::Tensor R = p.pinv;
  report("rss_after_setup_mb", peak_rss_mb());

  const double dense = 2.0 * static_cast<double>(V) * static_cast<double>(V) * static_cast<double>(dh);
  auto f = vocablens::head_vocab_circuit(m, R, 0, 0, vocablens::CircuitKind::OV);
  // The stream's BLAS screen (tiles written, then scanned) and its fused screen (compared in registers),
  // pruning off, then the fused one with pruning; the square GEMM rate again right after, since a shared
  // machine's load drifts between the two measures.
  struct Variant {
    const char* tag;
    bool fused, prune;
  };
  for (Variant var : {Variant{"one_head_blas_full", false, false}, Variant{"one_head_full", true, false},
                      Variant{"one_head_pruned", true, true}}) {
    vocablens::TopkStreamOptions o;
    o.k = k;
    o.prune = var.prune;
    o.fused_screen = var.fused;
    vocablens::TopkStreamStats st;
    auto top = vocablens::topk_stream(f.A, f.B, o, &st);
    const std::string tag = var.tag;
    const double sq_after = square_gemm_rate(2048, 3);
    report(tag + "_gemm_square_after_gflops", sq_after);
    report(tag + "_fraction_of_square_gemm_after", dense / st.seconds / 1e9 / sq_after);
    report(tag + "_seconds", st.seconds);
    report(tag + "_effective_gflops", dense / st.seconds / 1e9);
    report(tag + "_fraction_of_square_gemm", dense / st.seconds / 1e9 / sq);
    report(tag + "_fraction_of_tile_gemm", dense / st.seconds / 1e9 / tile);
    report(tag + "_gemm_fraction_multiplied", st.gemm_flops / st.dense_flops);
    report(tag + "_candidates", st.candidates);
    report(tag + "_best", nlohmann::json::array({top.front().i, top.front().j, top.front().value}));
  }
  report("rss_after_one_head_mb", peak_rss_mb());

  if (all) {
    double t = now_s(), gemm = 0;
    int64_t circuits = 0;
    for (int64_t l = 0; l < L; ++l) {
      for (int64_t h = 0; h < H; ++h)
        for (auto kind : {vocablens::CircuitKind::OV, vocablens::CircuitKind::QK}) {
          auto g = vocablens::head_vocab_circuit(m, R, l, h, kind);
          vocablens::TopkStreamOptions o;
          o.k = k;
          o.prune = prune_all;
          vocablens::TopkStreamStats st;
          vocablens::topk_stream(g.A, g.B, o, &st);
          gemm += st.gemm_flops;
          ++circuits;
        }
      double el = now_s() - t;
      fmt::print(stderr, "  layer {} done: {} circuits, {:.1f} s, {:.1f} effective GFLOP/s\n", l, circuits, el,
                 circuits * dense / el / 1e9);
    }
    double el = now_s() - t;
    report("all_circuits", circuits);
    report("all_pruning", prune_all);
    report("all_seconds", el);
    report("all_seconds_per_circuit", el / static_cast<double>(circuits));
    report("all_effective_gflops", circuits * dense / el / 1e9);
    report("all_fraction_of_square_gemm", circuits * dense / el / 1e9 / sq);
    report("all_fraction_of_tile_gemm", circuits * dense / el / 1e9 / tile);
    report("all_gemm_fraction_multiplied", gemm / (circuits * dense));
  }
  report("peak_rss_mb", peak_rss_mb());
  if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
  return 0;
}

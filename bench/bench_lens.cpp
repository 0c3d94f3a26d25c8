// Benchmark of the logit lens: GPT-2-small shape, 1024 tokens, all 13 lens layers, top-10 +
// entropy + KL + cross-entropy + target rank; and the machine's GEMM rate for the same unembedding shape.
//
//   bench_lens MODEL_DIR [--threads N] [--repeat R] [--block P] [--out DIR] [--attn-block B] [--forward-only]
//
// --attn-block sets the attention's tile edge (AttentionPolicy::block: inputs longer than B take the blocked
// path); --forward-only times the forward pass (residual cache as the lens takes it) and exits.
// MODEL_DIR is written by `bench/lens_baseline.py make DIR` (random GPT-2-small weights + ids.npy).
// Prints a JSON object: forward, lens (normalise + GEMM + row passes), GEMM reference rates, peak RSS.
// bench/run_lens_bench.sh runs this and the Python baseline and prints the ratio.
#include <sys/stat.h>
#include <unistd.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>

#include "vocablens/attention.hpp"
#include "vocablens/detail/lens_engine.hpp"
#include "vocablens/lens.hpp"
#include "vocablens/model.hpp"
#include "vocablens/npy.hpp"

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// CPU seconds of the whole process (every thread, user + system). On a shared machine wall time measures the
// other tenants as much as this program; CPU time measures the work done (it still rises somewhat under load:
// caches and memory bandwidth are shared), so the benchmark reports both.
double cpu_now() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

double peak_rss_mb() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;
}

// Best time of `repeat` runs of C = A @ B into a preallocated C.
double time_mm(const at::Tensor& A, const at::Tensor& B, int repeat) {
  at::Tensor C = at::empty({A.size(0), B.size(1)}, A.options());
  at::mm_out(C, A, B);  // warm-up (page faults of C, thread pool)
  double best = std::numeric_limits<double>::infinity();
  for (int r = 0; r < repeat; ++r) {
    double t0 = now();
    at::mm_out(C, A, B);
    best = std::min(best, now() - t0);
  }
  return best;
}

// OpenBLAS's kernel family ("SkylakeX", "Haswell", "Prescott", ...) when LibTorch's BLAS is OpenBLAS.
// Debian's OpenBLAS 0.3.21 does not know recent Xeons and falls back to Prescott (SSE3) kernels unless
// OPENBLAS_CORETYPE is set; the benchmark reports which kernels ran.
std::string blas_core() {
  using Fn = char* (*)();
  if (auto f = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "openblas_get_corename"))) return f();
  return "unknown (not OpenBLAS?)";
}

}  // namespace

int run(int argc, char** argv);

// Every failure is one line and exit 1 (an uncaught exception was an abort, signal 6: a missing --out
// directory was found only after the timed runs, when the first array was written).
int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_lens: error: %s\n", e.what());
    return 1;
  }
}

int run(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: bench_lens MODEL_DIR [--threads N] [--repeat R] [--block P] [--out DIR]\n"
                 "                  [--attn-block B] [--forward-only]\n");
    return 2;
  }
  std::string dir = argv[1], out;
  int threads = 0, repeat = 3;
  int64_t block = 0, attn_block = 0;
  bool forward_only = false;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--forward-only") {  // flag (no value): time the forward pass alone, then exit
      --i;
      continue;
    }
    if (a == "--threads") threads = std::atoi(argv[i + 1]);
    else if (a == "--repeat") repeat = std::atoi(argv[i + 1]);
    else if (a == "--block") block = std::atoll(argv[i + 1]);
    else if (a == "--out") out = argv[i + 1];
    else if (a == "--attn-block") attn_block = std::atoll(argv[i + 1]);
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  {
    int values = 0;
    for (int i = 2; i < argc; ++i) forward_only = forward_only || std::string(argv[i]) == "--forward-only";
    for (int i = 2; i < argc; ++i) values += std::string(argv[i]) == "--forward-only" ? 0 : 1;
    if (values % 2 != 0) {
      std::fprintf(stderr, "bench_lens: %s needs a value\n", argv[argc - 1]);
      return 2;
    }
  }
  if (!out.empty()) {
    // Checked before the (long) timed runs, not when the arrays are written at the end.
    struct stat st {};
    if (::stat(out.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      std::fprintf(stderr, "bench_lens: --out %s: no such directory (create it first)\n", out.c_str());
      return 1;
    }
    if (::access(out.c_str(), W_OK) != 0) {
      std::fprintf(stderr, "bench_lens: --out %s: directory is not writable\n", out.c_str());
      return 1;
    }
  }
  if (threads > 0) setenv("VOCABLENS_THREADS", std::to_string(threads).c_str(), 1);
  vocablens::init_runtime();
  at::NoGradGuard no_grad;
  if (attn_block > 0) {  // the attention's tile edge (and the length up to which it materialises)
    vocablens::AttentionPolicy pol = vocablens::attention_policy();
    pol.block = attn_block;
    vocablens::set_attention_policy(pol);
  }

  double t0 = now();
  vocablens::Model m = vocablens::load_model(dir);
  double load_s = now() - t0;
  auto idarr = vocablens::read_npy(dir + "/ids.npy");
  std::vector<int64_t> ids(static_cast<size_t>(idarr.numel()));
  std::memcpy(ids.data(), idarr.bytes.data(), idarr.bytes.size());
  const int64_t T = static_cast<int64_t>(ids.size()), d = m.config().d_model, V = m.config().vocab_size;

  if (forward_only) {
    at::Tensor idt = at::tensor(ids, at::kLong);
    vocablens::CacheSpec spec;
    spec.resid_pre = spec.resid_post = true;
    m.forward(idt, spec, false);  // warm-up
    double best = 1e30, cbest = 1e30;
    for (int r = 0; r < repeat; ++r) {
      double a = now(), ca = cpu_now();
      auto o = m.forward(idt, spec, false);
      best = std::min(best, now() - a);
      cbest = std::min(cbest, cpu_now() - ca);
    }
    nlohmann::json j = {{"forward_s", best},
                        {"cpu_forward_s", cbest},
                        {"attention_block", vocablens::attention_policy().block},
                        {"threads", at::get_num_threads()}};
    std::cout << j.dump() << std::endl;
    return 0;
  }

  vocablens::LensOptions opt;
  opt.top_k = 10;
  opt.block_positions = block;
  vocablens::lens_detail::LensEngine eng(m, opt);
  const int64_t n = static_cast<int64_t>(eng.layers().size());
  std::vector<int64_t> targets(static_cast<size_t>(T), -1);
  for (int64_t t = 0; t + 1 < T; ++t) targets[static_cast<size_t>(t)] = ids[static_cast<size_t>(t + 1)];
  at::Tensor idt = at::tensor(ids, at::kLong);

  // Warm-up: one full lens (thread pool, page faults of the weights and buffers).
  vocablens::lens_detail::LensStats st;
  eng.run(ids, targets, opt.top_k, st);

  // Paired reference: right after each lens run, the same unembedding work as plain at::mm calls (all
  // n * T rows, in the lens's block shape, into one reused buffer). On a shared machine the load drifts;
  // comparing each lens run with a GEMM run taken under the same conditions keeps the ratio honest.
  const int64_t Pb = std::min(T, block > 0 ? block : vocablens::lens_detail::default_block_positions(n, V));
  at::Tensor refA = at::randn({n * Pb, d});
  at::Tensor refC = at::empty({n * Pb, V});
  auto paired_gemm = [&]() {
    double a = now();
    for (int64_t t0 = 0; t0 < T; t0 += Pb) {
      const int64_t rows = n * std::min(Pb, T - t0);
      at::Tensor C = refC.narrow(0, 0, rows);
      at::mm_out(C, refA.narrow(0, 0, rows), m.W_U());
    }
    return now() - a;
  };
  paired_gemm();
  nlohmann::json pairs = nlohmann::json::array();
  double best_fraction = 0, best_paired_gemm = 1e30;

  double best_fwd = 1e30, best_norm = 1e30, best_lens = 1e30, best_gemm = 1e30, best_stats = 1e30, best_total = 1e30;
  double cpu_fwd = 1e30, cpu_norm = 1e30, cpu_lens = 1e30, cpu_total = 1e30;
  for (int r = 0; r < repeat; ++r) {
    double a = now(), ca = cpu_now();
    at::Tensor normed = eng.normalised_stack(idt);  // forward with cache + final norm per layer
    double b = now(), cb = cpu_now();
    eng.run_normalised(normed, ids, targets, opt.top_k, st);
    double c = now(), cc = cpu_now();
    cpu_norm = std::min(cpu_norm, cb - ca);
    cpu_lens = std::min(cpu_lens, cc - cb);
    cpu_total = std::min(cpu_total, cc - ca);
    double g = paired_gemm();
    pairs.push_back({{"lens_s", c - b}, {"plain_mm_s", g}, {"fraction", g / (c - b)}});
    best_fraction = std::max(best_fraction, g / (c - b));
    best_paired_gemm = std::min(best_paired_gemm, g);
    best_norm = std::min(best_norm, b - a);
    best_lens = std::min(best_lens, c - b);
    best_gemm = std::min(best_gemm, st.gemm_seconds);
    best_stats = std::min(best_stats, st.stats_seconds);
    best_total = std::min(best_total, c - a);
  }
  // The forward pass alone (same cache), for the split.
  for (int r = 0; r < repeat; ++r) {
    vocablens::CacheSpec spec;
    spec.resid_pre = spec.resid_post = true;
    double a = now(), ca = cpu_now();
    auto o = m.forward(idt, spec, false);
    best_fwd = std::min(best_fwd, now() - a);
    cpu_fwd = std::min(cpu_fwd, cpu_now() - ca);
  }

  refA = at::Tensor();
  refC = at::Tensor();
  const double lens_peak_rss = peak_rss_mb();  // before the GEMM reference allocates its own buffers

  // The machine's GEMM rate for this shape: a plain at::mm [M, d] x [d, V], with W_U as the model holds it
  // (a transposed view of W_E when tied) and as a contiguous [d, V] copy; M = the lens's block rows and T.
  const int64_t P = block > 0 ? block : vocablens::lens_detail::default_block_positions(n, V);
  const int64_t Mblock = n * std::min(P, T);
  nlohmann::json gemm = nlohmann::json::array();
  double machine_gflops = 0;
  at::Tensor Wc = m.W_U().contiguous();
  for (int64_t M : {Mblock, T}) {
    at::Tensor A = at::randn({M, d});
    for (int layout = 0; layout < 2; ++layout) {
      const at::Tensor& B = layout == 0 ? m.W_U() : Wc;
      double s = time_mm(A, B, repeat);
      double gf = 2.0 * static_cast<double>(M) * static_cast<double>(d) * static_cast<double>(V) / s / 1e9;
      machine_gflops = std::max(machine_gflops, gf);
      gemm.push_back({{"M", M},
                      {"K", d},
                      {"N", V},
                      {"B", layout == 0 ? "W_U as held" : "contiguous [d,V]"},
                      {"seconds", s},
                      {"gflops", gf}});
    }
  }
  Wc = at::Tensor();

  const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(T) * static_cast<double>(d) * static_cast<double>(V);
  nlohmann::json j = {{"impl", "vocablens (C++, fused)"},
                      {"threads", at::get_num_threads()},
                      {"blas_core", blas_core()},
                      {"tokens", T},
                      {"layers", n},
                      {"vocab", V},
                      {"d_model", d},
                      {"block_rows", Mblock},
                      {"load_s", load_s},
                      {"forward_s", best_fwd},
                      {"forward_and_norm_s", best_norm},
                      {"lens_s", best_lens},
                      {"lens_gemm_s", best_gemm},
                      {"lens_stats_s", best_stats},
                      {"total_s", best_total},
                      {"cpu_forward_s", cpu_fwd},
                      {"cpu_forward_and_norm_s", cpu_norm},
                      {"cpu_lens_s", cpu_lens},
                      {"cpu_total_s", cpu_total},
                      {"unembed_gflop", flops / 1e9},
                      {"lens_gflops", flops / best_lens / 1e9},
                      {"lens_gemm_gflops", flops / best_gemm / 1e9},
                      {"machine_gemm_gflops", machine_gflops},
                      {"lens_fraction_of_machine_gemm", flops / best_lens / 1e9 / machine_gflops},
                      {"paired_plain_mm_gflops", flops / best_paired_gemm / 1e9},
                      {"paired_fraction_best", best_fraction},
                      {"pairs", pairs},
                      {"gemm_reference", gemm},
                      {"peak_rss_mb", lens_peak_rss},
                      {"peak_rss_mb_incl_gemm_reference", peak_rss_mb()}};
  std::cout << j.dump() << std::endl;

  if (!out.empty()) {
    // Arrays for the comparison with the baseline (run_lens_bench.sh).
    vocablens::LensResult r = vocablens::logit_lens(m, ids, opt);
    vocablens::write_npy(out + "/vocablens_entropy.npy", vocablens::NdArray::f32({n, T}, r.entropy.data()));
    vocablens::write_npy(out + "/vocablens_kl.npy", vocablens::NdArray::f32({n, T}, r.kl_final.data()));
    vocablens::write_npy(out + "/vocablens_top_ids.npy", vocablens::NdArray::i64({n, T, 10}, r.top_ids.data()));
    vocablens::write_npy(out + "/vocablens_top_p.npy", vocablens::NdArray::f32({n, T, 10}, r.top_probs.data()));
  }
  return 0;
}

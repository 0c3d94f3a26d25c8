// Embedding-geometry benchmark (GPT-2-small shape by default: random E 50257 x 768, seed 1234):
//  - top-k singular values/vectors of E with vocablens::matrix_spectrum (Gram + Spectra; optionally the
//    matrix-free Lanczos operator), to compare with torch.linalg.svd (bench/geometry_baseline.py);
//  - the exact k-NN graph (k = 10) with vocablens::knn_graph, to compare with FAISS IndexFlatIP
//    (bench/faiss_knn.cpp) on the same unit rows.
// Writes E.npy, U.npy (unit rows), sv.npy (top-k σ), knn_indices.npy, knn_scores.npy into --out and prints
// one JSON object with the timings. Driven by bench/run_geometry_bench.sh.
//
//   ninja -C build bench_geometry && build/bench_geometry --out /tmp/geo-bench
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>

#include "vocablens/detail/atomic_file.hpp"
#include "vocablens/knn.hpp"
#include "vocablens/model.hpp"
#include "vocablens/neighbours.hpp"
#include "vocablens/npy.hpp"
#include "vocablens/spectrum.hpp"
#include "bench_clock.hpp"

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
// Process CPU time (all threads): on a shared machine wall time depends on the load, CPU time less so.
void usage() {
  std::fprintf(stderr,
               "usage: bench_geometry --out DIR [--rows 50257] [--dim 768] [--k 64] [--knn-k 10] [--block 2048]\n"
               "                      [--reps 3] [--lanczos] [--no-spectrum] [--no-knn] [--no-save]\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::string out;
  int64_t rows = 50257, dim = 768, k = 64, knn_k = 10, block = 2048, reps = 3;
  bool lanczos = false, do_spectrum = true, do_knn = true, save = true;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        usage();
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--out") out = next();
    else if (a == "--rows") rows = std::stoll(next());
    else if (a == "--dim") dim = std::stoll(next());
    else if (a == "--k") k = std::stoll(next());
    else if (a == "--knn-k") knn_k = std::stoll(next());
    else if (a == "--block") block = std::stoll(next());
    else if (a == "--reps") reps = std::stoll(next());
    else if (a == "--lanczos") lanczos = true;
    else if (a == "--no-spectrum") do_spectrum = false;
    else if (a == "--no-knn") do_knn = false;
    else if (a == "--no-save") save = false;
    else {
      usage();
      return 2;
    }
  }
  if (out.empty()) {
    usage();
    return 2;
  }
  vocablens::init_runtime();
  if (save) vocablens::ensure_directory(out);
  nlohmann::json report = {{"rows", rows}, {"dim", dim}, {"threads", at::get_num_threads()}};

  at::manual_seed(1234);
  at::Tensor E = at::randn({rows, dim}, at::kFloat);
  if (save) {
    vocablens::write_npy(out + "/E.npy", vocablens::NdArray::f32({rows, dim}, E.data_ptr<float>()));
    // The unit rows exactly as knn_graph forms them (float64 norms, rounded once to float32).
    at::Tensor Ed = E.to(at::kDouble);
    at::Tensor U = (Ed / Ed.norm(2, 1, true)).to(at::kFloat).contiguous();
    vocablens::write_npy(out + "/U.npy", vocablens::NdArray::f32({rows, dim}, U.data_ptr<float>()));
  }

  if (do_spectrum) {
    vocablens::SpectrumOptions o;
    o.k = k;
    o.loadings = 0;
    o.full_spectrum = false;
    o.method = vocablens::SpectrumMethod::Gram;
    double best = 1e300, best_cpu = 1e300;
    vocablens::SpectrumResult s;
    for (int64_t r = 0; r < reps; ++r) {
      auto t = Clock::now();
      double c0 = vl_bench::cpu_now();
      s = vocablens::matrix_spectrum(E, o, "E");
      best = std::min(best, since(t));
      best_cpu = std::min(best_cpu, vl_bench::cpu_now() - c0);
    }
    report["spectrum_gram"] = {{"k", k},
                               {"seconds_best", best},
                               {"cpu_seconds_best", best_cpu},
                               {"reps", reps},
                               {"seconds_gram", s.seconds_gram},
                               {"seconds_spectra", s.seconds_solve},
                               {"operator_products", s.operator_products},
                               {"restarts", s.iterations},
                               {"solver", s.solver},
                               {"sigma_1", s.singular_values.front()},
                               {"sigma_k", s.singular_values.back()}};
    if (save) vocablens::write_npy(out + "/sv.npy", vocablens::NdArray::f64({k}, s.singular_values.data()));
    // The default call (full spectrum, covariance, loadings) for reference.
    {
      vocablens::SpectrumOptions full;
      full.k = k;
      auto t = Clock::now();
      auto f = vocablens::matrix_spectrum(E, full, "E");
      report["spectrum_full_default"] = {{"seconds", since(t)}, {"effective_rank", f.effective_rank}};
    }
    if (lanczos) {
      o.method = vocablens::SpectrumMethod::Lanczos;
      auto t = Clock::now();
      double c0 = vl_bench::cpu_now();
      auto l = vocablens::matrix_spectrum(E, o, "E");
      double lcpu = vl_bench::cpu_now() - c0;
      double worst = 0;
      for (int64_t j = 0; j < k; ++j)
        worst = std::max(worst, std::abs(l.singular_values[static_cast<size_t>(j)] - s.singular_values[static_cast<size_t>(j)]) /
                                    s.singular_values[static_cast<size_t>(j)]);
      report["spectrum_lanczos"] = {{"seconds", since(t)},
                                    {"cpu_seconds", lcpu},
                                    {"operator_products", l.operator_products},
                                    {"restarts", l.iterations},
                                    {"max_rel_diff_vs_gram", worst}};
    }
    std::fprintf(stderr, "spectrum done: %s\n", report["spectrum_gram"].dump().c_str());
  }

  if (do_knn) {
    vocablens::KnnOptions o;
    o.k = knn_k;
    o.block = block;
    auto t = Clock::now();
    double c0 = vl_bench::cpu_now();
    auto g = vocablens::knn_graph(E, o);
    double sec = since(t), cpu = vl_bench::cpu_now() - c0;
    report["knn"] = {{"k", knn_k},         {"block", block},         {"seconds", sec},
                     {"cpu_seconds", cpu}, {"rescored", g.rescored}, {"fallback_rows", g.fallback_rows},
                     {"margin", g.margin}};
    if (save) {
      vocablens::write_npy(out + "/knn_indices.npy", vocablens::NdArray::i64({rows, knn_k}, g.indices.data()));
      vocablens::write_npy(out + "/knn_scores.npy", vocablens::NdArray::f64({rows, knn_k}, g.scores.data()));
    }
  }
  std::printf("%s\n", report.dump(2).c_str());
  return 0;
}

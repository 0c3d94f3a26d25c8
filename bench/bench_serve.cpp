// In-process baseline for `vocablens serve`'s speed (bench/run_serve_bench.sh, docs/benchmarks.md): the lens of a
// 64-token prompt through run_analysis (what a POST /api/lens runs), and with result_to_json (what it sends).
//
//   ninja -C build bench_serve && ./build/bench_serve MODEL_DIR [REPEATS=10] [TOKENS=64]
// Prompt r is the ids (1000 + TOKENS*r + i) % V, as bench/serve_bench.py sends them (a new prompt each time:
// the server's cache never answers). Prints one JSON line of medians in milliseconds.
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "vocablens/analysis_registry.hpp"
#include "vocablens/export.hpp"
#include "vocablens/model.hpp"
#include "vocablens/tokenizer.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_serve MODEL_DIR [REPEATS] [TOKENS]\n");
    return 2;
  }
  const int reps = argc > 2 ? std::atoi(argv[2]) : 10;
  const int T = argc > 3 ? std::atoi(argv[3]) : 64;
  // As the CLI's main() does (src/cli/main.cpp): keep activation buffers in the heap. The CLI's other start-up
  // step, OpenBLAS's fast kernels, is OPENBLAS_CORETYPE, set for both processes by bench/run_serve_bench.sh.
  ::mallopt(M_MMAP_THRESHOLD, 32 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 256 << 20);
  try {
    vocablens::init_runtime();
    vocablens::Model m = vocablens::load_model(argv[1]);
    vocablens::adapt_threads_to(m);  // as the server does
    auto tok = vocablens::load_tokenizer_for(argv[1]);
    const auto& lens = vocablens::find_analysis("lens");
    const int64_t V = m.config().vocab_size;
    std::vector<double> analysis_ms, json_ms;
    for (int r = -1; r < reps; ++r) {  // r = -1: warm-up
      std::vector<int64_t> ids;
      for (int i = 0; i < T; ++i) ids.push_back((1000 + int64_t{T} * (r + 1) + i) % V);
      nlohmann::json given = {{"prompt", ids}, {"top_k", 10}};
      auto t0 = std::chrono::steady_clock::now();
      vocablens::Result res = vocablens::run_analysis(lens, m, tok.get(), given, vocablens::Surface::Http);
      auto t1 = std::chrono::steady_clock::now();
      std::string doc = vocablens::result_to_json(res, true);
      auto t2 = std::chrono::steady_clock::now();
      if (r < 0) continue;
      analysis_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      json_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t0).count());
    }
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    std::printf("{\"tokens\": %d, \"repeats\": %d, \"analysis_ms\": %.2f, \"analysis_and_json_ms\": %.2f}\n", T, reps,
                median(analysis_ms), median(json_ms));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_serve: %s\n", e.what());
    return 1;
  }
  return 0;
}

// Memory and speed of a model kept in its stored dtype: load, one forward over N tokens, the full
// logit lens (every layer, every position, top-10 + statistics), peak RSS.
//
//   bench_gguf MODEL N_TOKENS [REPEAT] [--dtype float32|bfloat16|int8]
//
// MODEL: anything load_model reads (bench/make_7b.py writes a 7B-shaped BF16 safetensors directory and
// GGUF files). N seeded random ids. Prints one JSON object; bench/run_gguf_bench.sh runs it beside llama.cpp.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "vocablens/lens.hpp"
#include "vocablens/model.hpp"
#include "vocablens/weight.hpp"

namespace {
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
// CPU seconds of the whole process (all threads): less sensitive than wall time to other processes on a
// shared machine (bench/run_gguf_bench.sh reports both).
double cpu_s() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + 1e-6 * (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}
double peak_rss_mb() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: bench_gguf MODEL N_TOKENS [REPEAT] [--dtype float32|bfloat16|int8]\n");
    return 2;
  }
  vocablens::init_runtime();
  const std::string path = argv[1];
  const int64_t n = std::atoll(argv[2]);
  int repeat = 1;
  for (int i = 3; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--dtype") && i + 1 < argc)
      vocablens::set_compute_dtype(vocablens::compute_dtype_from_string(argv[++i]));
    else repeat = std::atoi(argv[i]);
  }
  nlohmann::json out;
  out["model"] = path;
  out["threads"] = at::get_num_threads();
  out["dtype"] = vocablens::compute_dtype_name(vocablens::compute_dtype());
  double t0 = now();
  vocablens::Model m = vocablens::load_model(path);
  out["load_s"] = now() - t0;
  out["weights"] = m.config().weight_dtype;
  out["rss_after_load_mb"] = peak_rss_mb();
  std::mt19937 rng(1);
  std::vector<int64_t> ids(static_cast<size_t>(n));
  for (auto& x : ids) x = 3 + static_cast<int64_t>(rng() % static_cast<uint32_t>(m.config().vocab_size - 3));
  at::Tensor t = at::tensor(ids, at::kLong);
  for (int r = 0; r < repeat; ++r) {
    t0 = now();
    double c0 = cpu_s();
    auto f = m.forward(t);
    const double s = now() - t0;
    out["forward_s"].push_back(s);
    out["forward_cpu_s"].push_back(cpu_s() - c0);
    out["forward_tok_per_s"].push_back(static_cast<double>(n) / s);
    std::fprintf(stderr, "forward %.2f s\n", s);
    // The blocks alone (no logits): what llama.cpp's forward does with logits of the last position only
    // (bench/lcpp_bench.cpp), to within one row of the unembedding.
    t0 = now();
    c0 = cpu_s();
    auto fb = m.forward(t, vocablens::CacheSpec{}, false);
    out["blocks_s"].push_back(now() - t0);
    out["blocks_cpu_s"].push_back(cpu_s() - c0);
  }
  for (int r = 0; r < repeat; ++r) {
    t0 = now();
    double c0 = cpu_s();
    auto lens = vocablens::logit_lens(m, ids);
    const double s = now() - t0;
    out["lens_s"].push_back(s);
    out["lens_cpu_s"].push_back(cpu_s() - c0);
    std::fprintf(stderr, "lens %.2f s (%lld layers)\n", s, static_cast<long long>(lens.n_layers()));
  }
  out["peak_rss_mb"] = peak_rss_mb();
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

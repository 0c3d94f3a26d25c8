// Benchmark of SAE feature logit weights (docs/benchmarks.md, "SAE feature logits"): the streamed exact
// top-k / bottom-k of W_dec @ W_U (vocablens::feature_logits) against the dense baseline that forms the
// d_sae × V product and takes torch-style topk of each row, in the same run. Random weights of GPT-2-small
// shapes by default (V = 50257, d = 768, d_sae = 24576), decoder rows of unit norm as SAELens saves them.
//
//   ninja -C build bench_feature_logits && ./build/bench_feature_logits [--d-sae N] [--vocab V] [--d D] [--k K]
//                                                                     [--sides int8,float32,dense] [--check 1]
//
// Sides: int8 = feature_logits with the int8 screen (the default where available), float32 = the same with the
// float32 screen (the previous method), dense = the baseline. --check 1 also compares the int8 and float32
// screens' lists entry for entry (ids and float64 values, ==) in one process. Times are CPU seconds of the
// process (user + system, getrusage) and wall seconds.
//
// Each side runs in a fresh process (this program with --side stream|dense) so that each one's peak RSS is
// its own; the parent prints both, minus the resident size once the weights exist, and the ratios.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <string>

#include <fmt/format.h>

#include "vocablens/features.hpp"
#include "vocablens/model.hpp"
#include "vocablens/sae.hpp"

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double rss_mb() {  // current resident size
  std::ifstream f("/proc/self/statm");
  long pages = 0, res = 0;
  f >> pages >> res;
  return static_cast<double>(res) * static_cast<double>(::sysconf(_SC_PAGESIZE)) / 1048576.0;
}

double cpu_s() {
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

double peak_rss_mb() {
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;
}

// Runs this program again for one side and reads back its "RESULT cpu_s peak_mb base_mb wall_s" line: each side
// in a fresh process, so that its peak RSS is its own (a fork of a process whose OpenMP/BLAS threads exist
// can hang the child).
std::array<double, 4> run_side(const std::string& self, const std::string& side, const std::string& args) {
  std::array<double, 4> r{-1, -1, -1, -1};
  FILE* p = ::popen((self + " --side " + side + args).c_str(), "r");
  if (!p) return r;
  char line[512];
  while (std::fgets(line, sizeof line, p)) {
    if (std::sscanf(line, "RESULT %lf %lf %lf %lf", &r[0], &r[1], &r[2], &r[3]) == 4) continue;
    std::fputs(line, stdout);
  }
  ::pclose(p);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t V = 50257, d = 768, n = 24576, k = 10;
  bool check = false;
  std::string side, args, sides = "int8,float32,dense";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--side") {
      side = argv[i + 1];
      continue;
    }
    if (a == "--sides") {
      sides = argv[i + 1];
      continue;
    }
    args += " " + a + " " + argv[i + 1];
    int64_t v = std::atoll(argv[i + 1]);
    if (a == "--d-sae") n = v;
    else if (a == "--vocab") V = v;
    else if (a == "--d") d = v;
    else if (a == "--k") k = v;
    else if (a == "--check") check = v != 0;
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  vocablens::init_runtime();  // threads (VOCABLENS_THREADS), BLAS set-up, as the CLI
  at::manual_seed(0);
  vocablens::ModelConfig c;
  c.architecture = "random GPT-2 shapes";
  c.n_layers = 1;
  c.d_model = d;
  c.n_heads = 12;
  c.n_kv_heads = 12;
  c.d_head = d / 12;
  c.d_mlp = 4 * d;
  c.vocab_size = V;
  c.n_ctx = 1024;
  vocablens::ModelWeights w;
  w.W_E = at::randn({V, d}).mul_(0.1);
  w.W_U = w.W_E.t();
  w.layers.resize(1);
  vocablens::Model m(c, w, "random");
  vocablens::Sae sae;
  sae.source = "random SAE";
  sae.d_in = sae.d_out = d;
  sae.d_sae = n;
  sae.W_dec = at::randn({n, d});
  sae.W_dec.div_(sae.W_dec.norm(2, {1}, true));
  sae.W_enc = sae.W_dec.t();
  sae.b_enc = at::zeros({n});
  sae.b_dec = at::zeros({d});
  const double base = rss_mb();
  if (side == "int8" || side == "float32") {
    vocablens::FeatureLogitsOptions o;
    o.top_k = k;
    o.screen = side;
    double c = cpu_s(), t = now_s();
    auto a = vocablens::feature_logits(m, sae, o);
    t = now_s() - t;
    c = cpu_s() - c;
    std::printf("%s: screen %s, feature 0 best token %ld, survivors %.1f / finalists %.1f per feature and end\n", side.c_str(),
                a.screen.c_str(), static_cast<long>(a.top[0][0].j), static_cast<double>(a.survivors) / static_cast<double>(2 * n),
                static_cast<double>(a.finalists) / static_cast<double>(2 * n));
    if (check) {
      o.screen = side == "int8" ? "float32" : "int8";
      auto b = vocablens::feature_logits(m, sae, o);
      int64_t diff = 0;
      for (size_t f = 0; f < a.top.size(); ++f)
        for (size_t q = 0; q < a.top[f].size(); ++q) {
          diff += a.top[f][q].j != b.top[f][q].j || a.top[f][q].value != b.top[f][q].value;
          diff += a.bottom[f][q].j != b.bottom[f][q].j || a.bottom[f][q].value != b.bottom[f][q].value;
        }
      std::printf("check: %s vs %s screen: %ld of %ld entries differ\n", a.screen.c_str(), b.screen.c_str(),
                  static_cast<long>(diff), static_cast<long>(2 * n * k));
    }
    std::printf("RESULT %f %f %f %f\n", c, peak_rss_mb(), base, t);
    return 0;
  }
  if (side == "dense") {
    double c = cpu_s(), t = now_s();
    at::Tensor L = at::mm(sae.W_dec, m.W_U());  // [d_sae, V] float32: the dense baseline
    auto top = L.topk(k, 1);
    auto bot = L.topk(k, 1, /*largest=*/false);
    t = now_s() - t;
    c = cpu_s() - c;
    std::printf("dense: feature 0 best token %ld\nRESULT %f %f %f %f\n",
                static_cast<long>(std::get<1>(top)[0][0].item<int64_t>()), c, peak_rss_mb(), base, t);
    return 0;
  }
  fmt::print("shapes: d_sae {} · V {} · d {} · k {} · threads {}\n", n, V, d, k, at::get_num_threads());
  std::fflush(stdout);
  std::map<std::string, std::array<double, 4>> res;
  std::string rest = sides + ",";
  for (size_t p = 0; (p = rest.find(',')) != std::string::npos; rest.erase(0, p + 1)) {
    std::string sd = rest.substr(0, p);
    if (sd.empty()) continue;
    res[sd] = run_side(argv[0], sd, args + (check && sd == "int8" ? " --check 1" : ""));
    const auto& x = res[sd];
    fmt::print("{:8s} CPU {:7.2f} s · wall {:7.2f} s · peak RSS {:5.0f} MB (+{:.0f} MB over the weights)\n", sd, x[0], x[3], x[1],
               x[1] - x[2]);
    std::fflush(stdout);
  }
  if (res.count("dense"))
    for (const auto& [sd, x] : res)
      if (sd != "dense")
        fmt::print("dense / {}: CPU {:.2f}x · wall {:.2f}x · extra memory {:.1f}x\n", sd, res["dense"][0] / x[0],
                   res["dense"][3] / x[3], (res["dense"][1] - res["dense"][2]) / std::max(1.0, x[1] - x[2]));
  return 0;
}

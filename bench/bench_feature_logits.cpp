// Benchmark of SAE feature logit weights (docs/benchmarks.md, "SAE feature logits"): the streamed exact
// top-k / bottom-k of W_dec @ W_U (vocablens::feature_logits) against the dense baseline that forms the
// d_sae × V product and takes torch-style topk of each row, in the same run. Random weights of GPT-2-small
// shapes by default (V = 50257, d = 768, d_sae = 24576), decoder rows of unit norm as SAELens saves them.
//
//   ninja -C build bench_feature_logits && ./build/bench_feature_logits [--d-sae N] [--vocab V] [--d D] [--k K]
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

double peak_rss_mb() {
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;
}

// Runs this program again for one side and reads back its "RESULT seconds peak_mb base_mb" line: each side
// in a fresh process, so that its peak RSS is its own (a fork of a process whose OpenMP/BLAS threads exist
// can hang the child).
std::array<double, 3> run_side(const std::string& self, const std::string& side, const std::string& args) {
  std::array<double, 3> r{-1, -1, -1};
  FILE* p = ::popen((self + " --side " + side + args).c_str(), "r");
  if (!p) return r;
  char line[512];
  while (std::fgets(line, sizeof line, p)) {
    if (std::sscanf(line, "RESULT %lf %lf %lf", &r[0], &r[1], &r[2]) == 3) continue;
    std::fputs(line, stdout);
  }
  ::pclose(p);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t V = 50257, d = 768, n = 24576, k = 10;
  std::string side, args;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--side") {
      side = argv[i + 1];
      continue;
    }
    args += " " + a + " " + argv[i + 1];
    int64_t v = std::atoll(argv[i + 1]);
    if (a == "--d-sae") n = v;
    else if (a == "--vocab") V = v;
    else if (a == "--d") d = v;
    else if (a == "--k") k = v;
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
  if (side == "stream") {
    vocablens::FeatureLogitsOptions o;
    o.top_k = k;
    double t = now_s();
    auto a = vocablens::feature_logits(m, sae, o);
    t = now_s() - t;
    std::printf("stream: feature 0 best token %ld\nRESULT %f %f %f\n", static_cast<long>(a.top[0][0].j), t,
                peak_rss_mb(), base);
    return 0;
  }
  if (side == "dense") {
    double t = now_s();
    at::Tensor L = at::mm(sae.W_dec, m.W_U());  // [d_sae, V] float32: the dense baseline
    auto top = L.topk(k, 1);
    auto bot = L.topk(k, 1, /*largest=*/false);
    t = now_s() - t;
    std::printf("dense: feature 0 best token %ld\nRESULT %f %f %f\n",
                static_cast<long>(std::get<1>(top)[0][0].item<int64_t>()), t, peak_rss_mb(), base);
    return 0;
  }
  fmt::print("shapes: d_sae {} · V {} · d {} · k {} · threads {}\n", n, V, d, k, at::get_num_threads());
  std::fflush(stdout);
  auto s_ = run_side(argv[0], "stream", args);
  auto d_ = run_side(argv[0], "dense", args);
  fmt::print("stream (feature_logits, top+bottom {}): {:.2f} s, peak RSS {:.0f} MB (+{:.0f} MB over the weights)\n", k,
             s_[0], s_[1], s_[1] - s_[2]);
  fmt::print("dense (W_dec @ W_U, topk both ends):  {:.2f} s, peak RSS {:.0f} MB (+{:.0f} MB over the weights)\n",
             d_[0], d_[1], d_[1] - d_[2]);
  fmt::print("speed ratio dense/stream: {:.2f}x · extra-memory ratio dense/stream: {:.1f}x\n", d_[0] / s_[0],
             (d_[1] - d_[2]) / std::max(1.0, s_[1] - s_[2]));
  return 0;
}

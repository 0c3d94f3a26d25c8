// Benchmark of SAE feature logit weights (docs/benchmarks.md, "SAE feature logits"): the streamed exact
// top-k / bottom-k of W_dec @ W_U (vocablens::feature_logits) against the dense baseline that forms the
// d_sae × V product and takes torch-style topk of each row, in the same run. Random weights of GPT-2-small
// shapes by default (V = 50257, d = 768, d_sae = 24576), decoder rows of unit norm as SAELens saves them.
//
//   ninja -C build bench_feature_logits && ./build/bench_feature_logits [--d-sae N] [--vocab V] [--d D] [--k K]
//
// Each side runs in its own forked child so that each one's peak memory can be read (RUSAGE_CHILDREN's
// ru_maxrss, minus the resident size at the fork, which both share); the parent prints both and the ratios.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

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

// Runs fn in a child; returns {seconds (as the child measured), child's peak RSS in MB}.
std::pair<double, double> in_child(const std::function<double()>& fn) {
  int fds[2];
  if (::pipe(fds) != 0) std::abort();
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    double t = fn();
    if (::write(fds[1], &t, sizeof t) != sizeof t) _exit(2);
    _exit(0);
  }
  ::close(fds[1]);
  double t = -1;
  if (::read(fds[0], &t, sizeof t) != sizeof t) t = -1;
  ::close(fds[0]);
  int status = 0;
  struct rusage ru {};
  ::wait4(pid, &status, 0, &ru);
  return {t, static_cast<double>(ru.ru_maxrss) / 1024.0};
}

}  // namespace

int main(int argc, char** argv) {
  int64_t V = 50257, d = 768, n = 24576, k = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
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
  fmt::print("shapes: d_sae {} · V {} · d {} · k {} · threads {} · resident before {:.0f} MB\n", n, V, d, k,
             at::get_num_threads(), base);

  auto [ts, ms] = in_child([&] {
    vocablens::FeatureLogitsOptions o;
    o.top_k = k;
    double t = now_s();
    auto a = vocablens::feature_logits(m, sae, o);
    t = now_s() - t;
    std::fprintf(stderr, "stream: feature 0 best token %ld\n", static_cast<long>(a.top[0][0].j));
    return t;
  });
  auto [td, md] = in_child([&] {
    double t = now_s();
    at::Tensor L = at::mm(sae.W_dec, m.W_U());  // [d_sae, V] float32: the dense baseline
    auto top = L.topk(k, 1);
    auto bot = L.topk(k, 1, /*largest=*/false);
    t = now_s() - t;
    std::fprintf(stderr, "dense: feature 0 best token %ld\n", static_cast<long>(std::get<1>(top)[0][0].item<int64_t>()));
    return t;
  });
  fmt::print("stream (feature_logits, top+bottom {}): {:.2f} s, peak RSS {:.0f} MB (+{:.0f} MB)\n", k, ts, ms, ms - base);
  fmt::print("dense (W_dec @ W_U, topk both ends):  {:.2f} s, peak RSS {:.0f} MB (+{:.0f} MB)\n", td, md, md - base);
  fmt::print("speed ratio dense/stream: {:.2f}x · extra-memory ratio dense/stream: {:.1f}x\n", td / ts,
             (md - base) / std::max(1.0, ms - base));
  return 0;
}

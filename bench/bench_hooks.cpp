// Hook overhead benchmark: Model::forward (no hooks) vs run_with_hooks with (a) an empty HookList,
// (b) one read-only hook, (c) a zero-ablation hook on one head, (d) per-head results hooked on every layer;
// plus one `activation_patching` over resid. Process CPU time per forward (median of rounds), ratio to (0).
//
//   ninja -C build bench_hooks && VOCABLENS_THREADS=1 build/bench_hooks ../shared/fixtures/gpt2-tiny [T] [reps]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include <ATen/Parallel.h>

#include "vocablens/hooks.hpp"
#include "vocablens/model.hpp"
#include "vocablens/patching.hpp"
#include "bench_clock.hpp"

namespace {

// Median over 7 rounds of the mean CPU seconds of `reps` calls.
double measure(int reps, const std::function<void()>& f) {
  std::vector<double> r;
  f();  // warm-up
  for (int round = 0; round < 7; ++round) {
    double t0 = vl_bench::cpu_now();
    for (int i = 0; i < reps; ++i) f();
    r.push_back((vl_bench::cpu_now() - t0) / reps);
  }
  std::sort(r.begin(), r.end());
  return r[3];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_hooks MODEL [T=64] [reps=20]\n");
    return 2;
  }
  vocablens::init_runtime();
  auto m = vocablens::load_model(argv[1]);
  const int64_t T = argc > 2 ? std::atoll(argv[2]) : 64;
  const int reps = argc > 3 ? std::atoi(argv[3]) : 20;
  std::vector<int64_t> ids;
  for (int64_t t = 0; t < T; ++t) ids.push_back((t * 7919 + 13) % m.config().vocab_size);
  at::Tensor x = at::tensor(ids, at::kLong);

  const double base = measure(reps, [&] { m.forward(x); });
  vocablens::HookList empty;
  const double e = measure(reps, [&] { vocablens::run_with_hooks(m, x, empty); });
  vocablens::HookList read;
  read.add("blocks.1.hook_resid_pre", [](at::Tensor&) {});
  const double rd = measure(reps, [&] { vocablens::run_with_hooks(m, x, read); });
  vocablens::HookList abl;
  abl.add("blocks.1.attn.hook_z", [](at::Tensor& z) { z.select(2, 0).zero_(); });
  const double ab = measure(reps, [&] { vocablens::run_with_hooks(m, x, abl); });
  vocablens::HookList res;
  for (int64_t l = 0; l < m.config().n_layers; ++l) res.add("result." + std::to_string(l), [](at::Tensor&) {});
  const double rs = measure(reps, [&] { vocablens::run_with_hooks(m, x, res); });
  std::vector<int64_t> corrupt = ids;
  corrupt[static_cast<size_t>(T / 2)] = (corrupt[static_cast<size_t>(T / 2)] + 1) % m.config().vocab_size;
  vocablens::PatchOptions po;
  po.target = 13;
  const double pt = measure(1, [&] { vocablens::activation_patching(m, ids, corrupt, po); });

  std::printf("model %s, T = %lld, threads %d; CPU seconds per call (median of 7 rounds of %d)\n", argv[1],
              static_cast<long long>(T), at::get_num_threads(), reps);
  std::printf("%-44s %10.5f  x%.3f\n", "(0) Model::forward", base, 1.0);
  std::printf("%-44s %10.5f  x%.3f\n", "(a) run_with_hooks, empty HookList", e, e / base);
  std::printf("%-44s %10.5f  x%.3f\n", "(b) one read-only hook (resid_pre.1)", rd, rd / base);
  std::printf("%-44s %10.5f  x%.3f\n", "(c) zero-ablate one head (z.1)", ab, ab / base);
  std::printf("%-44s %10.5f  x%.3f\n", "(d) per-head results hooked on every layer", rs, rs / base);
  std::printf("%-44s %10.5f  x%.1f (%lld patched runs)\n", "activation_patching --over resid", pt, pt / base,
              static_cast<long long>(m.config().n_layers * T));
  return 0;
}

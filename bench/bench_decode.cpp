// Decoding benchmark: greedy decoding with the KV cache (Model::generate_greedy, vocablens/kv_cache.hpp)
// against the same decoding by full passes over the whole prefix at every step (what generate did before),
// same model, same prompt, same run; and a batch of 32 sequences stepped one position at a time (as
// sample_corpus) against full [32, t] passes. Process CPU seconds (best of 3), the ratio, and whether the
// tokens agree.
//
//   ninja -C build bench_decode && VOCABLENS_THREADS=1 build/bench_decode ../shared/fixtures/stories260K/stories260K.bin [steps]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include "vocablens/kv_cache.hpp"
#include "vocablens/model.hpp"
#include "bench_clock.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_decode MODEL [steps]\n");
    return 2;
  }
  vocablens::init_runtime();
  const auto m = vocablens::load_model(argv[1]);
  const int64_t n_ctx = m.config().n_ctx;
  const int64_t steps = std::min<int64_t>(argc > 2 ? std::atoll(argv[2]) : 200, n_ctx - 1);
  const std::vector<int64_t> prompt = {1};
  at::NoGradGuard ng;

  std::vector<int64_t> cached, full;
  const double t_cached = vl_bench::best_of(3, [&] { cached = m.generate_greedy(prompt, steps); });
  const double t_full = vl_bench::best_of(3, [&] {
    full = prompt;
    for (int64_t s = 0; s < steps; ++s)
      full.push_back(m.forward(at::tensor(full, at::kLong)).logits[0][-1].argmax().item<int64_t>());
  });
  std::printf("greedy, %lld steps: cached %.3f CPU-s, full passes %.3f CPU-s, ratio %.2fx, tokens %s\n",
              static_cast<long long>(steps), t_cached, t_full, t_full / t_cached, cached == full ? "identical" : "DIFFER");

  const int64_t B = 32, len = std::min<int64_t>(64, n_ctx);
  at::Tensor last_cached, last_full;
  const double b_cached = vl_bench::best_of(3, [&] {
    vocablens::KVCache kv;
    kv.reserve(len);
    at::Tensor tok = at::ones({B, 1}, at::kLong);
    for (int64_t t = 1; t < len; ++t) {
      last_cached = vocablens::forward_cached(m, tok, kv).logits.select(1, 0);
      tok = last_cached.argmax(-1, true);
    }
  });
  const double b_full = vl_bench::best_of(3, [&] {
    at::Tensor seq = at::ones({B, 1}, at::kLong);
    for (int64_t t = 1; t < len; ++t) {
      last_full = m.forward(seq).logits.select(1, t - 1);
      seq = at::cat({seq, last_full.argmax(-1, true)}, 1);
    }
  });
  std::printf("batch %lld x %lld positions: cached %.3f CPU-s, full passes %.3f CPU-s, ratio %.2fx, max |dlogit| %.2e\n",
              static_cast<long long>(B), static_cast<long long>(len), b_cached, b_full, b_full / b_cached,
              (last_cached - last_full).abs().max().item<double>());
  return 0;
}

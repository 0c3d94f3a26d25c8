// Benchmark for `lens --prompts`: per-prompt lens (what logit_lens_batch does: one forward and one
// lens pass per prompt) against a batched forward (prompts right-padded to the longest, one forward [P, T_max],
// then each prompt's lens pass on its own rows; exact under causal attention, checked here).
//
//   bench_lens_batch MODEL [--prompts P] [--min-tokens A] [--max-tokens B] [--repeat R] [--threads N] [--top-k K]
//
// Prompts are random token ids (fixed seed) of A..B tokens. Prints one JSON object: best-of-R seconds of both
// ways, their ratio, and the largest difference between them (target probability, KL; ranks equal or not).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vocablens/detail/lens_engine.hpp"
#include "vocablens/lens.hpp"
#include "vocablens/model.hpp"

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct Out {
  std::vector<std::vector<float>> prob, kl;
  std::vector<std::vector<int64_t>> rank;
};

std::vector<int64_t> next_targets(const std::vector<int64_t>& ids) {
  std::vector<int64_t> t(ids.size(), -1);
  for (size_t i = 0; i + 1 < ids.size(); ++i) t[i] = ids[i + 1];
  return t;
}

void keep(Out& o, const vocablens::lens_detail::LensStats& s) {
  std::vector<float> p, k;
  std::vector<int64_t> r;
  for (size_t a = 0; a < s.lse.size(); ++a) {
    const int64_t li = static_cast<int64_t>(a) / s.T, t = static_cast<int64_t>(a) % s.T;
    p.push_back(t + 1 < s.T ? static_cast<float>(std::exp(s.z_target[a] - s.lse[a])) : 0.f);
    r.push_back(t + 1 < s.T ? 1 + s.target_greater[a] : -1);
    k.push_back(static_cast<float>(s.kl(li, t)));
  }
  o.prob.push_back(p);
  o.kl.push_back(k);
  o.rank.push_back(r);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: bench_lens_batch MODEL [--prompts P] [--min-tokens A] [--max-tokens B] [--repeat R] [--threads N] "
                 "[--top-k K]\n";
    return 2;
  }
  std::string path = argv[1];
  int64_t P = 50, lo = 8, hi = 22, repeat = 3, threads = 0, k = 10;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    int64_t v = std::atoll(argv[i + 1]);
    if (a == "--prompts") P = v;
    else if (a == "--min-tokens") lo = v;
    else if (a == "--max-tokens") hi = v;
    else if (a == "--repeat") repeat = v;
    else if (a == "--threads") threads = v;
    else if (a == "--top-k") k = v;
    else {
      std::cerr << "unknown option " << a << "\n";
      return 2;
    }
  }
  vocablens::init_runtime();
  if (threads > 0) at::set_num_threads(static_cast<int>(threads));
  vocablens::Model m = vocablens::load_model(path);
  const int64_t V = m.config().vocab_size;
  std::mt19937_64 rng(21);
  std::vector<std::vector<int64_t>> prompts;
  int64_t Tmax = 0, tokens = 0;
  for (int64_t p = 0; p < P; ++p) {
    int64_t T = lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
    std::vector<int64_t> ids;
    for (int64_t t = 0; t < T; ++t) ids.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(V)));
    Tmax = std::max(Tmax, T);
    tokens += T;
    prompts.push_back(ids);
  }
  vocablens::LensOptions opt;
  opt.top_k = k;
  vocablens::lens_detail::LensEngine eng(m, opt);
  const auto& layers = eng.layers();

  double best_single = 1e30, best_batch = 1e30, fwd_batch = 1e30;
  Out single, batch;
  for (int64_t r = 0; r < repeat; ++r) {
    Out o;
    double t0 = now();
    for (const auto& ids : prompts) {
      vocablens::lens_detail::LensStats s;
      eng.run(ids, next_targets(ids), k, s);
      keep(o, s);
    }
    best_single = std::min(best_single, now() - t0);
    single = o;

    Out b;
    t0 = now();
    // Right-pad with each prompt's last id: under causal attention a position never sees later ones.
    at::Tensor ids = at::empty({P, Tmax}, at::kLong);
    for (int64_t p = 0; p < P; ++p)
      for (int64_t t = 0; t < Tmax; ++t)
        ids[p][t] =
            prompts[static_cast<size_t>(p)]
                   [static_cast<size_t>(std::min<int64_t>(t, static_cast<int64_t>(prompts[static_cast<size_t>(p)].size()) - 1))];
    vocablens::CacheSpec spec;
    spec.resid_pre = spec.resid_post = true;
    auto out = m.forward(ids, spec, false);
    std::vector<at::Tensor> hooks;
    for (const auto& L : layers) hooks.push_back(out.cache.get(L.hook));
    at::Tensor all = at::stack(hooks, 1);  // [P, n, T_max, d]
    const double t_fwd = now() - t0;
    for (int64_t p = 0; p < P; ++p) {
      const auto& pi = prompts[static_cast<size_t>(p)];
      at::Tensor normed = m.final_norm(all[p].narrow(1, 0, static_cast<int64_t>(pi.size()))).contiguous();
      vocablens::lens_detail::LensStats s;
      eng.run_normalised(normed, pi, next_targets(pi), k, s);
      keep(b, s);
    }
    best_batch = std::min(best_batch, now() - t0);
    fwd_batch = std::min(fwd_batch, t_fwd);
    batch = b;
  }
  double dprob = 0, dkl = 0;
  int64_t rank_diff = 0;
  for (size_t p = 0; p < single.prob.size(); ++p)
    for (size_t a = 0; a < single.prob[p].size(); ++a) {
      dprob = std::max(dprob, static_cast<double>(std::fabs(single.prob[p][a] - batch.prob[p][a])));
      dkl = std::max(dkl, static_cast<double>(std::fabs(single.kl[p][a] - batch.kl[p][a])));
      rank_diff += single.rank[p][a] != batch.rank[p][a];
    }
  nlohmann::json j = {{"model", path},
                      {"params_vocab", V},
                      {"lens_layers", layers.size()},
                      {"prompts", P},
                      {"tokens", tokens},
                      {"padded_tokens", P * Tmax},
                      {"threads", at::get_num_threads()},
                      {"repeat", repeat},
                      {"per_prompt_seconds", best_single},
                      {"batched_seconds", best_batch},
                      {"batched_forward_seconds", fwd_batch},
                      {"per_prompt_over_batched", best_single / best_batch},
                      {"max_abs_diff_target_prob", dprob},
                      {"max_abs_diff_kl_final", dkl},
                      {"target_rank_mismatches", rank_diff}};
  std::cout << j.dump(1) << "\n";
  return 0;
}

// Text sampled from a model (see sample_corpus in vocablens/tuned_lens.hpp): the held-out and training corpora
// of the tuned-lens demonstration come from the model's own distribution at temperature 1.
#include <cmath>
#include <random>

#include "vocablens/error.hpp"
#include "vocablens/kv_cache.hpp"
#include "vocablens/model.hpp"
#include "vocablens/tokenizer.hpp"
#include "vocablens/tuned_lens.hpp"

namespace vocablens {

std::string sample_corpus(const Model& m, const Tokenizer& tok, int64_t n_tokens, uint64_t seed, double temperature,
                          int64_t max_len) {
  const auto& c = m.config();
  if (n_tokens < 1) throw UsageError("--tokens must be >= 1");
  if (!(temperature > 0)) throw UsageError("--temperature must be > 0");
  const int64_t len = max_len > 0 ? std::min(max_len, c.n_ctx) : std::min<int64_t>(c.n_ctx, 256);
  if (len < 2) throw UsageError("--max-len must be >= 2");
  const int64_t bos = tok.bos_id() >= 0 ? tok.bos_id() : (c.bos_token_id >= 0 ? c.bos_token_id : 1);
  const int64_t eos = tok.eos_id() >= 0 ? tok.eos_id() : c.eos_token_id;
  std::mt19937_64 rng(seed);
  std::string out;
  int64_t drawn = 0;
  constexpr int64_t B = kSampleCorpusBatch;  // sequences drawn side by side, one position per step for all
  while (drawn < n_tokens) {
    std::vector<std::vector<int64_t>> seqs(B, std::vector<int64_t>{bos});
    std::vector<bool> done(B, false);
    std::vector<int64_t> fed(B);
    KVCache kv;  // each step runs only position t - 1 (vocablens/kv_cache.hpp)
    kv.reserve(len);
    for (int64_t t = 1; t < len && drawn < n_tokens; ++t) {
      // Position t - 1 of each sequence; a finished one goes on with BOS, which nobody reads.
      for (int64_t b = 0; b < B; ++b)
        fed[static_cast<size_t>(b)] = t - 1 < static_cast<int64_t>(seqs[b].size()) ? seqs[b][static_cast<size_t>(t - 1)] : bos;
      auto fo = forward_cached(m, at::tensor(fed, at::kLong).reshape({B, 1}), kv);
      at::Tensor z = at::softmax(fo.logits.select(1, 0).to(at::kDouble).div(temperature), -1).contiguous();
      const double* zp = z.data_ptr<double>();
      bool any = false;
      for (int64_t b = 0; b < B && drawn < n_tokens; ++b) {
        if (done[static_cast<size_t>(b)]) continue;
        const double u = static_cast<double>(rng() >> 11) * (1.0 / 9007199254740992.0);
        double acc = 0;
        int64_t pick = c.vocab_size - 1;
        for (int64_t j = 0; j < c.vocab_size; ++j) {
          acc += zp[b * c.vocab_size + j];
          if (u < acc) {
            pick = j;
            break;
          }
        }
        ++drawn;
        if (pick == bos || pick == eos) done[static_cast<size_t>(b)] = true;
        else seqs[static_cast<size_t>(b)].push_back(pick);
        any = true;
      }
      bool all_done = true;
      for (bool d : done) all_done = all_done && d;
      if (!any || all_done) break;
    }
    for (const auto& sq : seqs)
      if (sq.size() > 1) out += tok.decode(std::vector<int64_t>(sq.begin() + 1, sq.end())) + "\n";
  }
  return out;
}

}  // namespace vocablens

// GloVe: co-occurrence counts, AdaGrad fit, and the `train --model glove` run (see vocablens/glove.hpp).
#include "vocablens/glove.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "train/safetensors_writer.hpp"
#include "train/trainer.hpp"
#include "vocablens/detail/atomic_file.hpp"
#include "vocablens/error.hpp"
#include "vocablens/interrupt.hpp"
#include "vocablens/npy.hpp"

namespace vocablens {

GloveCounts glove_cooccurrence(const TokenStream& s, int64_t vocab, int64_t window, bool distance_weighting) {
  if (window < 1) throw UsageError("glove: --window must be >= 1");
  if (vocab < 1 || vocab > (int64_t(1) << 31) - 1) throw UsageError("glove: vocabulary size out of range");
  GloveCounts c;
  c.vocab = vocab;
  c.window = window;
  // One accumulator per (row, col), summed in corpus order: for each token (the reference's "target"),
  // its left neighbours from nearest to farthest, X[left][target] then X[target][left].
  std::unordered_map<uint64_t, double> acc;
  acc.reserve(1 << 16);
  std::vector<uint8_t> seen(static_cast<size_t>(vocab), 0);
  auto key = [](int64_t a, int64_t b) { return (static_cast<uint64_t>(a) << 32) | static_cast<uint64_t>(b); };
  for (size_t l = 0; l < s.line_starts.size(); ++l) {
    const int64_t a = s.line_starts[l], e = s.line_ends[l];
    for (int64_t j = a; j < e; ++j) {
      const int64_t w2 = s.ids[static_cast<size_t>(j)];
      if (w2 < 0 || w2 >= vocab) throw UsageError("glove: token id " + std::to_string(w2) + " outside the vocabulary");
      if (!seen[static_cast<size_t>(w2)]) {
        seen[static_cast<size_t>(w2)] = 1;
        ++c.distinct;
      }
      ++c.tokens;
      for (int64_t k = j - 1; k >= std::max(a, j - window); --k) {
        const int64_t w1 = s.ids[static_cast<size_t>(k)];
        const double v = distance_weighting ? 1.0 / static_cast<double>(j - k) : 1.0;
        acc[key(w1, w2)] += v;
        acc[key(w2, w1)] += v;
      }
    }
  }
  c.entries.reserve(acc.size());
  for (auto& [k, x] : acc) c.entries.push_back({static_cast<int32_t>(k >> 32), static_cast<int32_t>(k & 0xffffffffu), x});
  std::sort(c.entries.begin(), c.entries.end(),
            [](const GloveEntry& p, const GloveEntry& q) { return p.row != q.row ? p.row < q.row : p.col < q.col; });
  return c;
}

GloveParams glove_init(int64_t vocab, int64_t dim, uint64_t seed) {
  if (vocab < 1 || dim < 1) throw UsageError("glove: vocabulary and vector size must be positive");
  GloveParams p;
  p.vocab = vocab;
  p.dim = dim;
  std::mt19937_64 rng(seed);
  const size_t n = static_cast<size_t>(vocab * dim), V = static_cast<size_t>(vocab);
  auto draw = [&](std::vector<double>& v, size_t k) {
    v.resize(k);
    for (double& x : v) x = (train_detail::uniform01(rng) - 0.5) / static_cast<double>(dim);
  };
  draw(p.w, n);
  draw(p.b, V);
  draw(p.wc, n);
  draw(p.bc, V);
  p.gw.assign(n, 1.0);
  p.gwc.assign(n, 1.0);
  p.gb.assign(V, 1.0);
  p.gbc.assign(V, 1.0);
  return p;
}

GloveFit::GloveFit(const GloveCounts& counts, const GloveFitOptions& o) : c_(counts), o_(o) {
  if (!(o.x_max > 0) || !std::isfinite(o.x_max)) throw UsageError("glove: --x-max must be a positive number");
  if (!(o.alpha >= 0) || !std::isfinite(o.alpha)) throw UsageError("glove: --alpha must be >= 0");
  if (!(o.eta > 0) || !std::isfinite(o.eta)) throw UsageError("glove: --lr must be a positive number");
  const size_t n = counts.entries.size();
  order_.resize(n);
  weight_.resize(n);
  logx_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    order_[i] = static_cast<uint32_t>(i);
    const double x = counts.entries[i].x;
    weight_[i] = x > o.x_max ? 1.0 : std::pow(x / o.x_max, o.alpha);
    logx_[i] = std::log(x);
  }
  // One Fisher–Yates shuffle, used by every epoch (the reference shuffles its file once).
  std::mt19937_64 rng(o.seed ^ 0x5DEECE66Dull);
  for (size_t i = n; i > 1; --i) std::swap(order_[i - 1], order_[train_detail::below(rng, i)]);
}

double GloveFit::epoch(GloveParams& p) const {
  const int64_t d = p.dim;
  double total = 0;
  std::vector<double> u1(static_cast<size_t>(d)), u2(static_cast<size_t>(d));
  for (uint32_t idx : order_) {
    const GloveEntry& e = c_.entries[idx];
    double* w1 = p.w.data() + static_cast<size_t>(e.row) * d;
    double* w2 = p.wc.data() + static_cast<size_t>(e.col) * d;
    double* g1 = p.gw.data() + static_cast<size_t>(e.row) * d;
    double* g2 = p.gwc.data() + static_cast<size_t>(e.col) * d;
    double diff = 0;
    for (int64_t k = 0; k < d; ++k) diff += w1[k] * w2[k];
    diff += p.b[static_cast<size_t>(e.row)] + p.bc[static_cast<size_t>(e.col)] - logx_[idx];
    double fdiff = weight_[idx] * diff;
    if (!std::isfinite(diff) || !std::isfinite(fdiff))
      throw Error("glove: the fit diverged (non-finite residual); try a lower --lr");
    total += 0.5 * fdiff * diff;
    double s1 = 0, s2 = 0;
    for (int64_t k = 0; k < d; ++k) {
      const double t1 = std::clamp(fdiff * w2[k], -o_.grad_clip, o_.grad_clip) * o_.eta;
      const double t2 = std::clamp(fdiff * w1[k], -o_.grad_clip, o_.grad_clip) * o_.eta;
      u1[static_cast<size_t>(k)] = t1 / std::sqrt(g1[k]);
      u2[static_cast<size_t>(k)] = t2 / std::sqrt(g2[k]);
      s1 += u1[static_cast<size_t>(k)];
      s2 += u2[static_cast<size_t>(k)];
      g1[k] += t1 * t1;
      g2[k] += t2 * t2;
    }
    if (std::isfinite(s1) && std::isfinite(s2))
      for (int64_t k = 0; k < d; ++k) {
        w1[k] -= u1[static_cast<size_t>(k)];
        w2[k] -= u2[static_cast<size_t>(k)];
      }
    p.b[static_cast<size_t>(e.row)] -= fdiff / std::sqrt(p.gb[static_cast<size_t>(e.row)]);
    p.bc[static_cast<size_t>(e.col)] -= fdiff / std::sqrt(p.gbc[static_cast<size_t>(e.col)]);
    p.gb[static_cast<size_t>(e.row)] += fdiff * fdiff;
    p.gbc[static_cast<size_t>(e.col)] += fdiff * fdiff;
  }
  return c_.entries.empty() ? 0.0 : total / static_cast<double>(c_.entries.size());
}

double GloveFit::cost(const GloveParams& p) const {
  const int64_t d = p.dim;
  double total = 0;
  for (size_t i = 0; i < c_.entries.size(); ++i) {
    const GloveEntry& e = c_.entries[i];
    const double* w1 = p.w.data() + static_cast<size_t>(e.row) * d;
    const double* w2 = p.wc.data() + static_cast<size_t>(e.col) * d;
    double diff = p.b[static_cast<size_t>(e.row)] + p.bc[static_cast<size_t>(e.col)] - logx_[i];
    for (int64_t k = 0; k < d; ++k) diff += w1[k] * w2[k];
    total += 0.5 * weight_[i] * diff * diff;
  }
  return c_.entries.empty() ? 0.0 : total / static_cast<double>(c_.entries.size());
}

namespace train_detail {

GloveRun run_glove(const TrainOptions& o, const TokenStream& s, int64_t vocab, const std::string& corpus_name,
                   const std::function<double()>& elapsed) {
  GloveRun r;
  GloveCounts X = glove_cooccurrence(s, vocab, o.window);
  if (X.distinct < o.d_model)
    throw UsageError("glove: the corpus " + corpus_name + " has " + std::to_string(X.distinct) +
                     " distinct tokens, fewer than the vector size " + std::to_string(o.d_model) +
                     " (--d-model): give a larger corpus or a smaller --d-model");
  if (X.entries.empty()) throw UsageError("glove: the corpus " + corpus_name + " has no line with two tokens");
  r.nonzero = static_cast<int64_t>(X.entries.size());
  r.distinct = X.distinct;
  GloveFitOptions fo;
  fo.x_max = o.glove_x_max;
  fo.alpha = o.glove_alpha;
  fo.eta = o.lr;
  fo.seed = o.seed;
  GloveFit fit(X, fo);
  GloveParams P = glove_init(vocab, o.d_model, o.seed);
  double ema = 0;
  for (int64_t ep = 0; ep < o.steps; ++ep) {
    if (int sig = interrupt_signal())  // GloVe runs in one go (not resumable): stop, and train() removes its directory
      throw Interrupted(sig, "interrupted in GloVe epoch " + std::to_string(ep + 1) + " of " + std::to_string(o.steps) +
                                 " (GloVe is not resumable); nothing was kept");
    const double c = fit.epoch(P);
    r.losses.push_back(c);
    ema = ep == 0 ? c : 0.95 * ema + 0.05 * c;
    if (o.on_progress) o.on_progress({ep + 1, o.steps, c, ema, o.lr, elapsed(), false, false});
  }
  r.final_cost = fit.cost(P);

  const std::string& dir = o.out_dir;
  auto tensor = [](const std::vector<double>& v, std::vector<int64_t> shape) {
    return at::tensor(at::ArrayRef<double>(v), at::TensorOptions().dtype(at::kDouble)).view(shape).to(at::kFloat);
  };
  const int64_t V = vocab, d = o.d_model;
  std::map<std::string, at::Tensor> t;
  t["word_vectors"] = tensor(P.w, {V, d});
  t["context_embeddings"] = tensor(P.wc, {V, d});
  t["bias"] = tensor(P.b, {V});
  t["context_bias"] = tensor(P.bc, {V});
  std::vector<double> sum(P.w.size());
  for (size_t i = 0; i < sum.size(); ++i) sum[i] = P.w[i] + P.wc[i];
  t["embeddings"] = tensor(sum, {V, d}).contiguous();
  nlohmann::ordered_json j;
  j["architectures"] = {"VocablensGloVe"};
  j["model_type"] = "vocablens-glove";
  j["vocab_size"] = V;
  j["n_embd"] = d;
  j["window"] = o.window;
  j["x_max"] = o.glove_x_max;
  j["alpha"] = o.glove_alpha;
  j["distance_weighting"] = true;
  j["nonzero_counts"] = r.nonzero;
  j["torch_dtype"] = "float32";
  j["vocablens_trained"] = {{"model", "glove"},
                            {"seed", o.seed},
                            {"epochs", o.steps},
                            {"definition", "embeddings = W + W~ (word + context vectors), GloVe's published vectors"}};
  write_file_atomic(dir + "/config.json", j.dump(2) + "\n");
  write_safetensors(dir + "/embeddings.safetensors", t, {{"format", "pt"}});
  const at::Tensor& E = t["embeddings"];
  write_npy(dir + "/embeddings.npy", NdArray::f32({V, d}, E.data_ptr<float>()));
  return r;
}

}  // namespace train_detail
}  // namespace vocablens

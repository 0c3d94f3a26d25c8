// src/train/trainer.hpp — the pieces train() is made of (internal to src/train).
//
// A Trainable owns its named leaf parameters (the names are those of the files it writes), draws its
// own batches from the token stream with the trainer's RNG, and writes its model files. train.cpp runs
// the loop, the optimizer, checkpoints and resume; gpt.cpp and embed.cpp hold the models.
#pragma once
#include <ATen/ATen.h>

#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>

#include "vocablens/train.hpp"

namespace vocablens::train_detail {

// ---- portable random numbers (std::mt19937_64 only: identical on every platform) ----
inline uint64_t below(std::mt19937_64& rng, uint64_t n) { return rng() % n; }
inline double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * (1.0 / 9007199254740992.0); }
/// float32 tensor of N(0, std²) values (Box–Muller on the generator's doubles).
at::Tensor normal_tensor(at::IntArrayRef shape, double std, std::mt19937_64& rng);
/// float32 tensor of U(-a, a) values.
at::Tensor uniform_tensor(at::IntArrayRef shape, double a, std::mt19937_64& rng);

class Trainable {
 public:
  virtual ~Trainable() = default;
  /// Leaf tensors with requires_grad, by the names they are written under.
  std::map<std::string, at::Tensor> params;
  /// One batch's loss (a scalar with grad), drawn with `rng`.
  virtual at::Tensor loss(std::mt19937_64& rng) = 0;
  /// Writes config.json and the weight file(s) into `dir` (not the tokenizer).
  virtual void write(const std::string& dir) const = 0;
  /// Parameters counted once (tied matrices once).
  int64_t parameter_count() const {
    int64_t n = 0;
    for (auto& kv : params) n += kv.second.numel();
    return n;
  }
};

/// Builds the model the options ask for over `stream` (kept by reference: it must outlive the model).
std::unique_ptr<Trainable> make_gpt(const TrainOptions& o, const TokenStream& stream, int64_t vocab, int64_t eos_id);
std::unique_ptr<Trainable> make_embed_lm(const TrainOptions& o, const TokenStream& stream, int64_t vocab);
std::unique_ptr<Trainable> make_word2vec(const TrainOptions& o, const TokenStream& stream, int64_t vocab);

/// GloVe is not a Trainable (no autograd, no Adam): counts, then AdaGrad epochs (glove.cpp). Writes
/// config.json and the embedding files into o.out_dir; train() writes the log and state.
struct GloveRun {
  std::vector<double> losses;  ///< the cost of every epoch
  double final_cost = 0;       ///< the objective after the last epoch
  int64_t nonzero = 0, distinct = 0;
};
GloveRun run_glove(const TrainOptions& o, const TokenStream& stream, int64_t vocab, const std::string& corpus_name,
                   const std::function<double()>& elapsed);

/// Random windows of n_ctx + 1 tokens starting at line starts: inputs [B, n_ctx] and targets [B, n_ctx]
/// (-100 where the next token is not a target). Shared by GPT and EmbedLM.
/// With `segments`: also their segment ids [B, n_ctx] (TokenStream::segment), drawing the same windows.
void sample_windows(const TokenStream& s, const std::vector<int64_t>& starts, int64_t batch, int64_t n_ctx, std::mt19937_64& rng,
                    at::Tensor& inputs, at::Tensor& targets, at::Tensor* segments = nullptr);
/// Line starts from which a whole window fits. Throws UsageError when the corpus is too short.
std::vector<int64_t> window_starts(const TokenStream& s, int64_t n_ctx);

/// Adam (AdamW when weight_decay > 0: decay on tensors with dim >= 2 only), via torch::optim.
class Optimizer {
 public:
  Optimizer(const std::map<std::string, at::Tensor>& params, const TrainOptions& o);
  ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;
  void zero_grad();
  void step(double lr);
  /// The optimizer state (torch::save format) / restore it.
  std::string save() const;
  void load(const std::string& bytes, const std::string& path_for_errors);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Scales gradients so that their global L2 norm is at most max_norm; returns the norm before clipping.
double clip_grad_norm(const std::map<std::string, at::Tensor>& params, double max_norm);

}  // namespace vocablens::train_detail

// tests/support/random_gpt.hpp — a small GPT of the trainer's (vocablens/train.hpp), freshly initialised and
// with its matrices scaled up, for the runner tests that need a model with a position kind no fixture has
// (ALiBi, sinusoidal, none) or a set number of layers.
//
// Why scaled: GPT-2's initialisation (N(0, 0.02)) makes every block's contribution so small that a wrong
// position, bias or cache slot could hide within float32 rounding; ten times larger weights put every effect
// far above it. d_model 32, 4 heads, a vocabulary of 128; the seed makes the weights reproducible.
//
//   vocablens::Model m = vl_test::scaled_random_gpt(vocablens::PositionKind::ALiBi, /*layers=*/2, /*n_ctx=*/64,
//                                                   /*seed=*/7, "random ALiBi");
#pragma once
#include <cstdint>
#include <string>

#include "vocablens/model.hpp"
#include "vocablens/train.hpp"

namespace vl_test {

/// gpt_config + init_gpt_parameters(seed) of a d_model 32, 4-head GPT over 128 tokens, every 2-D weight
/// (the matrices, embeddings and position table) times 10; the Model views those tensors.
inline vocablens::Model scaled_random_gpt(vocablens::PositionKind positions, int64_t layers, int64_t n_ctx, uint64_t seed,
                                          const std::string& name) {
  vocablens::TrainOptions o;
  o.d_model = 32;
  o.n_heads = 4;
  o.n_layers = layers;
  o.n_ctx = n_ctx;
  o.positions = positions;
  auto cfg = vocablens::gpt_config(o, 128);
  auto p = vocablens::init_gpt_parameters(cfg, seed);
  at::NoGradGuard ng;
  for (auto& kv : p.named)
    if (kv.second.dim() == 2) kv.second.mul_(10);
  return vocablens::Model(cfg, p.weights, name);
}

}  // namespace vl_test

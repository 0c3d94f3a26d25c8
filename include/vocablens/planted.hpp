// vocablens/planted.hpp — do the analyses find the structure planted in the synthetic world? The checks the
// demo runs on the model it trains (and tests/demo_test.cpp asserts with thresholds).
//
// The world (vocablens/synthetic.hpp) plants facts ("the capital of france is" -> "paris"), classes of
// words sharing contexts, and copying lines ("repeat w1 .. wk : w1 .. wk"). Each check runs one analysis
// and scores it against what was planted:
//  - facts: the logit lens's top-1 at the last position of every fact prompt, per lens layer;
//  - copying: top-1 accuracy on the repeated words w2 .. wk of held-out copying lines, per lens layer
//    (predictable only by finding the earlier occurrence and copying what followed: induction);
//  - OV copying: the best copying score among the heads' OV circuits;
//  - neighbours: the share of each class word's k nearest neighbours that are of its class.
//
//   auto world = vocablens::synthetic_corpus(opts);
//   vocablens::PlantedStructure p;
//   p.facts = vocablens::check_facts(model, *tok, world);
//   double last = p.facts->accuracy().back();          // top-1 accuracy at the last lens layer
//   vocablens::Result r = p.to_result(world.facts.size(), 5);   // kind "planted_structure"
#pragma once
#include "vocablens/tensor_fwd.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "vocablens/result.hpp"

namespace vocablens {

class Model;
class Tokenizer;
struct SyntheticCorpus;
struct HeadsAnalysis;

/// The token of a world word as the corpus spells it mid-sentence (" paris"): single_token_id (token_id.hpp) of
/// " " + word, else the first token of its encoding; -1 when it encodes to nothing.
int64_t word_token(const Tokenizer& tok, const std::string& word);

/// Top-1 accuracy per lens layer.
struct LayerAccuracy {
  std::vector<std::string> layer_labels;  ///< "embed", "0", "1", ... (LensLayer::label)
  std::vector<int64_t> correct_by_layer;  ///< positions whose top-1 is right, per lens layer
  int64_t n = 0;                          ///< positions scored
  /// correct / n per layer (n counted as 1 when 0).
  std::vector<double> accuracy() const;
  /// {label: accuracy} and "label NN%, ..." for the demo's line.
  nlohmann::json by_label() const;
  std::string summary_line() const;
};

struct FactCheck : LayerAccuracy {
  /// relation, prompt, answer, final_top1, correct, final_prob, rank_by_layer (JSON text).
  std::vector<std::vector<nlohmann::json>> rows;
};

/// The lens on every fact prompt of the world (no BOS), the answer word as the target.
FactCheck check_facts(const Model& m, const Tokenizer& tok, const SyntheticCorpus& world);

/// Copying lines of a held-out world (seed `seed`, `lines` lines, copying only, no prompt marks).
LayerAccuracy check_copying(const Model& m, const Tokenizer& tok, uint64_t seed, int64_t lines);

struct OvCopyingCheck {
  double best = -2;  ///< best OV copying score (-2 when there is no OV circuit)
  int64_t best_layer = -1, best_head = -1;
  int64_t above_half = 0, n = 0;                  ///< OV circuits with copying score > 0.5, of n
  std::vector<std::vector<nlohmann::json>> rows;  ///< layer, head, copying_score, weight_copying_score
};

/// The OV circuits of a heads analysis, scored by copying.
OvCopyingCheck check_ov_copying(const HeadsAnalysis& a);

struct NeighbourCheck {
  std::map<std::string, std::pair<int64_t, int64_t>> by_class;  ///< class -> (same-class neighbours, all)
  std::vector<std::vector<nlohmann::json>> rows;                ///< class, word, neighbours, same_class, k
  /// {class: share of same-class neighbours}.
  nlohmann::json precision() const;
};

/// The k nearest neighbours (rows of X [V, d], e.g. skip-gram vectors) of every country, city, animal and
/// fruit of the world.
NeighbourCheck check_neighbours(const at::Tensor& X, const Tokenizer& tok, const SyntheticCorpus& world, int64_t k);

/// The checks that ran (a failed step leaves its check empty).
struct PlantedStructure {
  std::optional<FactCheck> facts;
  std::optional<LayerAccuracy> copying;
  std::optional<OvCopyingCheck> ov_copying;
  std::optional<NeighbourCheck> neighbours;

  /// kind "planted_structure": settings {facts, neighbours_k}; summary fact_top1_by_layer,
  /// copy_top1_by_layer, best_ov_copying_score / _head, neighbours_same_class_at5; tables facts,
  /// ov_copying, neighbours.
  Result to_result(int64_t n_facts, int64_t neighbours_k) const;
};

}  // namespace vocablens

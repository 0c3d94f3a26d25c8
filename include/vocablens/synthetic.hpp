// vocablens/synthetic.hpp — a built-in training corpus with planted structure that interpretability
// should find, so that `vocablens train --synthetic` and `vocablens demo` need nothing downloaded.
//
// The corpus is lowercase ASCII words, one short sentence per line, drawn from a small fixed world:
//  - facts (entity -> attribute): "the capital of france is paris", "people in japan speak japanese",
//    "the country egypt is in africa", "the dog says woof", "the bee has six legs", "the colour of the lime
//    is green";
//    a trained model should predict the attribute at late layers (logit lens);
//  - class sentences: "france and japan are countries", "we flew from paris to tokyo", "i like the
//    lemon": entities of one class share contexts, so word2vec neighbours of an entity are its class;
//  - counting and successor lines: "count 3 4 5 6 7", "after 17 comes 18";
//  - copying lines: "<prompt>repeat dog 12 rome green :</prompt> dog 12 rome green" — a random span
//    shown once and repeated; the repetition rewards copying (induction / OV-copying heads). The first
//    half is marked as a prompt span: it gets no loss (see train.hpp, "Loss masking").
// Everything is a deterministic function of the options (seed included).
//
//   vocablens::SyntheticOptions o;  o.seed = 7;  o.lines = 20000;
//   vocablens::SyntheticCorpus c = vocablens::synthetic_corpus(o);
//   c.text;                  // "the capital of peru is lima\n..." with <prompt> markers
//   c.facts[0].prompt;       // "the capital of france is"   c.facts[0].answer == "paris"
//   c.classes.at("paris");   // "city"
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace vocablens {

struct SyntheticOptions {
  uint64_t seed = 1;
  int64_t lines = 40000;  ///< sentences (lines) in the corpus
  /// Relative weights of the four kinds of line (need not sum to 1; each >= 0, sum > 0).
  double facts = 0.6;
  double classes = 0.1;
  double counting = 0.1;
  double copying = 0.2;
  int64_t max_number = 49;  ///< counting / successor lines use the numbers 0 .. max_number (1..999)
  int64_t copy_min = 3;     ///< length of the copied span, words (>= 1)
  int64_t copy_max = 7;     ///< (>= copy_min)
  /// Wrap the first (unpredictable) half of copying lines in <prompt>...</prompt> so that it gets no loss.
  bool mark_prompts = true;
};

/// One entity -> attribute fact of the world, as a prompt and the word that completes it.
struct SyntheticFact {
  std::string relation;  ///< "capital", "language", "continent", "sound", "legs", "colour"
  std::string subject;   ///< "france"
  std::string prompt;    ///< "the capital of france is" (a whole line's beginning; no trailing space)
  std::string answer;    ///< "paris" (the next word: GPT-2-style tokens spell it " paris")
  std::string rest;      ///< what the corpus sentence has after the answer ("" or " legs")
};

struct SyntheticCorpus {
  SyntheticOptions options;
  std::string text;                            ///< the corpus, one sentence per line, "\n"-terminated
  std::vector<SyntheticFact> facts;            ///< every fact of the world, in a fixed order
  std::map<std::string, std::string> classes;  ///< word -> class: country, city, language, continent,
                                               ///< animal, sound, fruit, colour, number
  /// Every distinct word that can occur, sorted (the world's vocabulary; BPE should make each a token).
  std::vector<std::string> words;
};

/// Generates the corpus. Throws UsageError on bad options.
SyntheticCorpus synthetic_corpus(const SyntheticOptions& opts = {});

/// The words of one class ("country", "animal", ...), in the world's fixed order; empty if unknown.
std::vector<std::string> synthetic_class_members(const std::string& cls);

}  // namespace vocablens

// notebooks-export/report_examples.hpp — private to the report: what the kinds' synthetic examples share
// (`vocablens report --example`; each kind's example is in its slice, analyses/<slice>_report.cpp).
//
//   ExampleLcg rng{42};  double u = rng.next();                     // deterministic, [0, 1)
//   r.provenance = example_provenance("vocablens lens fixtures/gpt2-tiny --out run");
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vocablens/result.hpp"

namespace vocablens {

/// A tiny deterministic generator (no <random>: identical output on every platform).
struct ExampleLcg {
  uint64_t s;
  double next() {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<double>(s >> 11) / 9007199254740992.0;
  }
};

/// Provenance of a made-up gpt2-tiny run of `cmd`.
nlohmann::json example_provenance(const std::string& cmd);

/// Token strings the examples draw from (markup and quotes included: the report must show them as text).
extern const std::vector<std::string> kExampleVocab;

}  // namespace vocablens

// tests/support/tiny_gpt2.hpp — hand-made GPT-2 checkpoints for the tests of bad and borderline models: the
// safetensors framing (8-byte little-endian header length, JSON header padded to 8 bytes, data), the config of
// a 4-wide GPT-2 with 2 heads, 8 positions and 10 tokens, and a model directory holding both. Written from the
// file format alone, so that the loader is checked against something it does not share code with.
//
//   std::string dir = vl_test::make_model_dir("bad", vl_test::tiny_gpt2_config().dump(),
//                                             vl_test::safetensors_bytes(header, data));
//   vocablens::load_model(dir);   // config.json + model.safetensors
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "fixtures.hpp"

namespace vl_test {

/// `v` as 8 little-endian bytes.
inline std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[static_cast<size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

/// A safetensors file from its header JSON and its data section (the header padded with spaces to 8 bytes).
inline std::string safetensors_bytes(const nlohmann::json& header, const std::string& data) {
  std::string h = header.dump();
  while (h.size() % 8) h.push_back(' ');
  return le64(h.size()) + h + data;
}

/// The config.json of a `layers`-layer GPT-2: d_model 4, 2 heads, 8 positions, vocabulary 10.
inline nlohmann::json tiny_gpt2_config(int layers = 1) {
  return {{"architectures", {"GPT2LMHeadModel"}},
          {"model_type", "gpt2"},
          {"n_layer", layers},
          {"n_embd", 4},
          {"n_head", 2},
          {"n_positions", 8},
          {"vocab_size", 10},
          {"layer_norm_epsilon", 1e-5}};
}

/// A fresh temporary directory (named after `tag`) holding config.json and model.safetensors.
inline std::string make_model_dir(const std::string& tag, const std::string& config, const std::string& weights) {
  std::string dir = temp_dir(tag);
  write_file(dir + "/config.json", config);
  write_file(dir + "/model.safetensors", weights);
  return dir;
}

}  // namespace vl_test

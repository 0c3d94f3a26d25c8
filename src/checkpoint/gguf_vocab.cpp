// GGUF tokenizer.ggml.* metadata -> VocabSpec (the tokenizer is built by tokenizer_from_vocab()).
#include "vocablens/error.hpp"
#include "vocablens/gguf.hpp"
#include "vocablens/vocab_spec.hpp"

namespace vocablens {

VocabSpec gguf_vocab_spec(const GgufFile& g) {
  VocabSpec v;
  v.source = g.path;
  auto fail = [&](const std::string& what) { throw FormatError(g.path, what); };
  if (!g.metadata.contains("tokenizer.ggml.model")) fail("no tokenizer in this GGUF (tokenizer.ggml.model is missing)");
  v.model = g.get_string("tokenizer.ggml.model", "");
  v.pre = g.get_string("tokenizer.ggml.pre", "");
  auto array = [&](const char* key, const char* want) -> const nlohmann::json* {
    auto it = g.metadata.find(key);
    if (it == g.metadata.end()) return nullptr;
    if (g.metadata_types.at(key) != want)
      fail(std::string("metadata '") + key + "' is " + g.metadata_types.at(key) + ", expected " + want);
    return &*it;
  };
  const nlohmann::json* toks = array("tokenizer.ggml.tokens", "arr[str]");
  if (!toks) fail("metadata 'tokenizer.ggml.tokens' is missing");
  for (auto& t : *toks) v.tokens.push_back(t.get<std::string>());
  if (auto* s = array("tokenizer.ggml.scores", "arr[f32]"))
    for (auto& x : *s) v.scores.push_back(x.get<float>());
  if (auto* s = array("tokenizer.ggml.token_type", "arr[i32]"))
    for (auto& x : *s) v.token_types.push_back(x.get<int32_t>());
  if (auto* s = array("tokenizer.ggml.merges", "arr[str]"))
    for (auto& x : *s) v.merges.push_back(x.get<std::string>());
  v.bos_id = g.get_int("tokenizer.ggml.bos_token_id", -1);
  v.eos_id = g.get_int("tokenizer.ggml.eos_token_id", -1);
  v.unk_id = g.get_int("tokenizer.ggml.unknown_token_id", -1);
  v.pad_id = g.get_int("tokenizer.ggml.padding_token_id", -1);
  auto flag = [&](const char* key, std::optional<bool>& out) {
    auto it = g.metadata.find(key);
    if (it == g.metadata.end()) return;
    if (!it->is_boolean()) fail(std::string("metadata '") + key + "' is not a bool");
    out = it->get<bool>();
  };
  flag("tokenizer.ggml.add_bos_token", v.add_bos);
  flag("tokenizer.ggml.add_eos_token", v.add_eos);
  flag("tokenizer.ggml.add_space_prefix", v.add_space_prefix);
  return v;
}

}  // namespace vocablens

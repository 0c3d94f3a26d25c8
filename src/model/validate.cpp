// Checks run after a checkpoint is mapped onto the model: unused tensors, non-finite weights.
#include "model/validate.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <vector>

#include "model/nonfinite.hpp"
#include "vocablens/error.hpp"

namespace vocablens::detail {

namespace fs = std::filesystem;

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Buffers that checkpoints carry and that the model recomputes: GPT-2's causal mask ("attn.bias",
// "attn.masked_bias") and the rotary inverse frequencies of older Llama exports.
bool known_buffer(const std::string& n) {
  return ends_with(n, ".attn.bias") || ends_with(n, ".attn.masked_bias") || ends_with(n, "rotary_emb.inv_freq") ||
         n == "freqs_cos" || n == "freqs_sin" || ends_with(n, ".freqs_cos") || ends_with(n, ".freqs_sin");
}

// The layer index in names such as "h.2.ln_1.weight", "layers.2.mlp...", "model.layers.2...", or -1.
int64_t layer_of(const std::string& n) {
  for (const char* key : {"h.", "layers."}) {
    const std::string k = key;
    for (size_t at = n.find(k); at != std::string::npos; at = n.find(k, at + 1)) {
      if (at != 0 && n[at - 1] != '.') continue;
      size_t i = at + k.size(), j = i;
      while (j < n.size() && std::isdigit(static_cast<unsigned char>(n[j])) && j - i < 12) ++j;
      if (j > i && j < n.size() && n[j] == '.') return std::stoll(n.substr(i, j - i));
    }
  }
  return -1;
}

}  // namespace

void check_all_tensors_used(const TensorStore& st, const ModelConfig& c, const std::string& cfg_path,
                            const std::string& only_prefix) {
  std::vector<std::string> unused;
  int64_t max_layer = -1, beyond = 0;
  std::string beyond_example;
  for (const auto& kv : st.tensors) {
    const std::string& n = kv.first;
    if (n.compare(0, only_prefix.size(), only_prefix) != 0 || st.used.count(n) || known_buffer(n)) continue;
    const int64_t l = layer_of(n);
    if (l >= c.n_layers) {
      ++beyond;
      if (l > max_layer) max_layer = l, beyond_example = n;
      continue;
    }
    unused.push_back(n);
  }
  if (beyond)
    throw FormatError(st.source, "holds weights of layer " + std::to_string(max_layer) + " ('" + beyond_example + "', " +
                                     std::to_string(beyond) + " tensors beyond the last layer) but " + cfg_path + " says " +
                                     std::to_string(c.n_layers) + " layer" + (c.n_layers == 1 ? "" : "s") +
                                     ": the config does not describe these weights");
  if (unused.empty()) return;
  std::string list;
  for (size_t i = 0; i < unused.size() && i < 5; ++i) list += (i ? ", '" : "'") + unused[i] + "'";
  if (unused.size() > 5) list += ", ... (" + std::to_string(unused.size() - 5) + " more)";
  throw FormatError(st.source, std::to_string(unused.size()) + " tensor" + (unused.size() == 1 ? "" : "s") + " that a " +
                                   c.architecture + " model does not use: " + list +
                                   " (a different architecture or a config.json that does not match these weights?)");
}

std::string checkpoints_hint(const std::string& dir) {
  std::vector<std::string> found;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string n = it->path().filename().string();
    if (!it->is_regular_file(ec) || n.rfind("pytorch_model", 0) == 0 || n == "tokenizer.bin") continue;
    if (n.rfind("tok", 0) == 0 && ends_with(n, ".bin")) continue;  // tok512.bin: a llama2.c tokenizer
    if (ends_with(n, ".bin") || ends_with(n, ".pt")) found.push_back(n);
  }
  if (found.empty()) return "";
  std::sort(found.begin(), found.end());
  std::string list;
  for (size_t i = 0; i < found.size() && i < 4; ++i) list += (i ? ", '" : "'") + (fs::path(dir) / found[i]).string() + "'";
  if (found.size() > 4) list += ", ...";
  return "; it holds " + std::string(found.size() == 1 ? "a checkpoint file" : "checkpoint files") + " (llama2.c?): " + list +
         ": pass the file itself";
}

void check_store_finite(const TensorStore& st) {
  for (const auto& kv : st.tensors)
    if (st.used.count(kv.first)) check_weight_finite(kv.second, kv.first, st.source);
}

}  // namespace vocablens::detail

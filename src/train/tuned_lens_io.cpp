// Writing a tuned lens directory (vocablens/tuned_lens.hpp): tuned_lens.safetensors, the tuned-lens package's
// params.pt (torch::pickle_save: the zip format Python's torch.load reads) and config.json (its
// TunedLensConfig). The only file of the tuned lens that includes LibTorch's serialization headers.
#include <ATen/core/Dict.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "train/safetensors_writer.hpp"
#include "vocablens/detail/atomic_file.hpp"
#include "vocablens/error.hpp"
#include "vocablens/tuned_lens_train.hpp"
#include "util/regular_file.hpp"

namespace vocablens {

void save_tuned_lens(const TunedLens& t, const std::string& dir) { save_tuned_lens(t, dir, 0, 0); }

void save_tuned_lens(const TunedLens& t, const std::string& dir, int64_t trained_steps, int64_t steps) {
  // Unfinished (--stop-after, Ctrl-C): said in config.json, which every reader of the directory opens (the
  // tuned-lens package ignores keys it does not know, with a warning), and in the safetensors metadata.
  const bool unfinished = steps > 0 && trained_steps < steps;
  ensure_directory(dir);
  std::map<std::string, at::Tensor> tensors;
  c10::Dict<std::string, at::Tensor> state;
  for (int64_t l = 0; l < t.n_translators(); ++l) {
    const auto W = t.weight[static_cast<size_t>(l)].detach().to(at::kFloat).contiguous().clone();
    const auto b = t.bias[static_cast<size_t>(l)].detach().to(at::kFloat).contiguous().clone();
    tensors[std::to_string(l) + ".weight"] = W;
    tensors[std::to_string(l) + ".bias"] = b;
  }
  // The package's state_dict order: 0.weight, 0.bias, 1.weight, ...
  for (int64_t l = 0; l < t.n_translators(); ++l) {
    state.insert(std::to_string(l) + ".weight", tensors[std::to_string(l) + ".weight"]);
    state.insert(std::to_string(l) + ".bias", tensors[std::to_string(l) + ".bias"]);
  }
  std::map<std::string, std::string> meta = {{"format", "vocablens-tuned-lens"}, {"unembed_sha256", t.unembed_sha256}};
  if (unfinished) meta["unfinished"] = std::to_string(trained_steps) + "/" + std::to_string(steps);
  train_detail::write_safetensors(dir + "/tuned_lens.safetensors", tensors, meta);
  const std::vector<char> pt = torch::jit::pickle_save(c10::IValue(state));
  write_file_atomic(dir + "/params.pt", std::string_view(pt.data(), pt.size()));
  const auto& c = t.config;
  auto null_or = [](const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); };
  nlohmann::json j = {{"base_model_name_or_path", c.base_model_name_or_path},
                      {"d_model", c.d_model},
                      {"num_hidden_layers", c.num_hidden_layers},
                      {"bias", c.bias},
                      {"base_model_revision", null_or(c.base_model_revision)},
                      {"unembed_hash", null_or(c.unembed_hash)},
                      {"lens_type", c.lens_type}};
  if (unfinished) j["vocablens_unfinished"] = {{"trained_steps", trained_steps}, {"steps", steps}};
  write_file_atomic(dir + "/config.json", j.dump(1) + "\n");
}

}  // namespace vocablens

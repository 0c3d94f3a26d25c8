// tests/support/safetensors_edit.hpp — an independent way to change a checkpoint: copy a Hugging Face
// model directory and edit F32 tensors of its model.safetensors in place, byte by byte, through nothing
// but the file format (8-byte header length, JSON header, data_offsets). Used to check hooks against the
// forward pass of a modified checkpoint (tests/ablation_test.cpp).
//
//   auto dir = vl_test::edited_copy(src_dir, "abl", {{"h.1.attn.c_proj.weight",
//       [](float* w, const std::vector<int64_t>& shape) { /* zero rows 16..31 */ }}});
//   auto m = vocablens::load_model(dir);
#pragma once
#include <cstdint>
#include <cstring>
#include <dirent.h>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fixtures.hpp"

namespace vl_test {

using TensorEdit = std::function<void(float* data, const std::vector<int64_t>& shape)>;

inline std::string edited_copy(const std::string& src_dir, const std::string& tag,
                               const std::map<std::string, TensorEdit>& edits) {
  std::string dst = temp_dir(tag);
  // Copy every regular file but the weights (config, tokenizer files).
  if (DIR* d = ::opendir(src_dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n == "." || n == ".." || n == "model.safetensors" || n == "reference") continue;
      std::string p = src_dir + "/" + n;
      if (e->d_type == DT_REG) write_file(dst + "/" + n, read_file(p));
    }
    ::closedir(d);
  }
  std::string bytes = read_file(src_dir + "/model.safetensors");
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  auto header = nlohmann::json::parse(bytes.substr(8, n));
  const size_t data0 = 8 + n;
  for (const auto& [name, fn] : edits) {
    if (!header.contains(name)) throw std::runtime_error("edited_copy: no tensor " + name);
    const auto& e = header[name];
    if (e["dtype"] != "F32") throw std::runtime_error("edited_copy: " + name + " is not F32");
    const size_t begin = e["data_offsets"][0].get<size_t>();
    fn(reinterpret_cast<float*>(&bytes[data0 + begin]), e["shape"].get<std::vector<int64_t>>());
  }
  write_file(dst + "/model.safetensors", bytes);
  return dst;
}

}  // namespace vl_test

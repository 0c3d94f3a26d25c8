// The trainer's safetensors writer (see safetensors_writer.hpp).
#include "train/safetensors_writer.hpp"

#include <cstring>

#include <nlohmann/json.hpp>

#include "vocablens/detail/atomic_file.hpp"
#include "vocablens/error.hpp"

namespace vocablens::train_detail {

std::string safetensors_bytes(const std::map<std::string, at::Tensor>& tensors,
                              const std::map<std::string, std::string>& metadata) {
  // nlohmann::json objects keep their keys sorted, which is the order of the data section too.
  nlohmann::json header = nlohmann::json::object();
  std::vector<at::Tensor> data;
  uint64_t offset = 0;
  for (auto& [name, t0] : tensors) {
    if (name.empty() || name == "__metadata__") throw UsageError("safetensors: invalid tensor name '" + name + "'");
    if (!t0.defined()) throw UsageError("safetensors: tensor '" + name + "' is undefined");
    at::Tensor t = t0.detach().to(at::kCPU);
    const bool integral = at::isIntegralType(t.scalar_type(), /*includeBool=*/true);
    t = t.to(integral ? at::kLong : at::kFloat).contiguous();
    const uint64_t nbytes = static_cast<uint64_t>(t.numel()) * (integral ? 8u : 4u);
    header[name] = {{"dtype", integral ? "I64" : "F32"}, {"shape", t.sizes().vec()}, {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
    data.push_back(t);
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string h = header.dump();
  while (h.size() % 8 != 0) h += ' ';
  std::string out;
  out.reserve(8 + h.size() + offset);
  const uint64_t hlen = h.size();
  for (int i = 0; i < 8; ++i) out += static_cast<char>((hlen >> (8 * i)) & 0xff);
  out += h;
  for (auto& t : data) out.append(static_cast<const char*>(t.data_ptr()), static_cast<size_t>(t.numel() * t.element_size()));
  return out;
}

void write_safetensors(const std::string& path, const std::map<std::string, at::Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  write_file_atomic(path, safetensors_bytes(tensors, metadata));
}

}  // namespace vocablens::train_detail

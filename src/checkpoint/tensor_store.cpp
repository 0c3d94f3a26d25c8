// TensorStore: the name -> tensor map every checkpoint reader fills.
#include "vocablens/tensor_store.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "util/json_depth.hpp"
#include "vocablens/error.hpp"

namespace vocablens {

const at::Tensor& TensorStore::get(const std::string& name) const {
  auto it = tensors.find(name);
  if (it == tensors.end()) throw FormatError(source, "missing tensor '" + name + "'");
  used.insert(name);
  return it->second;
}

namespace detail {

TensorStore read_sharded_index(const std::string& index_path, const std::string& format,
                               const std::function<TensorStore(const std::string&)>& read_shard) {
  using nlohmann::json;
  // Hostile input: the index is read whole; bound its size first (real ones are < 1 MB).
  std::error_code size_error;
  const auto index_size = std::filesystem::file_size(index_path, size_error);
  if (!size_error && index_size > (uint64_t{64} << 20))
    throw FormatError(index_path, "file is " + std::to_string(index_size) + " bytes; index files larger than 64 MB are refused");
  std::ifstream f(index_path, std::ios::binary);
  if (!f) throw FormatError(index_path, "cannot open");
  std::ostringstream ss;
  ss << f.rdbuf();
  std::string text = ss.str();
  check_json_depth(text, index_path, 64);
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) { throw FormatError(index_path, std::string("malformed JSON: ") + e.what()); }
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    throw FormatError(index_path, "no \"weight_map\" object");
  namespace fs = std::filesystem;
  fs::path dir = fs::path(index_path).parent_path();
  std::map<std::string, std::vector<std::string>> by_shard;
  for (auto& [name, shard] : j["weight_map"].items()) {
    if (!shard.is_string()) throw FormatError(index_path, "weight_map entry '" + name + "' is not a file name");
    std::string s = shard.get<std::string>();
    if (s.empty() || s.find('/') != std::string::npos || s == "." || s == "..")
      throw FormatError(index_path, "shard name '" + s + "' must be a plain file name");
    by_shard[s].push_back(name);
  }
  TensorStore out;
  out.source = index_path;
  out.format = format;
  if (j.contains("metadata")) out.metadata = j["metadata"];
  std::set<std::string> dtypes;
  for (auto& [shard, names] : by_shard) {
    const std::string shard_path = (dir / shard).string();
    if (!fs::exists(shard_path)) throw FormatError(index_path, "shard '" + shard + "' named in weight_map is missing");
    TensorStore part = read_shard(shard_path);
    for (auto& n : names) {
      if (!part.has(n)) throw FormatError(shard_path, "tensor '" + n + "' listed in " + index_path + " is missing");
      out.tensors[n] = part.tensors[n];
    }
    // Stored dtypes of the tensors taken, each a '+'-joined list of its shard's.
    std::string one;
    std::istringstream parts(part.stored_dtype);
    while (std::getline(parts, one, '+'))
      if (!one.empty()) dtypes.insert(one);
  }
  for (auto& s : dtypes) out.stored_dtype += (out.stored_dtype.empty() ? "" : "+") + s;
  return out;
}

}  // namespace detail

TensorStore read_torch_zip_index(const std::string& index_path, bool upcast_half) {
  return detail::read_sharded_index(index_path, "pytorch-zip",
                                    [upcast_half](const std::string& shard) { return read_torch_zip(shard, upcast_half); });
}

}  // namespace vocablens

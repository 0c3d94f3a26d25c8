// The safetensors reader: 8-byte little-endian header length, a JSON header, then one data section.
// Validation follows the format's specification (and the official Rust crate's checks): header inside
// the file, JSON well-formed, known dtypes, byte ranges inside the data section, exactly covering it
// without overlaps or holes, and bytes == numel * dtype size.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "checkpoint/mapped_file.hpp"
#include "util/json_depth.hpp"
#include "vocablens/error.hpp"
#include "vocablens/tensor_store.hpp"

namespace vocablens {
namespace detail {

struct StDtype {
  const char* name;
  at::ScalarType type;
  size_t size;
};
constexpr StDtype kStDtypes[] = {
    {"F64", at::kDouble, 8}, {"F32", at::kFloat, 4}, {"F16", at::kHalf, 2}, {"BF16", at::kBFloat16, 2}, {"I64", at::kLong, 8},
    {"I32", at::kInt, 4},    {"I16", at::kShort, 2}, {"I8", at::kChar, 1},  {"U8", at::kByte, 1},       {"BOOL", at::kBool, 1},
};

const StDtype* find_dtype(const std::string& s) {
  for (auto& d : kStDtypes)
    if (s == d.name) return &d;
  return nullptr;
}

// Header sizes above this are refused before reading (the official crate uses 100 MB).
constexpr uint64_t kMaxHeader = 100ull << 20;

}  // namespace detail

TensorStore read_safetensors(const std::string& path) { return read_safetensors(path, true); }

TensorStore read_safetensors(const std::string& path, bool upcast_half) {
  using nlohmann::json;
  auto file = MappedFile::open(path);
  const size_t fsize = file->size();
  if (fsize < 8) throw FormatError(path, "truncated safetensors file (" + std::to_string(fsize) + " bytes, no header)");
  uint64_t hlen = 0;
  for (int i = 0; i < 8; ++i) hlen |= static_cast<uint64_t>(file->data()[i]) << (8 * i);
  if (hlen > detail::kMaxHeader)
    throw FormatError(path, "safetensors header length " + std::to_string(hlen) + " exceeds the 100 MB limit");
  if (hlen > fsize - 8)
    throw FormatError(path, "safetensors header length " + std::to_string(hlen) + " runs past the end of the file (" +
                                std::to_string(fsize) + " bytes)");
  std::string header(reinterpret_cast<const char*>(file->data()) + 8, hlen);
  if (header.empty() || header[0] != '{') throw FormatError(path, "safetensors header does not start with '{'");
  detail::check_json_depth(header, path, 64);
  json j;
  try {
    j = json::parse(header);
  } catch (const json::exception& e) {
    throw FormatError(path, std::string("safetensors header is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw FormatError(path, "safetensors header is not a JSON object");

  const size_t data_start = 8 + hlen;
  const size_t data_size = fsize - data_start;
  TensorStore store;
  store.source = path;
  store.format = "safetensors";
  struct Range {
    uint64_t begin, end;
    std::string name;
  };
  std::vector<Range> ranges;
  std::set<std::string> dtypes;
  for (auto& [name, e] : j.items()) {
    if (name == "__metadata__") {
      if (!e.is_object()) throw FormatError(path, "__metadata__ is not an object");
      store.metadata = e;
      continue;
    }
    auto where = "tensor '" + name + "': ";
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets"))
      throw FormatError(path, where + "entry needs dtype, shape and data_offsets");
    if (!e["dtype"].is_string()) throw FormatError(path, where + "dtype is not a string");
    std::string dt = e["dtype"].get<std::string>();
    const auto* d = detail::find_dtype(dt);
    if (!d) throw FormatError(path, where + "unsupported dtype '" + dt + "'");
    const json& shape = e["shape"];
    const json& offs = e["data_offsets"];
    if (!shape.is_array() || shape.size() > 16) throw FormatError(path, where + "shape is not an array of at most 16 sizes");
    if (!offs.is_array() || offs.size() != 2 || !offs[0].is_number_unsigned() || !offs[1].is_number_unsigned())
      throw FormatError(path, where + "data_offsets must be two non-negative integers");
    std::vector<int64_t> sizes;
    uint64_t numel = 1;
    for (auto& s : shape) {
      if (!s.is_number_unsigned()) throw FormatError(path, where + "shape entries must be non-negative integers");
      uint64_t v = s.get<uint64_t>();
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) || (v != 0 && numel > (uint64_t(1) << 62) / v))
        throw FormatError(path, where + "shape is too large");
      numel *= v;
      sizes.push_back(static_cast<int64_t>(v));
    }
    uint64_t b = offs[0].get<uint64_t>(), en = offs[1].get<uint64_t>();
    if (b > en) throw FormatError(path, where + "data_offsets begin > end");
    if (en > data_size)
      throw FormatError(path, where + "data_offsets [" + std::to_string(b) + ", " + std::to_string(en) +
                                  ") lie outside the data section (" + std::to_string(data_size) + " bytes)");
    if (numel > (uint64_t(1) << 62) / d->size || en - b != numel * d->size)
      throw FormatError(path, where + "byte range of " + std::to_string(en - b) + " bytes does not match shape x " + dt + " (" +
                                  std::to_string(numel * d->size) + " bytes)");
    ranges.push_back({b, en, name});
    dtypes.insert(dt);
    at::Tensor t;
    if (upcast_half && (d->type == at::kHalf || d->type == at::kBFloat16)) {
      // CPU half matmul is unsupported in LibTorch 1.13: convert to float32 (a copy, by necessity).
      t = view_as_tensor(file, data_start + b, sizes, {}, d->type).to(at::kFloat);
    } else {
      t = view_as_tensor(file, data_start + b, sizes, {}, d->type);
    }
    store.tensors.emplace(name, std::move(t));
  }
  std::sort(ranges.begin(), ranges.end(),
            [](const Range& a, const Range& b) { return a.begin < b.begin || (a.begin == b.begin && a.end < b.end); });
  uint64_t expect = 0;
  for (auto& r : ranges) {
    if (r.begin < expect) throw FormatError(path, "tensor '" + r.name + "' overlaps the previous tensor's bytes");
    if (r.begin > expect) throw FormatError(path, "hole in the data section before tensor '" + r.name + "'");
    expect = r.end;
  }
  if (expect != data_size)
    throw FormatError(path, "data section has " + std::to_string(data_size - expect) + " trailing bytes no tensor covers");
  if (dtypes.size() == 1) store.stored_dtype = *dtypes.begin();
  else {
    for (auto& s : dtypes) store.stored_dtype += (store.stored_dtype.empty() ? "" : "+") + s;
  }
  return store;
}

TensorStore read_safetensors_index(const std::string& index_path) { return read_safetensors_index(index_path, true); }

TensorStore read_safetensors_index(const std::string& index_path, bool upcast_half) {
  return detail::read_sharded_index(index_path, "safetensors",
                                    [upcast_half](const std::string& shard) { return read_safetensors(shard, upcast_half); });
}

}  // namespace vocablens

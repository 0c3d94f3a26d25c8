// NumPy .npz archives as named tensors (Gemma Scope's params.npz).
#include "checkpoint/npz.hpp"

#include <cstring>
#include <set>

#include "checkpoint/mapped_file.hpp"
#include "checkpoint/zip.hpp"
#include "vocablens/error.hpp"

namespace vocablens {
namespace {

// The value text of `key` in the .npy header's Python dict literal, e.g. '<f4' or (64, 96).
std::string dict_value(const std::string& h, const std::string& key, const std::string& where) {
  const std::string k = "'" + key + "':";
  size_t p = h.find(k);
  if (p == std::string::npos) throw FormatError(where, "npy header has no '" + key + "'");
  p += k.size();
  while (p < h.size() && h[p] == ' ') ++p;
  size_t e = p;
  if (p < h.size() && h[p] == '(') {
    e = h.find(')', p);
    if (e == std::string::npos) throw FormatError(where, "npy header: unterminated shape");
    return h.substr(p, e - p + 1);
  }
  if (p < h.size() && h[p] == '\'') {
    e = h.find('\'', p + 1);
    if (e == std::string::npos) throw FormatError(where, "npy header: unterminated string");
    return h.substr(p + 1, e - p - 1);
  }
  while (e < h.size() && h[e] != ',' && h[e] != '}') ++e;
  return h.substr(p, e - p);
}

}  // namespace

TensorStore read_npz(const std::string& path) {
  auto file = MappedFile::open(path);
  zip::Archive ar = zip::Archive::parse(*file);
  TensorStore s;
  s.source = path;
  s.format = "npz";
  std::set<std::string> dtypes;
  for (const auto& e : ar.entries()) {
    const std::string where = path + ":" + zip::printable(e.name);
    if (e.name.size() < 5 || e.name.compare(e.name.size() - 4, 4, ".npy") != 0) continue;
    if (e.method != 0)
      throw FormatError(path, "member '" + zip::printable(e.name) +
                                  "' is compressed (numpy.savez_compressed); only numpy.savez archives are read");
    const uint8_t* d = file->data() + e.data_offset;
    const uint64_t n = e.size;
    if (n < 10 || std::memcmp(d, "\x93NUMPY", 6) != 0) throw FormatError(where, "not a .npy member (bad magic)");
    const int major = d[6];
    uint64_t hlen = 0, hstart = 0;
    if (major == 1) {
      hlen = d[8] | (uint64_t{d[9]} << 8);
      hstart = 10;
    } else if (major == 2 || major == 3) {
      if (n < 12) throw FormatError(where, "truncated .npy header");
      hlen = d[8] | (uint64_t{d[9]} << 8) | (uint64_t{d[10]} << 16) | (uint64_t{d[11]} << 24);
      hstart = 12;
    } else {
      throw FormatError(where, "unsupported .npy version " + std::to_string(major));
    }
    if (hlen > n - hstart || hlen > (1u << 20)) throw FormatError(where, ".npy header runs past the member");
    const std::string h(reinterpret_cast<const char*>(d + hstart), hlen);
    const std::string descr = dict_value(h, "descr", where);
    const std::string fortran = dict_value(h, "fortran_order", where);
    const std::string shape_s = dict_value(h, "shape", where);
    at::ScalarType t;
    std::string st;
    size_t item = 0;
    if (descr == "<f4") t = at::kFloat, st = "F32", item = 4;
    else if (descr == "<f8") t = at::kDouble, st = "F64", item = 8;
    else if (descr == "<f2") t = at::kHalf, st = "F16", item = 2;
    else if (descr == "<i4") t = at::kInt, st = "I32", item = 4;
    else if (descr == "<i8") t = at::kLong, st = "I64", item = 8;
    else throw FormatError(where, "unsupported .npy dtype '" + zip::printable(descr) + "' (read: <f4 <f8 <f2 <i4 <i8)");
    std::vector<int64_t> shape;
    {
      size_t i = 1;  // skip '('
      while (i < shape_s.size()) {
        while (i < shape_s.size() && (shape_s[i] == ' ' || shape_s[i] == ',')) ++i;
        if (i >= shape_s.size() || shape_s[i] == ')') break;
        int64_t v = 0;
        size_t start = i;
        while (i < shape_s.size() && shape_s[i] >= '0' && shape_s[i] <= '9') {
          v = v * 10 + (shape_s[i] - '0');
          if (v > (int64_t{1} << 40)) throw FormatError(where, "npy shape too large");
          ++i;
        }
        if (i == start) throw FormatError(where, "npy header: bad shape " + zip::printable(shape_s));
        shape.push_back(v);
      }
    }
    if (shape.size() > 8) throw FormatError(where, "npy shape has more than 8 dimensions");
    uint64_t numel = 1;
    for (int64_t v : shape) {
      if (v != 0 && numel > (uint64_t{1} << 50) / static_cast<uint64_t>(v)) throw FormatError(where, "npy shape too large");
      numel *= static_cast<uint64_t>(v);
    }
    const uint64_t data_off = hstart + hlen;
    if (numel * item != n - data_off)
      throw FormatError(where, "data size " + std::to_string(n - data_off) + " bytes disagrees with shape " + shape_s);
    std::vector<int64_t> strides;
    if (fortran == "True" && shape.size() > 1) {
      strides.resize(shape.size());
      int64_t st_ = 1;
      for (size_t q = 0; q < shape.size(); ++q) strides[q] = st_, st_ *= shape[q];
    } else if (fortran != "False" && fortran != "True") {
      throw FormatError(where, "npy header: bad fortran_order '" + zip::printable(fortran) + "'");
    }
    at::Tensor tensor = view_as_tensor(file, static_cast<size_t>(e.data_offset + data_off), shape, strides, t);
    std::string name = e.name.substr(0, e.name.size() - 4);
    s.tensors[name] = tensor;
    dtypes.insert(st);
  }
  for (const auto& d : dtypes) s.stored_dtype += (s.stored_dtype.empty() ? "" : "+") + d;
  return s;
}

}  // namespace vocablens

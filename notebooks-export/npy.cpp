// .npy reading and writing (NumPy format 1.0 / 2.0 / 3.0).
#include "vocablens/npy.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "vocablens/detail/atomic_file.hpp"
#include "util/regular_file.hpp"
#include "vocablens/error.hpp"

namespace vocablens {
namespace detail {

// Parses the Python-dict header: {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
struct NpyHeader {
  std::string descr;
  bool fortran = false;
  std::vector<int64_t> shape;
};

std::string dict_value(const std::string& h, const std::string& key, const std::string& path) {
  auto k = h.find("'" + key + "'");
  if (k == std::string::npos) throw FormatError(path, "npy header has no '" + key + "'");
  auto colon = h.find(':', k);
  if (colon == std::string::npos) throw FormatError(path, "npy header is malformed");
  size_t i = colon + 1;
  while (i < h.size() && h[i] == ' ') ++i;
  if (i >= h.size()) throw FormatError(path, "npy header is malformed");
  if (h[i] == '\'') {
    auto end = h.find('\'', i + 1);
    if (end == std::string::npos) throw FormatError(path, "npy header is malformed");
    return h.substr(i + 1, end - i - 1);
  }
  if (h[i] == '(') {
    auto end = h.find(')', i);
    if (end == std::string::npos) throw FormatError(path, "npy header is malformed");
    return h.substr(i, end - i + 1);
  }
  auto end = h.find_first_of(",}", i);
  if (end == std::string::npos) throw FormatError(path, "npy header is malformed");
  return h.substr(i, end - i);
}

NpyHeader parse_header(const std::string& h, const std::string& path) {
  NpyHeader r;
  r.descr = dict_value(h, "descr", path);
  std::string fo = dict_value(h, "fortran_order", path);
  fo.erase(std::remove(fo.begin(), fo.end(), ' '), fo.end());
  if (fo == "True") r.fortran = true;
  else if (fo != "False") throw FormatError(path, "npy header: bad fortran_order '" + fo + "'");
  std::string s = dict_value(h, "shape", path);
  if (s.size() < 2 || s.front() != '(' || s.back() != ')') throw FormatError(path, "npy header: bad shape");
  std::string inner = s.substr(1, s.size() - 2);
  std::stringstream ss(inner);
  std::string tok;
  while (std::getline(ss, tok, ',')) {
    tok.erase(std::remove(tok.begin(), tok.end(), ' '), tok.end());
    if (tok.empty()) continue;
    if (tok.back() == 'L') tok.pop_back();
    // ::isdigit on a plain char is undefined for bytes >= 0x80 (negative char); compare directly.
    if (tok.empty() || tok.size() > 18 || !std::all_of(tok.begin(), tok.end(), [](char c) { return c >= '0' && c <= '9'; }))
      throw FormatError(path, "npy header: bad shape entry '" + tok + "'");
    r.shape.push_back(std::stoll(tok));
  }
  return r;
}

std::string normalise_descr(std::string d) {
  // '=' (native) and '<' are the same on the little-endian machines we support.
  if (!d.empty() && d[0] == '=') d[0] = '<';
  if (d == "<u1" || d == "<i1" || d == "<b1") d[0] = '|';
  return d;
}

}  // namespace detail

size_t npy_itemsize(const std::string& dtype) {
  static const std::pair<const char*, size_t> known[] = {{"<f4", 4}, {"<f8", 8}, {"<f2", 2}, {"<i4", 4}, {"<i8", 8}, {"<u4", 4},
                                                         {"<u8", 8}, {"<i2", 2}, {"<u2", 2}, {"|u1", 1}, {"|i1", 1}, {"|b1", 1}};
  for (auto& [d, s] : known)
    if (dtype == d) return s;
  throw UsageError("unsupported npy dtype '" + dtype + "'");
}

NdArray read_npy(const std::string& path) {
  // A symlink to /dev/zero or a FIFO named X.npy is refused, not read forever / waited on.
  const std::string all = detail::read_regular_file(path, uint64_t{16} << 30, ".npy files");
  if (all.size() < 10 || std::memcmp(all.data(), "\x93NUMPY", 6) != 0) throw FormatError(path, "not a .npy file (bad magic)");
  int major = static_cast<unsigned char>(all[6]);
  size_t hlen = 0, hstart = 0;
  if (major == 1) {
    hlen = static_cast<unsigned char>(all[8]) | (static_cast<size_t>(static_cast<unsigned char>(all[9])) << 8);
    hstart = 10;
  } else if (major == 2 || major == 3) {
    if (all.size() < 12) throw FormatError(path, "truncated npy header");
    hlen = 0;
    for (int i = 0; i < 4; ++i) hlen |= static_cast<size_t>(static_cast<unsigned char>(all[8 + i])) << (8 * i);
    hstart = 12;
  } else {
    throw FormatError(path, "unsupported npy format version " + std::to_string(major));
  }
  if (hstart + hlen > all.size()) throw FormatError(path, "npy header length past end of file");
  auto hdr = detail::parse_header(all.substr(hstart, hlen), path);
  NdArray a;
  a.dtype = detail::normalise_descr(hdr.descr);
  size_t item;
  try {
    item = npy_itemsize(a.dtype);
  } catch (const UsageError&) { throw FormatError(path, "unsupported npy dtype '" + hdr.descr + "'"); }
  a.shape = hdr.shape;
  // Every partial product must fit in int64 (NdArray::numel() multiplies in that order), so (10^18, 10, 0)
  // is refused although it holds no element.
  int64_t elements = 1;
  for (auto s : a.shape)
    if (s < 0 || __builtin_mul_overflow(elements, s, &elements) ||
        static_cast<uint64_t>(elements) > std::numeric_limits<size_t>::max() / item)
      throw FormatError(path, "npy shape too large");
  const size_t n = static_cast<size_t>(elements);
  size_t data_start = hstart + hlen;
  if (all.size() - data_start != n * item)
    throw FormatError(
        path, "npy data size " + std::to_string(all.size() - data_start) + " bytes, shape needs " + std::to_string(n * item));
  a.bytes.assign(all.begin() + static_cast<std::ptrdiff_t>(data_start), all.end());
  if (hdr.fortran && a.shape.size() > 1) {
    // Re-order into C order: element at C index (i0..ik) sits at Fortran offset sum(i_j * prod(shape[<j])).
    std::vector<uint8_t> c(a.bytes.size());
    size_t nd = a.shape.size();
    std::vector<int64_t> idx(nd, 0);
    for (size_t lin = 0; lin < n; ++lin) {
      size_t foff = 0, mul = 1;
      for (size_t j = 0; j < nd; ++j) {
        foff += static_cast<size_t>(idx[j]) * mul;
        mul *= static_cast<size_t>(a.shape[j]);
      }
      std::memcpy(&c[lin * item], &a.bytes[foff * item], item);
      for (size_t j = nd; j-- > 0;) {
        if (++idx[j] < a.shape[j]) break;
        idx[j] = 0;
      }
    }
    a.bytes.swap(c);
  }
  return a;
}

std::string npy_header(const std::string& dtype, const std::vector<int64_t>& shape_in) {
  std::string shape = "(";
  for (size_t i = 0; i < shape_in.size(); ++i) {
    shape += std::to_string(shape_in[i]);
    if (shape_in.size() == 1 || i + 1 < shape_in.size()) shape += ",";
    if (i + 1 < shape_in.size()) shape += " ";
  }
  shape += ")";
  std::string dict = "{'descr': '" + dtype + "', 'fortran_order': False, 'shape': " + shape + ", }";
  bool v2 = dict.size() + 11 > 65535;
  size_t pre = v2 ? 12 : 10;
  size_t total = pre + dict.size() + 1;
  size_t pad = (64 - total % 64) % 64;
  dict.append(pad, ' ');
  dict.push_back('\n');
  std::string out = "\x93NUMPY";
  out.push_back(static_cast<char>(v2 ? 2 : 1));
  out.push_back(0);
  size_t hl = dict.size();
  out.push_back(static_cast<char>(hl & 0xff));
  out.push_back(static_cast<char>((hl >> 8) & 0xff));
  if (v2) {
    out.push_back(static_cast<char>((hl >> 16) & 0xff));
    out.push_back(static_cast<char>((hl >> 24) & 0xff));
  }
  return out + dict;
}

std::string encode_npy(const NdArray& a) {
  size_t item = npy_itemsize(a.dtype);
  if (a.bytes.size() != static_cast<size_t>(a.numel()) * item)
    throw UsageError("npy encode: " + std::to_string(a.bytes.size()) + " bytes do not match shape");
  std::string out = npy_header(a.dtype, a.shape);
  out.append(reinterpret_cast<const char*>(a.bytes.data()), a.bytes.size());
  return out;
}

void write_npy(const std::string& path, const std::string& dtype, const std::vector<int64_t>& shape, const void* data,
               size_t nbytes) {
  AtomicWriter w(path);
  w.write(npy_header(dtype, shape));
  w.write(std::string_view(static_cast<const char*>(data), nbytes));
  w.commit();
}

void write_npy(const std::string& path, const NdArray& a) { write_file_atomic(path, encode_npy(a)); }

}  // namespace vocablens

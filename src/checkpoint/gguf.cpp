// The GGUF reader: a bounds-checked cursor over the mapped file. Every length read from the file is
// compared with the bytes that remain before anything is allocated for it.
#include "vocablens/gguf.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>

#include "util/mapped_file.hpp"
#include "vocablens/vocab_spec.hpp"
#include "vocablens/error.hpp"

namespace vocablens {
namespace detail {
namespace {

enum GgufValueType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kStr = 8,
  kArr = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};
const char* value_type_name(uint32_t t) {
  static const char* names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr", "u64", "i64", "f64"};
  return t < 13 ? names[t] : "?";
}
// Smallest encoded size of one value of type t (strings: the 8-byte length; arrays: type + count).
uint64_t min_value_bytes(uint32_t t) {
  switch (t) {
    case kU8:
    case kI8:
    case kBool: return 1;
    case kU16:
    case kI16: return 2;
    case kU32:
    case kI32:
    case kF32: return 4;
    case kU64:
    case kI64:
    case kF64:
    case kStr: return 8;
    case kArr: return 12;
  }
  return 1;
}

class Cursor {
 public:
  Cursor(const std::string& path, const uint8_t* data, size_t size) : path_(path), p_(data), size_(size) {}
  size_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }
  [[noreturn]] void fail(const std::string& what) const { throw FormatError(path_, what); }
  void need(uint64_t n, const char* what) const {
    if (n > left())
      fail(std::string("truncated file: ") + what + " needs " + std::to_string(n) + " bytes at offset " + std::to_string(pos_) +
           " but only " + std::to_string(left()) + " remain");
  }
  template <class T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string str(const char* what) {
    uint64_t n = read<uint64_t>(what);
    if (n > left())
      fail(std::string(what) + ": string length " + std::to_string(n) + " at offset " + std::to_string(pos_ - 8) +
           " runs past the end of the file");
    std::string s(reinterpret_cast<const char*>(p_ + pos_), static_cast<size_t>(n));
    pos_ += n;
    return s;
  }

 private:
  const std::string& path_;
  const uint8_t* p_;
  size_t size_;
  size_t pos_ = 0;
};

nlohmann::json read_value(Cursor& c, uint32_t type, const std::string& key, int depth, std::string& type_name) {
  using nlohmann::json;
  switch (type) {
    case kU8: type_name = "u8"; return c.read<uint8_t>("u8 value");
    case kI8: type_name = "i8"; return c.read<int8_t>("i8 value");
    case kU16: type_name = "u16"; return c.read<uint16_t>("u16 value");
    case kI16: type_name = "i16"; return c.read<int16_t>("i16 value");
    case kU32: type_name = "u32"; return c.read<uint32_t>("u32 value");
    case kI32: type_name = "i32"; return c.read<int32_t>("i32 value");
    case kU64: type_name = "u64"; return c.read<uint64_t>("u64 value");
    case kI64: type_name = "i64"; return c.read<int64_t>("i64 value");
    case kF32: type_name = "f32"; return static_cast<double>(c.read<float>("f32 value"));
    case kF64: type_name = "f64"; return c.read<double>("f64 value");
    case kBool: {
      type_name = "bool";
      uint8_t b = c.read<uint8_t>("bool value");
      if (b > 1) c.fail("metadata '" + key + "': bool value " + std::to_string(b) + " is neither 0 nor 1");
      return b == 1;
    }
    case kStr: type_name = "str"; return c.str(("metadata '" + key + "' string").c_str());
    case kArr: {
      if (depth >= 4) c.fail("metadata '" + key + "': arrays nested more than 4 deep");
      uint32_t et = c.read<uint32_t>("array element type");
      if (et > kF64) c.fail("metadata '" + key + "': unknown array element type " + std::to_string(et));
      uint64_t n = c.read<uint64_t>("array length");
      // Each element takes at least min_value_bytes: a count the remaining bytes cannot hold is refused
      // before reserving anything (an array of 2^60 elements in a 1 kB file).
      if (n > c.left() / min_value_bytes(et))
        c.fail("metadata '" + key + "': array of " + std::to_string(n) + " " + value_type_name(et) +
               " elements cannot fit in the " + std::to_string(c.left()) + " bytes left in the file");
      json arr = json::array();
      arr.get_ref<json::array_t&>().reserve(static_cast<size_t>(n));
      std::string inner = value_type_name(et);
      for (uint64_t i = 0; i < n; ++i) arr.push_back(read_value(c, et, key, depth + 1, inner));
      type_name = "arr[" + inner + "]";
      return arr;
    }
  }
  c.fail("metadata '" + key + "': unknown value type " + std::to_string(type));
}

}  // namespace
}  // namespace detail

std::string ggml_type_name(uint32_t t) {
  // clang-format off
  // (a list of macro calls, which clang-format would indent a step further on every pass)
  switch (static_cast<GgmlType>(t)) {
#define VL_T(x) case GgmlType::x: return #x;
    VL_T(F32) VL_T(F16) VL_T(Q4_0) VL_T(Q4_1) VL_T(Q5_0) VL_T(Q5_1) VL_T(Q8_0) VL_T(Q8_1) VL_T(Q2_K) VL_T(Q3_K)
    VL_T(Q4_K) VL_T(Q5_K) VL_T(Q6_K) VL_T(Q8_K) VL_T(IQ2_XXS) VL_T(IQ2_XS) VL_T(IQ3_XXS) VL_T(IQ1_S) VL_T(IQ4_NL)
    VL_T(IQ3_S) VL_T(IQ2_S) VL_T(IQ4_XS) VL_T(I8) VL_T(I16) VL_T(I32) VL_T(I64) VL_T(F64) VL_T(IQ1_M) VL_T(BF16)
    VL_T(TQ1_0) VL_T(TQ2_0) VL_T(MXFP4) VL_T(NVFP4) VL_T(Q1_0) VL_T(Q2_0)
#undef VL_T
  }
  // clang-format on
  return "type " + std::to_string(t);
}

int64_t GgufTensorInfo::numel() const {
  int64_t n = 1;
  for (auto v : ne) n *= v;
  return n;
}

const GgufTensorInfo* GgufFile::find(const std::string& name) const {
  for (auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

const uint8_t* GgufFile::tensor_data(const GgufTensorInfo& t) const { return file->data() + t.offset; }

int64_t GgufFile::get_int(const std::string& key, int64_t fallback) const {
  auto it = metadata.find(key);
  if (it == metadata.end()) return fallback;
  if (it->is_number_unsigned()) {
    uint64_t v = it->get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      throw FormatError(path, "metadata '" + key + "' is out of range");
    return static_cast<int64_t>(v);
  }
  if (it->is_number_integer()) return it->get<int64_t>();
  throw FormatError(path, "metadata '" + key + "' is " + metadata_types.at(key) + ", expected an integer");
}

double GgufFile::get_float(const std::string& key, double fallback) const {
  auto it = metadata.find(key);
  if (it == metadata.end()) return fallback;
  if (it->is_number()) return it->get<double>();
  throw FormatError(path, "metadata '" + key + "' is " + metadata_types.at(key) + ", expected a number");
}

std::string GgufFile::get_string(const std::string& key, const std::string& fallback) const {
  auto it = metadata.find(key);
  if (it == metadata.end()) return fallback;
  if (it->is_string()) return it->get<std::string>();
  throw FormatError(path, "metadata '" + key + "' is " + metadata_types.at(key) + ", expected a string");
}

bool is_gguf_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  char m[4] = {};
  f.read(m, 4);
  return f.gcount() == 4 && std::memcmp(m, "GGUF", 4) == 0;
}

GgufFile read_gguf(const std::string& path) {
  using namespace detail;
  GgufFile g;
  g.path = path;
  g.file = MappedFile::open(path);
  Cursor c(path, g.file->data(), g.file->size());
  if (g.file->size() < 4 || std::memcmp(g.file->data(), "GGUF", 4) != 0) c.fail("not a GGUF file (no 'GGUF' magic)");
  c.read<uint32_t>("magic");
  g.version = c.read<uint32_t>("version");
  if (g.version == 1) c.fail("GGUF version 1 is not supported (versions 2 and 3 are)");
  if (g.version != 2 && g.version != 3) {
    if ((g.version & 0xffff) == 0 && g.version != 0)
      c.fail("GGUF version field " + std::to_string(g.version) + " looks big-endian; only little-endian GGUF is supported");
    c.fail("unsupported GGUF version " + std::to_string(g.version) + " (versions 2 and 3 are)");
  }
  const uint64_t n_tensors = c.read<uint64_t>("tensor count");
  const uint64_t n_kv = c.read<uint64_t>("metadata count");
  // A key-value pair takes at least 13 bytes (key length, type, one byte); a tensor info at least 24.
  if (n_kv > c.left() / 13) c.fail("metadata count " + std::to_string(n_kv) + " cannot fit in the file");
  if (n_tensors > c.left() / 24) c.fail("tensor count " + std::to_string(n_tensors) + " cannot fit in the file");

  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = c.str("metadata key");
    uint32_t type = c.read<uint32_t>("metadata value type");
    if (type > kF64) c.fail("metadata '" + key + "': unknown value type " + std::to_string(type));
    if (g.metadata.contains(key)) c.fail("metadata key '" + key + "' appears twice");
    std::string tname;
    nlohmann::json v = read_value(c, type, key, 0, tname);
    g.metadata[key] = std::move(v);
    g.metadata_types[key] = tname;
  }
  if (g.metadata.contains("general.alignment")) {
    const auto& a = g.metadata["general.alignment"];
    if (g.metadata_types["general.alignment"] != "u32") c.fail("general.alignment must be a u32");
    uint64_t al = a.get<uint64_t>();
    if (al == 0 || (al & (al - 1)) != 0) c.fail("general.alignment " + std::to_string(al) + " is not a power of two");
    g.alignment = al;
  }

  std::set<std::string> names;
  g.tensors.reserve(static_cast<size_t>(n_tensors));
  std::vector<uint64_t> rel_offsets;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo t;
    t.name = c.str("tensor name");
    const std::string where = "tensor '" + t.name + "': ";
    if (!names.insert(t.name).second) c.fail(where + "name appears twice");
    uint32_t nd = c.read<uint32_t>("tensor n_dims");
    if (nd < 1 || nd > 4) c.fail(where + "n_dims " + std::to_string(nd) + " (must be 1 to 4)");
    uint64_t numel = 1;
    for (uint32_t d = 0; d < nd; ++d) {
      uint64_t v = c.read<uint64_t>("tensor dimension");
      if (v > (uint64_t(1) << 62) || (v != 0 && numel > (uint64_t(1) << 62) / v)) c.fail(where + "dimensions are too large");
      numel *= v;
      t.ne.push_back(static_cast<int64_t>(v));
    }
    uint32_t type = c.read<uint32_t>("tensor type");
    t.type = static_cast<GgmlType>(type);
    int64_t bv = 0;
    size_t bb = 0;
    if (!ggml_block_layout(t.type, bv, bb)) {
      std::string nm = ggml_type_name(type);
      if (nm.rfind("type ", 0) == 0) c.fail(where + "unknown ggml tensor type " + std::to_string(type));
      c.fail(where + "tensor type " + nm + " (" + std::to_string(type) + ") is not supported by vocablens");
    }
    if (t.ne[0] % bv != 0)
      c.fail(where + "first dimension " + std::to_string(t.ne[0]) + " is not a multiple of " + ggml_type_name(type) +
             "'s block of " + std::to_string(bv));
    t.nbytes = numel / static_cast<uint64_t>(bv) * bb;  // numel <= 2^62, bb <= 292: no overflow after the division
    if (numel / static_cast<uint64_t>(bv) > (uint64_t(1) << 62) / bb) c.fail(where + "byte size overflows");
    uint64_t off = c.read<uint64_t>("tensor offset");
    if (off % g.alignment != 0)
      c.fail(where + "offset " + std::to_string(off) + " is not a multiple of the alignment " + std::to_string(g.alignment));
    rel_offsets.push_back(off);
    g.tensors.push_back(std::move(t));
  }
  uint64_t start = c.pos();
  start += (g.alignment - start % g.alignment) % g.alignment;
  const uint64_t fsize = g.file->size();
  if (n_tensors > 0 && start > fsize)
    c.fail("truncated file: the data section would start at " + std::to_string(start) + ", past the end");
  g.data_offset = start;
  const uint64_t data_size = start <= fsize ? fsize - start : 0;
  struct R {
    uint64_t b, e;
    size_t i;
  };
  std::vector<R> ranges;
  for (size_t i = 0; i < g.tensors.size(); ++i) {
    auto& t = g.tensors[i];
    uint64_t off = rel_offsets[i];
    if (off > data_size || t.nbytes > data_size - off)
      c.fail("tensor '" + t.name + "': data [" + std::to_string(off) + ", +" + std::to_string(t.nbytes) +
             ") runs past the end of the data section (" + std::to_string(data_size) + " bytes)");
    t.offset = start + off;
    ranges.push_back({off, off + t.nbytes, i});
  }
  std::sort(ranges.begin(), ranges.end(), [](const R& a, const R& b) { return a.b < b.b; });
  // Empty tensors occupy no bytes; among the others, each must begin at or after every earlier one's end.
  uint64_t max_end = 0;
  size_t max_i = 0;
  for (auto& r : ranges) {
    if (r.e == r.b) continue;
    if (r.b < max_end) c.fail("tensor '" + g.tensors[r.i].name + "' overlaps tensor '" + g.tensors[max_i].name + "'");
    max_end = r.e;
    max_i = r.i;
  }
  return g;
}

}  // namespace vocablens

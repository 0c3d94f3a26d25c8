// tests/support/torch_zip_writer.hpp — hand-made torch.save files for the reader's tests: a minimal zip writer
// (STORED entries, classic end record) and a builder of pickle protocol-2 opcodes as torch.save emits them.
// Written from the two formats alone, so that each hostile file states exactly which byte is wrong.
//
//   vl_test::Pickle p;
//   p.op('}').op('(').str("w").tensor("0", 6, 0, {2, 3}, {3, 1}).op('u');
//   vl_test::ZipWriter z;
//   z.add("archive/data.pkl", p.done());
//   z.add("archive/data/0", std::string(24, '\0'));
//   std::string file = z.bytes();
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace vl_test {

/// The zip CRC-32 (polynomial 0xEDB88320) of `s`.
inline uint32_t crc32(const std::string& s) {
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : s) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
  }
  return c ^ 0xFFFFFFFFu;
}

/// Appends the low `bytes` bytes of `v` to `out`, little-endian.
inline void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((v >> (8 * i)) & 0xFF);
}

/// A minimal zip writer: STORED entries (optionally marked with another method), classic end record.
struct ZipWriter {
  struct Item {
    std::string name, data;
    uint16_t method;
    uint32_t offset;
  };
  std::vector<Item> items;
  void add(const std::string& name, const std::string& data, uint16_t method = 0) { items.push_back({name, data, method, 0}); }
  std::string bytes() {
    std::string out;
    for (auto& it : items) {
      it.offset = static_cast<uint32_t>(out.size());
      put_le(out, 0x04034b50, 4);
      put_le(out, 20, 2);
      put_le(out, 0, 2);
      put_le(out, it.method, 2);
      put_le(out, 0, 4);  // time, date
      put_le(out, crc32(it.data), 4);
      put_le(out, it.data.size(), 4);
      put_le(out, it.data.size(), 4);
      put_le(out, it.name.size(), 2);
      put_le(out, 0, 2);
      out += it.name;
      out += it.data;
    }
    const size_t cd = out.size();
    for (auto& it : items) {
      put_le(out, 0x02014b50, 4);
      put_le(out, 20, 2);
      put_le(out, 20, 2);
      put_le(out, 0, 2);
      put_le(out, it.method, 2);
      put_le(out, 0, 4);
      put_le(out, crc32(it.data), 4);
      put_le(out, it.data.size(), 4);
      put_le(out, it.data.size(), 4);
      put_le(out, it.name.size(), 2);
      put_le(out, 0, 2);  // extra
      put_le(out, 0, 2);  // comment
      put_le(out, 0, 2);  // disk
      put_le(out, 0, 2);  // internal attributes
      put_le(out, 0, 4);  // external attributes
      put_le(out, it.offset, 4);
      out += it.name;
    }
    const size_t cd_size = out.size() - cd;
    put_le(out, 0x06054b50, 4);
    put_le(out, 0, 2);
    put_le(out, 0, 2);
    put_le(out, items.size(), 2);
    put_le(out, items.size(), 2);
    put_le(out, cd_size, 4);
    put_le(out, cd, 4);
    put_le(out, 0, 2);
    return out;
  }
};

/// Emits pickle protocol-2 opcodes the way torch.save does.
struct Pickle {
  std::string b = std::string("\x80\x02", 2);
  Pickle& op(char c) {
    b += c;
    return *this;
  }
  Pickle& str(const std::string& s) {
    b += 'X';
    put_le(b, s.size(), 4);
    b += s;
    return *this;
  }
  Pickle& integer(int64_t v) {
    if (v >= 0 && v < 256) {
      b += 'K';
      put_le(b, static_cast<uint64_t>(v), 1);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
      b += 'J';
      put_le(b, static_cast<uint64_t>(v), 4);
    } else {
      b += '\x8a';
      b += '\x08';
      put_le(b, static_cast<uint64_t>(v), 8);
    }
    return *this;
  }
  Pickle& real(double d) {
    uint64_t bits;
    std::memcpy(&bits, &d, 8);
    b += 'G';
    for (int i = 7; i >= 0; --i) b += static_cast<char>((bits >> (8 * i)) & 0xFF);
    return *this;
  }
  Pickle& global(const std::string& module, const std::string& name) {
    b += 'c' + module + "\n" + name + "\n";
    return *this;
  }
  Pickle& ints(const std::vector<int64_t>& v) {
    op('(');
    for (auto x : v) integer(x);
    return op('t');
  }
  // _rebuild_tensor_v2(('storage', torch.<type>, key, 'cpu', numel), offset, sizes, strides, False, OrderedDict())
  Pickle& tensor(const std::string& key, int64_t numel, int64_t offset, const std::vector<int64_t>& sizes,
                 const std::vector<int64_t>& strides, const std::string& type = "FloatStorage") {
    global("torch._utils", "_rebuild_tensor_v2");
    op('(');
    op('(').str("storage").global("torch", type).str(key).str("cpu").integer(numel).op('t').op('Q');
    integer(offset).ints(sizes).ints(strides).op('\x89');
    global("collections", "OrderedDict").op(')').op('R');
    return op('t').op('R');
  }
  std::string done() { return b + "."; }
};

}  // namespace vl_test

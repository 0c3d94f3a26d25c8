// checkpoint/zip.cpp — central-directory parsing (APPNOTE.TXT 6.3, sections 4.3.7-4.3.16, 4.5.3).
//
// Every multi-byte read goes through Reader, which checks the requested range against the bytes it was
// given; every offset taken from the file is checked against the file size before it is followed.
#include "checkpoint/zip.hpp"

#include <array>
#include <limits>

#include "vocablens/error.hpp"

namespace vocablens::zip {
namespace detail {

constexpr uint32_t kLocalSig = 0x04034b50;
constexpr uint32_t kCentralSig = 0x02014b50;
constexpr uint32_t kEndSig = 0x06054b50;
constexpr uint32_t kEnd64Sig = 0x06064b50;
constexpr uint32_t kEnd64LocatorSig = 0x07064b50;
constexpr size_t kEndSize = 22, kEnd64Size = 56, kLocatorSize = 20, kCentralSize = 46, kLocalSize = 30;
constexpr uint16_t kZip64ExtraId = 0x0001;

// Little-endian reads from a bounded byte range; any read past `size` throws FormatError.
class Reader {
 public:
  Reader(const std::string& path, const uint8_t* data, size_t size) : path_(path), data_(data), size_(size) {}
  uint16_t u16(size_t at) const { return static_cast<uint16_t>(get(at, 2)); }
  uint32_t u32(size_t at) const { return static_cast<uint32_t>(get(at, 4)); }
  uint64_t u64(size_t at) const { return get(at, 8); }
  /// Throws unless [at, at + n) lies inside the range; `what` names the structure for the message.
  void need(uint64_t at, uint64_t n, const char* what) const {
    if (at > size_ || n > size_ - at)
      throw FormatError(path_, std::string("zip: ") + what + " at offset " + std::to_string(at) +
                                   " runs past the end of the file (" + std::to_string(size_) + " bytes)");
  }
  const uint8_t* ptr(size_t at) const { return data_ + at; }
  size_t size() const { return size_; }

 private:
  uint64_t get(size_t at, size_t n) const {
    need(at, n, "field");
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(data_[at + i]) << (8 * i);
    return v;
  }
  const std::string& path_;
  const uint8_t* data_;
  size_t size_;
};

// Where the central directory is, from the (zip64) end record.
struct Directory {
  uint64_t offset = 0, size = 0, count = 0;
  uint64_t end = 0;  // first byte after the directory that belongs to the end records
};

Directory locate_directory(const Reader& r, const std::string& path) {
  if (r.size() < kEndSize) throw FormatError(path, "not a zip archive (file too small: " + std::to_string(r.size()) + " bytes)");
  // The end record is the last 22 bytes plus a comment of up to 65535 bytes; search backwards for a
  // signature whose comment length ends exactly at the end of the file (a comment may contain the bytes).
  const size_t last = r.size() - kEndSize;
  const size_t first = last > 0xFFFF ? last - 0xFFFF : 0;
  size_t eocd = SIZE_MAX;
  for (size_t pos = last + 1; pos-- > first;) {
    if (r.u32(pos) == kEndSig && pos + kEndSize + r.u16(pos + 20) == r.size()) {
      eocd = pos;
      break;
    }
  }
  if (eocd == SIZE_MAX) throw FormatError(path, "not a zip archive (no end-of-central-directory record)");
  Directory d;
  uint32_t disk = r.u16(eocd + 4), cd_disk = r.u16(eocd + 6);
  uint64_t on_disk = r.u16(eocd + 8);
  d.count = r.u16(eocd + 10);
  d.size = r.u32(eocd + 12);
  d.offset = r.u32(eocd + 16);
  d.end = eocd;
  // A zip64 locator right before the end record means the 16/32-bit fields are (or may be) placeholders.
  if (eocd >= kLocatorSize && r.u32(eocd - kLocatorSize) == kEnd64LocatorSig) {
    const size_t loc = eocd - kLocatorSize;
    uint64_t rec = r.u64(loc + 8);
    uint32_t total_disks = r.u32(loc + 16);
    if (r.u32(loc + 4) != 0 || total_disks > 1) throw FormatError(path, "zip: multi-disk archives are not supported");
    if (rec > loc || loc - rec < kEnd64Size)
      throw FormatError(path, "zip: zip64 end record offset " + std::to_string(rec) + " is out of place");
    if (r.u32(rec) != kEnd64Sig) throw FormatError(path, "zip: bad zip64 end-of-central-directory signature");
    disk = r.u32(rec + 16);
    cd_disk = r.u32(rec + 20);
    on_disk = r.u64(rec + 24);
    d.count = r.u64(rec + 32);
    d.size = r.u64(rec + 40);
    d.offset = r.u64(rec + 48);
    d.end = rec;
  } else if (d.count == 0xFFFF || d.size == 0xFFFFFFFF || d.offset == 0xFFFFFFFF) {
    throw FormatError(path, "zip: end record needs zip64 values but there is no zip64 locator");
  }
  if (disk != 0 || cd_disk != 0 || on_disk != d.count) throw FormatError(path, "zip: multi-disk archives are not supported");
  if (d.offset > d.end || d.size > d.end - d.offset)
    throw FormatError(path, "zip: central directory [" + std::to_string(d.offset) + ", +" + std::to_string(d.size) +
                                ") does not lie before the end record (offset " + std::to_string(d.end) + ")");
  // Each record is at least 46 bytes: this bounds the entry count (and what we reserve) by the file size.
  if (d.count > d.size / kCentralSize)
    throw FormatError(path, "zip: " + std::to_string(d.count) + " entries cannot fit in a " + std::to_string(d.size) +
                                "-byte central directory");
  return d;
}

// Replaces 0xFFFFFFFF placeholders with the values of the zip64 extra field (APPNOTE 4.5.3: present in
// the order uncompressed, compressed, local offset, disk, and only for fields that are placeholders).
void apply_zip64_extra(const Reader& r, size_t extra, size_t extra_len, Entry& e, uint64_t& local, bool need_size,
                       bool need_csize, bool need_local, const std::string& path) {
  const size_t end = extra + extra_len;
  size_t pos = extra;
  bool found = false;
  while (pos + 4 <= end) {
    uint16_t id = r.u16(pos), len = r.u16(pos + 2);
    if (len > end - (pos + 4))
      throw FormatError(path, "zip: extra field of entry '" + printable(e.name) + "' overruns its record");
    if (id == kZip64ExtraId) {
      found = true;
      size_t f = pos + 4, fend = f + len;
      auto take = [&](uint64_t& out) {
        if (fend - f < 8) throw FormatError(path, "zip: zip64 extra field of entry '" + printable(e.name) + "' is too short");
        out = r.u64(f);
        f += 8;
      };
      if (need_size) take(e.size);
      if (need_csize) take(e.compressed_size);
      if (need_local) take(local);
    }
    pos += 4 + len;
  }
  if ((need_size || need_csize || need_local) && !found)
    throw FormatError(path, "zip: entry '" + printable(e.name) + "' has 32-bit placeholders but no zip64 extra field");
}

}  // namespace detail

Archive Archive::parse(const MappedFile& file) {
  using namespace detail;
  const std::string& path = file.path();
  Reader r(path, file.data(), file.size());
  Directory dir = locate_directory(r, path);
  Archive ar;
  ar.entries_.reserve(dir.count);
  size_t pos = dir.offset;
  const size_t cd_end = dir.offset + dir.size;
  for (uint64_t i = 0; i < dir.count; ++i) {
    if (pos > cd_end || cd_end - pos < kCentralSize)
      throw FormatError(path, "zip: central directory record " + std::to_string(i) + " runs past the directory");
    if (r.u32(pos) != kCentralSig)
      throw FormatError(path, "zip: bad central directory signature at offset " + std::to_string(pos));
    Entry e;
    const uint16_t flags = r.u16(pos + 8);
    e.method = r.u16(pos + 10);
    e.crc32 = r.u32(pos + 16);
    e.compressed_size = r.u32(pos + 20);
    e.size = r.u32(pos + 24);
    const size_t name_len = r.u16(pos + 28), extra_len = r.u16(pos + 30), comment_len = r.u16(pos + 32);
    const uint16_t disk = r.u16(pos + 34);
    uint64_t local = r.u32(pos + 42);
    const size_t rec_len = kCentralSize + name_len + extra_len + comment_len;
    if (rec_len > cd_end - pos)
      throw FormatError(path, "zip: central directory record " + std::to_string(i) + " runs past the directory");
    e.name.assign(reinterpret_cast<const char*>(r.ptr(pos + kCentralSize)), name_len);
    apply_zip64_extra(r, pos + kCentralSize + name_len, extra_len, e, local, e.size == 0xFFFFFFFF,
                      e.compressed_size == 0xFFFFFFFF, local == 0xFFFFFFFF, path);
    if (flags & 0x0041) throw FormatError(path, "zip: entry '" + printable(e.name) + "' is encrypted");
    if (disk != 0 && disk != 0xFFFF) throw FormatError(path, "zip: multi-disk archives are not supported");
    if (e.method == 0 && e.compressed_size != e.size)
      throw FormatError(path, "zip: stored entry '" + printable(e.name) + "' has compressed size " +
                                  std::to_string(e.compressed_size) + " != size " + std::to_string(e.size));

    // The local header repeats the name and may carry a different extra field; data follows it.
    if (local >= dir.offset)
      throw FormatError(path, "zip: local header of '" + printable(e.name) + "' is not before the central directory");
    r.need(local, kLocalSize, "local header");
    if (r.u32(local) != kLocalSig) throw FormatError(path, "zip: bad local header signature for '" + printable(e.name) + "'");
    const size_t lname = r.u16(local + 26), lextra = r.u16(local + 28);
    r.need(local + kLocalSize, lname + lextra, "local header name");
    if (lname != name_len || std::memcmp(r.ptr(local + kLocalSize), e.name.data(), name_len) != 0)
      throw FormatError(path, "zip: local header name differs from the directory for '" + printable(e.name) + "'");
    if (r.u16(local + 8) != e.method) throw FormatError(path, "zip: local header method differs for '" + printable(e.name) + "'");
    e.data_offset = local + kLocalSize + lname + lextra;
    if (e.data_offset > dir.offset || e.compressed_size > dir.offset - e.data_offset)
      throw FormatError(path, "zip: data of '" + printable(e.name) + "' (" + std::to_string(e.compressed_size) +
                                  " bytes at offset " + std::to_string(e.data_offset) + ") overruns the central directory");

    if (!ar.by_name_.emplace(e.name, ar.entries_.size()).second)
      throw FormatError(path, "zip: duplicate entry '" + printable(e.name) + "'");
    ar.entries_.push_back(std::move(e));
    pos += rec_len;
  }
  if (pos != cd_end)
    throw FormatError(path, "zip: central directory has " + std::to_string(cd_end - pos) + " bytes after its last record");
  return ar;
}

const Entry* Archive::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &entries_[it->second];
}

uint32_t crc32(const uint8_t* data, size_t size) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i) c = table[(c ^ data[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

std::string printable(const std::string& s, size_t max_len) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    if (out.size() >= max_len) {
      out += "...";
      break;
    }
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

}  // namespace vocablens::zip

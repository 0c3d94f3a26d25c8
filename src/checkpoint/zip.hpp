// checkpoint/zip.hpp — a validating reader of a zip archive's central directory (zip64 included).
//
// Only what checkpoint readers need: the list of entries and where each one's bytes lie in the file.
// PyTorch writes every entry STORED (uncompressed), so entry data can be viewed in place; compressed
// entries are listed (method != 0) and left to the caller to refuse.
//
//   auto file = MappedFile::open(path);
//   zip::Archive ar = zip::Archive::parse(*file);        // throws FormatError(path, ...)
//   if (const zip::Entry* e = ar.find("archive/data.pkl")) use(file->data() + e->data_offset, e->size);
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "checkpoint/mapped_file.hpp"

namespace vocablens::zip {

/// One archive member, with every number checked against the file: for a stored entry,
/// [data_offset, data_offset + size) lies inside the file.
struct Entry {
  std::string name;
  uint16_t method = 0;           ///< 0 = stored, 8 = deflate, ...
  uint32_t crc32 = 0;            ///< as recorded in the central directory
  uint64_t compressed_size = 0;  ///< bytes in the file
  uint64_t size = 0;             ///< uncompressed bytes
  uint64_t data_offset = 0;      ///< first data byte (after the local header)
};

class Archive {
 public:
  /// Parses the end-of-central-directory record (and its zip64 variant), every central-directory
  /// record and every local header. Throws FormatError(file.path(), "...") on anything malformed:
  /// a missing/inconsistent end record, records or names running out of their bounds, encrypted or
  /// multi-disk archives, duplicate names, local headers that disagree with the directory, data past
  /// the end of the file.
  static Archive parse(const MappedFile& file);

  const std::vector<Entry>& entries() const { return entries_; }
  /// The entry named exactly `name`, or nullptr.
  const Entry* find(const std::string& name) const;

 private:
  std::vector<Entry> entries_;
  std::unordered_map<std::string, size_t> by_name_;
};

/// CRC-32 (the zip / IEEE 802.3 polynomial) of [data, data + size).
uint32_t crc32(const uint8_t* data, size_t size);

/// `s` made safe for a one-line error message: control and non-ASCII bytes escaped as \xNN and the
/// result cut to about `max_len` characters. Entry and key names come from hostile files.
std::string printable(const std::string& s, size_t max_len = 80);

}  // namespace vocablens::zip

// util/mapped_file.hpp — a whole file mapped into memory (no LibTorch), shared by whatever views it.
//
// Readers map a file once and read from data(): nothing is read from disk until a page is touched, and the
// mapping lives as long as any holder of the shared_ptr (checkpoint/mapped_file.hpp's tensor views, GgufFile).
//
//   auto file = MappedFile::open(path);            // throws FormatError naming the path
//   const uint8_t* bytes = file->data();           // file->size() bytes
//
// The mapping is MAP_PRIVATE with PROT_READ|PROT_WRITE over a file opened O_RDONLY: the file itself can
// never be modified through it, but an in-place op on a tensor viewing it gets private copy-on-write pages
// instead of a SIGSEGV. As with any mapping, a file truncated by another process while mapped raises SIGBUS
// on access; checkpoints are not expected to change under us.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace vocablens {

class MappedFile {
 public:
  /// Maps the regular file at `path` in full. An empty file gives size() == 0 and a non-null data().
  /// Throws FormatError(path, "cannot open: <strerror>") / "not a regular file" / "cannot map: ...".
  static std::shared_ptr<MappedFile> open(const std::string& path);

  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  /// First byte of the file; page-aligned (so offset alignment == address alignment). Never null.
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile(std::string path, uint8_t* data, size_t size, bool mapped)
      : path_(std::move(path)), data_(data), size_(size), mapped_(mapped) {}
  std::string path_;
  uint8_t* data_;
  size_t size_;
  bool mapped_;  // false for an empty file (mmap of 0 bytes is an error; data_ points at a static byte)
};

}  // namespace vocablens

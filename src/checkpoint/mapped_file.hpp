// checkpoint/mapped_file.hpp — a whole file mapped into memory, shared by the tensors that view it.
//
// Checkpoint readers map the file once and hand out at::Tensor views of it: nothing is read from disk
// until a page is touched, and the mapping stays alive as long as any tensor viewing it does (each
// tensor's deleter holds a std::shared_ptr<MappedFile>).
//
//   auto file = MappedFile::open(path);                              // throws FormatError
//   at::Tensor w = view_as_tensor(file, offset, {rows, cols}, {}, at::kFloat);
//
// The mapping is MAP_PRIVATE with PROT_READ|PROT_WRITE over a file opened O_RDONLY: the file itself can
// never be modified through it, but an in-place op on a loaded tensor (at::Tensor has no read-only flag)
// gets private copy-on-write pages instead of a SIGSEGV. As with any mapping, a file truncated by another
// process while mapped raises SIGBUS on access; checkpoints are not expected to change under us.
#pragma once
#include <ATen/ATen.h>

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

/// A tensor of `dtype` whose element [i0, i1, ...] is at byte
///   offset + (i0 * strides[0] + i1 * strides[1] + ...) * element_size
/// of `file`. Empty `strides` means contiguous. Sizes and strides must be non-negative (same count).
/// Checks that every addressed byte lies inside the file (overflow-safe) and throws
/// FormatError(file->path(), "...") otherwise, so callers may pass unvalidated numbers.
/// Returns a zero-copy view (keeping `file` alive) when the first element is aligned for `dtype`;
/// otherwise a copy with the same sizes and strides (unaligned loads are UB for vectorised kernels).
/// Bool data is always copied and normalised to 0/1 (any other byte value is UB in a C++ bool).
at::Tensor view_as_tensor(const std::shared_ptr<MappedFile>& file, size_t offset, at::IntArrayRef sizes,
                          at::IntArrayRef strides, at::ScalarType dtype);

}  // namespace vocablens

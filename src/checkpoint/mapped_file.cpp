// checkpoint/mapped_file.cpp — bounds-checked tensor views of a mapped file.
#include "checkpoint/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "vocablens/error.hpp"

namespace vocablens {
namespace detail {
namespace {

// Highest byte (exclusive) addressed by a strided tensor relative to its first element, in bytes;
// false on overflow or on a negative size/stride. 0 for an empty tensor.
bool strided_span_bytes(at::IntArrayRef sizes, at::IntArrayRef strides, size_t elem, uint64_t& span) {
  bool empty = false;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] < 0 || strides[d] < 0) return false;
    if (sizes[d] == 0) empty = true;
  }
  span = 0;
  if (empty) return true;  // addresses nothing, whatever the strides
  uint64_t max_index = 0;  // largest element index addressed
  for (size_t d = 0; d < sizes.size(); ++d) {
    uint64_t step = 0;
    if (__builtin_mul_overflow(static_cast<uint64_t>(sizes[d] - 1), static_cast<uint64_t>(strides[d]), &step) ||
        __builtin_add_overflow(max_index, step, &max_index))
      return false;
  }
  uint64_t count = 0;
  return !__builtin_add_overflow(max_index, uint64_t{1}, &count) && !__builtin_mul_overflow(count, uint64_t{elem}, &span);
}

// A misaligned span of at least 256 MB, copied into an unnamed temporary file (O_TMPFILE in $TMPDIR or /tmp)
// and mapped copy-on-write: its pages are file-backed, so the kernel (and MADV_PAGEOUT from a reader going
// through it in chunks) can drop and re-read them, where an aligned heap copy would keep all of it resident —
// a 262k-feature Gemma Scope params.npz (numpy does not align members) holds two 2.4 GB matrices. The source
// pages are given back as they are copied. Undefined tensor when the file cannot be made (the caller copies).
at::Tensor temp_file_copy(const uint8_t* first, size_t span, at::IntArrayRef sizes, at::IntArrayRef strides,
                          const at::TensorOptions& options) {
  const char* dir = std::getenv("TMPDIR");
  if (!dir || !*dir) dir = "/tmp";
  const int fd = ::open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return {};
#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif
  const uintptr_t pg = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  for (size_t off = 0; off < span;) {
    const size_t n = std::min(span - off, size_t{64} << 20);
    const ssize_t w = ::pwrite(fd, first + off, n, static_cast<off_t>(off));
    if (w <= 0) {
      ::close(fd);
      return {};
    }
    const uintptr_t a = (reinterpret_cast<uintptr_t>(first + off) + pg - 1) / pg * pg;
    const uintptr_t b = reinterpret_cast<uintptr_t>(first + off + static_cast<size_t>(w)) / pg * pg;
    if (b > a) ::madvise(reinterpret_cast<void*>(a), b - a, MADV_PAGEOUT);
    off += static_cast<size_t>(w);
  }
  void* p = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  ::close(fd);  // (the mapping keeps the unnamed file alive; it disappears with the mapping)
  if (p == MAP_FAILED) return {};
  return at::from_blob(
      p, sizes, strides, [p, span](void*) { ::munmap(p, span); }, options);
}

}  // namespace
}  // namespace detail

at::Tensor view_as_tensor(const std::shared_ptr<MappedFile>& file, size_t offset, at::IntArrayRef sizes, at::IntArrayRef strides,
                          at::ScalarType dtype) {
  const std::string& path = file->path();
  if (dtype == at::kBool) {
    // Normalise: a stored byte 2 read as bool is undefined behaviour in every kernel touching it.
    return view_as_tensor(file, offset, sizes, strides, at::kByte).ne(0);
  }
  std::vector<int64_t> contiguous;
  if (strides.empty() && !sizes.empty()) {
    // Row-major strides; overflow is caught below by strided_span_bytes (products only grow).
    contiguous.assign(sizes.size(), 1);
    for (size_t d = sizes.size() - 1; d > 0; --d) {
      int64_t next = 0;
      if (sizes[d] < 0 || __builtin_mul_overflow(contiguous[d], std::max<int64_t>(sizes[d], 1), &next))
        throw FormatError(path, "tensor shape is too large");
      contiguous[d - 1] = next;
    }
    strides = contiguous;
  }
  if (strides.size() != sizes.size())
    throw FormatError(path,
                      "tensor has " + std::to_string(sizes.size()) + " sizes but " + std::to_string(strides.size()) + " strides");
  const size_t elem = c10::elementSize(dtype);
  uint64_t span = 0;
  if (!detail::strided_span_bytes(sizes, strides, elem, span))
    throw FormatError(path, "tensor shape/strides are negative or too large");
  if (offset > file->size() || span > file->size() - offset)
    throw FormatError(path, "tensor data [" + std::to_string(offset) + ", +" + std::to_string(span) +
                                ") runs past the end of the file (" + std::to_string(file->size()) + " bytes)");
  auto options = at::TensorOptions().dtype(dtype);
  if (span == 0) return at::empty_strided(sizes, strides, options);
  uint8_t* first = const_cast<uint8_t*>(file->data()) + offset;  // writable: the mapping is copy-on-write
  if (reinterpret_cast<uintptr_t>(first) % elem == 0) {
    // The deleter owns a reference to the mapping: the view outlives the reader, the file outlives the view.
    std::shared_ptr<MappedFile> keep = file;
    return at::from_blob(
        first, sizes, strides, [keep](void*) mutable { keep.reset(); }, options);
  }
  // Misaligned: copy the addressed span into a fresh (aligned) buffer and view it with the same strides (a
  // large one into a mapped temporary file, see temp_file_copy).
  if (span >= (uint64_t{256} << 20)) {
    at::Tensor t = detail::temp_file_copy(first, static_cast<size_t>(span), sizes, strides, options);
    if (t.defined()) return t;
  }
  at::Tensor buffer = at::empty({static_cast<int64_t>(span / elem)}, options);
  std::memcpy(buffer.data_ptr(), first, span);
  return buffer.as_strided(sizes, strides, 0);
}

}  // namespace vocablens

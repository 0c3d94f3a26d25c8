// checkpoint/mapped_file.hpp — tensors that view a mapped file (util/mapped_file.hpp) without copying it.
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
#include <memory>

#include "util/mapped_file.hpp"

namespace vocablens {

/// A tensor of `dtype` whose element [i0, i1, ...] is at byte
///   offset + (i0 * strides[0] + i1 * strides[1] + ...) * element_size
/// of `file`. Empty `strides` means contiguous. Sizes and strides must be non-negative (same count).
/// Checks that every addressed byte lies inside the file (overflow-safe) and throws
/// FormatError(file->path(), "...") otherwise, so callers may pass unvalidated numbers.
/// Returns a zero-copy view (keeping `file` alive) when the first element is aligned for `dtype`;
/// otherwise a copy with the same sizes and strides (unaligned loads are UB for vectorised kernels).
/// Bool data is always copied and normalised to 0/1 (any other byte value is UB in a C++ bool).
at::Tensor view_as_tensor(const std::shared_ptr<MappedFile>& file, size_t offset, at::IntArrayRef sizes, at::IntArrayRef strides,
                          at::ScalarType dtype);

}  // namespace vocablens

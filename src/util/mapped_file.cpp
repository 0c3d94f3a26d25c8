// util/mapped_file.cpp — the mmap wrapper; see mapped_file.hpp.
#include "util/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>

#include "vocablens/error.hpp"

namespace vocablens {
namespace detail {
namespace {

// mmap(0 bytes) fails, so an empty file points here: data() is never null, size() is 0.
const uint8_t kEmptyByte = 0;

// Closes the descriptor on every path out of open(); the mapping does not need it once made.
struct FdGuard {
  int fd;
  ~FdGuard() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace
}  // namespace detail

std::shared_ptr<MappedFile> MappedFile::open(const std::string& path) {
  // O_NONBLOCK: a FIFO is refused below instead of blocking the open until a writer appears.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw FormatError(path, std::string("cannot open: ") + std::strerror(errno));
  detail::FdGuard guard{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw FormatError(path, std::string("cannot stat: ") + std::strerror(errno));
  // Directories, FIFOs and devices have no meaningful size to map (and /dev/zero would be "infinite").
  if (S_ISDIR(st.st_mode)) throw FormatError(path, "is a directory, not a file");
  if (!S_ISREG(st.st_mode)) throw FormatError(path, "not a regular file");
  if (st.st_size < 0 || static_cast<uint64_t>(st.st_size) > std::numeric_limits<size_t>::max())
    throw FormatError(path, "file size out of range");
  const size_t size = static_cast<size_t>(st.st_size);
  if (size == 0)
    return std::shared_ptr<MappedFile>(new MappedFile(path, const_cast<uint8_t*>(&detail::kEmptyByte), 0, false));
  // MAP_PRIVATE + PROT_WRITE: see the header — writes become private copies, never reach the file.
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  if (p == MAP_FAILED) throw FormatError(path, std::string("cannot map: ") + std::strerror(errno));
  return std::shared_ptr<MappedFile>(new MappedFile(path, static_cast<uint8_t*>(p), size, true));
}

MappedFile::~MappedFile() {
  if (mapped_) ::munmap(data_, size_);
}

}  // namespace vocablens

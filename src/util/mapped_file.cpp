// util/mapped_file.cpp — the mmap wrapper; see mapped_file.hpp.
#include "util/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <mutex>
#include <vector>

#include "vocablens/error.hpp"

namespace vocablens {
namespace detail {
namespace {

// mmap(0 bytes) fails, so an empty file points here: data() is never null, size() is 0.
const uint8_t kEmptyByte = 0;

// Closes the descriptor on every path out of open() that does not hand it to the MappedFile.
struct FdGuard {
  int fd;
  ~FdGuard() {
    if (fd >= 0) ::close(fd);
  }
  int release() {
    const int f = fd;
    fd = -1;
    return f;
  }
};

int64_t mtime_ns(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + static_cast<int64_t>(st.st_mtim.tv_nsec);
}

// Every live mapping, for check_all_unchanged(). Registered by the constructor, removed by the destructor.
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::vector<const MappedFile*>& registry() {
  static std::vector<const MappedFile*> r;
  return r;
}

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
    return std::shared_ptr<MappedFile>(
        new MappedFile(path, const_cast<uint8_t*>(&detail::kEmptyByte), 0, false, guard.release(), detail::mtime_ns(st)));
  // MAP_PRIVATE + PROT_WRITE: see the header — writes become private copies, never reach the file.
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  if (p == MAP_FAILED) throw FormatError(path, std::string("cannot map: ") + std::strerror(errno));
  return std::shared_ptr<MappedFile>(
      new MappedFile(path, static_cast<uint8_t*>(p), size, true, guard.release(), detail::mtime_ns(st)));
}

MappedFile::MappedFile(std::string path, uint8_t* data, size_t size, bool mapped, int fd, int64_t mtime_ns)
    : path_(std::move(path)), data_(data), size_(size), mapped_(mapped), fd_(fd), mtime_ns_(mtime_ns) {
  std::lock_guard<std::mutex> lock(detail::registry_mutex());
  detail::registry().push_back(this);
}

MappedFile::~MappedFile() {
  {
    std::lock_guard<std::mutex> lock(detail::registry_mutex());
    auto& r = detail::registry();
    r.erase(std::remove(r.begin(), r.end(), this), r.end());
  }
  if (mapped_) ::munmap(data_, size_);
  if (fd_ >= 0) ::close(fd_);
}

void MappedFile::check_unchanged() const {
  struct stat st {};
  if (fd_ < 0 || ::fstat(fd_, &st) != 0) return;  // nothing to compare with: the mapping itself is unaffected
  const auto now = static_cast<uint64_t>(st.st_size);
  if (now < size_)
    throw FormatError(path_, "changed on disk since it was loaded: truncated from " + std::to_string(size_) + " to " +
                                 std::to_string(now) + " bytes (reading it now would crash); load it again");
  if (detail::mtime_ns(st) != mtime_ns_)
    throw FormatError(path_,
                      "changed on disk since it was loaded: written in place (its modification time moved), "
                      "so the weights read from now on would not be the ones loaded; load it again");
}

bool MappedFile::release_pages(const void* p, size_t n) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(detail::registry_mutex());
  for (const MappedFile* f : detail::registry()) {
    const auto lo = reinterpret_cast<uintptr_t>(f->data_);
    if (!f->mapped_ || a < lo || a - lo > f->size_ || n > f->size_ - (a - lo)) continue;
    const auto pg = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    const uintptr_t b = (a + pg - 1) / pg * pg, e = (a + n) / pg * pg;
    // MADV_DONTNEED on a private file mapping drops the page table entries; the page cache keeps the
    // file's pages, so a later touch is a minor fault, not a read from disk (MADV_PAGEOUT would evict them).
    if (e > b) ::madvise(reinterpret_cast<void*>(b), e - b, MADV_DONTNEED);
    return true;
  }
  return false;
}

void MappedFile::check_all_unchanged() {
  std::lock_guard<std::mutex> lock(detail::registry_mutex());
  for (const MappedFile* f : detail::registry()) f->check_unchanged();
}

}  // namespace vocablens

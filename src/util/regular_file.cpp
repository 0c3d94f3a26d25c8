// Reading only regular files of bounded size: no /dev/zero, no blocking on a FIFO.
#include "util/regular_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "vocablens/error.hpp"

namespace vocablens::detail {

namespace {
std::string kind_of(mode_t m) {
  if (S_ISREG(m)) return "";
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO (named pipe)";
  if (S_ISCHR(m)) return "a character device (like /dev/zero)";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}
}  // namespace

std::string file_kind(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "";
  return kind_of(st.st_mode);
}

namespace {
// Opens `path` O_NONBLOCK (a FIFO does not block), fstat's the descriptor (no race with a rename) and
// refuses anything but a regular file of at most max_bytes. Returns the open descriptor and the size.
int open_checked(const std::string& path, uint64_t max_bytes, const std::string& what, uint64_t& size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int e = errno;
    if (e == ENOENT) throw FormatError(path, "no such file");
    throw FormatError(path, std::string("cannot open: ") + std::strerror(e));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    throw FormatError(path, std::string("cannot stat: ") + std::strerror(e));
  }
  const std::string kind = kind_of(st.st_mode);
  if (!kind.empty()) {
    ::close(fd);
    throw FormatError(path, "is " + kind + ", not a regular file");
  }
  if (st.st_size < 0 || static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    throw FormatError(path, "file is " + std::to_string(st.st_size) + " bytes; " + what + " larger than " +
                                std::to_string(max_bytes >> 20) + " MB are refused");
  }
  size = static_cast<uint64_t>(st.st_size);
  return fd;
}
}  // namespace

uint64_t check_regular_file(const std::string& path, uint64_t max_bytes, const std::string& what) {
  uint64_t size = 0;
  ::close(open_checked(path, max_bytes, what, size));
  return size;
}

std::string read_regular_file(const std::string& path, uint64_t max_bytes, const std::string& what) {
  uint64_t size = 0;
  const int fd = open_checked(path, max_bytes, what, size);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  std::string out(static_cast<size_t>(size), '\0');
  size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = ::read(fd, &out[got], out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw FormatError(path, std::string("read error: ") + std::strerror(errno));
    if (n == 0) break;  // the file shrank while being read
    got += static_cast<size_t>(n);
  }
  out.resize(got);
  return out;
}

}  // namespace vocablens::detail

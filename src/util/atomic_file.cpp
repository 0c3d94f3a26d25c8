#include "vocablens/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "vocablens/error.hpp"

namespace vocablens {
namespace detail {

// Temporary files in flight, as fixed-size C strings so that the SIGINT handler can unlink them
// without allocating.
constexpr size_t kMaxPending = 64;
constexpr size_t kMaxPath = 4096;
struct PendingSlot {
  std::atomic<bool> used{false};
  char path[kMaxPath];
};
std::array<PendingSlot, kMaxPending> g_pending;

int register_pending(const std::string& p) {
  if (p.size() + 1 > kMaxPath) return -1;
  for (size_t i = 0; i < kMaxPending; ++i) {
    bool expected = false;
    if (!g_pending[i].used.load() ) {
      std::memcpy(g_pending[i].path, p.c_str(), p.size() + 1);
      if (g_pending[i].used.compare_exchange_strong(expected, true)) return static_cast<int>(i);
    }
  }
  return -1;
}
void unregister_pending(int slot) {
  if (slot >= 0) g_pending[static_cast<size_t>(slot)].used.store(false);
}

}  // namespace detail

void remove_pending_temp_files() noexcept {
  for (auto& s : detail::g_pending)
    if (s.used.load()) ::unlink(s.path);
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  static std::atomic<unsigned> counter{0};
  std::string tmp = path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  int slot = detail::register_pending(tmp);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    int err = errno;
    detail::unregister_pending(slot);
    throw FormatError(path, std::string("cannot write: ") + std::strerror(err));
  }
  auto fail = [&](const char* what) {
    int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    detail::unregister_pending(slot);
    throw FormatError(path, std::string("cannot write (") + what + "): " + std::strerror(err));
  };
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write");
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) fail("fsync");
  if (::close(fd) != 0) {
    fd = -1;
    int err = errno;
    ::unlink(tmp.c_str());
    detail::unregister_pending(slot);
    throw FormatError(path, std::string("cannot write (close): ") + std::strerror(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    detail::unregister_pending(slot);
    throw FormatError(path, std::string("cannot write (rename): ") + std::strerror(err));
  }
  detail::unregister_pending(slot);
}

void ensure_directory(const std::string& dir) {
  if (dir.empty()) throw FormatError(dir, "empty output directory name");
  struct stat st{};
  if (::stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) throw FormatError(dir, "exists and is not a directory");
    if (::access(dir.c_str(), W_OK) != 0) throw FormatError(dir, "directory is not writable");
    return;
  }
  auto slash = dir.find_last_of('/');
  if (slash != std::string::npos && slash > 0) ensure_directory(dir.substr(0, slash));
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    throw FormatError(dir, std::string("cannot create directory: ") + std::strerror(errno));
}

}  // namespace vocablens

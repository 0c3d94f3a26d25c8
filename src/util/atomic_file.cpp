#include "vocablens/detail/atomic_file.hpp"

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
// A slot is claimed (kFree -> kClaimed) *before* its path is copied and published
// (kReady) after. The earlier version copied first and claimed after, so two threads registering at
// once could both copy into one free slot: the winner's slot then held the loser's path, and an
// interrupt left the winner's temporary file behind.
constexpr size_t kMaxPending = 64;
constexpr size_t kMaxPath = 4096;
enum SlotState : int { kFree = 0, kClaimed = 1, kReady = 2 };
struct PendingSlot {
  std::atomic<int> state{kFree};
  char path[kMaxPath];
};
std::array<PendingSlot, kMaxPending> g_pending;
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler reads slot states");

int register_pending(const std::string& p) {
  if (p.size() + 1 > kMaxPath) return -1;
  for (size_t i = 0; i < kMaxPending; ++i) {
    int expected = kFree;
    if (g_pending[i].state.compare_exchange_strong(expected, kClaimed)) {
      std::memcpy(g_pending[i].path, p.c_str(), p.size() + 1);
      g_pending[i].state.store(kReady);
      return static_cast<int>(i);
    }
  }
  return -1;
}
void unregister_pending(int slot) {
  if (slot >= 0) g_pending[static_cast<size_t>(slot)].state.store(kFree);
}

}  // namespace detail

void remove_pending_temp_files() noexcept {
  for (auto& s : detail::g_pending)
    if (s.state.load() == detail::kReady) ::unlink(s.path);
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  // Only a regular file (or nothing) is replaced: renaming over a FIFO, a device behind a symlink or a
  // directory someone named as the output would silently swap it for a file.
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    const char* kind = S_ISDIR(st.st_mode)    ? "a directory"
                       : S_ISFIFO(st.st_mode) ? "a FIFO (named pipe)"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "not a regular file";
    throw FormatError(path, std::string("is ") + kind + ", not a regular file: not replaced by the output (choose another path)");
  }
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

AtomicWriter::AtomicWriter(std::string path) : path_(std::move(path)) {
  static std::atomic<unsigned> counter{0};
  tmp_ = path_ + ".tmp-" + std::to_string(::getpid()) + "-s" + std::to_string(counter++);
  slot_ = detail::register_pending(tmp_);
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    int err = errno;
    detail::unregister_pending(slot_);
    throw FormatError(path_, std::string("cannot write: ") + std::strerror(err));
  }
}

AtomicWriter::~AtomicWriter() { abandon(); }

void AtomicWriter::abandon() noexcept {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_.c_str());
    fd_ = -1;
  }
  detail::unregister_pending(slot_);
  slot_ = -1;
}

void AtomicWriter::write(std::string_view bytes) {
  if (fd_ < 0) throw FormatError(path_, "cannot write: the file was already committed or abandoned");
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      abandon();
      throw FormatError(path_, std::string("cannot write (write): ") + std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
}

void AtomicWriter::commit() {
  if (fd_ < 0) throw FormatError(path_, "cannot write: the file was already committed or abandoned");
  auto fail = [&](const char* what, int err) {
    abandon();
    throw FormatError(path_, std::string("cannot write (") + what + "): " + std::strerror(err));
  };
  if (::fsync(fd_) != 0) fail("fsync", errno);
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp_.c_str());
    fail("close", err);
  }
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp_.c_str());
    fail("rename", err);
  }
  detail::unregister_pending(slot_);
  slot_ = -1;
}

void ensure_directory(const std::string& dir) {
  if (dir.empty()) throw FormatError(dir, "empty output directory name");
  struct stat st {};
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

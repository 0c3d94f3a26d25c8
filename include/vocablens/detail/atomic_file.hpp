// vocablens/detail/atomic_file.hpp — write a file so that readers see either the old file or the whole new one.
//
// Data goes to a temporary file beside the target ("<path>.tmp-<pid>-<n>"), is flushed and fsync'ed,
// then renamed over the target. If the process is interrupted (exception, SIGINT handled by the CLI),
// the temporary file is removed and the target is untouched.
//
//   vocablens::write_file_atomic("out/lens.json", json_text);
#pragma once
#include <string>
#include <string_view>

namespace vocablens {

/// Writes `bytes` to `path` atomically. Throws FormatError(path, "cannot write: <reason>") when the
/// directory does not exist or is not writable; nothing is left behind in that case.
void write_file_atomic(const std::string& path, std::string_view bytes);

/// Creates `dir` (and parents) if needed; throws FormatError(dir, ...) if it cannot, or if it exists
/// and is not a writable directory.
void ensure_directory(const std::string& dir);

/// Removes every temporary file still registered by write_file_atomic / AtomicWriter in this process
/// (called from the CLI's SIGINT/SIGTERM handler, src/cli/signals.cpp; async-signal-safe: only unlink()).
void remove_pending_temp_files() noexcept;

/// The streaming form of write_file_atomic, for outputs too large to build in memory first: bytes go to
/// the registered temporary file as they come; commit() fsyncs and renames it over `path`. Destroyed
/// without commit() (an exception, an early return), it removes the temporary file and leaves `path`
/// untouched; an interrupted process (SIGINT/SIGTERM via the CLI's handler) leaves nothing behind either.
///
///   vocablens::AtomicWriter w("out/big.npy");
///   for (...) w.write(chunk);
///   w.commit();
class AtomicWriter {
 public:
  /// Creates the temporary file beside `path`; throws FormatError(path, "cannot write: ...").
  explicit AtomicWriter(std::string path);
  ~AtomicWriter();
  AtomicWriter(const AtomicWriter&) = delete;
  AtomicWriter& operator=(const AtomicWriter&) = delete;

  /// Appends bytes; throws FormatError(path, "cannot write (write): ...") (and abandons the file).
  void write(std::string_view bytes);
  /// fsync + rename over the target; throws FormatError on failure. Once only.
  void commit();
  /// The temporary file's name (for tests).
  const std::string& temp_path() const { return tmp_; }

 private:
  void abandon() noexcept;
  std::string path_, tmp_;
  int fd_ = -1;
  int slot_ = -1;
};

}  // namespace vocablens

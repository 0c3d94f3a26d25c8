// vocablens/atomic_file.hpp — write a file so that readers see either the old file or the whole new one.
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

/// Removes every temporary file still registered by write_file_atomic in this process (called from the
/// CLI's SIGINT handler; async-signal-safe: only unlink()).
void remove_pending_temp_files() noexcept;

}  // namespace vocablens

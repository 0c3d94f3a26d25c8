// src/util/regular_file.hpp — read a file only if it is a regular file of bounded size.
//
// A config.json or result .npy that is a symlink to /dev/zero would be read "forever" (gigabytes); opening
// a FIFO named config.json for reading blocks until a writer appears (inspect/report hung). So the file is
// opened with O_NONBLOCK (never blocks on a FIFO), fstat'ed on the descriptor (no race with a rename), and
// refused unless it is a regular file of at most `max_bytes`.
//
//   std::string text = vocablens::detail::read_regular_file(path, 64 << 20, "config files");
#pragma once
#include <cstdint>
#include <string>

namespace vocablens::detail {

/// What `path` is when it is not a regular file: "a directory", "a FIFO (named pipe)", "a character device
/// (e.g. /dev/zero)", "a block device", "a socket"; "" for a regular file or when stat fails.
std::string file_kind(const std::string& path);

/// Reads the whole of `path`. Throws FormatError(path, ...) when it does not exist ("no such file"), is
/// not a regular file ("is a FIFO (named pipe), not a regular file"), is larger than max_bytes ("file is N
/// bytes; <what> larger than M MB are refused"), or cannot be read.
std::string read_regular_file(const std::string& path, uint64_t max_bytes, const std::string& what = "files");

/// The same checks without reading, for readers that stream the file themselves (a corpus of gigabytes):
/// throws as read_regular_file does, so /dev/zero or a FIFO never reaches a std::ifstream (which would
/// read forever, or block in open until a writer appears). Returns the size in bytes.
uint64_t check_regular_file(const std::string& path, uint64_t max_bytes, const std::string& what = "files");

/// Bounds of the files the program reads, by what they can hold (one place, so every reader agrees).
inline constexpr uint64_t kMaxSmallJsonBytes = uint64_t{64} << 20;  ///< config.json, tuned-lens config, options
inline constexpr uint64_t kMaxTextListBytes = uint64_t{1} << 30;    ///< prompts files, token lists (read whole)
inline constexpr uint64_t kMaxCorpusBytes = uint64_t{1} << 40;      ///< corpora (streamed)

}  // namespace vocablens::detail

// vocablens/error.hpp — the exceptions vocablens throws.
//
// Every error a user can cause (a bad file, a bad flag) is one of these, and its what() is a single
// line the CLI prints as is: "<file>: <problem>" for files, the plain problem otherwise.
//
//   try { auto m = vocablens::load_model(path); }
//   catch (const vocablens::FormatError& e) { std::cerr << "error: " << e.what() << "\n"; }
#pragma once
#include <cstdio>
#include <stdexcept>
#include <string>

namespace vocablens {

namespace detail {
/// Length of the well-formed UTF-8 sequence starting at s[i] (1..4), or 0 when the bytes there are not one
/// (stray continuation, overlong form, surrogate, beyond U+10FFFF, truncated).
inline size_t utf8_sequence_length(const std::string& s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  size_t n = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  const unsigned char c1 = b(i + 1);
  unsigned char lo = 0x80, hi = 0xBF;
  if (c == 0xE0) lo = 0xA0;
  if (c == 0xED) hi = 0x9F;
  if (c == 0xF0) lo = 0x90;
  if (c == 0xF4) hi = 0x8F;
  if (c1 < lo || c1 > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if ((b(i + k) & 0xC0) != 0x80) return 0;
  return n;
}

/// `s` with its control characters written as escapes (\n, \r, \t, \xNN), so that a message quoting
/// text from a file — an activation name, a token, a path containing a newline — stays one line; bytes that
/// are not well-formed UTF-8 (a bad config.json's raw bytes) are written as \xNN too.
inline std::string one_line(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const size_t n = utf8_sequence_length(s, i);
      if (n) {
        out.append(s, i, n);
        i += n - 1;
      } else {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
        out += buf;
      }
      continue;
    }
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}
}  // namespace detail

/// Base of every vocablens exception. what() is one line, no trailing newline: control characters in the
/// message (which may quote file contents) are escaped by the constructor.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(detail::one_line(what)) {}
  explicit Error(const char* what) : Error(std::string(what)) {}
};

/// A file is missing, unreadable, malformed, or describes something unsupported.
/// what() == path() + ": " + problem().
class FormatError : public Error {
 public:
  FormatError(std::string path, std::string problem)
      : Error(path + ": " + problem), path_(std::move(path)), problem_(std::move(problem)) {}
  const std::string& path() const noexcept { return path_; }
  const std::string& problem() const noexcept { return problem_; }

 private:
  std::string path_, problem_;
};

/// The caller asked for something impossible (bad flag value, token not in the vocabulary,
/// prompt longer than the context, layer out of range, ...).
class UsageError : public Error {
 public:
  using Error::Error;
};

}  // namespace vocablens

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
/// `s` with its control characters written as escapes (\n, \r, \t, \xNN), so that a message quoting
/// text from a file — an activation name, a token, a path containing a newline — stays one line.
inline std::string one_line(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
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

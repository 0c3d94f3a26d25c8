// vocablens/error.hpp — the exceptions vocablens throws.
//
// Every error a user can cause (a bad file, a bad flag) is one of these, and its what() is a single
// line the CLI prints as is: "<file>: <problem>" for files, the plain problem otherwise.
//
//   try { auto m = vocablens::load_model(path); }
//   catch (const vocablens::FormatError& e) { std::cerr << "error: " << e.what() << "\n"; }
#pragma once
#include <stdexcept>
#include <string>

namespace vocablens {

/// Base of every vocablens exception. what() is one line, no trailing newline.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
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

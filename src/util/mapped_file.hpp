// util/mapped_file.hpp — a whole file mapped into memory (no LibTorch), shared by whatever views it.
//
// Readers map a file once and read from data(): nothing is read from disk until a page is touched, and the
// mapping lives as long as any holder of the shared_ptr (checkpoint/mapped_file.hpp's tensor views, GgufFile).
//
//   auto file = MappedFile::open(path);            // throws FormatError naming the path
//   const uint8_t* bytes = file->data();           // file->size() bytes
//
// The mapping is MAP_PRIVATE with PROT_READ|PROT_WRITE over a file opened O_RDONLY: the file itself can
// never be modified through it, but an in-place op on a tensor viewing it gets private copy-on-write pages
// instead of a SIGSEGV. As with any mapping, a file truncated by another process while mapped raises SIGBUS
// on access, and one written in place shows its new bytes through every page not yet read. So each mapping
// keeps its descriptor and the size and modification time it had, and check_unchanged() / check_all_unchanged()
// compare them with the file now: every forward pass and every declared analysis asks first, so a checkpoint
// changed on disk between two calls is one FormatError ("changed on disk since it was loaded") instead of a
// SIGBUS or silently different numbers. (A file changed *during* a pass is not caught; a file replaced by a new
// one — rename over it, as editors and `cp --remove-destination` do — is no change: the mapping keeps the old.)
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace vocablens {

class MappedFile {
 public:
  /// Maps the regular file at `path` in full. An empty file gives size() == 0 and a non-null data().
  /// Throws FormatError(path, "cannot open: <strerror>") / "not a regular file" / "cannot map: ...".
  static std::shared_ptr<MappedFile> open(const std::string& path);

  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  /// First byte of the file; page-aligned (so offset alignment == address alignment). Never null.
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

  /// Throws FormatError(path, "changed on disk since it was loaded ...") when the mapped file is now shorter than
  /// mapped or was written since (its modification time moved).
  void check_unchanged() const;
  /// check_unchanged() on every file mapped now (the weights of every model loaded, SAE and transcoder files).
  static void check_all_unchanged();

  /// Gives back this process's resident pages of [p, p + n) (the whole pages inside it) when the range lies
  /// within one live mapping: they are read again from the file if touched, so a reader that is done with a
  /// large matrix (a transcoder layer once encoded) stops holding it in its resident set. Memory that is not a
  /// mapped file's is left alone (false). Only for read-only use: a page written through the mapping (a private
  /// copy) would revert to the file's bytes.
  static bool release_pages(const void* p, size_t n);

 private:
  MappedFile(std::string path, uint8_t* data, size_t size, bool mapped, int fd, int64_t mtime_ns);
  std::string path_;
  uint8_t* data_;
  size_t size_;
  bool mapped_;       // false for an empty file (mmap of 0 bytes is an error; data_ points at a static byte)
  int fd_;            // kept open: fstat sees the mapped file itself, even after its path names another
  int64_t mtime_ns_;  // modification time at open
};

}  // namespace vocablens

// The E⁺ cache: .npy files ('<f4' or '<f8', C order; vocablens/npy.hpp) read and written without extra copies,
// named by a hash of E (see include/vocablens/linalg/pinv.hpp).
#include "vocablens/linalg/pinv.hpp"
#include "pinv_cache.hpp"

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>

#include <fmt/format.h>

#include "vocablens/detail/atomic_file.hpp"
#include "vocablens/error.hpp"
#include "vocablens/nonfinite.hpp"
#include "vocablens/detail/hash.hpp"
#include "vocablens/npy.hpp"

namespace vocablens {

uint64_t hash_tensor(const at::Tensor& t) {
  at::Tensor c = t.to(at::kFloat).contiguous();
  uint64_t seed = static_cast<uint64_t>(c.dim());
  for (int64_t s : c.sizes()) seed = hash_bytes(&s, sizeof s, seed);
  return hash_bytes(c.data_ptr(), static_cast<size_t>(c.numel()) * sizeof(float), seed);
}

std::string default_cache_dir() {
  if (const char* e = std::getenv("VOCABLENS_CACHE"); e && *e) return e;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/vocablens";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/vocablens";
  return "/tmp/vocablens-cache";
}

namespace {

// Reads a file written by write_npy with exactly this header into `out` (n bytes). False if absent,
// different, or short.
bool read_raw(const std::string& path, const std::string& header, void* out, size_t n) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::string got(header.size(), '\0');
  if (!f.read(&got[0], static_cast<std::streamsize>(got.size())) || got != header) return false;
  if (!f.read(static_cast<char*>(out), static_cast<std::streamsize>(n))) return false;
  char extra;
  return !f.read(&extra, 1);
}

// The checksum file beside the two .npy files: the hash of the source matrix E they were computed from and
// XXH64 of their own contents. A cache file replaced by another valid matrix of the same shape (the name is
// only E's hash; the content is not) used to be read without a word.
std::string checksum_text(uint64_t source, const at::Tensor& pinv, const std::vector<double>& sv) {
  return fmt::format("vocablens E+ cache 1\nsource_xxh64 {:016x}\npinv_xxh64 {:016x}\nsv_xxh64 {:016x}\n", source,
                     hash_bytes(pinv.data_ptr(), static_cast<size_t>(pinv.numel()) * sizeof(float)),
                     hash_bytes(sv.data(), sv.size() * sizeof(double)));
}

}  // namespace

namespace detail {

std::string pinv_cache_base(const std::string& dir, uint64_t hash, int64_t V, int64_t d, double rtol) {
  return fmt::format("{}/pinv-{:016x}-{}x{}-rtol{:g}", dir, hash, V, d, rtol);
}

bool read_pinv_cache(const std::string& base, int64_t V, int64_t d, double rtol, Pinv& out) {
  at::Tensor pinv = at::empty({d, V}, at::kFloat);
  std::vector<double> sv(static_cast<size_t>(d));
  std::string path = base + ".npy";
  if (read_raw(base + ".sv.npy", npy_header("<f8", {d}), sv.data(), sv.size() * sizeof(double)) &&
      read_raw(path, npy_header("<f4", {d, V}), pinv.data_ptr(), static_cast<size_t>(d * V) * sizeof(float)) &&
      all_finite(pinv)) {  // scanned in place: no mask or abs copy of a [d, V] matrix
    std::ifstream f(base + ".sum", std::ios::binary);
    std::string stored((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (stored != checksum_text(out.hash, pinv, sv)) {
      std::cerr << "vocablens: warning: the E+ cache " << path
                << (stored.empty() ? " has no checksum file (.sum)"
                                   : " does not match its checksum (.sum): changed since it was written")
                << "; recomputing E+\n";
      return false;
    }
    out.pinv = pinv;
    out.singular_values = sv;
    double smax = sv.empty() ? 0.0 : sv.front();
    for (double s : sv) out.rank += (s > rtol * smax && s > 0);
    out.cache_path = path;
    out.from_cache = true;
    return true;
  }
  return false;
}

void write_pinv_cache(const std::string& dir, const std::string& base, Pinv& out) {
  const int64_t d = out.pinv.size(0), V = out.pinv.size(1);
  try {
    ensure_directory(dir);
    // write_npy goes through AtomicWriter, whose temporary file is registered with the CLI's
    // SIGINT/SIGTERM handler (the cache is ~150 MB for GPT-2: an interrupted write used to leave a .tmp file).
    write_npy(base + ".sv.npy", "<f8", {d}, out.singular_values.data(), out.singular_values.size() * sizeof(double));
    write_npy(base + ".npy", "<f4", {d, V}, out.pinv.data_ptr(), static_cast<size_t>(d * V) * sizeof(float));
    write_file_atomic(base + ".sum", checksum_text(out.hash, out.pinv, out.singular_values));  // last: vouches for both
    out.cache_path = base + ".npy";
  } catch (const Error& e) { out.cache_note = std::string("not cached: ") + e.what(); }
}

}  // namespace detail

}  // namespace vocablens

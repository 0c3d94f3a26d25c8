// Run directories that appear complete or are reported as mixed/partial; see run_directory.hpp.
#include "run_directory.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "util/regular_file.hpp"
#include "vocablens/error.hpp"
#include "vocablens/detail/sha256.hpp"

namespace vocablens::detail {

namespace {

std::string join(const std::string& dir, const std::string& f) {
  return dir.empty() || dir.back() == '/' ? dir + f : dir + "/" + f;
}

bool ends_with(const std::string& s, const char* suf) {
  const size_t n = std::strlen(suf);
  return s.size() >= n && s.compare(s.size() - n, n, suf) == 0;
}

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) names.emplace_back(e->d_name);
    ::closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// "<kind>.<name>.npy|csv" -> kind, else "".
std::string side_file_kind(const std::string& n) {
  if ((!ends_with(n, ".npy") && !ends_with(n, ".csv")) || n.find(".tmp-") != std::string::npos) return "";
  const std::string base = n.substr(0, n.size() - 4);
  const size_t dot = base.find('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 >= base.size()) return "";
  return base.substr(0, dot);
}

}  // namespace

RunDirLock::RunDirLock(const std::string& dir) {
  fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd_ < 0) throw FormatError(dir, std::string("cannot open the directory: ") + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    ::close(fd_);
    fd_ = -1;
    if (e == EWOULDBLOCK)
      throw FormatError(dir, "another vocablens process is writing results here right now; wait for it, or use another --out");
    throw FormatError(dir, std::string("cannot lock the directory: ") + std::strerror(e));
  }
}

RunDirLock::~RunDirLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

void prepare_result_slot(const std::string& dir, const std::string& kind, bool replace) {
  const std::string manifest = join(dir, kind + ".json");
  struct stat st {};
  const bool exists = ::lstat(manifest.c_str(), &st) == 0;
  if (exists && !replace)
    throw FormatError(manifest, "a '" + kind +
                                    "' result is already there; vocablens does not replace a run silently: "
                                    "pass --force to replace it, or choose another --out");
  // Manifest first: from here on, an interruption leaves side files without it (reported as partial).
  if (exists && S_ISREG(st.st_mode) && ::unlink(manifest.c_str()) != 0)
    throw FormatError(manifest, std::string("cannot remove the previous result: ") + std::strerror(errno));
  for (const auto& n : list_dir(dir))
    if (side_file_kind(n) == kind) ::unlink(join(dir, n).c_str());
}

nlohmann::ordered_json file_record(std::string_view bytes) {
  nlohmann::ordered_json j;
  j["bytes"] = bytes.size();
  j["sha256"] = sha256_hex(bytes);
  return j;
}

void verify_result_files(const nlohmann::json& j, const std::string& dir, const std::string& path) {
  if (!j.contains("files")) return;
  const auto& files = j["files"];
  if (!files.is_object()) throw FormatError(path, "'files' must be an object");
  for (const auto& [name, rec] : files.items()) {
    if (name.empty() || name.find('/') != std::string::npos || name.rfind("..", 0) == 0)
      throw FormatError(path, "'files': '" + name + "' is outside the run directory");
    if (!rec.is_object() || !rec.contains("bytes") || !rec["bytes"].is_number_unsigned() || !rec.contains("sha256") ||
        !rec["sha256"].is_string())
      throw FormatError(path, "'files': entry '" + name + "' needs 'bytes' and 'sha256'");
    const std::string fp = join(dir, name);
    struct stat st {};
    if (::stat(fp.c_str(), &st) != 0)
      throw FormatError(path, "partial run directory: it lists '" + name + "', which is missing (an interrupted write?)");
    if (!S_ISREG(st.st_mode)) throw FormatError(fp, "is " + file_kind(fp) + ", not a regular file");
    const std::string why = static_cast<uint64_t>(st.st_size) != rec["bytes"].get<uint64_t>() ? "size"
                            : sha256_file_hex(fp) != rec["sha256"].get<std::string>()         ? "SHA-256"
                                                                                              : "";
    if (!why.empty())
      throw FormatError(path, "mixed run directory: '" + name + "' is not the file this result was written with (" + why +
                                  " differs): another run wrote it, or an overwrite was interrupted; re-run the command "
                                  "with --force");
  }
}

void check_no_orphans(const std::string& dir, const std::set<std::string>& kinds) {
  std::vector<std::string> orphans;
  for (const auto& n : list_dir(dir)) {
    const std::string k = side_file_kind(n);
    if (!k.empty() && !kinds.count(k)) orphans.push_back(n);
  }
  if (orphans.empty()) return;
  std::string list;
  for (size_t i = 0; i < orphans.size() && i < 4; ++i) list += (i ? ", '" : "'") + orphans[i] + "'";
  if (orphans.size() > 4) list += ", ... (" + std::to_string(orphans.size()) + " files)";
  const std::string kind = side_file_kind(orphans[0]);
  throw FormatError(dir, "partial run directory: " + list + " without their result file " + kind +
                             ".json (an interrupted or failed write); re-run the command with --force");
}

}  // namespace vocablens::detail
